"""`nnsql export oracle --engine onnx` without an Oracle server: the ONNX file runs in onnxruntime 1.15.1
(the runtime inside Oracle 23ai/26ai, in its own venv: tests/onnxruntime115.py) with float32 parity against
Keras, in the form Oracle documents (one 2-D input, JSON metadata naming function, output, labels and
attributes); the SQL*Plus scripts pass the same independent parser as the PL/SQL route's."""

from __future__ import annotations

import json

import keras
import numpy as np
import onnx
import parseora
import pytest

from nnsql.export.oracle.__main__ import main as export_oracle
from nnsql.export.oracle.onnx_engine import MAX_IR_VERSION, MAX_OPSET
from tests import models, onnxruntime115, outside_zoo, zoo

pytestmark = pytest.mark.oracle
TOLERANCE = 1e-5  # float32 parity, as every target


@pytest.fixture(scope="module")
def ort115():
    """The onnxruntime 1.15.1 environment (made once under build/, see tests/onnxruntime115.py); its
    scoring process ends with the module."""
    yield onnxruntime115.ensure()
    onnxruntime115.RUNNING.close()


def export(model_path, directory, name, *extra: str) -> int:
    args = ["--engine", "onnx", "--model", str(model_path), "--name", name, "--script-only", str(directory)]
    return export_oracle([*args, "--quiet", "--sample-rows", "40", *extra])


def flat(inputs: list[np.ndarray]) -> np.ndarray:
    """A row as the scripts document it: every input flattened row-major, input after input."""
    return np.concatenate([x.reshape(len(x), -1) for x in inputs], axis=1).astype(np.float32)


def scored_in_ort115(directory, name: str, inputs: list[np.ndarray]) -> np.ndarray:
    metadata = json.loads((directory / f"{name}_metadata.json").read_text())
    (feature,) = metadata["input"]
    version, outputs = onnxruntime115.run(directory / f"{name}.onnx", {feature: flat(inputs)})
    assert version == onnxruntime115.VERSION
    return outputs[0]


def check_form(directory, name: str, classes: list[str], values: int) -> dict:
    """What Oracle's documentation asks of the file and its metadata."""
    model = onnx.load(str(directory / f"{name}.onnx"))
    metadata = json.loads((directory / f"{name}_metadata.json").read_text())
    (graph_input,) = model.graph.input
    dims = graph_input.type.tensor_type.shape.dim
    assert len(dims) == 2 and dims[1].dim_value == values  # [batch, n]
    assert metadata["input"] == {graph_input.name: metadata["input"][graph_input.name]}
    assert len(metadata["input"][graph_input.name]) == values
    assert metadata["function"] == "classification" and metadata["labels"] == classes
    assert metadata["classificationProbOutput"] in [o.name for o in model.graph.output]
    assert model.ir_version <= MAX_IR_VERSION
    assert max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) <= MAX_OPSET
    assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)
    return metadata


@pytest.fixture(scope="module")
def ic_scripts(tmp_path_factory):
    """The Inclusive Classifier (masked GRU over 801 × 19 particles + 14 features), exported once."""
    directory = tmp_path_factory.mktemp("ic_onnx")
    model = models.inclusive_classifier()
    path = models.save(model, directory / "model", ["W+jets", "QCD", "ttbar"])
    assert export(path, directory / "out", "ic") == 0
    return model, directory / "out"


def test_inclusive_classifier_runs_in_onnxruntime_1_15_with_parity(ic_scripts, ort115):
    model, directory = ic_scripts
    metadata = check_form(directory, "ic", ["W+jets", "QCD", "ttbar"], 801 * 19 + 14)
    names = metadata["input"]["features"]
    assert names[0] == "GRU_INPUT_1" and names[801 * 19] == "HLF_INPUT_1" and names[-1] == "HLF_INPUT_14"
    particles, hlf = models.padded_events(12, seed=4)  # padded after 20..185 particles, a masked gap
    expected = model.predict([particles, hlf], verbose=0)
    actual = scored_in_ort115(directory, "ic", [particles, hlf])
    assert np.abs(actual - expected).max() <= TOLERANCE and (actual.argmax(1) == expected.argmax(1)).all()
    one = scored_in_ort115(directory, "ic", [particles[:1], hlf[:1]])  # a batch of one row
    assert np.abs(one - expected[:1]).max() <= TOLERANCE


@pytest.mark.parametrize(
    ("build", "shape"), [(models.cern_mlp, (784,)), (models.tf_spawner_cnn, (28, 28, 1))], ids=["mlp", "cnn"]
)
def test_mlp_and_cnn_run_in_onnxruntime_1_15_with_parity(build, shape, tmp_path, ort115):
    model = build()
    classes = [f"digit {i}" for i in range(10)]
    assert export(models.save(model, tmp_path / "model", classes), tmp_path / "out", "net") == 0
    check_form(tmp_path / "out", "net", classes, int(np.prod(shape)))
    x = np.random.default_rng(7).random((16, *shape), dtype=np.float32)
    expected = model.predict(x, verbose=0)
    actual = scored_in_ort115(tmp_path / "out", "net", [x])
    assert np.abs(actual - expected).max() <= TOLERANCE and (actual.argmax(1) == expected.argmax(1)).all()


# Every model of both zoos, each run through the route: the ones it accepts must run in onnxruntime 1.15.1
# with parity, the others must be refused in one line naming why (the word given here).
ZOO_MODELS = [
    pytest.param(kind, name, id=f"{kind}-{name}")
    for kind, names in (("outside", outside_zoo.ZOO), ("zoo", zoo.ZOO))
    for name in names
]
REFUSED = {("zoo", "softmax_groups_and_thresholds"): "computed by LogSoftmax"}


def zoo_case(kind: str, name: str) -> tuple[keras.Model, list[np.ndarray]]:
    """The zoo's model with seeded weights, and rows of the kind it takes (padded sequences, tokens)."""
    if kind == "outside":
        model = outside_zoo.build(name)
        return model, outside_zoo.rows(name, model, count=24)
    model = zoo.build(name)
    return model, zoo.rows(model, count=24)


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "name"), ZOO_MODELS)
def test_every_zoo_model_the_route_accepts_runs_in_onnxruntime_1_15(kind, name, tmp_path, ort115, capsys):
    model, inputs = zoo_case(kind, name)
    code = export(models.save(model, tmp_path / "model"), tmp_path / "out", "net")
    err = capsys.readouterr().err.strip()
    if (kind, name) in REFUSED:
        assert code == 2 and REFUSED[kind, name] in err and len(err.splitlines()) == 1, err
        return
    assert code == 0, err
    predicted = model.predict(inputs if len(inputs) > 1 else inputs[0], verbose=0)
    expected = predicted[0] if isinstance(predicted, list) else predicted  # Oracle scores the first head
    actual = scored_in_ort115(tmp_path / "out", "net", inputs)
    # NaN where Keras gives NaN (an average over a sequence whose every step is masked is 0 / 0 in Keras)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=TOLERANCE, equal_nan=True)
    finite = np.isfinite(expected).all(axis=1)
    assert finite.sum() >= len(expected) // 2 and (actual.argmax(1) == expected.argmax(1))[finite].all()


def parse_errors(text: str, version: str) -> list:
    return [(u["line"], e) for u in parseora.parse(text, version=version) for e in u["errors"]]


@pytest.mark.parametrize("version", ["23ai"])
def test_scripts_parse_as_oracle(ic_scripts, version):
    _, directory = ic_scripts
    scripts = sorted(p.name for p in directory.glob("*.sql"))
    assert scripts == ["00_privileges_onnx.sql", "install_onnx_v1.sql", "onnx_package_v1.sql"]
    for name in scripts:
        text = (directory / name).read_text()
        assert parse_errors(text, version) == [], name
        warnings = [w for unit in parseora.parse(text, version=version) for w in unit["warnings"]]
        assert all("not modelled" in w["message"] for w in warnings), (name, warnings[:3])
    package = (directory / "onnx_package_v1.sql").read_text()
    kinds = [u["statement"] for u in parseora.parse(package, version=version) if u["kind"] == "plsql"]
    assert kinds == ["CreatePackage", "CreatePackageBody"]
    for scorer in ("PREDICTION_SET", "PREDICTION_PROBABILITY", "'SELECT PREDICTION'"):
        assert scorer in package
    broken = package.replace("DBMS_SQL.NATIVE);", "DBMS_SQL.NATIVE)")
    assert parse_errors(broken, version)  # the check can fail


def test_install_script_loads_verifies_then_switches(ic_scripts):
    _, directory = ic_scripts
    text = (directory / "install_onnx_v1.sql").read_text()
    load = text.index("DBMS_VECTOR.LOAD_ONNX_MODEL(")
    verify = text.index("version not published")
    switch = text.index("CREATE OR REPLACE PACKAGE BODY ic_onnx AS")
    assert text.index("@@onnx_package_v1.sql") < load < verify < switch
    assert "directory  => 'DATA_PUMP_DIR'" in text and "metadata   => JSON(ic_onnx_v1_pkg.metadata)" in text
    assert text.count("check_row(") == 21  # the procedure and 20 sample rows
    package = (directory / "onnx_package_v1.sql").read_text()
    assert "GRU_INPUT_1 .. GRU_INPUT_15219: input gru_input (801 x 19, flattened row-major" in package
    assert "predict_proba(gru_input IN UTL_NLA_ARRAY_FLT, hlf_input IN UTL_NLA_ARRAY_FLT)" in package


def test_the_package_writes_the_metadata_file_s_json(ic_scripts):
    """The package builds the metadata in Oracle from a head, the attribute names by rule, and a tail:
    rebuilt here the same way, it is the JSON file's content."""
    _, directory = ic_scripts
    package = (directory / "onnx_package_v1.sql").read_text()
    written = json.loads((directory / "ic_metadata.json").read_text())
    call = package.split("RETURN listing(", 1)[1].split(", '\"', '\"', ", 1)
    head = call[0][1:-1].replace("''", "'")
    tail = call[1].split(", FALSE);")[0][1:-1]
    rules = [line.strip() for line in package.splitlines() if line.strip().startswith("IF k <= ")]
    assert rules == [
        "IF k <= 15219 THEN RETURN 'GRU_INPUT_' || k; END IF;",
        "IF k <= 15233 THEN RETURN 'HLF_INPUT_' || (k - 15219); END IF;",
    ]
    names = [f"GRU_INPUT_{k}" for k in range(1, 15220)] + [f"HLF_INPUT_{k}" for k in range(1, 15)]
    rebuilt = head + ", ".join(f'"{n}"' for n in names) + tail
    assert json.loads(rebuilt) == written


def test_a_sigmoid_probability_becomes_two_classes(tmp_path, ort115):
    """Keras's binary classifier (Dense(1, sigmoid)) gives P(class 1); Oracle classifies over every class's
    probability, so the file gives [1 − p, p] and PREDICTION names the likelier class."""
    inputs = keras.Input((6,), name="features")
    outputs = keras.layers.Dense(1, activation="sigmoid")(keras.layers.Dense(4, activation="relu")(inputs))
    model = models._seeded(keras.Model(inputs, outputs), 8)
    path = models.save(model, tmp_path / "model", ["no", "yes"])
    assert export(path, tmp_path / "out", "churn") == 0
    check_form(tmp_path / "out", "churn", ["no", "yes"], 6)
    x = np.random.default_rng(3).normal(size=(20, 6)).astype(np.float32)
    p = model.predict(x, verbose=0)
    actual = scored_in_ort115(tmp_path / "out", "churn", [x])
    assert actual.shape == (20, 2) and np.abs(actual - np.hstack([1 - p, p])).max() <= TOLERANCE


def test_one_linear_value_is_a_regression(tmp_path, ort115):
    inputs = keras.Input((5,), name="features")
    model = models._seeded(keras.Model(inputs, keras.layers.Dense(1)(inputs)), 9)
    assert export(models.save(model, tmp_path / "model"), tmp_path / "out", "energy") == 0
    metadata = json.loads((tmp_path / "out" / "energy_metadata.json").read_text())
    assert metadata["function"] == "regression" and "labels" not in metadata
    package = (tmp_path / "out" / "onnx_package_v1.sql").read_text()
    assert "FUNCTION label" not in package and parse_errors(package, "23ai") == []
    x = np.random.default_rng(4).random((8, 5), dtype=np.float32)
    actual = scored_in_ort115(tmp_path / "out", "energy", [x])
    assert np.abs(actual - model.predict(x, verbose=0)).max() <= TOLERANCE


def test_several_sigmoids_are_refused_in_one_line(tmp_path, capsys):
    inputs = keras.Input((5,), name="features")
    model = keras.Model(inputs, keras.layers.Dense(3, activation="sigmoid")(inputs))
    assert export(models.save(model, tmp_path / "model"), tmp_path / "out", "tags") == 2
    err = capsys.readouterr().err.strip()
    assert "computed by Sigmoid" in err and "--engine plsql" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists()  # nothing written


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dsn", "scott@db:1521/FREEPDB1"], "give --script-only DIR"),
        (["--script-only", "x", "--onnx-directory", "dir; drop"], "invalid --onnx-directory"),
    ],
)
def test_bad_options_are_one_line(cern_mlp_path, capsys, args, message):
    options = ["--engine", "onnx", "--model", str(cern_mlp_path), "--name", "mnist", "--quiet", *args]
    assert export_oracle(options) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_a_variable_length_sequence_is_refused_in_one_line(tmp_path, capsys):
    sequence = keras.Input((None, 4), name="sequence")
    model = keras.Model(sequence, keras.layers.Dense(3, activation="softmax")(keras.layers.GRU(5)(sequence)))
    assert export(models.save(model, tmp_path / "model"), tmp_path / "out", "seq") == 2
    err = capsys.readouterr().err.strip()
    assert "variable dimension" in err and len(err.splitlines()) == 1


def test_hostile_labels_stay_data(tmp_path):
    from tests.export.test_targets import HOSTILE_LABELS

    model = models.cern_mlp(n_features=16)
    counts = {}
    for kind, labels in (("plain", [f"c{i}" for i in range(10)]), ("hostile", HOSTILE_LABELS)):
        assert export(models.save(model, tmp_path / kind, labels), tmp_path / f"{kind}_out", "labels") == 0
        package = (tmp_path / f"{kind}_out" / "onnx_package_v1.sql").read_text()
        assert parse_errors(package, "23ai") == []
        counts[kind] = len(parseora.parse(package, version="23ai"))
        metadata = json.loads((tmp_path / f"{kind}_out" / "labels_metadata.json").read_text())
        assert metadata["labels"] == labels
    assert counts["hostile"] == counts["plain"]


def test_test_data_and_a_real_model_s_accuracy(digits_model, tmp_path, ort115):
    """The reference network trained on scikit-learn's digits: the test split goes into NAME_testdata (the
    table the PL/SQL route writes, whose arrays NAME_onnx takes) and the file classifies it as Keras does."""
    from nnsql import imagedata

    assert export(digits_model, tmp_path, "digits", "--load-test-data") == 0
    text = (tmp_path / "testdata.sql").read_text()
    assert text.count("INSERT INTO digits_testdata") == 450
    assert parse_errors(text[:20000].rsplit("\n/", 1)[0] + "\n/", "23ai") == []
    data = imagedata.load("digits")
    scores = scored_in_ort115(tmp_path, "digits", [data.x_test])
    assert (scores.argmax(1) == data.y_test).mean() >= 0.95


def test_token_indices_are_cast_back_to_integers(tmp_path, ort115):
    """An Embedding's int32 token input travels as whole float values in the flat row; the wrapper's Cast
    gives the model its integers back."""
    tokens = keras.Input((12,), dtype="int32", name="tokens")
    pooled = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(50, 8, name="embed")(tokens))
    model = models._seeded(keras.Model(tokens, keras.layers.Dense(3, activation="softmax")(pooled)), 12)
    assert export(models.save(model, tmp_path / "model"), tmp_path / "out", "tokens") == 0
    onnx_model = onnx.load(str(tmp_path / "out" / "tokens.onnx"))
    assert "Cast" in [node.op_type for node in onnx_model.graph.node[:4]]
    x = np.random.default_rng(6).integers(0, 50, (10, 12)).astype(np.int32)
    actual = scored_in_ort115(tmp_path / "out", "tokens", [x])
    assert np.abs(actual - model.predict(x, verbose=0)).max() <= TOLERANCE


def test_one_onnxruntime_1_15_process_scores_every_model(tmp_path, ort115):
    """Files are scored by one process of the 1.15.1 environment, not one per file; a file it cannot load
    is its error in one line, and the process scores the next file; closing it ends it."""
    import onnx.helper as make

    relu = make.make_graph(
        [make.make_node("Relu", ["x"], ["y"])],
        "relu",
        [make.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, 3])],
        [make.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, 3])],
    )
    model = make.make_model(relu, opset_imports=[make.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, str(tmp_path / "relu.onnx"))
    x = np.array([[-1.0, 2.0, -3.0]], dtype=np.float32)
    assert onnxruntime115.run(tmp_path / "relu.onnx", {"x": x})[1][0].tolist() == [[0.0, 2.0, 0.0]]
    process = onnxruntime115.RUNNING.process
    assert process is not None and process.poll() is None
    with pytest.raises(RuntimeError) as refused:
        onnxruntime115.run(tmp_path / "missing.onnx", {"x": x})
    assert "NO_SUCHFILE" in str(refused.value) and "\n" not in str(refused.value)
    version, outputs = onnxruntime115.run(tmp_path / "relu.onnx", {"x": -x})
    assert version == onnxruntime115.VERSION and outputs[0].tolist() == [[1.0, 0.0, 3.0]]
    assert onnxruntime115.RUNNING.process is process
    onnxruntime115.RUNNING.close()
    assert process.poll() is not None
