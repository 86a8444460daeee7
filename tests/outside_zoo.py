"""The outside-style zoo: Keras models built the way other exporters' test suites and their users build
them (frugally-deep's and keras2c's one-model-per-layer-family generators, hls4ml's functional models),
one model per layer family, each ending in a classifier head. Weights are seeded normal values
(as frugally-deep and keras2c set random weights, untrained), and every option at the edges is present:
masks, padding, causal attention, several outputs.

Each entry says how its rows look: token indices, or floats padded after varied lengths with the value a
`Masking` layer tests for, so that masks take effect on every target.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import keras
import numpy as np

from tests.models import _seeded

CLASSES = 3
TOKENS = 9  # the vocabulary of token inputs; rows draw indices below it, 0 padding the end
layers = keras.layers


def head(value: keras.KerasTensor, name: str = "out") -> keras.KerasTensor:
    """The classifier every model ends with: whatever shape the value has, flattened first."""
    if len(value.shape) > 2:
        value = layers.Flatten(name=f"{name}_flat")(value)
    return layers.Dense(CLASSES, activation="softmax", name=name)(value)


def pooling_same() -> keras.Model:
    """Average and max pooling with 'same' padding that pads (Keras averages over the values inside only),
    on images and sequences, with strides that leave partial windows."""
    image = keras.Input((7, 7, 2), name="image")
    mean = layers.AveragePooling2D(3, strides=2, padding="same", name="mean2d")(image)
    peak = layers.MaxPooling2D(2, padding="same", name="max2d")(image)
    sequence = keras.Input((9, 3), name="sequence")
    mean1 = layers.AveragePooling1D(4, strides=3, padding="same", name="mean1d")(sequence)
    peak1 = layers.MaxPooling1D(2, padding="same", name="max1d")(sequence)
    flat = [layers.Flatten()(v) for v in (mean, peak, mean1, peak1)]
    return keras.Model([image, sequence], head(layers.Concatenate(name="joined")(flat)))


def causal_convolution() -> keras.Model:
    """A WaveNet-style stack: causal Conv1D with growing dilation, and a strided causal one."""
    sequence = keras.Input((10, 2), name="sequence")
    x = layers.Conv1D(4, 2, padding="causal", activation="tanh", name="causal_a")(sequence)
    x = layers.Conv1D(4, 2, padding="causal", dilation_rate=2, activation="relu", name="causal_b")(x)
    x = layers.Conv1D(3, 3, padding="causal", strides=2, name="causal_c")(x)
    return keras.Model(sequence, head(x))


def batch_norm_axes() -> keras.Model:
    """BatchNormalization over axis 1 (channels-first data, or per time step), and after
    an activation over a middle axis, with trained-looking statistics."""
    sequence = keras.Input((5, 4), name="sequence")
    per_step = layers.BatchNormalization(axis=1, name="bn_steps")(sequence)
    image = keras.Input((3, 4, 2), name="image")
    per_row = layers.BatchNormalization(axis=1, name="bn_rows")(image)
    per_place = layers.BatchNormalization(axis=2, name="bn_columns")(layers.Activation("relu")(per_row))
    joined = layers.Concatenate(name="joined")([layers.Flatten()(per_step), layers.Flatten()(per_place)])
    return keras.Model([sequence, image], head(joined))


def masking_value() -> keras.Model:
    """Masking(mask_value=-1) as users pad with -1 when 0 is a real reading: the masked steps are skipped
    by the LSTM, and zeroed in the value a per-step Dense reads beside it."""
    sequence = keras.Input((6, 3), name="sequence")
    masked = layers.Masking(mask_value=-1.0, name="mask")(sequence)
    state = layers.LSTM(4, name="lstm")(masked)
    per_step = layers.Flatten(name="steps")(layers.Dense(2, name="per_step")(masked))
    return keras.Model(sequence, head(layers.Concatenate(name="joined")([state, per_step])))


def pass_through() -> keras.Model:
    """Layers that vanish at inference: ActivityRegularization, Identity, SpatialDropout1D/2D."""
    image = keras.Input((4, 4, 2), name="image")
    x = layers.SpatialDropout2D(0.3, name="drop2d")(layers.Conv2D(3, 2, name="conv")(image))
    x = layers.Identity(name="same")(layers.ActivityRegularization(l1=0.01, l2=0.01, name="reg")(x))
    sequence = layers.Reshape((9, 3), name="as_sequence")(x)
    x = layers.SpatialDropout1D(0.2, name="drop1d")(sequence)
    return keras.Model(image, head(x))


def reshaping() -> keras.Model:
    """Permute, RepeatVector, UpSampling (nearest and bilinear), asymmetric Cropping and ZeroPadding,
    each flattened into the head."""
    sequence = keras.Input((4, 3), name="sequence")
    swapped = layers.Permute((2, 1), name="permute")(sequence)
    up1 = layers.UpSampling1D(3, name="up1d")(sequence)
    cropped = layers.Cropping1D((1, 2), name="crop1d")(layers.ZeroPadding1D((2, 0), name="pad1d")(up1))
    vector = keras.Input((5,), name="vector")
    repeated = layers.RepeatVector(3, name="repeat")(vector)
    image = keras.Input((3, 4, 2), name="image")
    nearest = layers.UpSampling2D((2, 3), name="nearest")(image)
    bilinear = layers.UpSampling2D(2, interpolation="bilinear", name="bilinear")(image)
    trimmed = layers.Cropping2D(((0, 1), (2, 0)), name="crop2d")(bilinear)
    padded = layers.ZeroPadding2D(((1, 0), (0, 2)), name="pad2d")(nearest)
    moved = layers.Permute((3, 1, 2), name="channels_first")(image)
    parts = [swapped, cropped, repeated, trimmed, padded, moved]
    flat = [layers.Flatten(name=f"flat_{part.name.split('/')[0]}")(part) for part in parts]
    return keras.Model([sequence, vector, image], head(layers.Concatenate(name="joined")(flat)))


def transposed_convolution() -> keras.Model:
    """A decoder: Conv2DTranspose with 'same' and 'valid' padding, strides larger and smaller than the
    kernel, output_padding and dilation; Conv1DTranspose over a sequence."""
    image = keras.Input((3, 4, 2), name="image")
    x = layers.Conv2DTranspose(3, 3, strides=2, padding="same", activation="relu", name="up_same")(image)
    x = layers.Conv2DTranspose(2, (2, 3), strides=(3, 2), padding="valid", name="up_valid")(x)
    y = layers.Conv2DTranspose(2, 3, strides=2, output_padding=1, name="up_output_padding")(image)
    z = layers.Conv2DTranspose(2, 2, dilation_rate=2, padding="same", name="up_dilated")(image)
    sequence = keras.Input((5, 3), name="sequence")
    s = layers.Conv1DTranspose(2, 3, strides=2, padding="same", activation="tanh", name="up1d")(sequence)
    flat = [layers.Flatten()(v) for v in (x, y, z, s)]
    return keras.Model([image, sequence], head(layers.Concatenate(name="joined")(flat)))


def depthwise_separable() -> keras.Model:
    """MobileNet-style blocks: DepthwiseConv2D with a depth multiplier, a strided SeparableConv2D, and
    their 1-D forms over a sequence."""
    image = keras.Input((6, 6, 3), name="image")
    x = layers.DepthwiseConv2D(3, depth_multiplier=2, padding="same", activation="relu6", name="dw")(image)
    x = layers.SeparableConv2D(4, 3, strides=2, activation="relu", name="sep")(x)
    sequence = keras.Input((8, 2), name="sequence")
    s = layers.DepthwiseConv1D(3, depth_multiplier=3, name="dw1d")(sequence)
    s = layers.SeparableConv1D(3, 2, padding="same", depth_multiplier=2, name="sep1d")(s)
    joined = layers.Concatenate(name="joined")([layers.Flatten()(x), layers.Flatten()(s)])
    return keras.Model([image, sequence], head(joined))


def attention_tokens() -> keras.Model:
    """Luong attention over embedded tokens with mask_zero (the masks reach Attention from Keras), with a
    trained scale; the query's mask flows on to a GRU."""
    tokens = keras.Input((6,), dtype="int32", name="tokens")
    embedded = layers.Embedding(TOKENS, 4, mask_zero=True, name="embed")(tokens)
    attended = layers.Attention(use_scale=True, name="attention")([embedded, embedded])
    state = layers.GRU(3, name="gru")(attended)
    return keras.Model(tokens, head(layers.Concatenate(name="joined")([state, layers.Flatten()(attended)])))


def attention_causal_concat() -> keras.Model:
    """Bahdanau-style (concat) attention with a causal mask and a separate key, and dot attention that
    also returns its weights, over projected sequences."""
    sequence = keras.Input((5, 3), name="sequence")
    query = layers.Dense(4, name="query")(sequence)
    value = layers.Dense(4, activation="tanh", name="value")(sequence)
    key = layers.Dense(4, name="key")(sequence)
    causal = layers.Attention(score_mode="concat", use_scale=True, name="causal")(
        [query, value, key], use_causal_mask=True
    )
    plain, weights = layers.Attention(name="plain")([query, value], return_attention_scores=True)
    parts = [layers.Flatten()(v) for v in (causal, plain, weights)]
    return keras.Model(sequence, head(layers.Concatenate(name="joined")(parts)))


def bidirectional_two_outputs() -> keras.Model:
    """Bidirectional(merge_mode=None): the forward and backward sequences as two values, each read by its
    own layers, over a masked sequence; the model has two heads."""
    sequence = keras.Input((6, 3), name="sequence")
    masked = layers.Masking(0.0, name="mask")(sequence)
    forward, backward = layers.Bidirectional(
        layers.LSTM(3, return_sequences=True), merge_mode=None, name="bi"
    )(masked)
    first = head(layers.GRU(2, name="gru")(forward), "out")
    second = head(layers.SimpleRNN(2, name="rnn")(backward), "second")
    last = layers.Bidirectional(layers.GRU(2), merge_mode=None, name="bi_last")(masked)
    third = head(layers.Concatenate(name="ends")(last), "third")
    return keras.Model(sequence, [first, second, third])


def dot_products() -> keras.Model:
    """Dot with normalize=True (cosine similarity) of two vectors, and of two sequences over their
    features (a similarity matrix) and over their steps."""
    a, b = keras.Input((5,), name="a"), keras.Input((5,), name="b")
    cosine = layers.Dot(axes=1, normalize=True, name="cosine")([a, b])
    first, second = keras.Input((4, 3), name="first"), keras.Input((4, 2), name="second")
    similarity = layers.Dot(axes=(2, 2), normalize=True, name="similarity")([first, first])
    over_steps = layers.Dot(axes=1, name="over_steps")([first, second])
    parts = [cosine, layers.Flatten()(similarity), layers.Flatten()(over_steps)]
    return keras.Model([a, b, first, second], head(layers.Concatenate(name="joined")(parts)))


def transformer_block() -> keras.Model:
    """A Transformer encoder block as in Keras's text-classification example: token and position
    embeddings, multi-head self-attention over a mask_zero embedding, residual connections and layer
    normalisation, a feed-forward network."""
    tokens = keras.Input((6,), dtype="int32", name="tokens")
    embedded = layers.Embedding(TOKENS, 8, mask_zero=True, name="embed")(tokens)
    attended = layers.MultiHeadAttention(num_heads=2, key_dim=3, name="self_attention")(embedded, embedded)
    x = layers.LayerNormalization(epsilon=1e-6, name="norm1")(
        layers.Add(name="residual1")([embedded, attended])
    )
    ffn = layers.Dense(8, name="ffn2")(layers.Dense(12, activation="relu", name="ffn1")(x))
    x = layers.LayerNormalization(epsilon=1e-6, name="norm2")(layers.Add(name="residual2")([x, ffn]))
    return keras.Model(tokens, head(x))


def cross_attention() -> keras.Model:
    """A decoder's attention: causal multi-head self-attention, then cross attention over an encoder's
    sequence of another length with a separate key, value_dim and output_shape; the first returns its
    weights too."""
    target = keras.Input((4, 5), name="target")
    source = keras.Input((6, 3), name="source")
    decoded, weights = layers.MultiHeadAttention(num_heads=3, key_dim=2, name="causal")(
        target, target, use_causal_mask=True, return_attention_scores=True
    )
    key = layers.Dense(4, name="key")(source)
    crossed = layers.MultiHeadAttention(
        num_heads=2, key_dim=3, value_dim=2, output_shape=6, use_bias=False, name="cross"
    )(decoded, source, key)
    parts = [layers.Flatten()(v) for v in (crossed, weights)]
    return keras.Model([target, source], head(layers.Concatenate(name="joined")(parts)))


def normalisation_variants() -> keras.Model:
    """LayerNormalization over the steps, over two axes, without centre and scale, and with rms_scaling;
    GroupNormalization of an image's channels; UnitNormalization of a vector and of each step."""
    sequence = keras.Input((5, 4), name="sequence")
    over_steps = layers.LayerNormalization(axis=1, name="ln_steps")(sequence)
    bare = layers.LayerNormalization(center=False, scale=False, name="ln_bare")(sequence)
    rms = layers.LayerNormalization(rms_scaling=True, name="ln_rms")(sequence)
    image = keras.Input((3, 3, 4), name="image")
    both = layers.LayerNormalization(axis=[1, 3], name="ln_rows_channels")(image)
    grouped = layers.GroupNormalization(groups=2, name="group_norm")(layers.Conv2D(4, 2, name="conv")(image))
    vector = keras.Input((6,), name="vector")
    unit = layers.UnitNormalization(name="unit")(layers.Dense(4, name="dense")(vector))
    unit_steps = layers.UnitNormalization(axis=1, name="unit_steps")(sequence)
    parts = [layers.Flatten()(v) for v in (over_steps, bare, rms, both, grouped, unit_steps)] + [unit]
    return keras.Model([sequence, image, vector], head(layers.Concatenate(name="joined")(parts)))


def category_encoding() -> keras.Model:
    """CategoryEncoding of integer columns: one_hot of a single category, multi_hot and count of a bag
    of categories, beside numeric features (the structured-data example's wide part)."""
    colour = keras.Input((1,), dtype="int32", name="colour")
    tags = keras.Input((4,), dtype="int32", name="tags")
    numbers = keras.Input((3,), name="numbers")
    one_hot = layers.CategoryEncoding(num_tokens=TOKENS, output_mode="one_hot", name="one_hot")(colour)
    multi_hot = layers.CategoryEncoding(num_tokens=TOKENS, output_mode="multi_hot", name="multi_hot")(tags)
    count = layers.CategoryEncoding(num_tokens=TOKENS, output_mode="count", name="count")(tags)
    joined = layers.Concatenate(name="joined")([one_hot, multi_hot, count, numbers])
    hidden = layers.Dense(6, activation="relu", name="hidden")(joined)
    return keras.Model([colour, tags, numbers], head(hidden))


@dataclass(frozen=True)
class Entry:
    build: Callable[[], keras.Model]
    padding: float = 0.0  # what a padded step of a float sequence holds (a Masking layer's mask_value)


ZOO: dict[str, Entry] = {
    "pooling_same": Entry(pooling_same),
    "causal_convolution": Entry(causal_convolution),
    "batch_norm_axes": Entry(batch_norm_axes),
    "masking_value": Entry(masking_value, padding=-1.0),
    "pass_through": Entry(pass_through),
    "reshaping": Entry(reshaping),
    "transposed_convolution": Entry(transposed_convolution),
    "depthwise_separable": Entry(depthwise_separable),
    "attention_tokens": Entry(attention_tokens),
    "attention_causal_concat": Entry(attention_causal_concat),
    "bidirectional_two_outputs": Entry(bidirectional_two_outputs),
    "dot_products": Entry(dot_products),
    "transformer_block": Entry(transformer_block),
    "cross_attention": Entry(cross_attention),
    "normalisation_variants": Entry(normalisation_variants),
    "category_encoding": Entry(category_encoding),
}


def build(name: str, seed: int = 7) -> keras.Model:
    """The model with seeded weights and, for normalisation layers, statistics that differ from the
    identity (positive variances), as a trained model has."""
    model = _seeded(ZOO[name].build(), seed)
    generator = np.random.default_rng(seed)
    for layer in model.layers:
        if isinstance(layer, layers.BatchNormalization):
            layer.moving_mean.assign(generator.normal(0, 0.5, layer.moving_mean.shape))
            layer.moving_variance.assign(generator.uniform(0.2, 3.0, layer.moving_variance.shape))
    return model


def rows(name: str, model: keras.Model, count: int = 60, seed: int = 5) -> list[np.ndarray]:
    """Inputs for every model input: token indices (0 pads the end), or floats in [-1, 1) with sequences
    padded after lengths 0..steps with the entry's padding value."""
    generator = np.random.default_rng(seed)
    padding = ZOO[name].padding
    inputs = []
    for tensor in model.inputs:
        shape = (count, *tuple(int(d) for d in tensor.shape[1:]))
        if "int" in str(tensor.dtype):
            tokens = generator.integers(1, TOKENS, shape)
            if len(shape) == 2:
                for row in range(count):
                    tokens[row, row % (shape[1] + 1) :] = 0
            inputs.append(tokens.astype(np.int32))
            continue
        values = generator.uniform(-1.0, 1.0, shape).astype(np.float32)
        if values.ndim == 3:
            for row in range(count):
                values[row, row % (shape[1] + 1) :, :] = padding
        inputs.append(values)
    return inputs
