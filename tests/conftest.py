"""Shared fixtures: models saved to temporary directories, trained or seeded."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from tests import models
from tests.ci_skips import pytest_runtest_makereport  # noqa: F401  (the hook, registered here)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def cern_mlp_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference architecture (784 inputs) with seeded weights."""
    return models.save(models.cern_mlp(), tmp_path_factory.mktemp("cern_mlp"))


@pytest.fixture(scope="session")
def mixed_layers_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return models.save(models.mixed_layers(), tmp_path_factory.mktemp("mixed"))


@pytest.fixture(scope="session")
def digits_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference network really trained (scikit-learn digits, a few seconds)."""
    from nnsql.train import mnist

    out = tmp_path_factory.mktemp("digits")
    assert mnist.main(["--dataset", "digits", "--out", str(out), "--quiet"]) == 0
    return out / "model.keras"


@pytest.fixture(scope="session")
def user_models(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    """Every output kind written and trained as users do (tests/user_models.py), saved as `.keras` and
    as legacy `.h5`: {(case, "keras" or "h5"): path}."""
    from tests import user_models as cases

    directory = tmp_path_factory.mktemp("user_models")
    paths = {}
    for name, case in cases.CASES.items():
        for fmt in ("keras", "h5"):
            model = cases.trained(case, legacy=fmt == "h5")
            paths[name, fmt] = cases.save(model, case, directory / f"{name}_{fmt}", legacy=fmt == "h5")
    return paths


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server on a Unix socket, for the whole session (skipped if not installed)."""
    from tests.postgres_server import start_server

    try:
        server = start_server()
    except FileNotFoundError as missing:
        pytest.skip(str(missing))
    yield server
    server.stop()


@pytest.fixture
def postgres_dsn(postgres_server, request) -> str:
    """A fresh database on the session's server; returns its DSN (superuser)."""
    import re

    import psycopg

    name = "t_" + re.sub(r"[^a-z0-9]", "_", request.node.name.lower())[:50]
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute(f"CREATE DATABASE {name}")
    return postgres_server.dsn(name)
