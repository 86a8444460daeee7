"""Every block of the docs pages in the "targets" group runs as written (tests/docs/pages.py says how)."""

from __future__ import annotations

import pytest

from tests.docs.groups import GROUPS
from tests.docs.runner import run_documented_page


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize("page", GROUPS["targets"])
def test_the_page_runs(page, tmp_path, tmp_path_factory, postgres_dsn, record_property):
    run_documented_page(page, tmp_path, tmp_path_factory, postgres_dsn, record_property)
