"""Shared fixtures: models saved to temporary directories, trained or seeded.

Under pytest-xdist each worker process has its own session: the models are made once per run by whichever
worker needs them first (tests/fixtures.py `made_once`), and each worker starts its own PostgreSQL server.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from tests import durations, models
from tests.fixtures import made_once

pytest_plugins = ["tests.ci_skips", "tests.docs.summary", "pytester"]

REPO = Path(__file__).resolve().parents[1]
SCREENSHOTS = REPO / "build" / "screenshots"  # the browser tests' (tests/serve/test_page.py)
STARTED = time.time()


@pytest.hookimpl(trylast=True)  # after pytest's own reordering for fixtures shared between tests
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest test files first (tests/durations.py): pytest-xdist hands files to its workers in this
    order, so the last file to start is a short one and both workers finish together. Every worker sorts
    alike, as pytest-xdist requires, from the same record."""
    order = durations.longest_first([item.nodeid for item in items], durations.read())
    items[:] = [items[i] for i in order]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Where this run's screenshots of the page are, for a person to look at. Read from the folder, not
    from the test module: under pytest-xdist the tests ran in worker processes."""
    taken = sorted(p for p in SCREENSHOTS.glob("*.png") if p.stat().st_mtime >= STARTED)
    if taken:
        terminalreporter.write_sep("-", f"{len(taken)} screenshots of the page")
        for path in taken:
            terminalreporter.write_line(str(path))


@pytest.fixture(scope="session")
def cern_mlp_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference architecture (784 inputs) with seeded weights."""
    folder = made_once(tmp_path_factory, "cern_mlp", lambda out: models.save(models.cern_mlp(), out))
    return folder / "model.keras"


@pytest.fixture(scope="session")
def mixed_layers_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = made_once(tmp_path_factory, "mixed", lambda out: models.save(models.mixed_layers(), out))
    return folder / "model.keras"


def train_digits(out: Path) -> None:
    from nnsql.train import mnist

    assert mnist.main(["--dataset", "digits", "--out", str(out), "--quiet"]) == 0


@pytest.fixture(scope="session")
def digits_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference network really trained (scikit-learn digits, a few seconds)."""
    return made_once(tmp_path_factory, "digits", train_digits) / "model.keras"


@pytest.fixture(scope="session")
def user_models(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    """Every output kind written and trained as users do (tests/user_models.py), saved as `.keras` and
    as legacy `.h5`: {(case, "keras" or "h5"): path}."""
    from tests import user_models as cases

    def train(directory: Path) -> None:
        for name, case in cases.CASES.items():
            for fmt in ("keras", "h5"):
                model = cases.trained(case, legacy=fmt == "h5")
                cases.save(model, case, directory / f"{name}_{fmt}", legacy=fmt == "h5")

    directory = made_once(tmp_path_factory, "user_models", train)
    return {
        (name, fmt): directory / f"{name}_{fmt}" / ("model.h5" if fmt == "h5" else "model.keras")
        for name in cases.CASES
        for fmt in ("keras", "h5")
    }


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server on a Unix socket, for the whole session of this worker (skipped if not
    installed, which fails the run under CI=true; `make test` checks it starts before pytest runs)."""
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


# The tests' Spark driver lives minutes, not the hours a user's session may: the quick JIT compiler alone
# and the serial garbage collector halve its start (20 → 11 s of CPU) and take 8% off the JVM's CPU over
# the Spark test files (182 → 168 s), where the optimising compiler's code would not pay back its compiling.
SPARK_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One local Spark session (local[2]) per test process, for tests/export and tests/hostile, its
    catalog in a temporary warehouse; stopped at the end, so no JVM outlives the tests."""
    from pathlib import Path

    from nnsql.export.spark import session

    where = session.Where(Path(tmp_path_factory.mktemp("spark-warehouse")), "local[2]")
    settings = {"spark.sql.shuffle.partitions": "2", session.JAVA_OPTIONS: SPARK_JAVA_OPTIONS}
    started = session.start(where, **settings)
    started.sparkContext.setLogLevel("ERROR")
    yield started
    session.stop(started)
