"""Conv2D and MaxPooling2D lowered to Gather + PatchDense / GroupMax: the windows against Keras's own
convolution, and TF-Spawner's CNN scored within 1e-5 of Keras in DuckDB, PL/pgSQL, PL/Python
and Oracle (BLAS_GEMM over the gathered windows, checked by the independent UTL_NLA interpreter)."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from nnsql.export.compile import to_ir
from nnsql.export.ir import reference
from tests import models
from tests.export.executors import DuckDBExecutor, OracleScriptExecutor, PlPythonExecutor, PostgresExecutor
from tests.models import tf_spawner_cnn


def convolution_variants(seed: int = 32) -> keras.Model:
    """'same' padding, strides, dilation, no bias, an elementwise activation, two channels in."""
    inputs = keras.Input((9, 7, 2), name="image")
    x = keras.layers.Conv2D(4, (3, 2), padding="same", strides=(2, 1), activation="elu", name="c1")(inputs)
    x = keras.layers.Conv2D(3, (2, 2), dilation_rate=(2, 1), use_bias=False, name="c2")(x)
    x = keras.layers.MaxPooling2D((1, 2), strides=(1, 1), name="p")(x)
    outputs = keras.layers.Dense(3, activation="softmax", name="out")(keras.layers.Flatten()(x))
    return models._seeded(keras.Model(inputs, outputs), seed)


@pytest.mark.parametrize("build", [tf_spawner_cnn, convolution_variants])
def test_lowered_convolutions_match_keras_in_the_reference(build):
    model = build()
    shape = tuple(model.inputs[0].shape[1:])
    x = np.random.default_rng(33).random((12, *shape), dtype=np.float32)
    graph = to_ir(model, target="reference")
    assert {node.kind for node in graph.nodes} >= {"Gather", "PatchDense", "GroupMax"}
    assert np.abs(reference.run(graph, x) - model.predict(x, verbose=0)).max() <= 1e-5


@pytest.fixture(
    params=[
        pytest.param("duckdb", marks=pytest.mark.duckdb),
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("plpython", marks=pytest.mark.postgres),
    ]
)
def cnn_target(request, tmp_path):
    if request.param == "duckdb":
        return DuckDBExecutor(tmp_path)
    executor = PlPythonExecutor if request.param == "plpython" else PostgresExecutor
    return executor(request.getfixturevalue("postgres_dsn"))


@pytest.mark.parametrize("build", [tf_spawner_cnn, convolution_variants])
def test_convolutions_score_in_the_database(cnn_target, tmp_path, build):
    model = build()
    assert cnn_target.export(models.save(model, tmp_path / build.__name__), "cnn", "--sample-rows", "20") == 0
    shape = tuple(model.inputs[0].shape[1:])
    x = np.random.default_rng(34).random((10, *shape), dtype=np.float32)
    actual, expected = cnn_target.predict("cnn", x), model.predict(x, verbose=0)
    assert np.abs(actual - expected).max() <= 1e-5 and (actual.argmax(1) == expected.argmax(1)).all()


@pytest.mark.oracle
@pytest.mark.parametrize("build", [tf_spawner_cnn, convolution_variants])
def test_oracle_package_runs_convolutions_with_blas_gemm(tmp_path, build):
    """The generated package, run by the independent interpreter of UTL_NLA (BLAS_GEMM per layer)."""
    import parseora

    model = build()
    target = OracleScriptExecutor(tmp_path)
    assert target.export(models.save(model, tmp_path / "cnn"), "cnn") == 0
    package = (target.directory / "03_package_v1.sql").read_text()
    assert all(not unit["errors"] for unit in parseora.parse(package, version="19c"))
    assert "UTL_NLA.BLAS_GEMM" in package and "gather(" in package
    shape = tuple(model.inputs[0].shape[1:])
    x = np.random.default_rng(35).random((6, *shape), dtype=np.float32)
    actual, expected = target.predict("cnn", x), model.predict(x, verbose=0)
    assert np.abs(actual - expected).max() <= 1e-5 and (actual.argmax(1) == expected.argmax(1)).all()


def test_blas_gemm_reference_follows_the_documented_layouts():
    from tests.export.plsql_interpreter import blas_gemm

    a = np.arange(1, 7, dtype=np.float32)  # 2x3 [[1,2,3],[4,5,6]] row-major
    b = np.arange(1, 7, dtype=np.float32)  # 3x2 [[1,2],[3,4],[5,6]] row-major
    c = blas_gemm("N", "N", 2, 2, 3, 1.0, a, 3, b, 2, 0.0, np.zeros(4, np.float32), 2, pack="R")
    np.testing.assert_array_equal(c, [22, 28, 49, 64])
    c = blas_gemm("N", "N", 2, 2, 3, 1.0, a, 2, b, 3, 1.0, np.ones(4, np.float32), 2, pack="C")
    # column-major: A = [[1,3,5],[2,4,6]], B = [[1,4],[2,5],[3,6]]; C = A·B + 1, stored column-major
    np.testing.assert_array_equal(c, [23, 29, 50, 65])


@pytest.fixture(scope="module")
def field_cnn(tmp_path_factory):
    """Conv2D 32 then 64 filters over 28×28 (~11 M multiply-adds a row), staged in a DuckDB file with
    a table of FIELD_ROWS images; the model and the file."""
    from nnsql.export.duckdb.store import DuckDBStore, feature_table

    model = models.mnist_cnn()
    path = tmp_path_factory.mktemp("field") / "field.duckdb"
    store = DuckDBStore(path, progress=False)
    with store.session():
        store.stage("cnn", 1, to_ir(model, target="duckdb"))
    images = np.random.default_rng(36).random((FIELD_ROWS, 28, 28, 1), dtype=np.float32)
    with store.registered(feature_table({"image": images})) as rows:
        store.con.execute(f"CREATE TABLE images AS SELECT _nn_row AS id, image FROM {rows}")
    store.close()
    return model, path


FIELD_ROWS = 30
FEW_ROWS = 12  # more than the macro computes at once (export/duckdb/batches.py: 10 rows)
# What each row beyond FEW_ROWS may add to the peak memory of a process that scores them in one query
# (one DuckDB chunk): the allocator's noise, ±20 MB. A macro that computed all the rows of a chunk at
# once added ~15 MB a row.
GROWTH_MB_PER_ROW = 2.0


def peak_mb(path, rows: int) -> float:
    """Peak resident MB of a fresh process that opens the file and scores its first `rows` images."""
    import subprocess
    import sys

    script = (
        "import duckdb, re, sys\n"
        "con = duckdb.connect(sys.argv[1], read_only=True)\n"
        "con.execute('SET enable_progress_bar = false')\n"
        "con.execute('SELECT cnn.predict(image) FROM images WHERE id < ?', [int(sys.argv[2])]).fetchall()\n"
        # VmHWM, not getrusage: the peak a process inherits from its parent over fork and exec
        "print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path), str(rows)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return float(done.stdout) / 1024


@pytest.mark.duckdb
def test_field_sized_cnn_scores_in_duckdb(field_cnn):
    """The windows are read by element inside the loop over the positions: a few images score in
    seconds, within 1e-5."""
    from nnsql.export.duckdb.store import DuckDBStore

    model, path = field_cnn
    x = np.random.default_rng(37).random((3, 28, 28, 1), dtype=np.float32)
    store = DuckDBStore(path, progress=False)
    actual, expected = store.scores("cnn", {"image": x}), model.predict(x, verbose=0)
    store.close()
    assert np.abs(actual - expected).max() <= 1e-5 and (actual.argmax(1) == expected.argmax(1)).all()


@pytest.mark.duckdb
def test_field_sized_cnn_scores_in_bounded_memory(field_cnn):
    _, path = field_cnn
    few, many = peak_mb(path, FEW_ROWS), peak_mb(path, FIELD_ROWS)
    assert many - few <= GROWTH_MB_PER_ROW * (FIELD_ROWS - FEW_ROWS), (
        f"{few:.0f} MB for {FEW_ROWS} rows, {many:.0f} MB for {FIELD_ROWS}"
    )
