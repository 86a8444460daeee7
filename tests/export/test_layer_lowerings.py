"""The lowerings of the attention, convolution-variant and normalisation layers against Keras through
the numpy reference (export/ir/reference.py), over the options at their edges (no database: the grid in
test_outside_zoo.py runs them on every target), the golden listing of one masked attention for review
against Keras's equations, and the one-line refusals."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from nnsql.export.compile import to_ir
from nnsql.export.errors import UnsupportedLayer
from nnsql.export.ir import reference
from tests.golden.graphs import check_golden
from tests.models import _seeded

layers = keras.layers


def agrees_with_keras(model: keras.Model, *, tokens: bool = False) -> float:
    """max |Δ| between Keras and the reference on 40 rows (floats in [-1, 1), or token indices)."""
    _seeded(model, 4)
    generator = np.random.default_rng(1)
    x = []
    for tensor in model.inputs:
        shape = (40, *tensor.shape[1:])
        x.append(
            generator.integers(0, 6, shape) if tokens else generator.uniform(-1, 1, shape).astype(np.float32)
        )
    expected = model.predict(x if len(x) > 1 else x[0], verbose=0)
    graph = to_ir(model, target="reference")
    actual = reference.run(graph, {spec.name: value for spec, value in zip(graph.inputs, x, strict=True)})
    return float(np.abs(actual - np.asarray(expected).reshape(len(actual), -1)).max())


def flat_model(inputs: keras.KerasTensor, value: keras.KerasTensor) -> keras.Model:
    return keras.Model(inputs, layers.Flatten()(value) if len(value.shape) > 2 else value)


@pytest.mark.parametrize(
    ("kernel", "strides", "padding", "output_padding", "dilation"),
    [
        (3, 2, "same", None, 1),
        (3, 2, "valid", None, 1),
        (2, 3, "valid", None, 1),  # strides above the kernel: positions no tap reaches hold the bias
        (2, 3, "same", None, 1),
        ((2, 3), (1, 2), "valid", None, 1),
        (3, 2, "valid", 1, 1),
        (3, 2, "same", 1, 1),
        (2, 1, "same", None, 2),
    ],
)
def test_conv2d_transpose_matches_keras(kernel, strides, padding, output_padding, dilation):
    image = keras.Input((3, 4, 2))
    value = layers.Conv2DTranspose(
        3, kernel, strides=strides, padding=padding, output_padding=output_padding, dilation_rate=dilation
    )(image)
    assert agrees_with_keras(flat_model(image, value)) <= 1e-5


@pytest.mark.parametrize(("pool", "strides"), [(2, None), (3, 2), (3, 1), ((2, 3), (2, 2))])
def test_same_padding_pools_over_the_values_inside_only(pool, strides):
    image = keras.Input((5, 5, 2))
    mean = layers.AveragePooling2D(pool, strides=strides, padding="same")(image)
    peak = layers.MaxPooling2D(pool, strides=strides, padding="same")(image)
    joined = layers.Concatenate()([layers.Flatten()(mean), layers.Flatten()(peak)])
    assert agrees_with_keras(keras.Model(image, joined)) <= 1e-6


@pytest.mark.parametrize(("kernel", "dilation", "strides"), [(2, 1, 1), (3, 2, 1), (3, 1, 2)])
def test_causal_conv1d_sees_only_the_past(kernel, dilation, strides):
    sequence = keras.Input((7, 2))
    value = layers.Conv1D(2, kernel, padding="causal", dilation_rate=dilation, strides=strides)(sequence)
    assert agrees_with_keras(flat_model(sequence, value)) <= 1e-6


@pytest.mark.parametrize("mode", ["dot", "concat"])
@pytest.mark.parametrize("scale", [False, True])
def test_attention_with_masks_scale_and_causal_mask(mode, scale):
    tokens = keras.Input((5,), dtype="int32")
    embedded = layers.Embedding(6, 3, mask_zero=True)(tokens)
    value = layers.Attention(use_scale=scale, score_mode=mode)([embedded, embedded], use_causal_mask=True)
    assert agrees_with_keras(flat_model(tokens, value), tokens=True) <= 1e-6


def test_attention_lowering_golden_listing():
    """A masked, scaled dot-product attention, listed node by node (reviewed against Keras's equations in
    export/frontend/attention.py)."""
    tokens = keras.Input((3,), dtype="int32", name="tokens")
    embedded = layers.Embedding(4, 2, mask_zero=True, name="embed")(tokens)
    value = layers.Attention(use_scale=True, name="attention")([embedded, embedded])
    model = keras.Model(tokens, layers.Flatten(name="flat")(value))
    graph = to_ir(_seeded(model, 1), target="reference")
    check_golden(graph.text() + "\n", "lowered_attention.txt")


def test_multi_head_attention_with_keyword_inputs_and_masks():
    tokens = keras.Input((4,), dtype="int32")
    embedded = layers.Embedding(6, 4, mask_zero=True)(tokens)
    attended = layers.MultiHeadAttention(num_heads=2, key_dim=2)(query=embedded, value=embedded)
    assert agrees_with_keras(flat_model(tokens, attended), tokens=True) <= 1e-6


def test_bilinear_up_sampling_matches_tensorflow_resize():
    image = keras.Input((3, 4, 2))
    value = layers.UpSampling2D((3, 2), interpolation="bilinear")(image)
    assert agrees_with_keras(flat_model(image, value)) <= 1e-6


def refused(model: keras.Model) -> str:
    with pytest.raises(UnsupportedLayer) as caught:
        to_ir(model, target="duckdb")
    message = str(caught.value)
    assert len(message.splitlines()) == 1 and "'duckdb'" in message
    return message


def test_options_without_a_lowering_are_refused_in_one_line():
    sequence = keras.Input((4, 3))
    mask = keras.Input((4, 4))  # a float 0/1 attention mask, which MultiHeadAttention casts
    attended = layers.MultiHeadAttention(num_heads=1, key_dim=2, name="mha")(
        sequence, sequence, attention_mask=mask
    )
    assert "'mha' (MultiHeadAttention)" in refused(keras.Model([sequence, mask], layers.Flatten()(attended)))
    image = keras.Input((3, 3, 1))
    cubic = layers.UpSampling2D(interpolation="bicubic", name="cubic")(image)
    assert "interpolation='bicubic'" in refused(flat_model(image, cubic))
    numbers = keras.Input((2,))
    encoded = layers.CategoryEncoding(num_tokens=4, output_mode="multi_hot", name="categories")(numbers)
    assert "only integer (n,) inputs" in refused(keras.Model(numbers, encoded))
