"""Every output kind on every SQL target, with models written as users write them (tests/user_models.py:
binary, multi-label, logits, regression with one and three values, each as `.keras` and legacy `.h5`).
Each function a user queries is checked against what a Keras user reads from model.predict, computed
here with numpy: p > 0.5, the labels above the threshold, the argmax of the softmax, the values. Oracle
runs through the independent PL/SQL interpreter (which reads score's comparison from the generated
text) after its scripts parse. The parity gate fails an export whose binary rule is broken."""

from __future__ import annotations

import re

import duckdb
import numpy as np
import psycopg
import pytest

from nnsql.export.duckdb.generator import DuckDBGenerator
from nnsql.export.postgres.generator import PostgresGenerator
from tests import user_models as cases
from tests.export.executors import (
    CubeExecutor,
    DuckDBExecutor,
    OracleScriptExecutor,
    PlPythonExecutor,
    PostgresExecutor,
)
from tests.export.plsql_interpreter import load_scripts

pytestmark = pytest.mark.slow
CASES = cases.CASES
ROWS = cases.rows(8)
TARGETS = [
    pytest.param("duckdb", marks=pytest.mark.duckdb),
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("postgres+plpython", marks=pytest.mark.postgres),
    pytest.param("postgres+cube", marks=pytest.mark.postgres),
    pytest.param("oracle", marks=pytest.mark.oracle),
]
POSTGRES = {
    "postgres": PostgresExecutor,
    "postgres+plpython": PlPythonExecutor,
    "postgres+cube": CubeExecutor,
}


class Refused:
    """The function raises one line naming the function to use instead."""

    def __init__(self, use: str) -> None:
        self.use = use


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    return e / e.sum()


def expectations(case: cases.Case, out: np.ndarray) -> dict[str, object]:
    """What a Keras user reads from one row of model.predict, for every function."""
    classes = list(case.classes)
    if case.kind == "binary":
        p = float(out[0])
        assert abs(p - 0.5) > 1e-4  # no near-tie among the test rows: the answer is decided
        return {
            "predict": out,
            "predict_proba": [1 - p, p],
            "score": int(p > 0.5),
            "label": classes[int(p > 0.5)],
            "labels": Refused(".label("),
            "predict_logits": Refused(".predict_proba("),
        }
    if case.kind == "multilabel":
        assert np.all(np.abs(out - 0.5) > 1e-4)
        return {
            "predict": out,
            "predict_proba": out,
            "labels": [c for c, p in zip(classes, out, strict=True) if p > 0.5],
            "score": Refused(".labels("),
            "label": Refused(".labels("),
            "predict_logits": Refused(".predict_proba("),
        }
    if case.kind == "logits":
        best = int(np.argmax(out))
        return {
            "predict": out,
            "predict_logits": out,
            "predict_proba": softmax(out.astype(np.float64)),
            "score": best,
            "label": classes[best],
            "labels": Refused(".label("),
        }
    refused = Refused(".predict(")
    return {
        "predict": out,
        **dict.fromkeys(("predict_proba", "predict_logits", "score", "label", "labels"), refused),
    }


@pytest.fixture(scope="module")
def keras_outputs(user_models):
    """model.predict on the test rows, per (case, format), with the framework that saved the file."""
    import keras
    import tf_keras

    outputs = {}
    for (case, fmt), path in user_models.items():
        model = tf_keras.models.load_model(path) if fmt == "h5" else keras.saving.load_model(path)
        outputs[case, fmt] = model.predict(ROWS, verbose=0)
    return outputs


class Asker:
    """Calls a model's function on one row, on one open connection (or the Oracle interpreter)."""

    def __init__(self, target: str, executor) -> None:
        self.target, self.executor = target, executor
        if target == "duckdb":
            self.con = duckdb.connect(str(executor.db), read_only=True)
        elif target in POSTGRES:
            self.con = psycopg.connect(executor.dsn, autocommit=True)
        self.interpreters: dict[str, object] = {}

    def __call__(self, name: str, function: str, row: np.ndarray, *extra: float) -> object:
        """The answer, or the error's first line as a string prefixed by 'error: '."""
        try:
            if self.target == "oracle":
                interpreter = load_scripts(self.executor[name].directory)
                inputs = {interpreter.parameters[0]: row}  # tf.keras names its input hidden_input
                if function == "predict":
                    return interpreter.run(inputs)
                return interpreter.answer(function, inputs, *extra)
            marks = ", ".join(["?"] * (1 + len(extra)))
            sql = f"SELECT {name}.{function}({marks})"
            if self.target != "duckdb":
                sql = sql.replace("?", "%s")
            return self.con.execute(sql, [row.tolist(), *extra]).fetchone()[0]
        except (duckdb.Error, psycopg.Error, AssertionError) as error:
            return "error: " + str(error).splitlines()[0]

    def close(self) -> None:
        if self.target != "oracle":
            self.con.close()


def assert_parses(directory) -> None:
    import parseora

    for script in ("03_package_v1.sql", "04_verify_and_switch_v1.sql"):
        units = parseora.parse((directory / script).read_text(), version="19c")
        assert [error for unit in units for error in unit["errors"]] == [], (directory.name, script)


def module_database(server, name: str) -> str:
    with psycopg.connect(server.dsn(), autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute(f"CREATE DATABASE {name}")
    return server.dsn(name)


@pytest.fixture(scope="module", params=TARGETS)
def ask(request, user_models, tmp_path_factory):
    """Every user model exported to one target (a database per target), and a way to query it."""
    target = request.param
    directory = tmp_path_factory.mktemp(target.replace("+", "_"))
    if target == "duckdb":
        executor = DuckDBExecutor(directory)
    elif target in POSTGRES:
        server = request.getfixturevalue("postgres_server")
        executor = POSTGRES[target](module_database(server, f"kinds_{target.replace('+', '_')}"))
    else:
        executor = {f"{c}_{f}": OracleScriptExecutor(directory / f"{c}_{f}") for c, f in user_models}
    for (case, fmt), path in user_models.items():
        name = f"{case}_{fmt}"
        runner = executor[name] if target == "oracle" else executor
        assert runner.export(path, name) == 0, (target, name)
        if target == "oracle":  # the package, the switch and its checks parse as Oracle 19c
            assert_parses(runner.directory)
    asker = Asker(target, executor)
    yield asker
    asker.close()


def agrees(got: object, wanted: object) -> bool:
    if isinstance(wanted, Refused):
        return isinstance(got, str) and got.startswith("error: ") and wanted.use in got
    if isinstance(wanted, np.ndarray) or (
        isinstance(wanted, list) and wanted and isinstance(wanted[0], float)
    ):
        return got is not None and np.abs(np.asarray(got, float) - np.asarray(wanted, float)).max() <= 1e-5
    if isinstance(got, float | np.floating) and isinstance(wanted, int):  # Oracle's NUMBER
        return float(got) == wanted
    return list(got) == wanted if isinstance(got, list | np.ndarray) else got == wanted


@pytest.mark.parametrize("fmt", ["keras", "h5"])
@pytest.mark.parametrize("case", list(CASES))
def test_every_function_answers_as_keras_users_read_the_output(ask, keras_outputs, case, fmt):
    outputs = keras_outputs[case, fmt]
    if CASES[case].kind == "binary":  # rows on both sides of 0.5: labelling every row alike fails
        assert (outputs[:, 0] > 0.5).any() and (outputs[:, 0] < 0.5).any()
    for row, out in zip(ROWS, outputs, strict=True):
        for function, wanted in expectations(CASES[case], out).items():
            got = ask(f"{case}_{fmt}", function, row)
            assert agrees(got, wanted), (function, got, wanted)
    if CASES[case].kind == "multilabel":  # another threshold
        for row, out in zip(ROWS, outputs, strict=True):
            wanted = [c for c, p in zip(CASES[case].classes, out, strict=True) if p > 0.3]
            assert agrees(ask(f"{case}_{fmt}", "labels", row, 0.3), wanted)


@pytest.mark.parametrize(
    "target",
    [pytest.param("duckdb", marks=pytest.mark.duckdb), pytest.param("postgres", marks=pytest.mark.postgres)],
)
def test_the_gate_fails_an_export_whose_binary_rule_is_broken(
    target, request, user_models, tmp_path, monkeypatch, capsys
):
    """score read as the argmax of one column (the bug that labelled every row 0) fails the gate; the
    version before keeps scoring with Keras's rule."""
    executor = (
        DuckDBExecutor(tmp_path)
        if target == "duckdb"
        else PostgresExecutor(request.getfixturevalue("postgres_dsn"))
    )
    path = user_models["binary", "keras"]
    assert executor.export(path, "signal") == 0
    report = capsys.readouterr().out
    assert re.search(r"score \(1 when p > 0.5\) \d+/\d+", report) and "argmax" not in report
    generator = DuckDBGenerator if target == "duckdb" else PostgresGenerator
    attribute = "read_probabilities" if target == "duckdb" else "probabilities_read"
    monkeypatch.setattr(generator, attribute, lambda self: self.function("predict"))
    monkeypatch.setattr("nnsql.export.codegen.generator.Answering.two_columns", property(lambda self: False))
    assert executor.export(path, "signal") == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "score disagrees with Keras's 1 when p > 0.5" in error
    assert "version not published" in error
    active = executor.query("SELECT version FROM nnsql.models WHERE name = 'signal' AND active")
    assert active == [(1,)]
    x = cases.rows(8)
    scores = [executor.query("SELECT signal.score(?)", [row.tolist()])[0][0] for row in x]
    import keras

    assert scores == (keras.saving.load_model(path).predict(x, verbose=0)[:, 0] > 0.5).astype(int).tolist()
