"""Benchmark: CERN's Inclusive Classifier (Masking + GRU(50) over 801 × 19 particles, 14 high-level features)
scored in the databases, as ms per event and as a ratio to Keras `predict` on the same events in one run.

Two mixes of events: 80–120 real particles, and 20–200 (median ~115, as in the published data set), zero
padding after them: LHC events fill few of the 801 slots. The goal is DuckDB within 1.5× Keras on both,
judged on CPU seconds (user + system, every thread of the process: Keras's and DuckDB's run in it), which
a shared machine does not inflate as it does wall time; wall time is printed beside them.
DuckDB scores with one thread unless told otherwise: the 200 rows are one DuckDB chunk, which one thread
computes whatever the setting, and DuckDB 1.5 spends about twice the CPU on it when `threads` is 2.
Keras carries the GRU's state over masked steps, so the targets may skip them: DuckDB filters the step list
before its list_reduce, PL/pgSQL, PL/Python and Oracle `CONTINUE` at a masked step.

    Keras predict (baseline, one batch)
    DuckDB SQL macros
    PostgreSQL PL/pgSQL, no extension, and PL/Python + numpy (when plpython3u is installed)
    Oracle: the independent numpy BLAS interpreter's step count (how many GRU steps the package runs)
Writes bench/results/recurrent_scoring.json.

    nnsql bench recurrent_scoring [--events 200] [--pg-events 20] [--repeat 5] [--duckdb-threads 1]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from nnsql import quiet
from nnsql.bench.pg_paths import time_postgres_paths
from nnsql.bench.scoring import RESULTS, conditions

GOAL_TIMES_KERAS = 1.5  # DuckDB's time per event over Keras predict's, on each mix
MIXES = {
    "80-120 particles": (80, 100, 120),
    "20-200 particles": (20, 125, 200),
}  # triangular: low, mode, high


def positive(text: str) -> int:
    """An argument that must be a whole number of at least 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def events(
    count: int, mix: tuple[int, int, int] = MIXES["80-120 particles"], seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Uniform random particles, the real ones first in each event (their count drawn from a triangular
    distribution over `mix`), and high-level features."""
    generator = np.random.default_rng(seed)
    particles = generator.random((count, 801, 19), dtype=np.float32)
    low, mode, high = mix
    for row, real in enumerate(np.rint(generator.triangular(low, mode, high, count)).astype(int)):
        particles[row, real:, :] = 0.0
    return particles, generator.random((count, 14), dtype=np.float32)


def duckdb_store(model_path: Path, workdir: Path) -> Any:
    """The model published to a DuckDB file (a generous parity budget: the machine may be loaded)."""
    from nnsql.export.compile import prepare
    from nnsql.export.duckdb.generator import CAPABILITIES
    from nnsql.export.duckdb.store import DuckDBStore
    from nnsql.export.publish.pipeline import ExportRequest, publish

    request = ExportRequest(model_path=model_path, name="ic", sample_rows=10, parity_seconds=600)
    store = DuckDBStore(workdir / "bench.duckdb", progress=False)
    publish(store, request, prepare(request, CAPABILITIES), "duckdb")
    return store


def cpu_seconds() -> float:
    """CPU seconds this process has used, all its threads (user + system)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def timed(run: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run."""
    wall, cpu = time.perf_counter(), cpu_seconds()
    run()
    return time.perf_counter() - wall, cpu_seconds() - cpu


def duckdb_scorer(store: Any, table: str, particles: np.ndarray, hlf: np.ndarray) -> Callable[[], object]:
    """A function that scores the events, loaded into `table`, in one query."""
    from nnsql.export.duckdb.store import feature_table

    features = feature_table({"gru_input": particles, "hlf_input": hlf})
    with store.registered(features) as rows:
        store.con.execute(f"CREATE TABLE {table} AS SELECT _nn_row AS id, gru_input, hlf_input FROM {rows}")
    query = f"SELECT id, ic.score(gru_input, hlf_input) FROM {table}"
    return lambda: store.con.execute(query).fetchall()


def postgres_seconds(model_path: Path, particles: np.ndarray, hlf: np.ndarray) -> dict[str, float]:
    from nnsql.export.postgres.store import PostgresStore
    from tests.postgres_server import start_server

    server = start_server()
    try:
        store = PostgresStore(server.dsn(), progress=False)
        # qualified: the store's session has only pg_catalog on its search_path
        store.con.execute("CREATE TABLE public.events (id integer, gru_input float8[], hlf_input float8[])")
        for row, (p, h) in enumerate(zip(particles, hlf, strict=True)):
            values = [row, p.ravel().tolist(), h.tolist()]
            store.con.execute("INSERT INTO public.events VALUES (%s, %s, %s)", values)
        store.con.commit()
        query = "SELECT id, {}.score(gru_input, hlf_input) FROM public.events"
        seconds = time_postgres_paths(store, model_path, "ic", query.format)
        store.close()
        return seconds
    finally:
        server.stop()


def oracle_steps(model_path: Path, particles: np.ndarray, hlf: np.ndarray, workdir: Path) -> dict[str, int]:
    """The package's GRU steps run and skipped on these events, counted by the test suite's interpreter."""
    from nnsql.export.oracle.__main__ import main as export_oracle
    from tests.export.plsql_interpreter import load_scripts

    scripts = workdir / "oracle"
    export_oracle(["--model", str(model_path), "--name", "ic", "--script-only", str(scripts), "--quiet"])
    interpreter = load_scripts(scripts)
    for p, h in zip(particles, hlf, strict=True):
        interpreter.run(dict(zip(interpreter.parameters, (p, h), strict=True)))
    return {"steps_run": interpreter.steps_run, "steps_skipped": interpreter.steps_skipped}


def mix_figures(model: Any, store: Any, mix: str, count: int, repeat: int) -> dict[str, float]:
    """Keras predict and DuckDB on one mix of events, in ms per event of wall and CPU time: their runs
    alternate, so that the machine's load weighs on both alike."""
    particles, hlf = events(count, MIXES[mix])
    score = duckdb_scorer(store, f"events_{list(MIXES).index(mix)}", particles, hlf)

    def predict() -> object:
        return model.predict([particles, hlf], verbose=0)

    predict(), score()  # warm: graphs traced, macros bound
    keras, duckdb = [], []
    for _ in range(repeat):
        keras.append(timed(predict))
        duckdb.append(timed(score))
    real = np.any(particles != 0, axis=2).sum(axis=1)
    figures = {"real_particles_median": float(np.median(real))}
    for label, runs in (("keras_predict", keras), ("duckdb_sql", duckdb)):
        wall, cpu = np.median(np.array(runs), axis=0)
        figures[label] = 1000 * float(wall) / count
        figures[f"{label}_cpu"] = 1000 * float(cpu) / count
    return figures


def print_mixes(figures: dict[str, dict[str, float]], count: int, repeat: int, threads: int) -> None:
    print(
        f"Inclusive Classifier, {count} events per mix, median of {repeat} alternating runs; "
        f"ms per event, CPU (wall); DuckDB threads = {threads}"
    )
    header = f"{'mix':<18}{'real (median)':>14}{'Keras':>18}{'DuckDB':>18}{'× Keras CPU (wall)':>20}"
    print(f"{header}  goal (CPU)")
    for mix, row in figures.items():
        ratio = row["duckdb_sql_cpu"] / row["keras_predict_cpu"]
        wall_ratio = row["duckdb_sql"] / row["keras_predict"]
        verdict = "MET" if ratio <= GOAL_TIMES_KERAS else "MISSED"
        keras = f"{row['keras_predict_cpu']:.3f} ({row['keras_predict']:.3f})"
        duckdb = f"{row['duckdb_sql_cpu']:.3f} ({row['duckdb_sql']:.3f})"
        print(
            f"{mix:<18}{row['real_particles_median']:>14.0f}{keras:>18}{duckdb:>18}"
            f"{f'{ratio:.2f} ({wall_ratio:.2f})':>20}  ≤ {GOAL_TIMES_KERAS}× {verdict}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="nnsql bench recurrent_scoring", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--events", type=int, default=200, help="events per mix for Keras and DuckDB")
    parser.add_argument("--pg-events", type=int, default=20, help="events for PostgreSQL (0: skip it)")
    parser.add_argument("--oracle-events", type=int, default=2, help="events for the Oracle interpreter")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each contender (the median is kept)")
    parser.add_argument("--duckdb-threads", type=positive, default=1, help="DuckDB's threads (see above)")
    args = parser.parse_args(argv)
    from tests.models import inclusive_classifier, save

    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        model = inclusive_classifier()
        model_path = save(model, workdir / "ic", ["W+jets", "QCD", "ttbar"])
        store = duckdb_store(model_path, workdir)
        store.con.execute(f"SET threads = {args.duckdb_threads}")
        figures = {mix: mix_figures(model, store, mix, args.events, args.repeat) for mix in MIXES}
        store.close()
        particles, hlf = events(max(args.pg_events, args.oracle_events))
        postgres = {}
        if args.pg_events:
            subset = (particles[: args.pg_events], hlf[: args.pg_events])
            for label, seconds in postgres_seconds(model_path, *subset).items():
                postgres[label] = 1000 * seconds / args.pg_events
        oracle = oracle_steps(model_path, particles[: args.oracle_events], hlf[: args.oracle_events], workdir)
    print(conditions())
    print_mixes(figures, args.events, args.repeat, args.duckdb_threads)
    keras_ms = figures["80-120 particles"]["keras_predict"]
    for label, ms in postgres.items():
        print(
            f"{label:<18} {ms:.3f} ms/event on {args.pg_events} events of 80-120 particles "
            f"(× {ms / keras_ms:.2f} Keras)"
        )
    print(
        f"Oracle package on {args.oracle_events} events: {oracle['steps_run']} GRU steps run, "
        f"{oracle['steps_skipped']} masked steps skipped"
    )
    RESULTS.mkdir(exist_ok=True)
    document = {
        "conditions": conditions(),
        "events_per_mix": args.events,
        "mixes": figures,
        "postgres_ms_per_event": postgres,
        "oracle": oracle,
        "goal_times_keras": GOAL_TIMES_KERAS,
        "goal_measure": "cpu seconds",
        "duckdb_threads": args.duckdb_threads,
    }
    (RESULTS / "recurrent_scoring.json").write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {RESULTS / 'recurrent_scoring.json'}")
    return 0


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
