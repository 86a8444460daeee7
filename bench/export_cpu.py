"""Benchmark: CPU seconds (user + sys of this process) of exports run in-process, Keras scored by
`model.predict` (the old route: a traced graph per model, batch shape and partial batch) against eager
calls (export/frontend/keras_run.py), side by side in one process.

Each export loads its model from its file, as a user's export does, so both routes pay their Keras work
afresh every time. The two routes alternate export by export and each pair repeats `--rounds` times; the
figure of a route is its smallest CPU time over the rounds (the least disturbed by other work on a shared
machine). One warm-up export first pays TensorFlow's one-time start-up for neither route.
    models   zoo "gru" and "stacked_masked" (tests/zoo.py), their "two_head_lstm"
             (tests/their_models.py); with --models ic also the Inclusive Classifier (masked GRU(50) over
             801 × 19 + 14 features; its SQL parity needs a quiet machine to fit --parity-seconds)
    targets  duckdb, postgres plpgsql | cube | plpython (a throwaway server on a Unix socket), oracle
             --script-only, onnx; 100 sample rows as the tests export
The PostgreSQL server is another process: its CPU (the database's share of the parity check, the same for
both routes) is not in the figures. Writes bench/results/export_cpu.json.

    nnsql bench export_cpu [--only duckdb,onnx,...] [--models gru,ic,...] [--rounds N] [--no-postgres]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import resource
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from nnsql import quiet
from nnsql.bench.scoring import RESULTS

SAMPLE_ROWS = ("--sample-rows", "100")
Export = Callable[[Path, Path, str], list[str]]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def predicted_route(model: Any, feeds: list[np.ndarray]) -> list[np.ndarray]:
    """The old route: `model.predict` (tracing a graph) with keras_run.run's inputs and outputs."""
    from nnsql.export.frontend import keras_run

    feeds = [keras_run.cast(feed, tensor) for feed, tensor in zip(feeds, model.inputs, strict=True)]
    result = model.predict(feeds if len(feeds) > 1 else feeds[0], verbose=0)
    return [np.asarray(r) for r in result] if isinstance(result, list | tuple) else [np.asarray(result)]


@contextlib.contextmanager
def route(name: str) -> Iterator[None]:
    """Exports within use `name`'s route: "eager" (the exporter's own) or "predict" (the old one)."""
    from nnsql.export.frontend import keras_run

    eager = keras_run.run
    if name == "predict":
        keras_run.run = predicted_route
    try:
        yield
    finally:
        keras_run.run = eager


def exporters(dsn: str | None) -> dict[str, tuple[Callable[[list[str]], int], Export]]:
    """Each target: its in-process `main` and the arguments of one export (model, scratch, name)."""
    from nnsql.export.duckdb.__main__ import main as duckdb
    from nnsql.export.onnx.__main__ import main as onnx
    from nnsql.export.oracle.__main__ import main as oracle
    from nnsql.export.postgres.__main__ import main as postgres

    runs: dict[str, tuple[Callable[[list[str]], int], Export]] = {
        "duckdb": (duckdb, lambda m, w, n: ["--model", str(m), "--db", str(w / "m.duckdb"), "--name", n]),
        "oracle_script": (
            oracle,
            lambda m, w, n: [
                "--model",
                str(m),
                "--name",
                n,
                "--script-only",
                str(w / n),
                "--sample-rows",
                "50",
            ],
        ),
        "onnx": (onnx, lambda m, w, n: ["--model", str(m), "--repo", str(w / "repo"), "--name", n]),
    }
    if dsn is not None:
        for kernel in ("plpgsql", "cube", "plpython"):
            runs[f"postgres_{kernel}"] = (postgres, postgres_arguments(dsn, kernel))
    return runs


def postgres_arguments(dsn: str, kernel: str) -> Export:
    def arguments(model: Path, work: Path, name: str) -> list[str]:
        return ["--model", str(model), "--dsn", dsn, "--name", f"{name}_{kernel}", "--kernel", kernel]

    return arguments


def saved_models(work: Path, wanted: set[str]) -> dict[str, Path]:
    from tests import models, their_models, zoo

    makers: dict[str, Callable[[], Path]] = {
        "gru": lambda: models.save(zoo.build("gru"), work / "gru"),
        "stacked_masked": lambda: models.save(zoo.build("stacked_masked"), work / "stacked"),
        "ic": lambda: models.save(models.inclusive_classifier(), work / "ic", ["W+jets", "QCD", "ttbar"]),
        "two_head_lstm": lambda: their_models.THEIRS["two_head_lstm"].build(work / "two_heads"),
    }
    chosen = wanted or {"gru", "stacked_masked", "two_head_lstm"}
    return {name: make() for name, make in makers.items() if name in chosen}


def exported(main: Callable[[list[str]], int], argv: list[str]) -> float:
    """CPU seconds of one in-process export (its output swallowed); raises when it fails."""
    started = cpu_seconds()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as errors:
        status = main([*argv, *SAMPLE_ROWS, "--quiet"] if "--sample-rows" not in argv else [*argv, "--quiet"])
    if status != 0:
        raise RuntimeError(f"export {' '.join(argv[:2])} failed: {errors.getvalue().strip()[-300:]}")
    return cpu_seconds() - started


def best_of(
    main: Callable[[list[str]], int], arguments: Export, path: Path, work: Path, name: str, rounds: int
) -> dict[str, float]:
    """The smallest CPU seconds of each route over `rounds` pairs, the order alternating."""
    best = {"predict": float("inf"), "eager": float("inf")}
    for index in range(rounds):
        for route_name in ("predict", "eager") if index % 2 == 0 else ("eager", "predict"):
            with route(route_name):
                seconds = exported(main, arguments(path, work, f"{name}{index}{route_name[0]}"))
            best[route_name] = min(best[route_name], seconds)
    return best


def measure(runs: dict, models: dict[str, Path], work: Path, rounds: int) -> dict[str, dict[str, float]]:
    """Per model and target, the smallest CPU seconds of each route over `rounds` alternating pairs."""
    figures: dict[str, dict[str, float]] = {}
    for model_name, path in models.items():
        for target, (main, arguments) in runs.items():
            try:
                name = f"m{len(figures)}_{target[:2]}"  # unique and short (Oracle: 25 characters)
                best = best_of(main, arguments, path, work, name, rounds)
            except RuntimeError as error:
                print(f"{model_name:<18}{target:<18}{error}", flush=True)
                continue
            figures[f"{model_name} {target}"] = best
            print(
                f"{model_name:<18}{target:<18}{best['predict']:>8.2f} s{best['eager']:>8.2f} s"
                f"{best['predict'] / best['eager']:>7.2f}×",
                flush=True,
            )
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nnsql bench export_cpu", description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated targets (default: all)")
    parser.add_argument("--models", default="", help="comma-separated models (default: all)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating pairs per export (default 2)")
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL kernels")
    args = parser.parse_args(argv)
    from tests.postgres_server import optional_dsn

    with optional_dsn(not args.no_postgres) as dsn, tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        models = saved_models(work, set(filter(None, args.models.split(","))))
        runs = exporters(dsn)
        wanted = set(filter(None, args.only.split(",")))
        if wanted - set(runs):
            parser.error(
                f"--only: no target {', '.join(sorted(wanted - set(runs)))}; choose from {', '.join(runs)}"
            )
        runs = {target: run for target, run in runs.items() if not wanted or target in wanted}
        first = next(iter(runs.values()))
        exported(first[0], first[1](next(iter(models.values())), work, "warm_up"))
        print(f"{'model':<18}{'target':<18}{'predict':>10}{'eager':>10}{'ratio':>8}  (CPU s, best)")
        figures = measure(runs, models, work, args.rounds)
    total = {name: sum(f[name] for f in figures.values()) for name in ("predict", "eager")}
    print(
        f"all exports: predict {total['predict']:.1f} s, eager {total['eager']:.1f} s, "
        f"{total['predict'] / total['eager']:.2f}× less CPU"
    )
    RESULTS.mkdir(exist_ok=True)
    document = {"rounds": args.rounds, "cpu_seconds": figures, "total": total}
    (RESULTS / "export_cpu.json").write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {RESULTS / 'export_cpu.json'}")
    return 0


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
