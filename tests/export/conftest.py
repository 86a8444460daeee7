"""The target fixtures of the grids: `target` runs a case on every database here, `scorer` adds Oracle
through the test interpreter of its generated PL/SQL (parity only)."""

from __future__ import annotations

import re

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
    return postgres_executor(kind, request.getfixturevalue("postgres_dsn"))


def postgres_executor(kind: str, dsn: str) -> PostgresExecutor:
    """The PostgreSQL executor of `kind` (its kernel) on the database at `dsn`."""
    executor_class = {"postgres+plpython": PlPythonExecutor, "postgres+cube": CubeExecutor}.get(
        kind, PostgresExecutor
    )
    return executor_class(dsn)


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


@pytest.fixture(scope="module")
def published_mnist(request, tmp_path_factory, cern_mlp_path):
    """kind → that database target holding the reference MLP as `mnist`, exported once per module: for
    the tests that only query a published model, or prove that a refused export leaves it as it was.
    Each kind has its own database (file); no test that uses it may publish or remove a version."""
    published: dict[str, DuckDBExecutor | PostgresExecutor] = {}

    def on(kind: str) -> DuckDBExecutor | PostgresExecutor:
        if kind not in published:
            target = shared_executor(kind, request, tmp_path_factory)
            assert target.export(cern_mlp_path) == 0
            published[kind] = target
        return published[kind]

    return on


def shared_executor(kind: str, request, tmp_path_factory) -> DuckDBExecutor | PostgresExecutor:
    """An executor of `kind` on a database of its own that outlives a test (the module's)."""
    label = re.sub(r"[^a-z0-9]", "_", f"{request.module.__name__.rsplit('.', 1)[-1]}_{kind}".lower())
    if kind == "duckdb":
        return DuckDBExecutor(tmp_path_factory.mktemp(label))
    import psycopg

    server = request.getfixturevalue("postgres_server")
    name = f"shared_{label}"[:60]
    with psycopg.connect(server.dsn(), autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute(f"CREATE DATABASE {name}")
    return postgres_executor(kind, server.dsn(name))


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
