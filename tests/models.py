"""Small Keras models for tests, built in-process with seeded weights (no training needed)."""

from __future__ import annotations

import keras
import numpy as np


def _seeded(model: keras.Model, seed: int) -> keras.Model:
    """Replace every weight with seeded normal values scaled to keep activations in range."""
    generator = np.random.default_rng(seed)
    for weight in model.weights:
        shape = tuple(weight.shape)
        scale = 1.0 / np.sqrt(shape[0]) if len(shape) == 2 else 0.5
        weight.assign(generator.normal(0.0, scale, size=shape).astype(np.float32))
    return model


def cern_mlp(n_features: int = 784, seed: int = 1) -> keras.Model:
    """The reference architecture: input → Dense(100, sigmoid) → Dense(10, softmax)."""
    model = keras.Sequential(
        [
            keras.Input((n_features,), name="features"),
            keras.layers.Dense(100, activation="sigmoid", name="hidden"),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(10, activation="softmax", name="probabilities"),
        ]
    )
    return _seeded(model, seed)


def mixed_layers(seed: int = 2) -> keras.Model:
    """A functional graph over an 8×8 input using every layer kind the backbone supports."""
    inputs = keras.Input((8, 8), name="image")
    x = keras.layers.Flatten()(inputs)
    x = keras.layers.Dense(32, name="dense_tanh", activation="tanh")(x)
    x = keras.layers.Dense(16, name="dense_linear")(x)
    x = keras.layers.ReLU()(x)
    x = keras.layers.Dense(12, name="no_bias", use_bias=False)(x)
    x = keras.layers.Activation("sigmoid")(x)
    x = keras.layers.Dense(5, name="logits")(x)
    outputs = keras.layers.Softmax()(x)
    return _seeded(keras.Model(inputs, outputs), seed)


def with_unsupported_layer() -> keras.Model:
    inputs = keras.Input((10,), name="features")
    x = keras.layers.Reshape((2, 2, 1, 1))(keras.layers.Dense(4)(inputs))
    x = keras.layers.Conv3D(2, 1, name="conv3d")(x)  # volumes: no SQL target compiles Conv3D
    outputs = keras.layers.Dense(3, activation="softmax")(keras.layers.Flatten()(x))
    return keras.Model(inputs, outputs)


def with_unsupported_activation() -> keras.Model:
    inputs = keras.Input((10,), name="features")
    x = keras.layers.Dense(4, activation="sparsemax", name="sparsemax_dense")(inputs)
    outputs = keras.layers.Dense(3, activation="softmax")(x)
    return keras.Model(inputs, outputs)


def two_heads() -> keras.Model:
    """A shared trunk with two classification heads, as multi-task users build them."""
    features = keras.Input((6,), name="features")
    trunk = keras.layers.Dense(8, activation="relu", name="trunk")(features)
    kind = keras.layers.Dense(3, activation="softmax", name="kind")(trunk)
    energy = keras.layers.Dense(2, activation="softmax", name="energy")(trunk)
    return keras.Model(features, [kind, energy])


def save(model: keras.Model, directory, classes: list[str] | None = None):
    """Save as directory/model.keras with a metadata.json naming the classes; return the path."""
    import json

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "model.keras"
    model.save(path)
    n_out = int(model.outputs[0].shape[-1])
    metadata = {"classes": classes or [f"class_{i}" for i in range(n_out)]}
    (directory / "metadata.json").write_text(json.dumps(metadata))
    return path


def inclusive_classifier(seed: int = 3) -> keras.Model:
    """CERN's Inclusive Classifier (GRU over masked particles + high-level features), seeded weights."""
    from nnsql.train.inclusive_classifier import build_model

    return _seeded(build_model(), seed)


def padded_events(rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Particle lists zero-padded after a varying count (and a masked gap), plus high-level features."""
    generator = np.random.default_rng(seed)
    particles = generator.random((rows, 801, 19), dtype=np.float32)
    for row in range(rows):
        particles[row, 20 + 15 * row :, :] = 0.0
    particles[0, 5:9, :] = 0.0
    return particles, generator.random((rows, 14), dtype=np.float32)


def tf_spawner_cnn(seed: int = 31) -> keras.Model:
    """TF-Spawner's example network: two Conv2D + MaxPool2D, Dropout, Flatten, Dense(100), Dense(10)."""
    model = keras.Sequential(
        [
            keras.Input((28, 28, 1), name="image"),
            keras.layers.Conv2D(8, (3, 3), activation="relu", name="conv1"),
            keras.layers.MaxPool2D((2, 2), name="pool1"),
            keras.layers.Conv2D(16, (3, 3), activation="relu", name="conv2"),
            keras.layers.MaxPool2D((2, 2), name="pool2"),
            keras.layers.Dropout(0.25),
            keras.layers.Flatten(name="flat"),
            keras.layers.Dense(100, activation="relu", name="hidden"),
            keras.layers.Dense(10, activation="softmax", name="probabilities"),
        ]
    )
    return _seeded(model, seed)


def mnist_cnn(seed: int = 41) -> keras.Model:
    """A field-sized MNIST CNN (Keras's mnist_cnn example): Conv2D 32 then 64 filters 3×3, MaxPool 2×2,
    Dense(128), Dense(10); ~11 M multiply-adds per image, most of them in the second convolution."""
    model = keras.Sequential(
        [
            keras.Input((28, 28, 1), name="image"),
            keras.layers.Conv2D(32, (3, 3), activation="relu", name="conv1"),
            keras.layers.Conv2D(64, (3, 3), activation="relu", name="conv2"),
            keras.layers.MaxPool2D((2, 2), name="pool"),
            keras.layers.Flatten(name="flat"),
            keras.layers.Dense(128, activation="relu", name="hidden"),
            keras.layers.Dense(10, activation="softmax", name="probabilities"),
        ]
    )
    return _seeded(model, seed)
