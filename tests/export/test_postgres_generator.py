"""Golden text of the PostgreSQL generators (PL/pgSQL and the PL/Python fast path) on hand-made IR graphs:
every change to generated code shows in review. Execution is covered by the target grid."""

from __future__ import annotations

import pytest

from nnsql.export.postgres.generator import PostgresGenerator
from tests.golden.graphs import check_golden, tiny_binary_graph, tiny_graph, tiny_recurrent_graph


def test_plpgsql_matches_golden_text():
    check_golden(PostgresGenerator(tiny_graph(), "tiny", 3).render(), "postgres_tiny.sql")


def test_binary_functions_match_golden_text():
    """One sigmoid unit: predict_proba is [1 - p, p], score is p > 0.5, labels refuses."""
    check_golden(PostgresGenerator(tiny_binary_graph(), "sig", 1).render(), "postgres_tiny_binary.sql")


@pytest.mark.parametrize(
    ("graph", "golden"),
    [(tiny_graph, "plpython_tiny.sql"), (tiny_recurrent_graph, "plpython_tiny_recurrent.sql")],
)
def test_plpython_matches_golden_text(graph, golden):
    check_golden(PostgresGenerator(graph(), "tiny", 3, plpython=True).render(), golden)


def test_generated_plpgsql_lines_stay_readable():
    text = PostgresGenerator(tiny_graph(), "tiny", 3).render()
    # 110 columns where brackets and spaces allow; an error message literal is never split, so a little more
    assert max(len(line) for line in text.splitlines()) <= 130


def test_cube_kernel_matches_golden_text():
    from nnsql.export.postgres.cube import CubeGenerator

    check_golden(
        CubeGenerator(tiny_graph(), "tiny", 3, cube_schema="nnsql").render(), "postgres_cube_tiny.sql"
    )
