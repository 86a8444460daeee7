"""`nnsql bench infra`: is this training cluster healthy, and does it scale?

Runs a training benchmark (ResNet50, an AlexNet-like network, or CERN's Inclusive Classifier) through
`nnsql.train.spawn` for every worker count of a sweep, on synthetic data (generated on the device, no input
pipeline) and on real data (TFRecords through tf.data), and reports images/s per worker and in total,
speedup and scaling efficiency against one worker, step-time percentiles and the input pipeline's own
rate: a table on the terminal, and JSON, CSV and a PNG plot in runs/<run-id>/bench/.

    nnsql bench infra --workers 1,2 --data synthetic,real
    nnsql bench infra --model resnet50 --workers 1,2,4 --backend kubernetes --image my/tf-worker:2.21 \\
        --gpus 1 --data synthetic,s3://bucket/imagenet/train-*.tfrecord --env-file s3.env
    nnsql bench infra --workers 1,2 --backend kubernetes --dry-run      # the manifests it would run
    nnsql bench infra compare runs/bench-A/bench/results.json runs/bench-B/bench/results.json

Options it does not know are train.spawn's (--backend, --image, --gpus, --pvc, --namespace, ...).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from nnsql import quiet
from nnsql.bench.infra import report
from nnsql.bench.infra.worker import RESULT_MARK

WORKER = Path(__file__).with_name("worker.py")
MODELS = ("resnet50", "alexnet", "inclusive")
CPU_DEFAULTS = {"image_size": 64, "batch_size": 16, "steps": 20, "warmup": 5}
GPU_DEFAULTS = {"image_size": 224, "batch_size": 64, "steps": 100, "warmup": 10}
PLACEHOLDER = "s3://YOUR-BUCKET/{}/*.tfrecord"


class BenchError(Exception):
    """A one-line reason the benchmark cannot run."""


@dataclass(frozen=True)
class Run:
    model: str
    data: str  # "synthetic" or "real"
    source: str | None  # the real data's TFRecords (a glob or s3://), None for synthetic
    workers: int

    @property
    def name(self) -> str:
        return f"{self.model}-{self.data}-w{self.workers}"


def comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def worker_counts(text: str) -> list[int]:
    try:
        counts = sorted({int(item) for item in comma_list(text)})
    except ValueError:
        raise argparse.ArgumentTypeError(f"--workers takes numbers like 1,2,4, not {text!r}") from None
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError("--workers takes counts of 1 or more, like 1,2,4")
    return counts


def image_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(f"--eval-examples takes a count of 1 or more, not {text!r}")
    return count


def model_names(text: str) -> list[str]:
    names = comma_list(text)
    unknown = [name for name in names if name not in MODELS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"--model takes {', '.join(MODELS)} (comma-separated), not {text!r}")
    return names


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(
        prog="nnsql bench infra",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parse.add_argument("--model", type=model_names, default=["resnet50", "alexnet"], help=", ".join(MODELS))
    parse.add_argument(
        "--data",
        type=comma_list,
        default=["synthetic", "real"],
        help="synthetic, real (Fashion-MNIST upscaled, or the project's HEP events for inclusive), "
        "or TFRecord files (a glob or s3://; ImageNet keys image/encoded + image/class/label, or the "
        "Inclusive Classifier's schema), comma-separated",
    )
    parse.add_argument("--workers", type=worker_counts, default=[1, 2], help="worker counts, e.g. 1,2,4")
    parse.add_argument("--steps", type=int, help="timed steps per run (CPU 20, GPU 100)")
    parse.add_argument("--warmup", type=int, help="untimed steps first (CPU 5, GPU 10)")
    parse.add_argument("--batch-size", type=int, help="per replica: a GPU or a CPU worker (CPU 16, GPU 64)")
    parse.add_argument("--image-size", type=int, help="square image side (CPU 64, GPU 224)")
    parse.add_argument("--real-examples", type=int, default=8192, help="Fashion-MNIST images written")
    parse.add_argument("--hep-events", type=int, default=1024, help="HEP events written for inclusive")
    parse.add_argument("--target-accuracy", type=float, help="real data: also time training to it")
    parse.add_argument("--max-train-steps", type=int, default=2000, help="step budget for the target")
    parse.add_argument(
        "--eval-examples",
        type=image_count,
        default=2000,
        help="Fashion-MNIST test images the target's accuracy is measured on (default 2000)",
    )
    parse.add_argument("--eval-every", type=int, default=50, help="steps between accuracy checks")
    parse.add_argument("--s3-endpoint", help="S3-compatible endpoint for s3:// data")
    parse.add_argument("--label", help="this infrastructure's name in comparisons (default: host name)")
    parse.add_argument("--compare", type=Path, action="append", default=[], help="an earlier results.json")
    parse.add_argument("--runs", type=Path, default=Path("runs"), help="where runs/<run-id>/ goes")
    return parse


def spawn_value(options: list[str], flag: str) -> str | None:
    for index, option in enumerate(options):
        if option == flag and index + 1 < len(options):
            return options[index + 1]
        if option.startswith(flag + "="):
            return option.split("=", 1)[1]
    return None


def settle_defaults(args: argparse.Namespace, spawn_options: list[str]) -> None:
    gpus = int(spawn_value(spawn_options, "--gpus") or 0)
    defaults = GPU_DEFAULTS if gpus > 0 else CPU_DEFAULTS
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.gpus = gpus
    args.backend = spawn_value(spawn_options, "--backend") or "local"
    args.dry_run = "--dry-run" in spawn_options


def plan(args: argparse.Namespace) -> list[Run]:
    """Every (model, data, workers) run, with each real source resolved or marked to be generated."""
    runs: list[Run] = []
    for model in args.model:
        for data in args.data:
            kind = "synthetic" if data == "synthetic" else "real"
            source = None if data in ("synthetic", "real") else data
            runs.extend(Run(model, kind, source, workers) for workers in args.workers)
    return runs


def record_kind(model: str) -> str:
    return "events" if model == "inclusive" else "images"


def generated_sources(runs: list[Run], args: argparse.Namespace, directory: Path) -> dict[str, tuple]:
    """Real data the workers can read: generated here for a local run, a placeholder for a dry run."""
    wanted = {record_kind(run.model) for run in runs if run.data == "real" and run.source is None}
    if not wanted:
        return {}
    if args.backend != "local":
        if not args.dry_run:
            raise BenchError(
                "real data on Kubernetes: the pods cannot read this machine's files; give --data "
                "s3://BUCKET/PREFIX/*.tfrecord (or a glob on the --pvc volume)"
            )
        print(
            "warning: the manifests read real data from a placeholder; give --data s3://... for a real run",
            file=sys.stderr,
        )
        return {kind: (PLACEHOLDER.format(kind), None) for kind in wanted}
    from nnsql.bench.infra import data

    print(f"writing real data ({', '.join(sorted(wanted))}) to {directory}", file=sys.stderr)
    sources: dict[str, tuple] = {}
    if "images" in wanted:
        sources["images"] = data.fashion_records(
            directory / "fashion", args.real_examples, args.eval_examples
        )
    if "events" in wanted:
        sources["events"] = (data.hep_records(directory / "hep", args.hep_events), None)
    return sources


def worker_arguments(run: Run, args: argparse.Namespace, generated: dict[str, tuple]) -> list[str]:
    arguments = ["--model", run.model, "--data", run.data]
    for name in ("image_size", "batch_size", "steps", "warmup"):
        arguments += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    if run.data == "real":
        records, held_out = (run.source, None) if run.source else generated[record_kind(run.model)]
        arguments += ["--records", str(records)]
        if args.target_accuracy is not None and held_out:
            arguments += ["--eval-records", held_out, "--target-accuracy", str(args.target_accuracy)]
            arguments += [
                "--max-train-steps",
                str(args.max_train_steps),
                "--eval-every",
                str(args.eval_every),
            ]
    if args.s3_endpoint:
        arguments += ["--s3-endpoint", args.s3_endpoint]
    return arguments


def spawn_arguments(run: Run, spawn_options: list[str], worker_args: list[str]) -> list[str]:
    return [
        "-w",
        str(run.workers),
        "--tag",
        f"bench-{run.model}-{run.data}",
        "--max-restarts",
        "0",
        *spawn_options,
        str(WORKER),
        "--",
        *worker_args,
    ]


def run_once(run: Run, argv: list[str], spawn_runs: Path, log: Path) -> list[dict]:
    """One train.spawn run, its output kept in `log`; the workers' results from their logs."""
    from nnsql.train.spawn import __main__ as spawn

    spawn_runs.mkdir(parents=True, exist_ok=True)
    before = set(spawn_runs.iterdir())
    spawn.RUNS = spawn_runs
    with log.open("w") as out, contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = spawn.main(argv)
    created = sorted(path for path in set(spawn_runs.iterdir()) - before if not path.is_symlink())
    if code != 0 or not created:
        raise BenchError(f"{run.name}: train.spawn exited with {code}; its output: {log}")
    attempts = sorted(created[-1].glob("attempt-*"))
    logs = sorted(attempts[-1].glob("worker-*.log")) if attempts else []
    results = [r for path in logs for r in report.results_from_log(path.read_text(), RESULT_MARK)]
    if len(results) != run.workers:
        raise BenchError(
            f"{run.name}: {len(results)} of {run.workers} workers reported; logs: {attempts[-1]}"
        )
    return sorted(results, key=lambda result: result["worker"])


def host() -> dict:
    def version(package: str) -> str | None:
        with contextlib.suppress(metadata.PackageNotFoundError):
            return metadata.version(package)
        return None

    return {
        "hostname": platform.node(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "tensorflow": version("tensorflow") or version("tensorflow-cpu"),
    }


def sweep(
    runs: list[Run], args: argparse.Namespace, spawn_options: list[str], out: Path
) -> tuple[list, list]:
    from tqdm import tqdm

    generated = generated_sources(runs, args, out.parent / "data")
    rows, failures = [], []
    progress = tqdm(runs, desc="bench", unit="run", file=sys.stderr)
    for run in progress:
        progress.set_postfix_str(run.name)
        argv = spawn_arguments(run, spawn_options, worker_arguments(run, args, generated))
        try:
            results = run_once(run, argv, out.parent / "spawn", out / f"{run.name}.log")
        except BenchError as error:
            progress.write(f"error: {error}", file=sys.stderr)
            failures.append({"run": run.name, "error": str(error)})
            continue
        rows.append(report.measured_row(vars(args) | vars(run), results))
    return report.with_scaling(rows), failures


def dry_run(runs: list[Run], args: argparse.Namespace, spawn_options: list[str]) -> int:
    from nnsql.train.spawn import __main__ as spawn

    generated = generated_sources(runs, args, Path("."))
    for run in runs:
        print(f"---\n# bench.infra run {run.name}")
        code = spawn.main(spawn_arguments(run, spawn_options, worker_arguments(run, args, generated)))
        if code != 0:
            return code
    return 0


def write_outputs(document: dict, out: Path) -> list[Path]:
    paths = [out / "results.json", out / "results.csv", out / "throughput.png"]
    paths[0].write_text(json.dumps(document, indent=2) + "\n")
    report.write_csv(document["rows"], paths[1])
    if document["rows"]:
        report.plot(document["rows"], paths[2], f"{document['label']}: {document['run_id']}")
    return [path for path in paths if path.exists()]


def benchmark(args: argparse.Namespace, spawn_options: list[str]) -> int:
    settle_defaults(args, spawn_options)
    compared = [report.load_document(path) for path in args.compare]
    runs = plan(args)
    if args.dry_run:
        return dry_run(runs, args, spawn_options)
    run_id = time.strftime("bench-%Y%m%d-%H%M%S")
    out = args.runs / run_id / "bench"
    out.mkdir(parents=True)
    started = time.time()
    rows, failures = sweep(runs, args, spawn_options, out)
    settings = {
        k: getattr(args, k) for k in ("steps", "warmup", "batch_size", "image_size", "gpus", "backend")
    }
    document = {
        "run_id": run_id,
        "label": args.label or f"{platform.node()} ({args.backend})",
        "created": started,
        "seconds": round(time.time() - started, 1),
        "host": host(),
        "settings": settings,
        "rows": rows,
        "failures": failures,
    }
    paths = write_outputs(document, out)
    print(report.table(rows))
    if compared:
        print()
        print(report.comparison([*compared, document]))
    print("\nwrote " + ", ".join(str(path) for path in paths))
    return 1 if failures else 0


def compare(paths: list[str]) -> int:
    if len(paths) < 2:
        print("usage: nnsql bench infra compare FIRST.json OTHER.json [...]", file=sys.stderr)
        return 2
    print(report.comparison([report.load_document(Path(path)) for path in paths]))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["compare"]:
            return compare(argv[1:])
        args, spawn_options = parser().parse_known_args(argv)
        return benchmark(args, spawn_options)
    except (BenchError, ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
