"""Every block of the docs pages in the "quickstarts" group runs as written (tests/docs/pages.py says how)."""

from __future__ import annotations

import pytest

from tests.docs.groups import GROUPS, every_page
from tests.docs.runner import run_documented_page


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize("page", GROUPS["quickstarts"])
def test_the_page_runs(page, tmp_path, tmp_path_factory, postgres_dsn, record_property):
    run_documented_page(page, tmp_path, tmp_path_factory, postgres_dsn, record_property)


def test_every_page_is_in_one_group():
    grouped = [page for pages in GROUPS.values() for page in pages]
    assert sorted(grouped) == every_page()
