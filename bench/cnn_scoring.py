"""Benchmark: two CNNs scored in the databases beside Keras in one run: TF-Spawner's (two Conv2D +
MaxPool2D, Dense(100), Dense(10)) and a field-sized MNIST CNN (Conv2D 32 then 64 filters 3×3, MaxPool,
Dense(128), Dense(10): ~11 M multiply-adds per image), as ms per image, peak memory and parity rows.

    Keras predict (baseline, batches of 256)
    DuckDB SQL macros: ms per image (wall, and CPU of all threads), the CPU of a one-image query (what a
      query costs whatever its rows), the peak resident memory of a process that only scores (also for
      --memory-rows images in one query), and the sample rows the export's parity gate checks within the
      default budget (--parity-seconds)
    PostgreSQL PL/pgSQL, cube and PL/Python (--pg-rows images of TF-Spawner's CNN, --mnist-pg-rows of
      the MNIST CNN)
Images are Fashion-MNIST test images when Debian's package is installed, else uniform random rows; the
networks' weights are seeded (speed does not depend on their values). The goal line says whether the
MNIST CNN scores in at most 100 ms per image in DuckDB with at least 100 parity rows; the line before it
adds up the CPU those rows cost the gate. Prints the date, the machine and its load; writes
bench/results/cnn_scoring.json.

    nnsql bench cnn_scoring [--rows 200] [--pg-rows 40] [--mnist-pg-rows 5] [--memory-rows 1000 5000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from nnsql import quiet
from nnsql.bench.pg_paths import time_postgres_paths
from nnsql.bench.scoring import RESULTS, bench_rows, best_seconds, conditions

GOAL_MS, GOAL_ROWS = 100.0, 100  # the MNIST CNN in DuckDB: ms per image, parity rows in the budget


def publish_duckdb(model_path: Path, database: Path) -> int | str:
    """Export with the default parity budget; the rows the gate checked, or why it refused."""
    from nnsql.export.compile import prepare
    from nnsql.export.duckdb.generator import CAPABILITIES
    from nnsql.export.duckdb.store import DuckDBStore
    from nnsql.export.errors import ExportError
    from nnsql.export.publish.pipeline import ExportRequest, publish

    request = ExportRequest(model_path=model_path, name="cnn")
    store = DuckDBStore(database, progress=False)
    try:
        return publish(store, request, prepare(request, CAPABILITIES), "duckdb").parity.rows
    except ExportError as error:
        return f"refused: {str(error).splitlines()[0]}"
    finally:
        store.close()


def stage_duckdb(model: Any, database: Path, images: np.ndarray) -> None:
    """The model's macros and the images in a DuckDB file, without the gate (scoring is timed apart)."""
    from nnsql.export.compile import to_ir
    from nnsql.export.duckdb.store import DuckDBStore, feature_table

    store = DuckDBStore(database, progress=False)
    with store.session():
        store.stage("cnn", 1, to_ir(model, target="duckdb"))
    with store.registered(feature_table({"image": images})) as rows:
        store.con.execute(f"CREATE TABLE images AS SELECT _nn_row AS id, image FROM {rows}")
    store.close()


def score_in_child(database: Path, rows: int = 0, repeat: int = 2) -> dict[str, float]:
    """Seconds (best of `repeat` scoring queries), CPU seconds of one, and the peak resident MB of a
    process that only opens the file and scores (the first `rows` images, or all): the memory is
    DuckDB's, not TensorFlow's."""
    command = [
        sys.executable,
        "-m",
        "nnsql.bench.cnn_scoring",
        "--score",
        str(database),
        str(rows),
        str(repeat),
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"the scoring process failed: {done.stderr.strip().splitlines()[-1:]}")
    figures: dict[str, float] = json.loads(done.stdout)
    return figures


def peak_mb() -> float:
    """This process's peak resident MB. VmHWM, not getrusage: a child's getrusage peak starts from its
    parent's size at fork (here, TensorFlow's)."""
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) / 1024


def score(database: str, rows: int, repeat: int) -> int:
    import duckdb

    con = duckdb.connect(database, read_only=True)
    con.execute("SET enable_progress_bar = false")
    where = f" WHERE id < {rows}" if rows else ""
    query = f"SELECT id, cnn.score(image) FROM images{where}"
    started = os.times()
    seconds = best_seconds(lambda: con.execute(query).fetchall(), repeat)
    used = os.times()
    cpu = (used.user + used.system - started.user - started.system) / repeat
    fixed = min(cpu_seconds(con, "SELECT id, cnn.score(image) FROM images WHERE id < 1") for _ in range(3))
    print(
        json.dumps({"seconds": seconds, "cpu_seconds": cpu, "fixed_cpu_seconds": fixed, "peak_mb": peak_mb()})
    )
    return 0


def cpu_seconds(con: Any, query: str) -> float:
    """CPU seconds (user + system, all threads) of one query."""
    started = os.times()
    con.execute(query).fetchall()
    used = os.times()
    return used.user + used.system - started.user - started.system


def postgres_seconds(model_path: Path, images: np.ndarray) -> dict[str, float]:
    from nnsql.export.postgres.store import PostgresStore
    from tests.postgres_server import start_server

    server = start_server()
    try:
        store = PostgresStore(server.dsn(), progress=False)

        def load(name: str) -> None:
            store.load_test_data(name, images.reshape(len(images), -1), np.zeros(len(images), dtype=np.int64))
            store.con.commit()

        seconds = time_postgres_paths(
            store,
            model_path,
            "cnn",
            lambda name: f"SELECT id, {name}.score(features) FROM {name}.testdata",
            load,
        )
        store.close()
        return seconds
    finally:
        server.stop()


def measure(
    name: str,
    build: Callable[[], Any],
    images: np.ndarray,
    workdir: Path,
    pg_rows: int,
    memory_rows: list[int] | None = None,
) -> dict:
    """One CNN: Keras and DuckDB ms per image, DuckDB's peak memory (also at `memory_rows` images) and
    parity rows, PostgreSQL's ms per image on `pg_rows` images."""
    from tests.models import save

    model = build()
    model_path = save(model, workdir / name)
    rows = len(images)
    keras_ms = 1000 * best_seconds(lambda: model.predict(images, batch_size=256, verbose=0), 3) / rows
    stage_duckdb(model, workdir / f"{name}_scoring.duckdb", images)
    scored = score_in_child(workdir / f"{name}_scoring.duckdb")
    per_image = {"keras_predict": keras_ms, "duckdb_sql": 1000 * scored["seconds"] / rows}
    if pg_rows:
        for label, pg_seconds in postgres_seconds(model_path, images[:pg_rows]).items():
            per_image[label] = 1000 * pg_seconds / pg_rows
    return {
        "multiply_adds": multiply_adds(model),
        "ms_per_image": per_image,
        "duckdb_cpu_ms_per_image": 1000 * scored["cpu_seconds"] / rows,
        "duckdb_fixed_cpu_seconds": scored["fixed_cpu_seconds"],
        "duckdb_peak_mb": scored["peak_mb"],
        "duckdb_peak_mb_by_rows": memory_by_rows(model, images, workdir, memory_rows or []),
        "duckdb_parity_rows": publish_duckdb(model_path, workdir / f"{name}_gate.duckdb"),
    }


def multiply_adds(model: Any) -> int:
    from nnsql.export.compile import to_ir
    from nnsql.export.publish.budget import multiply_adds as count

    return count(to_ir(model, target="reference"))


def report(name: str, result: dict, rows: int) -> None:
    per_image = result["ms_per_image"]
    keras_ms = per_image["keras_predict"]
    print(f"{name}: {result['multiply_adds'] / 1e6:.1f} M multiply-adds per image, {rows:,} images")
    print(f"  {'contender':<20}{'ms/image':>10}{'× Keras predict':>18}")
    for label, ms in per_image.items():
        print(f"  {label:<20}{ms:>10.3f}{ms / keras_ms:>18.1f}")
    print(f"  duckdb CPU time     {result['duckdb_cpu_ms_per_image']:.1f} ms/image (all threads, one query)")
    print(f"  duckdb fixed cost   {result['duckdb_fixed_cpu_seconds']:.2f} s CPU a query (one image scored)")
    print(f"  duckdb peak memory  {result['duckdb_peak_mb']:.0f} MB (a process that only scores)")
    for count, peak in result.get("duckdb_peak_mb_by_rows", {}).items():
        print(f"  duckdb peak memory  {peak:.0f} MB scoring {int(count):,} images in one query")
    print(f"  duckdb parity rows  {result['duckdb_parity_rows']} (default --parity-seconds)")


def memory_by_rows(model: Any, images: np.ndarray, workdir: Path, counts: list[int]) -> dict[str, float]:
    """Peak MB of a process scoring each count of images (the given images repeated) in one query."""
    if not counts:
        return {}
    database = workdir / "memory.duckdb"
    stage_duckdb(model, database, np.resize(images, (max(counts), *images.shape[1:])))
    return {str(count): score_in_child(database, count, repeat=1)["peak_mb"] for count in counts}


def gate_arithmetic(result: dict) -> str:
    """What GOAL_ROWS rows cost the gate in CPU, against the scoring half of the default budget: a row's
    CPU (a one-query figure, all threads) times the rows, plus one query's fixed cost per batch."""
    from nnsql.export.publish.budget import BATCHES_PER_BUDGET, DEFAULT_SECONDS

    budget, fixed = DEFAULT_SECONDS / 2, result["duckdb_fixed_cpu_seconds"]
    rows_cpu = GOAL_ROWS * result["duckdb_cpu_ms_per_image"] / 1000
    total = rows_cpu + BATCHES_PER_BUDGET * fixed
    return (
        f"gate arithmetic: {GOAL_ROWS} rows × {result['duckdb_cpu_ms_per_image']:.1f} ms + "
        f"{BATCHES_PER_BUDGET} queries × {fixed:.2f} s = {total:.1f} s of CPU, for {budget:g} s of scoring "
        f"on 2 cores ({2 * budget:g} CPU s)"
    )


def goal(result: dict) -> str:
    ms, rows = result["ms_per_image"]["duckdb_sql"], result["duckdb_parity_rows"]
    met = ms <= GOAL_MS and isinstance(rows, int) and rows >= GOAL_ROWS
    return (
        f"goal (MNIST CNN in DuckDB: ≤ {GOAL_MS:g} ms/image, ≥ {GOAL_ROWS} parity rows): "
        f"{'met' if met else 'missed'} ({ms:.1f} ms/image, parity rows: {rows})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nnsql bench cnn_scoring", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200, help="images for Keras and DuckDB")
    parser.add_argument("--pg-rows", type=int, default=40, help="images for PostgreSQL (0: skip it)")
    parser.add_argument(
        "--mnist-pg-rows", type=int, default=5, help="images of the MNIST CNN for PostgreSQL (0: skip it)"
    )
    parser.add_argument(
        "--memory-rows",
        type=int,
        nargs="*",
        default=[],
        help="also score this many MNIST CNN images in one query each (e.g. 1000 5000): peak memory",
    )
    parser.add_argument("--score", nargs=3, help=argparse.SUPPRESS)  # the child process that only scores
    args = parser.parse_args(argv)
    if args.score:
        return score(args.score[0], int(args.score[1]), int(args.score[2]))
    from tests.models import mnist_cnn, tf_spawner_cnn

    flat, source = bench_rows(args.rows)
    images = flat.reshape(-1, 28, 28, 1).astype(np.float32)
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        results["tf_spawner_cnn"] = measure(
            "tf_spawner_cnn", tf_spawner_cnn, images, Path(scratch), args.pg_rows
        )
        results["mnist_cnn"] = measure(
            "mnist_cnn", mnist_cnn, images, Path(scratch), args.mnist_pg_rows, args.memory_rows
        )
    print(f"CNNs on {args.rows:,} {source}; {conditions()}")
    print(f"PostgreSQL: {args.pg_rows} images of TF-Spawner's CNN, {args.mnist_pg_rows} of the MNIST CNN")
    report("TF-Spawner CNN", results["tf_spawner_cnn"], args.rows)
    report("MNIST CNN (Conv 32, Conv 64)", results["mnist_cnn"], args.rows)
    print(gate_arithmetic(results["mnist_cnn"]))
    print(goal(results["mnist_cnn"]))
    RESULTS.mkdir(exist_ok=True)
    document = {
        "rows": args.rows,
        "postgres_rows": {"tf_spawner_cnn": args.pg_rows, "mnist_cnn": args.mnist_pg_rows},
        "source": source,
        "conditions": conditions(),
        "models": results,
    }
    (RESULTS / "cnn_scoring.json").write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {RESULTS / 'cnn_scoring.json'}")
    return 0


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
