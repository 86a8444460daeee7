"""nnsql bench scoring: the PostgreSQL goal line judges one call per row and score_table, each with a
serial and a parallel plan, so that a parallel figure is never read as a serial one."""

from __future__ import annotations

import os

import psycopg
import pytest

from nnsql.bench import scoring as bench


def test_the_goal_line_judges_each_plan_of_each_way_to_score():
    figures = {
        "postgres_cube": 0.21,
        "postgres_cube_parallel": 0.12,
        "postgres_cube_table": 0.19,
        "postgres_cube_table_parallel": 0.11,
    }
    results = {name: {"ms_per_row": value} for name, value in figures.items()}
    results["postgres_cube"]["server_cpu_ms_per_row"] = 0.205
    results["postgres_control"] = {"ms_per_row": 0.05, "server_cpu_ms_per_row": 0.049}
    line = bench.postgres_verdict(results)
    assert line is not None
    assert "score_table serial 0.1900 (met), parallel 0.1100 (met)" in line
    assert "one call per row serial 0.2100 (MISSED), parallel 0.1200 (met)" in line
    assert "one call per row 0.2050, control query 0.0490" in line
    assert "random" not in line  # dense rows not measured: not mentioned
    results["postgres_cube_dense"] = {"ms_per_row": 0.23, "server_cpu_ms_per_row": 0.228}
    line = bench.postgres_verdict(results)
    assert line is not None
    assert line.endswith("; uniform random rows, one call per row serial 0.2300 (CPU 0.2280)")
    del results["postgres_cube_parallel"]
    assert bench.postgres_verdict(results) is None  # a plan not measured: no verdict


def test_every_postgres_contender_but_the_parallel_ones_scores_with_a_serial_plan():
    assert bench.GOALS_MS_PER_ROW["postgres_cube_parallel"] == bench.GOALS_MS_PER_ROW["postgres_cube"]
    assert set(bench.PG_GOAL) == {
        "postgres_cube",
        "postgres_cube_parallel",
        "postgres_cube_table",
        "postgres_cube_table_parallel",
    }


@pytest.mark.postgres
def test_the_server_cpu_is_read_finer_than_a_clock_tick(postgres_dsn):
    """A clock tick (10 ms) is 0.005 ms a row over 2,000 rows, the size of the differences the benches
    compare: the backend's CPU time is read to the nanosecond, so some reading falls between ticks."""
    tick = 1 / os.sysconf("SC_CLK_TCK")
    with psycopg.connect(postgres_dsn) as con:
        readings = []
        for _ in range(5):
            con.execute("SELECT count(*) FROM generate_series(1, 20000)").fetchone()
            readings.append(bench.backend_cpu_seconds(con))
    assert readings == sorted(readings) and readings[-1] > readings[0]
    assert any(abs(value / tick - round(value / tick)) > 1e-6 for value in readings)
