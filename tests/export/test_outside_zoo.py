"""The outside-style zoo (tests/outside_zoo.py) × every target: each model is built and saved once, exported
to each target through its command (whose own gate checks parity on its sample rows), then 60 rows of the
zoo's own (padded with the model's mask value, token indices with padding) are scored in one query per
target and compared with Keras: max |Δp| ≤ 1e-5 (float32 parity), the same classes. The PostgreSQL
targets share one database, each model under its own name."""

from __future__ import annotations

import json

import duckdb
import numpy as np
import psycopg
import pytest

from tests import models, outside_zoo
from tests.export.conftest import executor

TARGETS = [
    pytest.param("duckdb", marks=pytest.mark.duckdb),
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("postgres+plpython", marks=pytest.mark.postgres),
    pytest.param("postgres+cube", marks=pytest.mark.postgres),
    pytest.param("oracle", marks=pytest.mark.oracle),
    "onnx",
]


PREFIXES = {"postgres": "p", "postgres+plpython": "py", "postgres+cube": "pc", "duckdb": "z", "oracle": "z"}
PREFIXES["onnx"] = "z"


@pytest.fixture(scope="session")
def outside_model(tmp_path_factory):
    """Each zoo model built and saved once: name → (model, path, rows, Keras's probabilities)."""
    built: dict[str, tuple] = {}

    def get(name: str):
        if name not in built:
            model = outside_zoo.build(name)
            path = models.save(model, tmp_path_factory.mktemp(name))
            x = outside_zoo.rows(name, model)
            expected = model.predict(x if len(x) > 1 else x[0], verbose=0)
            built[name] = (
                model,
                path,
                x,
                np.asarray(expected if not isinstance(expected, list) else joined(expected)),
            )
        return built[name]

    return get


def joined(outputs: list) -> np.ndarray:
    return np.concatenate([np.asarray(part).reshape(len(part), -1) for part in outputs], axis=1)


@pytest.fixture(scope="module")
def shared_database(postgres_server):
    """One database for every PostgreSQL export of this module."""
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS outside_zoo")
        admin.execute("CREATE DATABASE outside_zoo")
    return postgres_server.dsn("outside_zoo")


class SharedDatabase:
    """Lets `executor` build a PostgreSQL executor on the module's shared database."""

    def __init__(self, request, dsn: str | None) -> None:
        self.request, self.dsn = request, dsn

    def getfixturevalue(self, name: str):
        return self.dsn if name == "postgres_dsn" else self.request.getfixturevalue(name)


def scored(scorer, name: str, inputs: list[np.ndarray]) -> np.ndarray:
    """Every row's probabilities from one query (DuckDB, PostgreSQL) or one batch (ONNX, Oracle's
    interpreter row by row)."""
    flat = [x.reshape(len(x), -1).astype(np.float64).tolist() for x in inputs]
    marks = range(len(inputs))
    if scorer.target == "duckdb":
        columns = ", ".join(f"unnest(?::DOUBLE[][]) AS x{k}" for k in marks)
        sql = (
            f"SELECT {name}.predict_proba({', '.join(f'x{k}' for k in marks)}) FROM "
            f"(SELECT {columns}, generate_subscripts(?::DOUBLE[][], 1) AS i) ORDER BY i"
        )
        with duckdb.connect(str(scorer.db), read_only=True) as con:
            return np.array([row[0] for row in con.execute(sql, [*flat, flat[0]]).fetchall()])
    if scorer.target.startswith("postgres"):
        arguments = ", ".join(
            f"ARRAY(SELECT e::float8 FROM jsonb_array_elements_text(j->{k}) e)" for k in marks
        )
        sql = (
            f"SELECT {name}.predict_proba({arguments}) FROM jsonb_array_elements(%s::jsonb) "
            "WITH ORDINALITY AS t(j, i) ORDER BY i"
        )
        rows = [list(row) for row in zip(*flat, strict=True)]
        with psycopg.connect(scorer.dsn) as con:
            return np.array([row[0] for row in con.execute(sql, [json.dumps(rows)]).fetchall()])
    return scorer.predict_inputs(name, inputs)


@pytest.mark.parametrize("name", list(outside_zoo.ZOO))
@pytest.mark.parametrize("target", TARGETS)
def test_outside_zoo_scores_like_keras(target, name, outside_model, request, tmp_path):
    needs_database = target.startswith("postgres")
    dsn = request.getfixturevalue("shared_database") if needs_database else None
    scorer = executor(target, SharedDatabase(request, dsn), tmp_path)
    model_name = f"{PREFIXES[target]}_{name}"[:25]
    _, path, x, expected = outside_model(name)
    assert scorer.export(path, model_name) == 0
    if target == "oracle":  # the package parses as PL/SQL, loops and all
        import parseora

        package = (scorer.directory / "03_package_v1.sql").read_text()
        assert all(not unit["errors"] for unit in parseora.parse(package, version="19c"))
    actual = scored(scorer, model_name, x)
    assert np.abs(actual - expected).max() <= 1e-5
    assert (actual.argmax(1) == expected.argmax(1)).all()
