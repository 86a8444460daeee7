"""`python -m train.spawn`: run a MultiWorkerMirroredStrategy script with N workers, locally or on Kubernetes.

python -m train.spawn -w 2 train/mnist.py -- --dataset digits
python -m train.spawn --backend kubernetes -w 4 --image my/tf:2.21 --pvc shared train/mnist.py
python -m train.spawn --backend kubernetes -w 8 --dry-run train/mnist.py      # print the manifests
python -m train.spawn status RUN | logs RUN [--worker I] | delete RUN
"""

from __future__ import annotations

import argparse
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import yaml

from train.spawn import manifests, preflight
from train.spawn.backend import Backend, RunSpec, read_record
from train.spawn.control import JobFailed, Settings, run_job

RUNS = Path("runs")
SUBCOMMANDS = ("status", "logs", "delete")


def new_run_id(script: Path) -> str:
    stem = "".join(c if c.isalnum() else "-" for c in script.stem.lower()).strip("-")[:20] or "run"
    return f"{stem}-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:5]}"


def run_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m train.spawn",
        description="Run a tf.distribute MultiWorkerMirroredStrategy script with N workers (TF_CONFIG, "
        "WORKER_NUMBER and TOT_WORKERS set for each), watch it, restart the whole group when a worker fails "
        "(training resumes from the shared BackupAndRestore directory, NNSQL_BACKUP_DIR) and collect the "
        "chief's model (written to NNSQL_OUTPUT_DIR) into runs/<run-id>/. "
        "Other commands: status RUN, logs RUN, delete RUN.",
        epilog=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("script", type=Path, help="the training script")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, help="-- then the script's own arguments")
    parser.add_argument("-w", "--workers", type=int, default=2)
    parser.add_argument("--backend", choices=["local", "kubernetes"], default="local")
    parser.add_argument(
        "--max-restarts", type=int, default=2, help="group restarts after failures (default 2)"
    )
    parser.add_argument(
        "--start-timeout", type=float, default=300, help="seconds to wait for all workers to run"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the pods/processes and resources at the end"
    )
    parser.add_argument("--env-file", type=Path, help="KEY=VALUE lines, given to workers via a Secret")
    cluster = parser.add_argument_group("kubernetes")
    cluster.add_argument("--namespace", default="default")
    cluster.add_argument("--image", default=manifests.ClusterOptions.image)
    cluster.add_argument("--cpu", default="2")
    cluster.add_argument("--memory", default="4Gi")
    cluster.add_argument("--gpus", type=int, default=0, help="nvidia.com/gpu per worker")
    cluster.add_argument("--node-selector", action="append", default=[], metavar="KEY=VALUE")
    cluster.add_argument("--pvc", help="ReadWriteMany claim shared by the workers (backup and outputs)")
    cluster.add_argument("--overlay", type=Path, help="YAML deep-merged into the Job manifest")
    cluster.add_argument(
        "--dry-run", action="store_true", help="print the manifests as YAML; needs no cluster"
    )
    return parser


def cluster_options(args: argparse.Namespace) -> manifests.ClusterOptions:
    selector = dict(item.split("=", 1) for item in args.node_selector)
    return manifests.ClusterOptions(
        namespace=args.namespace,
        image=args.image,
        cpu=args.cpu,
        memory=args.memory,
        gpus=args.gpus,
        node_selector=selector,
        pvc=args.pvc,
        env_file_data=manifests.read_env_file(args.env_file) if args.env_file else {},
        overlay=yaml.safe_load(args.overlay.read_text()) if args.overlay else {},
    )


def check_script(script: Path) -> bool:
    report = preflight.check(script)
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for error in report.errors:
        print(f"error: {error}", file=sys.stderr)
    return not report.errors


def launch(args: argparse.Namespace) -> int:
    if args.workers < 1:
        print("error: --workers must be at least 1", file=sys.stderr)
        return 2
    if not check_script(args.script):
        return 2
    script_args = tuple(a for a in args.script_args if a != "--")
    run_id = new_run_id(args.script)
    options = cluster_options(args)
    if args.dry_run:
        documents = manifests.all_manifests(run_id, args.script, args.workers, script_args, options)
        print(yaml.safe_dump_all(documents, sort_keys=False), end="")
        return 0
    run_dir = (RUNS / run_id).resolve()
    run_dir.mkdir(parents=True)
    if args.backend == "local":
        from train.spawn.local import LocalBackend

        backend: Backend = LocalBackend()
        shared = str(run_dir / "shared")
        env = {
            "NNSQL_OUTPUT_DIR": f"{shared}/output",
            "NNSQL_BACKUP_DIR": f"{shared}/backup",
            **options.env_file_data,
        }
    else:
        from train.spawn.kube import KubernetesBackend

        backend = KubernetesBackend(options)
        shared, env = manifests.SHARED_DIR, {}
    spec = RunSpec(run_id, args.script.resolve(), script_args, args.workers, run_dir, shared, env)
    settings = Settings(start_timeout=args.start_timeout, max_restarts=args.max_restarts, keep=args.keep)
    try:
        run_job(backend, spec, settings)
    except JobFailed as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


def inspect(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m train.spawn {argv[0]}")
    parser.add_argument("run")
    parser.add_argument("--worker", type=int, default=0)
    args = parser.parse_args(argv[1:])
    run_dir = RUNS / args.run
    try:
        record = read_record(run_dir)
    except FileNotFoundError:
        print(f"error: no run {args.run!r} in {RUNS}/", file=sys.stderr)
        return 2
    if argv[0] == "status":
        print(yaml.safe_dump(record, sort_keys=False), end="")
    elif argv[0] == "logs":
        attempt = max(0, int(record.get("attempt", 1)) - 1)
        log = run_dir / f"attempt-{attempt}" / f"worker-{args.worker}.log"
        print(log.read_text() if log.exists() else f"(no log at {log})", end="")
    else:
        if record.get("backend") == "kubernetes":
            from train.spawn.kube import KubernetesBackend

            KubernetesBackend(
                manifests.ClusterOptions(namespace=record.get("namespace", "default"))
            ).delete_run(args.run)
        import shutil

        shutil.rmtree(run_dir)
        print(f"deleted {args.run}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        return inspect(argv)
    return launch(run_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
