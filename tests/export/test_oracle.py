"""Oracle target without an Oracle server: syntax (independent parser), BLAS semantics (numpy reference of
the documented UTL_NLA calls, executing the generated text), chunking, scripts, errors. Live tests run
when ORACLE_DSN and ORACLE_PASSWORD are set."""

from __future__ import annotations

import io
import os

import keras
import numpy as np
import parseora
import pytest

from nnsql.export.errors import ExportError
from nnsql.export.oracle.__main__ import main as export_oracle
from nnsql.export.oracle.store import explain, parse_dsn, sql_statements
from tests import models
from tests.ci_skips import needs_endpoint
from tests.export.plsql_interpreter import blas_gemv, load_scripts

pytestmark = pytest.mark.oracle


def script_only(model, directory, name="mnist", *extra: str) -> int:
    args = ["--model", str(model), "--name", name, "--script-only", str(directory), "--quiet"]
    return export_oracle([*args, "--sample-rows", "50", *extra])


def parse_errors(text: str, version: str = "19c") -> list:
    return [
        (unit["line"], error) for unit in parseora.parse(text, version=version) for error in unit["errors"]
    ]


@pytest.fixture(scope="module")
def mnist_scripts(tmp_path_factory, cern_mlp_path):
    directory = tmp_path_factory.mktemp("oracle_scripts")
    assert script_only(cern_mlp_path, directory) == 0
    return directory


@pytest.mark.parametrize("version", ["19c", "21c", "23ai"])
def test_every_script_parses_as_oracle(mnist_scripts, version):
    names = sorted(path.name for path in mnist_scripts.glob("*.sql"))
    assert names == [
        "00_privileges.sql",
        "01_schema.sql",
        "02_check_rows_v1.sql",
        "02_tensors_v1.sql",
        "03_package_v1.sql",
        "04_verify_and_switch_v1.sql",
        "activate_v1.sql",
        "install.sql",
    ]
    for name in names:
        text = (mnist_scripts / name).read_text()
        assert parse_errors(text, version) == [], name
        warnings = [w for unit in parseora.parse(text, version=version) for w in unit["warnings"]]
        assert all("not modelled" in w["message"] for w in warnings), (name, warnings[:3])


def test_parser_catches_a_broken_package(mnist_scripts):
    """The syntax check can fail: a missing semicolon is reported."""
    text = (
        (mnist_scripts / "03_package_v1.sql")
        .read_text()
        .replace("activate_sigmoid(v_hidden);", "activate_sigmoid(v_hidden)")
    )
    assert parse_errors(text)


def test_package_units_and_sizes_come_from_the_ir(mnist_scripts):
    package = (mnist_scripts / "03_package_v1.sql").read_text()
    kinds = [unit["statement"] for unit in parseora.parse(package) if unit["kind"] == "plsql"]
    assert kinds[:2] == ["CreatePackage", "CreatePackageBody"]
    assert "m => 100, n => 784" in package and "lda => 100" in package
    assert "m => 10, n => 100" in package and "features must have 784 values" in package
    assert "PRAGMA UDF" in package and "DETERMINISTIC" in package
    switch = (mnist_scripts / "04_verify_and_switch_v1.sql").read_text()
    assert "CREATE OR REPLACE PACKAGE BODY mnist AS" in switch and "PIPELINED" in switch
    assert switch.index("version not published") < switch.index("CREATE OR REPLACE PACKAGE BODY mnist")


@pytest.mark.parametrize("fixture", ["cern_mlp_path", "mixed_layers_path", "digits_model"])
def test_generated_blas_calls_reproduce_keras(fixture, request, tmp_path):
    model_path = request.getfixturevalue(fixture)
    assert script_only(model_path, tmp_path) == 0
    interpreter = load_scripts(tmp_path)
    model = keras.saving.load_model(model_path)
    shape = tuple(model.inputs[0].shape[1:])
    x = np.random.default_rng(11).random((25, *shape), dtype=np.float32)
    expected = model.predict(x, verbose=0)
    actual = np.array([interpreter.run({model.inputs[0].name: row}) for row in x])
    assert np.abs(actual - expected).max() <= 1e-5  # float32 parity
    assert (actual.argmax(1) == expected.argmax(1)).all()
    assert interpreter.gemv_calls and all(call["pack"] == "C" for call in interpreter.gemv_calls)


def test_kernel_over_a_million_values_is_chunked(tmp_path):
    inputs = keras.Input((2000,), name="features")
    hidden = keras.layers.Dense(600, activation="relu", name="wide")(inputs)  # 1.2M weights
    outputs = keras.layers.Dense(4, activation="softmax", name="out")(hidden)
    model = keras.Model(inputs, outputs)
    generator = np.random.default_rng(3)
    for weight in model.weights:
        weight.assign(generator.normal(0, 0.03, size=tuple(weight.shape)).astype(np.float32))
    path = models.save(model, tmp_path / "wide")
    assert script_only(path, tmp_path / "out") == 0
    interpreter = load_scripts(tmp_path / "out")
    tensors = (tmp_path / "out" / "02_tensors_v1.sql").read_text()
    assert "'wide.kernel', 2," in tensors and "'wide.kernel', 3," not in tensors
    x = generator.random((3, 2000), dtype=np.float32)
    actual = np.array([interpreter.run({"features": row}) for row in x])
    assert np.abs(actual - model.predict(x, verbose=0)).max() <= 1e-5
    wide_calls = [call for call in interpreter.gemv_calls[:3] if call["n"] == 2000]
    assert [call["m"] for call in wide_calls] == [500, 100]  # 1,000,000 // 2000 units per chunk
    assert all(call["m"] * call["n"] <= 1_000_000 for call in interpreter.gemv_calls)


def test_blas_reference_follows_the_documented_layouts():
    a = np.arange(1, 7, dtype=np.float32)  # 2x3 matrix [[1,3,5],[2,4,6]] column-major
    x = np.array([1, 1, 1], dtype=np.float32)
    y = np.array([10, 20], dtype=np.float32)
    np.testing.assert_array_equal(blas_gemv("N", 2, 3, 1.0, a, 2, x, 1, 1.0, y, 1, "C"), [19, 32])
    np.testing.assert_array_equal(blas_gemv("N", 2, 3, 1.0, a, 3, x, 1, 0.0, y, 1, "R"), [6, 15])
    np.testing.assert_array_equal(
        blas_gemv("T", 2, 3, 2.0, a, 2, np.array([1, 0], np.float32), 1, 0.0, np.zeros(3, np.float32), 1),
        [2, 6, 10],
    )


def test_test_data_script_holds_every_row(tmp_path, digits_model):
    assert script_only(digits_model, tmp_path, "digits", "--load-test-data") == 0
    text = (tmp_path / "05_testdata.sql").read_text()
    assert text.count("INSERT INTO digits_testdata") == 450
    assert parse_errors(text[:20000].rsplit("\n/", 1)[0] + "\n/") == []
    assert "@@05_testdata.sql" in (tmp_path / "install.sql").read_text()


def test_split_into_statements_like_sqlplus():
    script = "BEGIN\n  NULL;\nEND;\n/\n-- comment\nCREATE TABLE t (x NUMBER)\n/\n"
    assert list(sql_statements(script)) == ["BEGIN\n  NULL;\nEND;", "CREATE TABLE t (x NUMBER)"]


@pytest.mark.parametrize(
    ("dsn", "ok"),
    [
        ("scott@db.example.org:1521/FREEPDB1", True),
        ("scott@localhost/xe", True),
        ("db:1521/x", False),
        ("", False),
    ],
)
def test_dsn_forms(dsn, ok):
    if ok:
        assert parse_dsn(dsn).user == "scott"
    else:
        with pytest.raises(ExportError, match="expected user@host:port/service"):
            parse_dsn(dsn)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("ORA-01017: invalid credential or not authorized; logon denied", "rejected user or password"),
        ("ORA-01031: insufficient privileges", "needs CREATE TABLE, CREATE PROCEDURE"),
        (
            "ORA-06550: line 1: PLS-00201: identifier 'UTL_NLA' must be declared",
            "GRANT EXECUTE ON SYS.UTL_NLA",
        ),
        ("DPY-6005: cannot connect to database. Connection refused", "cannot reach Oracle at"),
    ],
)
def test_oracle_errors_say_the_fix(message, expected):
    error = explain(RuntimeError(message), parse_dsn("scott@db:1521/FREEPDB1"))
    assert expected in str(error) and "\n" not in str(error)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--name", "standard"], "reserved in Oracle"),
        (["--name", "select"], "an SQL keyword"),
        (["--name", "a_very_long_model_name_for_oracle"], "at most 25 characters"),
        (["--name", "x; drop"], "invalid model name"),
        (["--dsn", "not-a-dsn"], "expected user@host:port/service"),
    ],
)
def test_bad_input_is_one_line(cern_mlp_path, capsys, monkeypatch, args, message):
    monkeypatch.setenv("ORACLE_PASSWORD", "unused")
    options = {"--model": str(cern_mlp_path), "--name": "mnist", "--dsn": "scott@127.0.0.1:1/free"}
    options.update(dict(zip(args[::2], args[1::2], strict=True)))
    assert export_oracle([item for pair in options.items() for item in pair] + ["--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_unreachable_listener_is_one_line(cern_mlp_path, capsys, monkeypatch):
    monkeypatch.setenv("ORACLE_PASSWORD", "unused")
    args = ["--model", str(cern_mlp_path), "--name", "mnist", "--dsn", "scott@127.0.0.1:1/free", "--quiet"]
    assert export_oracle([*args, "--sample-rows", "5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: cannot reach Oracle at 127.0.0.1:1/free") and len(err.splitlines()) == 1


def test_password_is_never_taken_from_argv(cern_mlp_path, capsys, monkeypatch):
    monkeypatch.delenv("ORACLE_PASSWORD", raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a terminal: no prompt possible
    args = ["--model", str(cern_mlp_path), "--name", "mnist", "--dsn", "scott@127.0.0.1:1/free", "--quiet"]
    assert export_oracle([*args, "--sample-rows", "5"]) == 2
    assert "set ORACLE_PASSWORD" in capsys.readouterr().err


# ORACLE_DSN set without ORACLE_PASSWORD is a half-configured endpoint: the test then fails, not skips.
live = needs_endpoint("ORACLE_DSN", "a live Oracle at user@host:port/service, with ORACLE_PASSWORD")


@live
def test_live_export_scores_and_switches(digits_model, tmp_path):
    import oracledb

    dsn = parse_dsn(os.environ["ORACLE_DSN"])
    args = [
        "--model",
        str(digits_model),
        "--name",
        "nn_digits",
        "--dsn",
        str(dsn),
        "--quiet",
        "--load-test-data",
    ]
    assert export_oracle(args) == 0
    assert export_oracle(args[:-1]) == 0  # a second version
    with oracledb.connect(user=dsn.user, password=os.environ["ORACLE_PASSWORD"], dsn=dsn.address) as con:
        cursor = con.cursor()
        cursor.execute(
            "SELECT AVG(CASE WHEN nn_digits.score(features) = label THEN 1 ELSE 0 END) "
            "FROM nn_digits_testdata"
        )
        assert cursor.fetchone()[0] >= 0.95
        cursor.execute("SELECT nn_digits.version FROM dual")
        versions = cursor.fetchone()[0]
        cursor.execute(
            "SELECT COUNT(*) FROM TABLE(nn_digits.score_table("
            "CURSOR(SELECT id, features FROM nn_digits_testdata)))"
        )
        assert cursor.fetchone()[0] == 450 and versions >= 2


@live
def test_live_models_roll_back_and_remove(digits_model, capsys):
    import oracledb

    from nnsql.export.registry.cli import main as models

    dsn = parse_dsn(os.environ["ORACLE_DSN"])
    args = ["--model", str(digits_model), "--name", "nn_roll", "--dsn", str(dsn), "--quiet"]
    assert export_oracle(args) == 0 and export_oracle(args) == 0
    store = ["--oracle-dsn", str(dsn), "--name", "nn_roll"]
    capsys.readouterr()
    assert models(["list", *store]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    previous, newest = sorted(int(row[2] if row[0] == "*" else row[1]) for row in rows)[-2:]
    assert models(["activate", *store, "--version", str(previous)]) == 0
    assert models(["remove", *store, "--version", str(newest)]) == 0
    assert models(["remove", *store, "--version", str(previous)]) == 2  # the active one stays
    with oracledb.connect(user=dsn.user, password=os.environ["ORACLE_PASSWORD"], dsn=dsn.address) as con:
        cursor = con.cursor()
        cursor.execute("SELECT nn_roll.version FROM dual")
        assert cursor.fetchone()[0] == previous
        cursor.execute("SELECT COUNT(*) FROM user_objects WHERE object_name = :1", [f"NN_ROLL_V{newest}"])
        assert cursor.fetchone()[0] == 0


def test_generated_plsql_matches_golden_text():
    from nnsql.export.oracle.generator import OracleGenerator
    from tests.golden.graphs import check_golden, tiny_graph

    generator = OracleGenerator(tiny_graph(), "tiny", 3)
    text = generator.version_package() + generator.dispatch_spec() + generator.dispatch_body()
    check_golden(text, "oracle_tiny.sql")
    assert parse_errors(text) == []


def test_binary_package_matches_golden_text():
    """One sigmoid unit: predict_proba is [1 - p, p], decide is q(2) > 0.5, labels refuses."""
    from nnsql.export.oracle.generator import OracleGenerator
    from tests.golden.graphs import check_golden, tiny_binary_graph

    generator = OracleGenerator(tiny_binary_graph(), "sig", 1)
    text = generator.version_package() + generator.dispatch_spec() + generator.dispatch_body()
    check_golden(text, "oracle_tiny_binary.sql")
    assert parse_errors(text) == []


def test_hostile_labels_cannot_add_statements_to_the_scripts(tmp_path):
    from tests.export.test_targets import HOSTILE_LABELS

    counts = {}
    for kind, labels in (("plain", [f"c{i}" for i in range(10)]), ("hostile", HOSTILE_LABELS)):
        path = models.save(models.cern_mlp(n_features=16), tmp_path / kind, classes=labels)
        assert script_only(path, tmp_path / f"{kind}_out", "labels") == 0
        scripts = sorted((tmp_path / f"{kind}_out").glob("0*.sql"))
        counts[kind] = [len(list(sql_statements(p.read_text()))) for p in scripts]
        for script in scripts:
            assert parse_errors(script.read_text()) == [], script.name
    assert counts["hostile"] == counts["plain"]


def test_expected_nan_reaches_the_verify_script_as_plsql_nan():
    """A fully masked row's expected probabilities are NaN: written `nan`, PL/SQL reads a variable."""
    from nnsql.export.oracle.script import answer_condition

    condition = answer_condition("predict_proba", "m.predict_proba(x0)", [float("nan"), 0.5], 1e-5)
    assert "BINARY_DOUBLE_NAN" in condition and "nan," not in condition.lower().replace("_nan", "")
