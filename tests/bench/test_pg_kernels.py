"""nnsql bench pg_kernels: its contenders compute the products they stand for, on the real server, so the
bench compares like with like."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from nnsql.bench import pg_kernels as bench
from nnsql.export.postgres.kernels import cube_kernel

pytestmark = pytest.mark.postgres


@pytest.fixture
def contenders(postgres_dsn):
    """The bench's functions for a 250 × 7 kernel (3 points of 84 coordinates a unit)."""
    kernel = np.random.default_rng(3).normal(size=(250, 7)).astype(np.float32)
    with psycopg.connect(postgres_dsn) as con:
        con.execute("CREATE SCHEMA nnsql; CREATE EXTENSION cube SCHEMA nnsql")
        bench.create_contenders(con, kernel)
        yield con, kernel


def test_the_distances_are_the_cube_kernels_in_either_order(contenders):
    con, kernel = contenders
    x = np.random.default_rng(4).random(250)
    layout = cube_kernel(kernel)
    expected = [
        sum(np.linalg.norm(x[a - 1 : b] - layout.vectors[j][a - 1 : b]) for a, b in bench.spans(250, 84))
        for j in range(7)
    ]
    for function in ("distances", "distances_x_first"):
        got = con.execute(f"SELECT bench_kernels.{function}(%s)", [x.tolist()]).fetchone()[0]
        np.testing.assert_allclose(got, expected, rtol=1e-12)


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
