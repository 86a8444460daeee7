"""The recurrent model zoo, written the way users write Keras models: seeded weights, then a few training
steps with `model.fit`. Sequences are 7 steps × 3 features (small, so every target scores 200 rows fast);
`rows` zero-pads them after varied lengths, as masked inputs arrive."""

from __future__ import annotations

from collections.abc import Callable

import keras
import numpy as np

from tests.models import _seeded

STEPS, FEATURES, CLASSES, VOCABULARY = 7, 3, 3, 11
layers = keras.layers


def trained(model: keras.Model, seed: int) -> keras.Model:
    """Seeded weights, then two optimizer steps on random data (weights no longer symmetric or round)."""
    _seeded(model, seed)
    generator = np.random.default_rng(seed)
    for layer in model.layers:  # statistics that differ from the identity, with positive variances
        if isinstance(layer, layers.BatchNormalization):
            layer.moving_mean.assign(generator.normal(0, 0.5, layer.moving_mean.shape))
            layer.moving_variance.assign(generator.uniform(0.2, 3.0, layer.moving_variance.shape))
        if isinstance(layer, layers.Normalization):  # adapted to data, as users do
            layer.adapt(generator.normal(2.0, 3.0, (64, *layer.input.shape[1:])).astype(np.float32))
    losses = ["categorical_crossentropy"] * len(model.outputs)
    # Two steps run eagerly: tracing the training step as a tf.function costs 4 times as much CPU as the
    # steps themselves (29 → 7 s for 12 of these models). The file keeps `run_eagerly` in its compile
    # settings, as a user's does who set it.
    loss = losses if len(losses) > 1 else losses[0]
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss=loss, run_eagerly=True)
    generator = np.random.default_rng(seed)
    x = rows(model, 32, seed, empty=False)  # a fully masked row is NaN after a masked average: no loss
    y = []
    for output in model.outputs:  # one-hot targets for each output
        classes = int(output.shape[-1])
        y.append(np.eye(classes, dtype=np.float32)[generator.integers(0, classes, 32)])
    # Shuffled, as fit does by default, with the process's global seed: set here, so that the weights are
    # the same whatever ran before in the process.
    keras.utils.set_random_seed(seed)
    model.fit(x if len(x) > 1 else x[0], y if len(y) > 1 else y[0], batch_size=16, epochs=1, verbose=0)
    return model


def sequence_model(*recurrent: keras.layers.Layer, masked: bool = False) -> keras.Model:
    sequence = keras.Input((STEPS, FEATURES), name="sequence")
    value = layers.Masking(0.0, name="mask")(sequence) if masked else sequence
    for layer in recurrent:
        value = layer(value)
    return keras.Model(sequence, layers.Dense(CLASSES, activation="softmax", name="out")(value))


def gru() -> keras.Model:
    return sequence_model(layers.GRU(5, name="gru"))


def gru_reset_before() -> keras.Model:
    return sequence_model(layers.GRU(5, reset_after=False, name="gru"))


def lstm() -> keras.Model:
    return sequence_model(layers.LSTM(4, name="lstm"), masked=True)


def simple_rnn() -> keras.Model:
    return sequence_model(layers.SimpleRNN(6, activation="relu", name="rnn"))


def bidirectional_concat() -> keras.Model:
    return sequence_model(layers.Bidirectional(layers.LSTM(3), name="bi"), masked=True)


def bidirectional_sum() -> keras.Model:
    return sequence_model(layers.Bidirectional(layers.GRU(4), merge_mode="sum", name="bi"))


def stacked() -> keras.Model:
    """Two GRUs and a backwards SimpleRNN over a masked sequence: the mask flows through all three."""
    return sequence_model(
        layers.GRU(4, return_sequences=True, name="first"),
        layers.Bidirectional(layers.GRU(3, return_sequences=True), name="middle"),
        layers.SimpleRNN(3, go_backwards=True, name="last"),
        masked=True,
    )


def masked_with_second_input() -> keras.Model:
    sequence = keras.Input((STEPS, FEATURES), name="sequence")
    extra = keras.Input((4,), name="extra")
    state = layers.GRU(5, name="gru")(layers.Masking(0.0, name="mask")(sequence))
    joined = layers.Concatenate(name="joined")([state, extra])
    hidden = layers.Dense(6, activation="relu", name="hidden")(joined)
    return keras.Model([sequence, extra], layers.Dense(CLASSES, activation="softmax", name="out")(hidden))


def masked_and_unmasked() -> keras.Model:
    """One input feeding a masked GRU and, beside it, an unmasked one: only the first skips padding."""
    sequence = keras.Input((STEPS, FEATURES), name="sequence")
    masked = layers.GRU(4, name="masked_gru")(layers.Masking(0.0, name="mask")(sequence))
    plain = layers.GRU(4, name="plain_gru")(sequence)
    joined = layers.Concatenate(name="joined")([masked, plain])
    return keras.Model(sequence, layers.Dense(CLASSES, activation="softmax", name="out")(joined))


def shared_side_by_side() -> keras.Model:
    """One GRU layer applied to two sequences (a shared layer), its states joined."""
    first, second = (
        keras.Input((STEPS, FEATURES), name="first"),
        keras.Input((STEPS, FEATURES), name="second"),
    )
    shared = layers.GRU(4, name="shared")
    joined = layers.Concatenate(name="joined")([shared(first), shared(second)])
    return keras.Model([first, second], layers.Dense(CLASSES, activation="softmax", name="out")(joined))


def shared_chained() -> keras.Model:
    """One Dense layer applied twice in a chain, after an LSTM."""
    sequence = keras.Input((STEPS, FEATURES), name="sequence")
    shared = layers.Dense(4, activation="tanh", name="shared")
    value = shared(shared(layers.LSTM(4, name="lstm")(sequence)))
    return keras.Model(sequence, layers.Dense(CLASSES, activation="softmax", name="out")(value))


def conv1d_pooling() -> keras.Model:
    """A flat row reshaped to a sequence; 1-D convolution, padding, cropping, max, average and global
    pooling."""
    row = keras.Input((36,), name="row")
    x = layers.Reshape((12, 3), name="as_sequence")(row)
    x = layers.ZeroPadding1D(1, name="pad")(x)
    x = layers.Conv1D(4, 3, padding="same", activation="relu", name="conv_a")(x)
    x = layers.MaxPooling1D(2, name="max_pool")(x)
    x = layers.Cropping1D((1, 0), name="crop")(x)
    x = layers.Conv1D(4, 2, dilation_rate=2, activation="selu", name="conv_b")(x)
    x = layers.AveragePooling1D(2, strides=1, name="mean_pool")(x)
    x = layers.GlobalAveragePooling1D(name="global_mean")(x)
    return keras.Model(row, layers.Dense(CLASSES, activation="softmax", name="out")(x))


def conv2d_padding_pooling() -> keras.Model:
    image = keras.Input((8, 8, 1), name="image")
    x = layers.ZeroPadding2D(((1, 0), (2, 1)), name="pad")(image)
    x = layers.Conv2D(3, 3, activation="tanh", name="conv")(x)
    x = layers.AveragePooling2D(2, name="mean_pool")(x)
    x = layers.Cropping2D(((1, 0), (0, 1)), name="crop")(x)
    x = layers.GlobalMaxPooling2D(name="global_max")(x)
    return keras.Model(image, layers.Dense(CLASSES, activation="softmax", name="out")(x))


def merges() -> keras.Model:
    features = keras.Input((6,), name="features")
    a = layers.Dense(4, activation="tanh", name="a")(features)
    b = layers.Dense(4, activation="relu", name="b")(features)
    c = layers.Dense(4, name="c")(features)
    merged = [
        layers.Add(name="add")([a, b]),
        layers.Subtract(name="subtract")([a, c]),
        layers.Multiply(name="multiply")([b, c]),
        layers.Maximum(name="maximum")([a, b, c]),
        layers.Minimum(name="minimum")([a, c]),
        layers.Average(name="average")([a, b, c]),
    ]
    joined = layers.Concatenate(name="joined")(merged)
    return keras.Model(features, layers.Dense(CLASSES, activation="softmax", name="out")(joined))


def per_step_dense() -> keras.Model:
    """TimeDistributed(Dense) and a Dense over a masked sequence before a GRU: the mask flows through."""
    sequence = keras.Input((STEPS, FEATURES), name="sequence")
    x = layers.Masking(0.0, name="mask")(sequence)
    x = layers.TimeDistributed(layers.Dense(4, activation="relu"), name="per_step")(x)
    x = layers.Dense(5, name="embed")(x)
    x = layers.GRU(4, name="gru")(x)
    return keras.Model(sequence, layers.Dense(CLASSES, activation="softmax", name="out")(x))


def parameterised_activations() -> keras.Model:
    features = keras.Input((8,), name="features")
    x = layers.LeakyReLU(0.1, name="leaky")(layers.Dense(6, name="d1")(features))
    x = layers.PReLU(name="prelu")(layers.Dense(6, name="d2")(x))
    x = layers.ELU(alpha=0.5, name="elu")(layers.Dense(6, name="d3")(x))
    x = layers.ReLU(max_value=1.5, negative_slope=0.05, name="relu")(layers.Dense(6, name="d4")(x))
    return keras.Model(features, layers.Dense(CLASSES, activation="softmax", name="out")(x))


def conv_batch_norm() -> keras.Model:
    """BatchNormalization after a linear convolution (folded into it) and after an activation (not),
    PReLU with slopes shared over the image."""
    image = keras.Input((8, 8, 2), name="image")
    x = layers.BatchNormalization(name="bn_a")(layers.Conv2D(4, 3, name="conv_a")(image))
    x = layers.Activation("relu", name="relu_a")(x)
    x = layers.Conv2D(3, 2, activation="relu", name="conv_b")(x)
    x = layers.BatchNormalization(name="bn_b")(x)
    x = layers.PReLU(shared_axes=[1, 2], name="prelu")(x)
    x = layers.GlobalAveragePooling2D(name="mean")(x)
    return keras.Model(image, layers.Dense(CLASSES, activation="softmax", name="out")(x))


def layer_normalization() -> keras.Model:
    """LayerNormalization over a flat vector and over each step of a sequence (before an LSTM)."""
    sequence = keras.Input((STEPS, FEATURES), name="sequence")
    steps = layers.LayerNormalization(name="ln_steps")(layers.Dense(4, name="per_step")(sequence))
    state = layers.LSTM(5, name="lstm")(steps)
    x = layers.LayerNormalization(epsilon=1e-5, center=False, name="ln_flat")(
        layers.Dense(6, name="d")(state)
    )
    return keras.Model(sequence, layers.Dense(CLASSES, activation="softmax", name="out")(x))


def embedding() -> keras.Model:
    """Token indices (0 pads) embedded with mask_zero into a GRU, beside indices embedded and pooled."""
    tokens = keras.Input((STEPS,), dtype="int32", name="tokens")
    state = layers.GRU(4, name="gru")(layers.Embedding(VOCABULARY, 3, mask_zero=True, name="embed")(tokens))
    tags = keras.Input((4,), dtype="int32", name="tags")
    pooled = layers.GlobalAveragePooling1D(name="mean")(layers.Embedding(5, 2, name="tag_embed")(tags))
    joined = layers.Concatenate(name="joined")([state, pooled])
    return keras.Model([tokens, tags], layers.Dense(CLASSES, activation="softmax", name="out")(joined))


def concatenations_and_dot() -> keras.Model:
    """Sequences joined over features (interleaved per step) and over time, and a dot product."""
    first = keras.Input((STEPS, FEATURES), name="first")
    second = keras.Input((STEPS, 2), name="second")
    features = layers.Concatenate(name="by_feature")([first, second])
    steps = layers.Concatenate(axis=1, name="by_step")([features, features])
    state = layers.GRU(4, name="gru")(steps)
    a, b = layers.Dense(5, name="a")(state), layers.Dense(5, activation="tanh", name="b")(state)
    dot = layers.Dot(axes=1, name="dot")([a, b])
    joined = layers.Concatenate(name="joined")([state, dot])
    return keras.Model([first, second], layers.Dense(CLASSES, activation="softmax", name="out")(joined))


def adapted_normalization() -> keras.Model:
    """The Normalization preprocessing layer adapted to data (mean and variance baked in), tabular."""
    features = keras.Input((6,), name="features")
    x = layers.Dense(8, activation="selu", name="hidden")(layers.Normalization(name="norm")(features))
    return keras.Model(features, layers.Dense(CLASSES, activation="softmax", name="out")(x))


def softmax_groups_and_thresholds() -> keras.Model:
    """softmax and log_softmax over each step's features, softmax over the steps (a middle axis), ReLU
    thresholds (with a slope and a ceiling), and a log_softmax output."""
    sequence = keras.Input((STEPS, FEATURES), name="sequence")
    per_step = layers.Dense(4, activation="softmax", name="step_softmax")(sequence)
    state = layers.GRU(5, name="gru")(layers.Activation("log_softmax", name="step_log")(per_step))
    hidden = layers.Dense(6, name="hidden")(state)
    above = layers.ReLU(threshold=0.2, name="above")(hidden)
    clipped = layers.ReLU(threshold=0.1, negative_slope=0.3, max_value=0.8, name="clipped")(hidden)
    over_steps = layers.Flatten(name="flat")(layers.Softmax(axis=1, name="over_steps")(per_step))
    joined = layers.Concatenate(name="joined")([above, clipped, over_steps])
    return keras.Model(sequence, layers.Dense(CLASSES, activation="log_softmax", name="out")(joined))


def gelu_operations() -> keras.Model:
    """keras.ops.gelu in both forms, applied in the functional graph as users may write it."""
    features = keras.Input((6,), name="features")
    exact = keras.ops.gelu(layers.Dense(5, name="a")(features), approximate=False)
    tanh_form = keras.ops.gelu(layers.Dense(5, name="b")(features), approximate=True)
    joined = layers.Concatenate(name="joined")([exact, tanh_form])
    return keras.Model(features, layers.Dense(CLASSES, activation="softmax", name="out")(joined))


def masked_pooling() -> keras.Model:
    """GlobalAveragePooling1D and GlobalMaxPooling1D over masked sequences, in each way a mask reaches
    them: Masking, a masked LSTM's and a masked Bidirectional LSTM's sequences, and Embedding(mask_zero)
    (export/frontend/masked_pooling.py)."""
    sequence = keras.Input((STEPS, FEATURES), name="sequence")
    tokens = keras.Input((STEPS,), dtype="int32", name="tokens")
    masked = layers.Masking(0.0, name="mask")(sequence)
    lstm = layers.LSTM(4, return_sequences=True, name="lstm")(masked)
    both = layers.Bidirectional(layers.LSTM(3, return_sequences=True), name="bi")(masked)
    embedded = layers.Embedding(VOCABULARY, 3, mask_zero=True, name="embed")(tokens)
    sources = (("masked", masked), ("lstm", lstm), ("bi", both), ("embedded", embedded))
    pooled = [layers.GlobalAveragePooling1D(name=f"mean_{name}")(value) for name, value in sources]
    pooled += [layers.GlobalMaxPooling1D(name=f"max_{name}")(value) for name, value in sources]
    joined = layers.Concatenate(name="joined")(pooled)
    return keras.Model([sequence, tokens], layers.Dense(CLASSES, activation="softmax", name="out")(joined))


ZOO: dict[str, Callable[[], keras.Model]] = {
    "gru": gru,
    "gru_reset_before": gru_reset_before,
    "lstm_masked": lstm,
    "simple_rnn": simple_rnn,
    "bidirectional_concat": bidirectional_concat,
    "bidirectional_sum": bidirectional_sum,
    "stacked_masked": stacked,
    "masked_with_second_input": masked_with_second_input,
    "masked_and_unmasked": masked_and_unmasked,
    "shared_side_by_side": shared_side_by_side,
    "shared_chained": shared_chained,
    "conv1d_pooling": conv1d_pooling,
    "conv2d_padding_pooling": conv2d_padding_pooling,
    "merges": merges,
    "per_step_dense": per_step_dense,
    "parameterised_activations": parameterised_activations,
    "conv_batch_norm": conv_batch_norm,
    "layer_normalization": layer_normalization,
    "embedding": embedding,
    "concatenations_and_dot": concatenations_and_dot,
    "adapted_normalization": adapted_normalization,
    "softmax_groups_and_thresholds": softmax_groups_and_thresholds,
    "gelu_operations": gelu_operations,
    "masked_pooling": masked_pooling,
}


# Every activation a Keras layer may name (export/ir/activations.py writes them), for the rows at scale.
ACTIVATIONS = (
    "relu", "sigmoid", "tanh", "softmax", "elu", "selu", "softplus", "softsign", "silu", "hard_sigmoid",
    "hard_silu", "relu6", "leaky_relu", "mish", "gelu", "log_softmax", "log_sigmoid", "linear",
)  # fmt: skip


def every_activation() -> keras.Model:
    """Each activation over pre-activations at the row's own scale, exponential after a tanh (it
    overflows float32 from 89 on, in Keras too), and LayerNormalization (1/sqrt of a variance)."""
    features = keras.Input((6,), name="features")
    spread = layers.Dense(8, name="spread")(features)
    branches = [layers.Dense(4, activation=name, name=f"act_{name}")(spread) for name in ACTIVATIONS]
    bounded = layers.Dense(4, activation="tanh", name="bounded")(spread)
    branches.append(layers.Dense(4, activation="exponential", name="act_exponential")(bounded))
    branches.append(layers.LayerNormalization(name="normalised")(spread))
    joined = layers.Concatenate(name="joined")(branches)
    return keras.Model(features, layers.Dense(CLASSES, activation="softmax", name="out")(joined))


def every_cell() -> keras.Model:
    """Every recurrent cell over a masked sequence, softmax over each step and over the steps (a 3-D
    softmax), a convolution, and a masked average."""
    sequence = keras.Input((STEPS, FEATURES), name="sequence")
    masked = layers.Masking(0.0, name="mask")(sequence)
    lstm = layers.LSTM(4, return_sequences=True, name="lstm")(masked)
    both = layers.Bidirectional(layers.LSTM(3, return_sequences=True), name="bi")(lstm)
    gru = layers.GRU(3, return_sequences=True, name="gru")(both)
    states = [
        layers.SimpleRNN(3, name="rnn")(gru),
        layers.GRU(3, reset_after=False, name="gru_v1")(masked),
        layers.GlobalAveragePooling1D(name="mean")(lstm),
    ]
    per_step = layers.Dense(4, activation="softmax", name="step_softmax")(sequence)
    states.append(layers.Flatten(name="flat")(layers.Softmax(axis=1, name="over_steps")(per_step)))
    convolved = layers.Conv1D(4, 3, activation="selu", name="conv")(sequence)
    states.append(layers.GlobalMaxPooling1D(name="conv_max")(convolved))
    joined = layers.Concatenate(name="joined")(states)
    return keras.Model(sequence, layers.Dense(CLASSES, activation="softmax", name="out")(joined))


# Models scored at the scale of raw physics features (tests/export/test_numerics.py)
AT_SCALE: dict[str, Callable[[], keras.Model]] = {
    "every_activation": every_activation,
    "every_cell": every_cell,
}


def build(name: str, seed: int = 11) -> keras.Model:
    return trained({**ZOO, **AT_SCALE}[name](), seed)


def rows(model: keras.Model, count: int = 200, seed: int = 5, *, empty: bool = True) -> list[np.ndarray]:
    """Random inputs for every model input; sequences zero-padded after lengths 0..STEPS (all steps
    masked, some, none), or 1..STEPS without `empty`."""
    generator = np.random.default_rng(seed)
    first = 0 if empty else 1
    inputs: list[np.ndarray] = []
    for tensor in model.inputs:
        shape = (count, *tuple(tensor.shape[1:]))
        if "int" in str(tensor.dtype):  # token indices below the smallest vocabulary, 0 padding the end
            tokens = generator.integers(1, 5, shape)
            for row in range(count):
                tokens[row, first + row % (shape[1] + 1 - first) :] = 0
            inputs.append(tokens.astype(np.int32))
            continue
        values = generator.random(shape, dtype=np.float32)
        if values.ndim == 3:
            for row in range(count):
                values[row, first + row % (STEPS + 1 - first) :, :] = 0.0
        inputs.append(values)
    return inputs
