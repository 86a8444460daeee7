"""The target fixtures of the grids: `target` runs a case on every database here, `scorer` adds Oracle
through the test interpreter of its generated PL/SQL (parity only)."""

from __future__ import annotations

import pytest

from tests import models, zoo
from tests.export.executors import (
    CubeExecutor,
    DuckDBExecutor,
    OnnxExecutor,
    OracleScriptExecutor,
    PlPythonExecutor,
    PostgresExecutor,
)

DATABASES = [
    pytest.param("duckdb", marks=pytest.mark.duckdb),
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("postgres+plpython", marks=pytest.mark.postgres),
    pytest.param("postgres+cube", marks=pytest.mark.postgres),
]


def executor(kind: str, request, tmp_path):
    if kind == "duckdb":
        return DuckDBExecutor(tmp_path)
    if kind == "oracle":
        return OracleScriptExecutor(tmp_path)
    if kind == "onnx":
        return OnnxExecutor(tmp_path)
    executor_class = {"postgres+plpython": PlPythonExecutor, "postgres+cube": CubeExecutor}.get(
        kind, PostgresExecutor
    )
    return executor_class(request.getfixturevalue("postgres_dsn"))


@pytest.fixture(params=DATABASES)
def target(request, tmp_path):
    """Every target with a real database here: the whole grid runs on each."""
    return executor(request.param, request, tmp_path)


@pytest.fixture(params=[*DATABASES, pytest.param("oracle", marks=pytest.mark.oracle)])
def scorer(request, tmp_path):
    """Every target, Oracle included through the test interpreter of its PL/SQL: parity only."""
    return executor(request.param, request, tmp_path)


@pytest.fixture(params=[*DATABASES, pytest.param("oracle", marks=pytest.mark.oracle), "onnx"])
def any_target(request, tmp_path):
    """Every target of the product, ONNX (scored by onnxruntime) included: parity only."""
    return executor(request.param, request, tmp_path)


@pytest.fixture(scope="session")
def zoo_model(tmp_path_factory):
    """Each model of tests/zoo.py built and saved once per session: name → (model, path)."""
    built: dict[str, tuple] = {}

    def get(name: str):
        if name not in built:
            model = zoo.build(name)
            built[name] = (model, models.save(model, tmp_path_factory.mktemp(name)))
        return built[name]

    return get


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One local Spark session (local[2]) per test process, its catalog in a temporary warehouse;
    stopped at the end, so no JVM outlives the tests."""
    from pathlib import Path

    from nnsql.export.spark import session

    where = session.Where(Path(tmp_path_factory.mktemp("spark-warehouse")), "local[2]")
    started = session.start(where, **{"spark.sql.shuffle.partitions": "2"})
    started.sparkContext.setLogLevel("ERROR")
    yield started
    session.stop(started)
