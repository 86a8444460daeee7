"""nnsql bench recurrent_scoring: what its figures measure and how it judges its goal."""

from __future__ import annotations

import time

import pytest

from nnsql.bench import recurrent_scoring as bench


def busy(cpu_seconds: float) -> None:
    """Compute until this process has used `cpu_seconds` more (by the clock Python itself keeps)."""
    end = time.process_time() + cpu_seconds
    while time.process_time() < end:
        pass


def test_timed_counts_the_cpu_a_run_uses_and_not_its_waiting():
    wall, cpu = bench.timed(lambda: time.sleep(0.2))
    assert wall >= 0.2 and cpu < 0.1
    wall, cpu = bench.timed(lambda: busy(0.2))
    assert 0.19 <= cpu <= wall + 0.01  # one thread: its CPU time, whatever the machine's load


def figures(keras: tuple[float, float], duckdb: tuple[float, float]) -> dict[str, dict[str, float]]:
    """One mix's row: (CPU, wall) ms per event of each side."""
    row = {"real_particles_median": 100.0}
    for label, (cpu, wall) in (("keras_predict", keras), ("duckdb_sql", duckdb)):
        row[label], row[f"{label}_cpu"] = wall, cpu
    return {"80-120 particles": row}


@pytest.mark.parametrize(
    ("keras", "duckdb", "verdict"),
    [
        ((4.0, 2.0), (5.0, 5.0), "MET"),  # 1.25× Keras's CPU, 2.5× its wall (Keras on two cores)
        ((2.0, 4.0), (4.0, 4.0), "MISSED"),  # 2× Keras's CPU, 1× its wall (DuckDB slowed by the load)
    ],
)
def test_the_goal_is_judged_on_cpu_seconds(capsys, keras, duckdb, verdict):
    bench.print_mixes(figures(keras, duckdb), count=200, repeat=5, threads=1)
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.endswith(f"≤ {bench.GOAL_TIMES_KERAS}× {verdict}")
    assert f"{duckdb[0] / keras[0]:.2f} ({duckdb[1] / keras[1]:.2f})" in line


@pytest.mark.parametrize("threads", ["0", "-1", "two"])
def test_duckdb_threads_must_be_a_positive_number(capsys, threads):
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--duckdb-threads", threads])
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.endswith(f"expected a whole number of at least 1, got {threads!r}")
    assert "Traceback" not in error
