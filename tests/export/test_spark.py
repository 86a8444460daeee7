"""The Spark target on a real local Spark (local[2], one session for the module's process): the MNIST MLP,
TF-Spawner's CNN and the Inclusive Classifier (masked GRU, two inputs) scored in plain Spark SQL against
Keras, a weight off by 1e-4 refused with the previous version still scoring, and a look-alike function in
another database never called."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from nnsql.export.compile import prepare
from nnsql.export.errors import ExportError
from nnsql.export.publish.pipeline import ExportRequest, Prepared, publish
from nnsql.export.spark.generator import CAPABILITIES
from nnsql.export.spark.store import SparkStore, row_table
from tests import models
from tests.export import mutations
from tests.fixtures import made_once

TOLERANCE = 1e-5  # float64 Spark against Keras, the bound every float64 target is held to
SAMPLE_ROWS = 12  # the gate's rows: enough for every pattern of samples.py, few for a lean test


def saved(tmp_path_factory: pytest.TempPathFactory, name: str, build) -> Path:
    return made_once(tmp_path_factory, f"spark_{name}", lambda out: models.save(build(), out)) / "model.keras"


def export(
    spark, path: Path, name: str, prepared: Prepared | None = None, samples: Path | None = None
) -> tuple[Prepared, int]:
    """Publish the model at `path` as `name` through the gate; returns what was prepared and the version."""
    request = ExportRequest(
        model_path=path,
        name=name,
        sample_rows=SAMPLE_ROWS,
        parity_seconds=600,
        quiet=True,
        samples_file=samples,
    )
    prepared = prepared or prepare(request, CAPABILITIES)
    record = publish(SparkStore(spark, progress=False), request, prepared, "spark")
    return prepared, record.version


def shortest(prepared: Prepared, count: int = 4) -> np.ndarray:
    """The sample rows with the fewest values that are not padding: each step of a scan costs Spark
    thousands of interpreted lambda calls."""
    inputs = prepared.samples.inputs.values()
    filled = sum(np.count_nonzero(values.reshape(len(values), -1), axis=1) for values in inputs)
    return np.sort(np.argsort(filled, kind="stable")[:count])


def scored(spark, prepared: Prepared, sql: str, rows: np.ndarray | None = None) -> list:
    """`sql` (reading the view `events`) over the sample rows (or `rows` of them), in row order."""
    inputs = prepared.samples.inputs
    if rows is not None:
        inputs = {key: values[rows] for key, values in inputs.items()}
    spark.createDataFrame(row_table(inputs, prepared.graph)).createOrReplaceTempView("events")
    return [row[0] for row in spark.sql(sql + " ORDER BY _nn_row").collect()]


# Each model file loaded once: the Inclusive Classifier's is read by three tests.
LOADED: dict[Path, Any] = {}


def keras_scores(path: Path, prepared: Prepared, rows: np.ndarray) -> np.ndarray:
    import keras

    if path not in LOADED:
        LOADED[path] = keras.saving.load_model(path)
    feeds = [prepared.samples.inputs[spec.name][rows] for spec in prepared.graph.inputs]
    return LOADED[path].predict(feeds if len(feeds) > 1 else feeds[0], verbose=0)


@pytest.fixture(scope="module")
def paths(tmp_path_factory) -> dict[str, Path]:
    return {
        "mnist": saved(tmp_path_factory, "mlp", models.cern_mlp),
        "cnn": saved(tmp_path_factory, "cnn", models.tf_spawner_cnn),
        "higgs": saved(tmp_path_factory, "gru", models.inclusive_classifier),
    }


@pytest.fixture(scope="module")
def events(tmp_path_factory) -> Path:
    """Events as CERN's are: particle lists zero-padded after 20 to 185 particles (a scan over all 801
    steps of every sample row would cost the test minutes in Spark's interpreted lambdas)."""
    particles, features = models.padded_events(SAMPLE_ROWS)
    path = tmp_path_factory.mktemp("events") / "events.npz"
    np.savez(path, gru_input=particles, hlf_input=features)
    return path


@pytest.fixture(scope="module")
def published(spark, paths, events):
    """Each model exported once for the module: name → what was prepared."""
    done: dict[str, Prepared] = {}

    def get(name: str) -> Prepared:
        if name not in done:
            samples = events if name == "higgs" else None
            done[name] = export(spark, paths[name], name, samples=samples)[0]
        return done[name]

    return get


@pytest.mark.parametrize(
    ("name", "arguments"),
    [("mnist", "features"), ("cnn", "image"), ("higgs", "gru_input, hlf_input")],
)
def test_scores_in_plain_spark_sql_match_keras(spark, paths, published, name, arguments):
    prepared = published(name)
    rows = shortest(prepared)
    expected = keras_scores(paths[name], prepared, rows)
    answers = f"named_struct('p', {name}.predict_proba({arguments}), 'l', {name}.label({arguments}))"
    sql = f"SELECT {answers} FROM events"
    answers = scored(spark, prepared, sql, rows)
    assert np.abs(np.array([answer.p for answer in answers]) - expected).max() <= TOLERANCE
    assert [answer.l for answer in answers] == [prepared.graph.classes[i] for i in expected.argmax(axis=1)]


def test_sequences_are_arrays_of_steps_in_float(spark, paths, published):
    """The Inclusive Classifier's particles arrive as array<array<float>>, one array per particle."""
    prepared = published("higgs")
    rows = shortest(prepared)
    inputs = {key: values[rows] for key, values in prepared.samples.inputs.items()}
    table = row_table(inputs, prepared.graph)
    assert table.schema.field("gru_input").type == pa.list_(pa.list_(pa.float64()))
    frame = spark.createDataFrame(table).selectExpr(
        "_nn_row", "CAST(gru_input AS ARRAY<ARRAY<FLOAT>>) AS g", "CAST(hlf_input AS ARRAY<FLOAT>) AS h"
    )
    frame.createOrReplaceTempView("floats")
    answers = spark.sql("SELECT higgs.score(g, h) FROM floats ORDER BY _nn_row").collect()
    expected = keras_scores(paths["higgs"], prepared, rows).argmax(axis=1)
    assert [answer[0] for answer in answers] == list(expected)


def test_weight_off_by_1e4_is_refused_and_the_previous_version_scores(spark, tmp_path):
    true_path = models.save(mutations.dense(), tmp_path / "true")
    faulty_path = mutations.with_faulty_weights(true_path, "weight_1e-4", tmp_path / "faulty")
    prepared, version = export(spark, true_path, "mutant")
    request = ExportRequest(model_path=faulty_path, name="mutant", sample_rows=SAMPLE_ROWS, quiet=True)
    faulty = replace(prepared, graph=prepare(request, CAPABILITIES).graph)  # compared with the true model
    with pytest.raises(ExportError, match="parity"):
        export(spark, true_path, "mutant", faulty)
    before = scored(spark, prepared, f"SELECT mutant.predict_v{version}(features) FROM events")
    assert scored(spark, prepared, "SELECT mutant.predict(features) FROM events") == before
    functions = {row[0] for row in spark.sql("SHOW USER FUNCTIONS IN mutant").collect()}
    assert not any(function.endswith(f"_v{version + 1}") for function in functions)


def test_a_look_alike_function_elsewhere_is_never_called(spark, tmp_path):
    """Another user's database, current in the session, holds functions of the same names."""
    path = models.save(mutations.dense(), tmp_path / "model")
    spark.sql("CREATE DATABASE IF NOT EXISTS squatter")
    for function in ("predict_v1", "predict_proba_v1", "predict", "score_v1"):
        spark.sql(
            f"CREATE OR REPLACE FUNCTION squatter.{function}(features ARRAY<DOUBLE>) RETURNS ARRAY<DOUBLE> "
            "RETURN CAST(raise_error('the look-alike was called') AS ARRAY<DOUBLE>)"
        )
    spark.sql("USE squatter")
    try:
        prepared, _ = export(spark, path, "honest")
        answers = scored(spark, prepared, "SELECT honest.score(features) FROM events")
    finally:
        spark.sql("USE default")
    assert answers == list(prepared.gate.expected(np.arange(prepared.samples.rows)).argmax(axis=1))


def test_a_session_that_replaces_a_built_in_is_refused(spark, tmp_path):
    """A temporary function named `exp` (here Hive's square root) replaces the built-in for the rest of a
    session, and Spark cannot qualify a built-in: the generated softmax would run it. The export refuses
    that session in one line and stages nothing. The function lives in a session of its own, so the
    module's shared session keeps Spark's `exp`."""
    path = models.save(mutations.dense(), tmp_path / "model")
    replacing = spark.newSession()
    replacing.sql("CREATE OR REPLACE TEMPORARY FUNCTION exp AS 'org.apache.hadoop.hive.ql.udf.UDFSqrt'")
    with pytest.raises(ExportError, match="replaces the built-in function exp") as refused:
        export(replacing, path, "replaced")
    assert len(str(refused.value).splitlines()) == 1
    assert not spark.catalog.databaseExists("replaced")


def test_pyspark_columns_call_the_published_functions(spark, paths, published):
    from nnsql import spark as nn

    prepared = published("higgs")
    rows = shortest(prepared)
    inputs = {key: values[rows] for key, values in prepared.samples.inputs.items()}
    frame = spark.createDataFrame(row_table(inputs, prepared.graph))
    frame = frame.withColumn("p", nn.predict_proba("higgs", "gru_input", "hlf_input")).orderBy("_nn_row")
    probabilities = np.array([row.p for row in frame.select("p").collect()])
    assert np.abs(probabilities - keras_scores(paths["higgs"], prepared, rows)).max() <= TOLERANCE


def test_the_command_publishes_and_prints_a_fresh_sessions_settings(spark, tmp_path, capsys):
    from nnsql.export.spark.__main__ import main

    path = models.save(mutations.dense(), tmp_path / "model")
    options = ["--model", str(path), "--warehouse", str(tmp_path / "wh"), "--quiet"]
    options += ["--sample-rows", str(SAMPLE_ROWS), "--parity-seconds", "600"]
    assert main([*options, "--name", "small"]) == 0
    out = capsys.readouterr().out
    assert "published small version 1" in out
    assert "spark.sql.warehouse.dir" in out.splitlines()[-2]
    assert spark.sql("SELECT small.score(array(1D, 2D, 3D, 4D, 5D, 6D, 7D, 8D))").collect()[0][0] in range(4)


def test_the_sessions_java_options_add_to_the_derby_log_setting(spark):
    """Java options given to session.start (the test session's JIT settings) join the driver's own:
    Derby still writes its log into the warehouse, not into the folder the export ran from."""
    jvm = spark.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert "-XX:TieredStopAtLevel=1" in arguments, arguments
    log = Path(jvm.System.getProperty("derby.stream.error.file"))
    assert log == Path(warehouse(spark)) / "derby.log"


def test_bad_input_is_one_line_and_the_session_survives(spark, published, tmp_path, capsys):
    from nnsql.export.spark.__main__ import main

    path = models.save(models.with_unsupported_activation(), tmp_path / "model")
    assert main(["--model", str(path), "--name", "refused", "--warehouse", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "sparsemax" in err and len(err.splitlines()) == 1
    published("mnist")
    message = ""
    try:
        spark.sql("SELECT mnist.score(array(1D, 2D))").collect()
    except Exception as error:  # the wrong length, named in Spark's first line
        message = str(error).splitlines()[0]
    assert "mnist: features must have 784 values, got 2" in message


def test_an_unsupported_layer_is_refused_before_spark_starts(tmp_path):
    """A layer Spark cannot compile is refused in one line, as on the other targets, before anything is
    written: no warehouse folder, no JVM started (a separate process, so no test session is reused)."""
    import subprocess
    import sys

    path = models.save(models.with_unsupported_activation(), tmp_path / "model")
    warehouse = tmp_path / "wh"
    command = [sys.executable, "-m", "nnsql", "export", "spark", "--model", str(path), "--name", "refused"]
    result = subprocess.run(
        [*command, "--warehouse", str(warehouse)], capture_output=True, text=True, timeout=300
    )
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2
    assert lines[-1].startswith("error: ") and "sparsemax" in lines[-1]
    assert not any("Spark" in line or "log4j" in line for line in lines), result.stderr
    assert not warehouse.exists()


def warehouse(spark) -> str:
    """The catalog folder of the running session, as `nnsql models --warehouse` takes it."""
    return spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:")


def versions_of(spark, name: str) -> set[str]:
    return {
        row[0].rsplit("_v", 1)[1]
        for row in spark.sql(f"SHOW USER FUNCTIONS IN {name}").collect()
        if "_v" in row[0]
    }


def test_models_roll_back_refuse_a_replaced_function_and_remove_a_version(spark, tmp_path, capsys):
    """Two versions of one model: activate 1; version 2's function replaced after publishing is refused
    (the public functions keep answering as 1); version 2 removed: its functions are gone."""
    from nnsql.export.registry.cli import main

    first = models.save(mutations.dense(), tmp_path / "v1")
    second = mutations.with_faulty_weights(first, "weight_1e-4", tmp_path / "v2")  # retrained: other answers
    prepared, one = export(spark, first, "rolled")
    _, two = export(spark, second, "rolled")
    public, own = (
        "SELECT rolled.predict(features) FROM events",
        "SELECT rolled.predict_v{}(features) FROM events",
    )
    answers = {version: scored(spark, prepared, own.format(version)) for version in (one, two)}
    assert answers[one] != answers[two] and scored(spark, prepared, public) == answers[two]
    store = ["--warehouse", warehouse(spark), "--name", "rolled", "--version"]
    assert main(["activate", *store, str(one)]) == 0
    assert scored(spark, prepared, public) == answers[one]
    spark.sql(
        f"CREATE OR REPLACE FUNCTION rolled.predict_v{two}(features ARRAY<DOUBLE>) RETURNS ARRAY<DOUBLE> "
        f"RETURN rolled.predict_v{one}(features)"
    )
    capsys.readouterr()
    assert main(["activate", *store, str(two)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "fails the answer check" in err and "not activated" in err
    assert scored(spark, prepared, public) == answers[one]
    assert main(["remove", *store, str(two)]) == 0
    assert versions_of(spark, "rolled") == {str(one)}
    assert main(["remove", *store, str(one)]) == 2  # the active one stays
    capsys.readouterr()
    assert main(["list", *store[:-1]]) == 0
    listed = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert listed == [["*", "rolled", str(one), *listed[0][3:]]]


@pytest.mark.parametrize(
    ("kept", "changed"),
    [
        ("RETURN tiny.predict_v3(", "RETURN elsewhere.predict_v3("),  # another database's function
        ("RETURN tiny.score_v3(", "RETURN tiny.score_v2("),  # another version's
        ("CREATE OR REPLACE FUNCTION tiny.label(", "CREATE OR REPLACE FUNCTION other.label("),
        ("RETURNS INT RETURN", "RETURNS INT RETURN 1 + "),
    ],
)
def test_activation_runs_only_the_switch_the_exporter_writes(kept, changed):
    """The kept statements are read from a table anyone who can write the catalog can change: the
    public functions switch only through statements of the form the export writes."""
    from nnsql.export.registry.spark import public_statements
    from nnsql.export.spark.generator import SparkGenerator
    from tests.golden.graphs import tiny_graph

    generator = SparkGenerator(tiny_graph(), "tiny", 3)
    script = ";\n".join([*generator.statements(), *generator.public()]) + ";\n"
    assert [match.group(0) for match in public_statements(script, "tiny", 3)] == generator.public()
    assert kept in script
    with pytest.raises(ExportError, match="does not read as the exporter wrote it"):
        public_statements(script.replace(kept, changed), "tiny", 3)


@pytest.fixture(scope="module")
def masked(tmp_path_factory) -> tuple:
    """A GRU over `(None, 3)` readings behind Masking(-1) (not 0: the padding must be the layer's own
    value), saved once: the Keras model and its file."""
    import keras

    def build():
        keras.utils.set_random_seed(21)
        readings = keras.Input(shape=(None, 3), name="readings")
        state = keras.layers.GRU(4)(keras.layers.Masking(-1.0)(readings))
        return keras.Model(readings, keras.layers.Dense(3, activation="softmax")(state))

    path = saved(tmp_path_factory, "masked", build)
    return keras.saving.load_model(path), path


def test_a_shorter_sequence_is_padded_where_the_model_masks(spark, masked):
    """`sensors.predict(readings)` with readings an array<array<float>> of any length up to the exported
    one: Keras's answer on the sequence padded with the Masking layer's value; a longer sequence or a
    step of another size refused in one line naming the input."""
    model, path = masked
    request = ExportRequest(
        model_path=path,
        name="sensors",
        sample_rows=SAMPLE_ROWS,
        parity_seconds=600,
        quiet=True,
        sequence_length=6,
    )
    publish(SparkStore(spark, progress=False), request, prepare(request, CAPABILITIES), "spark")
    generator = np.random.default_rng(3)
    sequences = [generator.normal(size=(n, 3)).round(4).astype(np.float32) for n in (6, 4, 1)]
    frame = spark.createDataFrame(
        [(i, s.tolist()) for i, s in enumerate(sequences)], "i INT, readings ARRAY<ARRAY<FLOAT>>"
    )
    frame.createOrReplaceTempView("readings")
    answers = spark.sql("SELECT sensors.predict(readings) FROM readings ORDER BY i").collect()
    padded = np.stack([np.concatenate([s, np.full((6 - len(s), 3), -1.0)]) for s in sequences])
    expected = model.predict(padded, verbose=0)
    assert np.abs(np.array([answer[0] for answer in answers]) - expected).max() <= TOLERANCE

    def refusal(sequence: str) -> str:
        with pytest.raises(Exception) as refused:  # Spark's error, the message in its first line
            spark.sql(f"SELECT sensors.score({sequence})").collect()
        return str(refused.value).splitlines()[0]

    steps = "array(" + ", ".join(["array(0.5D, 1D, 2D)"] * 7) + ")"
    assert "sensors: readings must have at most 6 steps (shorter ones are padded with -1), got 7" in refusal(
        steps
    )
    ragged = "array(array(0.5D, 1D, 2D), array(1D, 2D))"
    assert "sensors: readings: every list at depth 2 must have 3 elements, got one of 2" in refusal(ragged)
    assert spark.sql("SELECT sensors.score(CAST(NULL AS ARRAY<ARRAY<DOUBLE>>))").collect()[0][0] is None


def test_a_shorter_sequence_is_refused_where_the_model_does_not_mask(spark, tmp_path):
    import keras

    keras.utils.set_random_seed(5)
    readings = keras.Input(shape=(6, 3), name="readings")
    model = keras.Model(readings, keras.layers.Dense(2, activation="softmax")(keras.layers.GRU(3)(readings)))
    export(spark, models.save(model, tmp_path / "plain"), "plain")
    with pytest.raises(Exception) as refused:
        spark.sql("SELECT plain.score(array(array(0.5D, 1D, 2D)))").collect()
    assert "plain: readings must have 6 lists, got 1" in str(refused.value).splitlines()[0]


def test_affine_layers_score_as_keras(spark, tmp_path):
    """Normalization, BatchNormalization (moving statistics away from 0 and 1) and LeakyReLU lower to
    Affine nodes, a scale and a shift per value: scored in Spark against Keras."""
    import keras

    keras.utils.set_random_seed(9)
    features = keras.Input(shape=(8,), name="features")
    normal = keras.layers.Normalization(mean=np.linspace(-1, 1, 8), variance=np.linspace(0.5, 2, 8))
    hidden = keras.layers.Dense(6)(normal(features))
    batch = keras.layers.BatchNormalization()
    hidden = keras.layers.LeakyReLU(negative_slope=0.2)(batch(hidden))
    model = keras.Model(features, keras.layers.Dense(3, activation="softmax")(hidden))
    generator = np.random.default_rng(4)
    gamma, beta = generator.normal(size=6), generator.normal(size=6)
    batch.set_weights([gamma, beta, generator.normal(size=6), generator.uniform(0.5, 2, size=6)])
    prepared, _ = export(spark, models.save(model, tmp_path / "affine"), "affine")
    rows = np.arange(6)
    expected = keras_scores(tmp_path / "affine" / "model.keras", prepared, rows)
    answers = scored(spark, prepared, "SELECT affine.predict_proba(features) FROM events", rows)
    assert np.abs(np.array(answers) - expected).max() <= TOLERANCE


def test_the_activations_of_the_ir_score_as_keras(spark, tmp_path):
    """Every activation export/ir/activations.py writes once for all targets (elu, gelu, rsqrt inside
    LayerNormalization...), rendered in Spark SQL, against Keras."""
    import keras

    keras.utils.set_random_seed(10)
    features = keras.Input(shape=(8,), name="features")
    hidden = keras.layers.LayerNormalization()(features)
    for activation in ("elu", "selu", "gelu", "softplus", "softsign", "silu", "hard_sigmoid", "mish"):
        hidden = keras.layers.Dense(8, activation=activation)(hidden)
    model = keras.Model(features, keras.layers.Dense(3, activation="softmax")(hidden))
    prepared, _ = export(spark, models.save(model, tmp_path / "activations"), "activations")
    rows = np.arange(6)
    expected = keras_scores(tmp_path / "activations" / "model.keras", prepared, rows)
    answers = scored(spark, prepared, "SELECT activations.predict_proba(features) FROM events", rows)
    assert np.abs(np.array(answers) - expected).max() <= TOLERANCE


@pytest.mark.parametrize("kind", ["adapted_normalization", "folded_linear_chain"])
def test_derived_weights_score_as_keras_in_float64_at_scale(spark, tmp_path, kind):
    """Weights the exporter derives in float64 (1/sqrt(variance), W1·W2) reach Spark's SQL in float64:
    on rows of magnitudes to 1e4 its values are Keras's in float64 to float64's rounding
    (tests/export/test_derived_weights.py says why and within what)."""
    from nnsql.export.frontend.float64 import predictor
    from tests.export import test_derived_weights as derived

    model = derived.derived(kind)
    path = models.save(model, tmp_path / kind)
    request = ExportRequest(
        model_path=path,
        name="derived",
        sample_rows=SAMPLE_ROWS,
        parity_seconds=600,
        quiet=True,
        output="values",
    )
    prepared = prepare(request, CAPABILITIES)
    publish(SparkStore(spark, progress=False), request, prepared, "spark")
    x = derived.rows_at_scale(100, 6)
    spark.createDataFrame(row_table({"features": x}, prepared.graph)).createOrReplaceTempView("events")
    answers = [
        row[0] for row in spark.sql("SELECT derived.predict(features) FROM events ORDER BY _nn_row").collect()
    ]
    assert derived.far(np.array(answers), predictor(model)([x])) <= derived.FLOAT64
