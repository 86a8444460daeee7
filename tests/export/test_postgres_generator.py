"""Golden text of the PostgreSQL generators (PL/pgSQL and the PL/Python fast path) on hand-made IR graphs:
every change to generated code shows in review. Execution is covered by the target grid."""

from __future__ import annotations

import re

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


def cube_distances(text: str) -> list[tuple[str, str]]:
    """The two arguments of every cube_distance call of a rendered export that reads a layer's points."""
    found = re.findall(r"cube_distance\(([^()]*(?:\([^()]*\))?[^()]*?), ([^()]*?)\)", text)
    return [(a, b) for a, b in found if re.search(r"_x\d", a + b)]


def test_cube_kernel_names_the_shifted_weights_before_the_input_points():
    """Every product's distances and the row's term take the literal point (v = w − M, or −M) first: cube's
    C tests "a lies left of b" first, so with v ≤ x each coordinate costs one comparison less. The norms
    (distance to the 1-coordinate origin) keep x first: cube puts the point of more coordinates first."""
    from nnsql.export.postgres.cube import CubeGenerator

    text = CubeGenerator(tiny_graph(), "tiny", 3, cube_schema="nnsql").render()
    products = [(a, b) for a, b in cube_distances(text) if "'(0.0)'" not in b]
    assert len(products) == 6  # per layer: the row's term and one per unit
    assert all(a.startswith("'(-") and re.fullmatch(r"c_\w+_x\d+", b) for a, b in products), products


def test_cube_kernel_scans_for_nan_only_values_the_checks_did_not():
    """The model input is refused with NaN by its checks, so the first layer does not scan it again; a
    hidden value (a masked average may be NaN) is still scanned."""
    from nnsql.export.postgres.cube import CubeGenerator

    text = CubeGenerator(tiny_graph(), "tiny", 3, cube_schema="nnsql").render()
    assert "IF pg_catalog.array_position(features, 'NaN') IS NOT NULL" not in text
    assert "IF pg_catalog.array_position(v_hidden, 'NaN') IS NOT NULL THEN c_output_row := 'NaN'" in text
    assert text.count("pg_catalog.array_position(features, 'NaN') IS NULL") == 1  # the input's check
