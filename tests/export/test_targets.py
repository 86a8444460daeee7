"""The grid: every database target × models and behaviours (parity, versions, switch, bad input)."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tests import models
from tests.export.conftest import DATABASES
from tests.export.executors import OracleScriptExecutor


def assert_parity(scorer, name: str, model, x: np.ndarray) -> None:
    """The target's probabilities within float32 parity of Keras (see export/publish/parity.py), same
    classes."""
    actual, expected = scorer.predict(name, x), model.predict(x, verbose=0)
    assert np.abs(actual - expected).max() <= 1e-5 and (actual.argmax(1) == expected.argmax(1)).all()


def versions(target, name: str = "mnist") -> list[tuple]:
    return target.query("SELECT version, active FROM nnsql.models WHERE name = ? ORDER BY version", [name])


@pytest.mark.parametrize("fixture", ["cern_mlp_path", "mixed_layers_path", "digits_model"])
def test_in_database_probabilities_match_tensorflow(scorer, fixture, request):
    model_path = request.getfixturevalue(fixture)
    assert scorer.export(model_path) == 0
    model = keras.saving.load_model(model_path)
    shape = tuple(model.inputs[0].shape[1:])
    x = np.random.default_rng(7).random((100, *shape), dtype=np.float32)
    x[:, ::3] = 0.0  # image rows are sparse; the PostgreSQL kernel skips zeros
    expected = model.predict(x, verbose=0)
    actual = scorer.predict("mnist", x)
    assert np.abs(actual - expected).max() <= 1e-5  # float32 parity (see export/publish/parity.py)
    assert (actual.argmax(1) == expected.argmax(1)).all()


def test_registry_records_version_and_parity(target, cern_mlp_path):
    # All 300 rows, whatever the load: the 20 s default budget cut PL/pgSQL to 171 on a busy machine.
    assert target.export(cern_mlp_path, "mnist", "--sample-rows", "300", "--parity-seconds", "600") == 0
    row = target.query(
        "SELECT version, active, parity_rows, parity_max_abs_diff, parity_argmax_agreement, length(sha256) "
        "FROM nnsql.models"
    )[0]
    assert row[:3] == (1, True, 300)
    assert 0 <= row[3] <= 1e-5 and row[4] == 1.0 and row[5] == 64
    tensors = target.query("SELECT tensor FROM nnsql.tensors ORDER BY tensor")
    assert [t[0] for t in tensors] == [
        "hidden.bias",
        "hidden.kernel",
        "probabilities.bias",
        "probabilities.kernel",
    ]


def test_reexport_makes_new_version_and_switches(target, cern_mlp_path, tmp_path):
    assert target.export(cern_mlp_path) == 0
    assert target.export(models.save(models.cern_mlp(seed=99), tmp_path / "v2")) == 0
    assert versions(target) == [(1, False), (2, True)]
    x = np.random.default_rng(3).random((20, 784), dtype=np.float32)
    expected = models.cern_mlp(seed=99).predict(x, verbose=0)
    assert np.abs(target.predict("mnist", x) - expected).max() <= 1e-5
    assert target.query("SELECT mnist.version()") == [(2,)]


def test_failed_parity_leaves_previous_version_scoring(target, cern_mlp_path, tmp_path, capsys):
    assert target.export(cern_mlp_path) == 0
    x = np.random.default_rng(4).random((10, 784), dtype=np.float32)
    before = target.predict("mnist", x)
    other = models.save(models.cern_mlp(seed=5), tmp_path / "v2")
    # A tolerance of 0 cannot be met (TensorFlow rounds in float32): parity must reject the version.
    assert target.export(other, "mnist", "--tolerance", "0") == 2
    assert "version not published" in capsys.readouterr().err
    assert versions(target) == [(1, True)]
    np.testing.assert_array_equal(target.predict("mnist", x), before)
    assert target.query("SELECT count(*) FROM nnsql.tensors WHERE version = 2") == [(0,)]


@pytest.mark.parametrize("kind", DATABASES)
def test_wrong_length_is_an_error_naming_the_expected_length(published_mnist, kind):
    target = published_mnist(kind)
    with pytest.raises(target.error, match="features must have 784 values, got 3"):
        target.query("SELECT mnist.score(?)", [[0.5, 0.5, 0.5]])
    with pytest.raises(target.error, match="features contains NULL values"):
        target.query("SELECT mnist.score(?)", [[0.1] * 7 + [None] + [0.1] * 776])
    assert target.query("SELECT mnist.score(NULL)") == [(None,)]


def test_labels_come_from_metadata(target, tmp_path):
    labels = ["T-shirt/top", "Trouser", "it's a bag", "Sandal", "Ankle boot", "5", "6", "7", "8", "9"]
    model = models.cern_mlp(n_features=64, seed=8)
    assert target.export(models.save(model, tmp_path / "labelled", classes=labels), "digits") == 0
    x = np.random.default_rng(9).random((20, 64), dtype=np.float32)
    expected = [labels[i] for i in model.predict(x, verbose=0).argmax(1)]
    assert [target.query("SELECT digits.label(?)", [row.tolist()])[0][0] for row in x] == expected
    assert target.query("SELECT digits.classes()")[0][0] == labels


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--name", "x; drop table t"], "invalid model name 'x; drop table t'"),
        (["--name", "nnsql"], "reserved"),
        (["--model", "missing/model.keras"], "model file not found"),
    ],
)
@pytest.mark.parametrize("kind", DATABASES)
def test_bad_arguments_fail_before_touching_the_database(
    published_mnist, kind, cern_mlp_path, capsys, args, message
):
    target = published_mnist(kind)
    before = target.snapshot()
    options = {"--model": str(cern_mlp_path), "--name": "mnist"} | dict(
        zip(args[::2], args[1::2], strict=True)
    )
    assert target.export(options["--model"], options["--name"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert target.snapshot() == before


def test_unsupported_layer_fails_and_creates_nothing(target, tmp_path, capsys):
    before = target.snapshot()
    assert target.export(models.save(models.with_unsupported_layer(), tmp_path / "ln")) == 2
    err = capsys.readouterr().err
    assert "'conv3d' (Conv3D)" in err and f"'{target.target}'" in err
    assert target.snapshot() == before


HOSTILE_LABELS = [
    "$fn$; CREATE TABLE pwned (x int); $fn$",
    "it's'); DROP TABLE nnsql.models; --",
    "*/ END; /* ",
    "$$",
    "ünïcødé ✓",
    "\\\\",
    "a",
    "b",
    "c",
    "d",
]


def test_hostile_labels_stay_data(target, tmp_path):
    model = models.cern_mlp(n_features=16, seed=4)
    assert target.export(models.save(model, tmp_path / "hostile", classes=HOSTILE_LABELS), "hostile") == 0
    assert target.query("SELECT hostile.classes()")[0][0] == HOSTILE_LABELS
    x = np.random.default_rng(5).random((5, 16), dtype=np.float32)
    expected = [HOSTILE_LABELS[i] for i in model.predict(x, verbose=0).argmax(1)]
    assert [target.query("SELECT hostile.label(?)", [row.tolist()])[0][0] for row in x] == expected
    tables = target.query("SELECT count(*) FROM information_schema.tables WHERE table_name = 'pwned'")
    assert tables == [(0,)]


@pytest.mark.parametrize("label", ["line\n/\nDROP TABLE nnsql_models", "tab\tbed", "nul\x00", ""])
def test_labels_with_line_breaks_or_control_characters_are_refused(scorer, tmp_path, capsys, label):
    classes = [label, *[f"c{i}" for i in range(9)]]
    path = models.save(models.cern_mlp(n_features=16), tmp_path / "bad", classes=classes)
    assert scorer.export(path, "bad") == 2
    err = capsys.readouterr().err.strip()
    assert "class label 0" in err and len(err.splitlines()) == 1


def test_classes_that_are_not_a_list_of_strings_are_refused(scorer, tmp_path, capsys):
    import json

    path = models.save(models.cern_mlp(n_features=16), tmp_path / "odd")
    (path.parent / "metadata.json").write_text(json.dumps({"classes": "abcdefghij"}))
    assert scorer.export(path, "odd") == 2
    assert "must be a list of strings" in capsys.readouterr().err


def test_labels_under_another_key_are_refused_not_numbered(scorer, tmp_path, capsys):
    """A metadata.json naming its labels `class_names` exported with labels 0..9, silently."""
    import json

    path = models.save(models.cern_mlp(n_features=16), tmp_path / "renamed")
    (path.parent / "metadata.json").write_text(json.dumps({"class_names": list("abcdefghij")}))
    assert scorer.export(path, "renamed") == 2
    err = capsys.readouterr().err.strip()
    assert "'class_names'" in err and "'classes'" in err and len(err.splitlines()) == 1


def array_text(target, values: list[str]) -> tuple[str, str]:
    """A row as array text and the cast that reads it, so that NaN reaches the database as NaN (the DuckDB
    client turns a Python NaN parameter into NULL)."""
    if target.target == "duckdb":
        return "[" + ", ".join(values) + "]", "DOUBLE[]"
    return "{" + ",".join(values) + "}", "float8[]"


@pytest.mark.parametrize("kind", DATABASES)
@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity", "3.5e38", "-1e300"])
def test_a_nan_infinite_or_beyond_float32_feature_is_an_error_naming_model_and_index(
    published_mnist, kind, bad
):
    """The model's inputs are float32 (as in Keras and ONNX): a value it cannot hold is refused like NaN."""
    target = published_mnist(kind)
    values = ["0.5"] * 784
    values[5] = bad if target.target != "duckdb" else bad.lower().replace("infinity", "inf")
    text, cast = array_text(target, values)
    message = "mnist: features holds NaN, infinity or a value beyond the float32 range at 0-based index 5"
    with pytest.raises(target.error, match=message):
        target.query(f"SELECT mnist.score(?::{cast})", [text])


@pytest.mark.postgres
@pytest.mark.parametrize("kind", ["postgres", "postgres+plpython"])
def test_postgres_arrays_indexed_from_zero_score_like_the_rest(published_mnist, kind):
    target = published_mnist(kind)
    row = np.random.default_rng(6).random(784)
    literal = "[0:783]={" + ",".join(repr(float(v)) for v in row) + "}"
    shifted = target.query("SELECT mnist.predict_proba(?::float8[])", [literal])[0][0]
    plain = target.query("SELECT mnist.predict_proba(?)", [row.tolist()])[0][0]
    np.testing.assert_allclose(shifted, plain, atol=0)
    square = "{" + ",".join(["{" + ",".join(["0.5"] * 28) + "}"] * 28) + "}"
    with pytest.raises(target.error, match=r"one-dimensional array|must have 784 values"):
        target.query("SELECT mnist.score(?::float8[])", [square])


@pytest.mark.parametrize(
    "name", ["select", "table", "order", "default", "end", "true", "null", "array", "system"]
)
def test_a_keyword_as_model_name_is_one_line(target, cern_mlp_path, capsys, name):
    before = target.snapshot()
    assert target.export(cern_mlp_path, name) == 2
    err = capsys.readouterr().err.strip()
    assert f"invalid model name {name!r}" in err and len(err.splitlines()) == 1
    assert target.snapshot() == before


def test_layers_named_like_keywords_compile(scorer, tmp_path):
    import keras

    inputs = keras.Input((12,), name="from")
    x = keras.layers.Dense(8, activation="relu", name="end")(inputs)
    x = keras.layers.Dense(8, activation="tanh", name="default")(x)
    x = keras.layers.Dense(6, activation="sigmoid", name="all")(x)
    outputs = keras.layers.Dense(3, activation="softmax", name="primary")(x)
    model = models._seeded(keras.Model(inputs, outputs), 12)
    assert scorer.export(models.save(model, tmp_path / "keywords"), "keywords") == 0
    x = np.random.default_rng(8).random((10, 12), dtype=np.float32)
    assert_parity(scorer, "keywords", model, x)


def shared_layer_models():
    """A Dense layer used twice side by side, and one applied twice in a chain."""
    import keras

    inputs = keras.Input((8,), name="features")
    shared = keras.layers.Dense(8, activation="tanh", name="shared")
    side = keras.layers.Concatenate(name="both")(
        [shared(inputs), shared(keras.layers.ReLU(name="r")(inputs))]
    )
    side_by_side = keras.Model(inputs, keras.layers.Dense(3, activation="softmax", name="out")(side))
    chain_in = keras.Input((8,), name="features")
    twice = keras.layers.Dense(8, activation="sigmoid", name="twice")
    chained = keras.Model(
        chain_in, keras.layers.Dense(3, activation="softmax", name="out")(twice(twice(chain_in)))
    )
    return {"side_by_side": models._seeded(side_by_side, 13), "chained": models._seeded(chained, 14)}


@pytest.mark.parametrize("kind", ["side_by_side", "chained"])
def test_shared_layers_compile_on_every_target(scorer, tmp_path, kind):
    model = shared_layer_models()[kind]
    assert scorer.export(models.save(model, tmp_path / kind), "shared") == 0
    x = np.random.default_rng(15).random((40, 8), dtype=np.float32)
    assert_parity(scorer, "shared", model, x)


ACTIVATION_GROUPS = {
    "exponential_family": ["elu", "selu", "softplus", "exponential"],
    "gated": ["silu", "swish", "mish", "gelu"],
    "piecewise": ["hard_sigmoid", "hard_silu", "relu6", "leaky_relu", "softsign"],
}


def activation_model(names: list[str], seed: int):
    """Dense layers with each activation in turn, then the same activations as Activation layers."""
    import keras

    inputs = keras.Input((10,), name="features")
    x = inputs
    for index, name in enumerate(names):
        x = keras.layers.Dense(8, activation=name, name=f"dense_{index}")(x)
    for index, name in enumerate(names):
        x = keras.layers.Activation(name, name=f"act_{index}")(x)
    outputs = keras.layers.Dense(3, activation="softmax", name="out")(x)
    return models._seeded(keras.Model(inputs, outputs), seed)


@pytest.mark.parametrize("group", sorted(ACTIVATION_GROUPS))
def test_activations_match_keras_on_every_target(any_target, tmp_path, group):
    scorer = any_target
    model = activation_model(ACTIVATION_GROUPS[group], seed=len(group))
    assert scorer.export(models.save(model, tmp_path / group), "acts") == 0
    x = (np.random.default_rng(16).random((40, 10), dtype=np.float32) - 0.5) * 6  # both signs, past ±3
    if isinstance(scorer, OracleScriptExecutor):
        import parseora

        package = (scorer.directory / "03_package_v1.sql").read_text()
        assert all(not unit["errors"] for unit in parseora.parse(package, version="19c"))
    assert_parity(scorer, "acts", model, x)


def normalised_models():
    """A tabular MLP with BatchNormalization + Dropout + selu (BN after a linear Dense, after an activation
    and on the inputs), and one that starts with a Normalization layer adapted to its data."""
    import keras

    inputs = keras.Input((12,), name="features")
    x = keras.layers.BatchNormalization(name="bn_in")(inputs)
    x = keras.layers.Dense(16, name="d1")(x)
    x = keras.layers.BatchNormalization(name="bn1")(x)
    x = keras.layers.Activation("selu", name="selu1")(x)
    x = keras.layers.Dropout(0.3)(x)
    x = keras.layers.Dense(16, activation="selu", name="d2")(x)
    x = keras.layers.BatchNormalization(name="bn2", center=False)(x)
    outputs = keras.layers.Dense(3, activation="softmax", name="out")(x)
    tabular = models._seeded(keras.Model(inputs, outputs), 21)
    generator = np.random.default_rng(22)
    for layer in tabular.layers:  # statistics that differ from the identity
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.moving_mean.assign(generator.normal(0, 0.5, layer.moving_mean.shape))
            layer.moving_variance.assign(generator.uniform(0.2, 3.0, layer.moving_variance.shape))
    normalizer = keras.layers.Normalization(name="norm")
    raw = keras.Input((12,), name="features")
    hidden = keras.layers.Dense(10, activation="relu", name="h")(normalizer(raw))
    preprocessed = models._seeded(
        keras.Model(raw, keras.layers.Dense(3, activation="softmax", name="o")(hidden)), 23
    )
    normalizer.adapt(
        generator.normal(5.0, 3.0, (200, 12)).astype(np.float32)
    )  # after seeding: real statistics
    return {"tabular": tabular, "preprocessed": preprocessed}


def test_normalisation_layers_fold_into_their_neighbours():
    from nnsql.export.compile import to_ir

    graph = to_ir(normalised_models()["tabular"], target="reference")
    assert [node.kind for node in graph.nodes] == ["Dense", "ActivationNode", "Dense", "Dense"]


@pytest.mark.parametrize("kind", ["tabular", "preprocessed"])
def test_normalisation_layers_match_keras_on_every_target(scorer, tmp_path, kind):
    model = normalised_models()[kind]
    assert scorer.export(models.save(model, tmp_path / kind), "norm") == 0
    x = np.random.default_rng(24).normal(2.0, 3.0, (40, 12)).astype(np.float32)
    assert_parity(scorer, "norm", model, x)
