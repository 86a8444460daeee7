"""nnsql bench pg_kernels: its contenders compute the products they stand for, on the real server, so the
bench compares like with like."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from nnsql.bench import pg_kernels as bench
from nnsql.export.postgres.kernels import cube_kernel

pytestmark = pytest.mark.postgres


ORDER = np.random.default_rng(6).permutation(250)  # the grouped contenders' order of the inputs
CHUNKS = 3


@pytest.fixture
def contenders(postgres_dsn):
    """The bench's functions for a 250 × 7 kernel (3 points of 84 coordinates a unit)."""
    kernel = np.random.default_rng(3).normal(size=(250, 7)).astype(np.float32)
    with psycopg.connect(postgres_dsn) as con:
        con.execute("CREATE SCHEMA nnsql; CREATE EXTENSION cube SCHEMA nnsql")
        bench.create_contenders(con, kernel, ORDER)
        yield con, kernel


def chunk_distances(x: np.ndarray, kernel: np.ndarray) -> list[float]:
    """Per unit, the sum of its points' distances to x's chunks, in float64 numpy."""
    layout = cube_kernel(kernel)
    return [
        sum(np.linalg.norm(x[a - 1 : b] - layout.vectors[j][a - 1 : b]) for a, b in bench.spans(250, 84))
        for j in range(7)
    ]


def sparse_row() -> np.ndarray:
    """Values in [0, 1) with the second chunk all zero, and zeros scattered over the others."""
    x = np.random.default_rng(4).random(250)
    x[84:168] = 0.0
    x[::5] = 0.0
    return x


def test_the_distances_are_the_cube_kernels_in_either_order(contenders):
    con, kernel = contenders
    x = np.random.default_rng(4).random(250)
    for function in ("distances", "distances_x_first", "zero_skip"):
        got = con.execute(f"SELECT bench_kernels.{function}(%s)", [x.tolist()]).fetchone()[0]
        np.testing.assert_allclose(got, chunk_distances(x, kernel), rtol=1e-12)


def test_a_skipped_zero_chunk_gives_the_distance_cube_computes(contenders):
    """|v| written as a literal is cube's own sum, bit for bit: skipping a chunk changes no digit."""
    con, kernel = contenders
    for x in (sparse_row(), np.zeros(250)):
        skipped, computed = (
            con.execute(f"SELECT bench_kernels.{function}(%s)", [x.tolist()]).fetchone()[0]
            for function in ("zero_skip", "distances")
        )
        assert skipped == computed
        np.testing.assert_allclose(skipped, chunk_distances(x, kernel), rtol=1e-12)


def test_the_grouped_contenders_compute_the_distances_of_the_permuted_inputs(contenders):
    con, kernel = contenders
    x = sparse_row()
    expected = chunk_distances(x[ORDER], kernel[ORDER])
    for function in ("grouped", "permuted"):
        got = con.execute(f"SELECT bench_kernels.{function}(%s)", [x.tolist()]).fetchone()[0]
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def distance_calls(con, function: str, x: np.ndarray) -> int:
    """How many times one call of `function` on x calls cube_distance (this transaction's count)."""
    con.execute("SET track_functions = 'all'")
    target = "'nnsql.cube_distance(nnsql.cube, nnsql.cube)'::regprocedure"
    before = con.execute(f"SELECT pg_stat_get_xact_function_calls({target})").fetchone()[0] or 0
    con.execute(f"SELECT bench_kernels.{function}(%s)", [x.tolist()])
    return con.execute(f"SELECT pg_stat_get_xact_function_calls({target})").fetchone()[0] - before


def test_zero_skip_computes_no_distance_to_a_zero_chunk(contenders):
    """The zero tests take one distance a chunk; the row's term and the 7 units one each a chunk that is
    not all zero (2 of the sparse row's 3): a row of zeros takes 3 distances, 3 + 7 × 3 without the
    skip."""
    con, _ = contenders
    assert distance_calls(con, "distances", np.zeros(250)) == CHUNKS + 7 * CHUNKS
    assert distance_calls(con, "zero_skip", np.zeros(250)) == CHUNKS
    assert distance_calls(con, "zero_skip", sparse_row()) == CHUNKS + 2 + 7 * 2
    assert distance_calls(con, "zero_skip", np.ones(250)) == CHUNKS + CHUNKS + 7 * CHUNKS


def test_the_grouped_order_puts_inputs_zero_together_in_one_chunk():
    """84 inputs, every other one, are zero in every sample row, the others in a random third: grouped,
    they fill the first chunk and make a third of the chunks zero, where the natural order makes none."""
    rng = np.random.default_rng(7)
    rows = rng.random((40, 250)) * (rng.random((40, 250)) > 0.3)
    together = np.arange(1, 250, 2)[:84]
    rows[:, together] = 0.0
    order = bench.grouped_order(rows == 0, 84)
    assert sorted(order) == list(range(250))
    assert set(order[:84]) == set(together)
    assert bench.zero_chunk_share(rows, 84) == 0.0
    assert bench.zero_chunk_share(rows, 84, order) == pytest.approx(1 / 3)


def test_the_expression_and_the_set_based_plan_compute_the_products(contenders):
    con, kernel = contenders
    x = np.random.default_rng(5).random(250)
    unit = con.execute("SELECT bench_kernels.one_unit(%s)", [x.tolist()]).fetchone()[0]
    layer = con.execute("SELECT bench_kernels.set_based(%s)", [x.tolist()]).fetchone()[0]
    products = x @ kernel.astype(np.float64)
    np.testing.assert_allclose(unit, products[0], rtol=1e-12)
    np.testing.assert_allclose(layer, products, rtol=1e-12)


def test_the_report_judges_each_contender_and_names_the_floor():
    results = {
        name: {"mlp_ms_per_row": value, "measured_ms_per_row": value}
        for name, value in (("cube_predict", 0.5), ("cube_distances", 0.19))
    }
    results["cube_distances"]["ns_per_coordinate"] = 2.4
    lines = bench.report(results, 2000, 20)
    assert lines[3].split()[-1] == "MISSED" and lines[4].split()[-1] == "met"
    assert lines[-1].endswith("(within the goal)") and "2.40 ns a coordinate" in lines[-1]
    results["zero_chunks"] = {"natural": 0.101, "grouped": 0.218, "sample_rows": 50}
    lines = bench.report(results, 2000, 20)
    assert len(lines) == 7 and "10.1% in the natural order, 21.8% grouped by the first 50 rows" in lines[-1]
