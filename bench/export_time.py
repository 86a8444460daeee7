"""Benchmark: how long `python -m export.<target>` takes to export CERN's Inclusive Classifier (masked GRU(50)
over 801 × 19 particles + 14 features) with its parity check, on every target. Goal: ≤ 60 s each.

Each export runs as the user runs it, a fresh process timed from start to exit (TensorFlow's start-up
included), with the default --sample-rows 1000 and --parity-seconds 20. The baseline, run side by side,
is a process that only imports the exporter and loads the model: what every export pays before any work.
    DuckDB                 a new database file
    PostgreSQL, each kernel (PL/pgSQL, cube, PL/Python) on a throwaway server on a Unix socket
    ONNX                   model repository; parity in onnxruntime
    Oracle PL/SQL, --script-only: compiling and writing the scripts. No Oracle here: the in-database
                           check runs when install.sql runs (20 rows), so it is not in this figure.
    Oracle --engine onnx, --script-only: the ONNX file, its parity in onnxruntime, the scripts.
Writes bench/results/export_time.json.

    nnsql bench export_time [--only duckdb,postgres_plpgsql,...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nnsql import quiet
from nnsql.bench.scoring import RESULTS

GOAL_SECONDS = 60.0
BASELINE = "from nnsql.export.frontend.model import load_model; import sys; load_model(sys.argv[1])"


def timed(command: list[str]) -> tuple[float, str]:
    """Seconds from start to exit, and the parity line of the command's output."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:3])} failed: {done.stderr.strip()[-500:]}")
    found = re.search(r"parity on (\d+) rows", done.stdout)
    return seconds, f"{found[1]} rows" if found else "at install time"


def commands(model: Path, work: Path, pg_dsn: str | None) -> dict[str, list[str]]:
    python = [sys.executable, "-m"]
    common = ["--model", str(model), "--quiet"]
    runs = {
        "duckdb": [
            *python,
            "nnsql.export.duckdb",
            *common,
            "--db",
            str(work / "models.duckdb"),
            "--name",
            "ic",
        ],
        "onnx": [*python, "nnsql.export.onnx", *common, "--repo", str(work / "repo"), "--name", "ic"],
        "oracle_plsql_script": [
            *python,
            "nnsql.export.oracle",
            *common,
            "--name",
            "ic",
            "--script-only",
            str(work / "o"),
        ],
        "oracle_onnx_script": [
            *python,
            "nnsql.export.oracle",
            *common,
            "--name",
            "ic",
            "--engine",
            "onnx",
            "--script-only",
            str(work / "oo"),
        ],
    }
    if pg_dsn is not None:
        for kernel in ("plpgsql", "cube", "plpython"):
            runs[f"postgres_{kernel}"] = [
                *python,
                "nnsql.export.postgres",
                *common,
                "--dsn",
                pg_dsn,
                "--name",
                f"ic_{kernel}",
                "--kernel",
                kernel,
            ]
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nnsql bench export_time", description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated targets (default: all)")
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL kernels")
    args = parser.parse_args(argv)
    from tests.models import inclusive_classifier, save
    from tests.postgres_server import optional_dsn

    with optional_dsn(not args.no_postgres) as dsn, tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        model = save(inclusive_classifier(), work / "ic", ["W+jets", "QCD", "ttbar"])
        baseline, _ = timed([sys.executable, "-c", BASELINE, str(model)])
        results: dict[str, dict[str, object]] = {}
        times: dict[str, float] = {}
        wanted = set(filter(None, args.only.split(",")))
        for target, command in commands(model, work, dsn).items():
            if wanted and target not in wanted:
                continue
            seconds, checked = timed(command)
            results[target] = {"seconds": round(seconds, 1), "parity": checked}
            times[target] = seconds
            print(f"{target:<22}{seconds:>8.1f} s  {seconds / baseline:>5.1f}× baseline   parity: {checked}")
    print(f"baseline (import the exporter, load the model): {baseline:.1f} s")
    load = os.getloadavg()[0]
    print(
        f"machine: {os.cpu_count()} cores, load average {load:.1f} at the end (other work slows every figure)"
    )
    missed = [target for target, seconds in times.items() if seconds > GOAL_SECONDS]
    verdict = f"MISSED by {', '.join(missed)}" if missed else "met"
    print(f"goal ≤ {GOAL_SECONDS:.0f} s per target: {verdict}")
    RESULTS.mkdir(exist_ok=True)
    document = {
        "baseline_seconds": round(baseline, 1),
        "goal_seconds": GOAL_SECONDS,
        "load_average": round(load, 1),
        "targets": results,
    }
    (RESULTS / "export_time.json").write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {RESULTS / 'export_time.json'}")
    return 0


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
