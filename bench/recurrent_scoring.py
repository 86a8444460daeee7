"""Benchmark: CERN's Inclusive Classifier (Masking + GRU(50) over 801 × 19 particles, 14 high-level features)
scored in the databases, as ms per event and as a ratio to Keras `predict` on the same events in one run.

Events hold 80–120 real particles (zero padding after them), as LHC events fill ~40–140 of the 801 slots.
Keras carries the GRU's state over masked steps, so the targets may skip them: DuckDB filters the step list
before its list_reduce, PL/pgSQL, PL/Python and Oracle `CONTINUE` at a masked step.

    Keras predict (baseline, one batch)
    DuckDB SQL macros
    PostgreSQL PL/pgSQL, no extension, and PL/Python + numpy (when plpython3u is installed)
    Oracle: the independent numpy BLAS interpreter's step count (how many GRU steps the package runs)
Writes bench/results/recurrent_scoring.json.

    nnsql bench recurrent_scoring [--events 200] [--pg-events 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from nnsql import quiet
from nnsql.bench.pg_paths import time_postgres_paths
from nnsql.bench.scoring import RESULTS, best_seconds

GOAL_DUCKDB_MS = 5.0  # per event with ~100 real particles


def events(count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    generator = np.random.default_rng(seed)
    particles = generator.random((count, 801, 19), dtype=np.float32)
    for row, real in enumerate(generator.integers(80, 121, count)):
        particles[row, real:, :] = 0.0
    return particles, generator.random((count, 14), dtype=np.float32)


def duckdb_seconds(model_path: Path, particles: np.ndarray, hlf: np.ndarray, workdir: Path) -> float:
    from nnsql.export.compile import prepare
    from nnsql.export.duckdb.generator import CAPABILITIES
    from nnsql.export.duckdb.store import DuckDBStore, feature_table
    from nnsql.export.publish.pipeline import ExportRequest, publish

    request = ExportRequest(model_path=model_path, name="ic", sample_rows=10)
    store = DuckDBStore(workdir / "bench.duckdb", progress=False)
    publish(store, request, prepare(request, CAPABILITIES), "duckdb")
    table = feature_table({"gru_input": particles, "hlf_input": hlf})
    with store.registered(table) as rows:
        store.con.execute(f"CREATE TABLE events AS SELECT _nn_row AS id, gru_input, hlf_input FROM {rows}")
    query = "SELECT id, ic.score(gru_input, hlf_input) FROM events"
    return best_seconds(lambda: store.con.execute(query).fetchall(), 2)


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="nnsql bench recurrent_scoring", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--events", type=int, default=200, help="events for Keras and DuckDB")
    parser.add_argument("--pg-events", type=int, default=20, help="events for PostgreSQL (0: skip it)")
    parser.add_argument("--oracle-events", type=int, default=2, help="events for the Oracle interpreter")
    args = parser.parse_args(argv)
    from tests.models import inclusive_classifier, save

    particles, hlf = events(args.events)
    real = int(np.any(particles != 0, axis=2).sum())
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        model = inclusive_classifier()
        model_path = save(model, workdir / "ic", ["W+jets", "QCD", "ttbar"])
        keras_ms = 1000 * best_seconds(lambda: model.predict([particles, hlf], verbose=0), 3) / args.events
        per_event = {"keras_predict": keras_ms}
        per_event["duckdb_sql"] = 1000 * duckdb_seconds(model_path, particles, hlf, workdir) / args.events
        if args.pg_events:
            subset = (particles[: args.pg_events], hlf[: args.pg_events])
            for label, seconds in postgres_seconds(model_path, *subset).items():
                per_event[label] = 1000 * seconds / args.pg_events
        oracle = oracle_steps(model_path, particles[: args.oracle_events], hlf[: args.oracle_events], workdir)
    average = real / args.events
    print(f"Inclusive Classifier on {args.events} events, {average:.0f} real particles of 801 on average")
    print(f"{'contender':<20}{'ms/event':>10}{'× Keras predict':>18}")
    for label, ms in per_event.items():
        print(f"{label:<20}{ms:>10.3f}{ms / keras_ms:>18.2f}")
    verdict = "met" if per_event["duckdb_sql"] <= GOAL_DUCKDB_MS else "MISSED"
    print(f"DuckDB goal ≤ {GOAL_DUCKDB_MS} ms/event: {verdict}")
    print(
        f"Oracle package on {args.oracle_events} events: {oracle['steps_run']} GRU steps run, "
        f"{oracle['steps_skipped']} masked steps skipped"
    )
    RESULTS.mkdir(exist_ok=True)
    document = {
        "events": args.events,
        "real_particles_mean": real / args.events,
        "ms_per_event": per_event,
        "oracle": oracle,
        "duckdb_goal_ms": GOAL_DUCKDB_MS,
    }
    (RESULTS / "recurrent_scoring.json").write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {RESULTS / 'recurrent_scoring.json'}")
    return 0


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
