"""The test every group file runs for each of its pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.pages import REPO, run_page
from tests.docs.summary import COUNTS, PROPERTY
from tests.docs.workspace import fresh_directory, readers_files


def run_documented_page(
    page: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, database_url: str, record_property
) -> None:
    directory = fresh_directory(tmp_path, readers_files(tmp_path_factory), page)
    # one epoch of the reference model, as docs/training.md says a quick try does: the block as written
    env = {"DATABASE_URL": database_url, "NNSQL_MNIST_EPOCHS": "1"}
    tally = run_page(REPO / page, directory, env)
    print(tally.line(page))
    record_property(PROPERTY, tally.line(page))
    record_property(COUNTS, (tally.ran, tally.rehearsed, sum(tally.not_run.values())))
