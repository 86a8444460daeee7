"""`python -m train.spawn`: run a tf.distribute script with N workers, locally or on Kubernetes.

python -m train.spawn -w 2 job.py                          # 2 local worker processes, legacy tf.keras
python -m train.spawn -w 2 train/mnist.py -- --dataset digits
python -m train.spawn --backend kubernetes -w 4 --image my/tf:2.21 --pvc shared job.py
python -m train.spawn --backend kubernetes -w 8 --dry-run job.py      # print the manifests
python -m train.spawn status RUN | logs RUN [--worker I] | delete RUN | tensorboard RUN

Where the model comes back: everything the chief (worker 0) writes under $NNSQL_OUTPUT_DIR, and, for
local runs, any .keras/.h5 file or SavedModel directory whose path the chief prints, is copied into
runs/<run-id>/model/.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import yaml

from train.spawn import commands, limits, manifests, preflight, runtime
from train.spawn.backend import Backend, RunSpec, write_record
from train.spawn.control import JobFailed, Settings, Stopped, run_job, stop_on_signals

RUNS = Path("runs")
SUBCOMMANDS = (*commands.NAMES, "tensorboard")


def new_run_id(script: Path, tag: str | None) -> str:
    stem = "".join(c if c.isalnum() else "-" for c in (tag or script.stem).lower()).strip("-")[:20]
    return f"{stem or 'run'}-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:5]}"


def run_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m train.spawn",
        description="Run a tf.distribute MultiWorkerMirroredStrategy script with N workers (TF_CONFIG, "
        "WORKER_NUMBER and TOT_WORKERS set for each), watch it, restart the whole group when a worker fails "
        "(training resumes from the shared BackupAndRestore directory, NNSQL_BACKUP_DIR) and collect the "
        "chief's model into runs/<run-id>/. Other commands: status RUN, logs RUN, delete RUN, "
        "tensorboard RUN.",
        epilog=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("script", type=Path, help="the training script, unchanged")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, help="-- then the script's own arguments")
    parser.add_argument("-w", "--workers", type=int, default=2)
    parser.add_argument("--backend", choices=["local", "kubernetes"], default="local")
    parser.add_argument("--keras", choices=runtime.CHOICES, default=runtime.DEFAULT, help=runtime.HELP)
    parser.add_argument(
        "--strategy",
        choices=["multi-worker", "parameter-server"],
        default="multi-worker",
        help="multi-worker: N workers in TF_CONFIG (MultiWorkerMirroredStrategy); parameter-server: a chief, "
        "N workers and --ps parameter servers (ParameterServerStrategy; the script starts a "
        "tf.distribute.Server in worker and ps tasks)",
    )
    parser.add_argument(
        "--ps", type=int, help="parameter servers with --strategy parameter-server (default 1)"
    )
    parser.add_argument("--max-restarts", type=int, default=2, help="group restarts after failures")
    parser.add_argument("--start-timeout", type=float, default=300, help="seconds to wait for all workers")
    parser.add_argument(
        "--keep", action="store_true", help="keep the pods/processes and resources at the end"
    )
    parser.add_argument("--force", action="store_true", help="allow more workers than the backend's bound")
    parser.add_argument("--env-file", type=Path, help="KEY=VALUE lines, given to workers via a Secret")
    parser.add_argument("--command", type=Path, help="shell lines each worker runs before the script")
    parser.add_argument("--tag", help="name prefix of the run id and its resources (default: the script's)")
    cluster = parser.add_argument_group("kubernetes")
    cluster.add_argument("--namespace", default="default")
    cluster.add_argument("--image", default=manifests.ClusterOptions.image)
    cluster.add_argument("--cpu", default="2")
    cluster.add_argument("--memory", default="4Gi")
    cluster.add_argument("--gpus", type=int, default=0, help="nvidia.com/gpu per worker")
    cluster.add_argument("--node-selector", action="append", default=[], metavar="KEY=VALUE")
    cluster.add_argument("--pvc", help="ReadWriteMany claim shared by the workers (backup and outputs)")
    cluster.add_argument("--port", type=int, default=manifests.PORT, help="the workers' gRPC port")
    cluster.add_argument("--pod-file", type=Path, help="a Pod YAML merged under the generated pod spec")
    cluster.add_argument("--overlay", type=Path, help="YAML deep-merged into the Job manifest")
    cluster.add_argument("--dry-run", action="store_true", help="print the manifests (secrets redacted)")
    return parser


def read_yaml(path: Path | None) -> dict:
    return (yaml.safe_load(path.read_text()) or {}) if path else {}


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
        overlay=read_yaml(args.overlay),
        pod_template=read_yaml(args.pod_file),
        runtime_env=runtime.environment(args.keras),
        command=args.command.read_text() if args.command else "",
        port=args.port,
        ps=args.ps,
    )


def check_script(args: argparse.Namespace) -> bool:
    report = preflight.check(args.script, args.keras, parameter_server=bool(args.ps))
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for error in report.errors:
        print(f"error: {error}", file=sys.stderr)
    return not report.errors


def local_backend(run_dir: Path, options: manifests.ClusterOptions) -> tuple[Backend, str, dict]:
    from train.spawn.local import LocalBackend

    shared = str(run_dir / "shared")
    env = {
        "NNSQL_OUTPUT_DIR": f"{shared}/output",
        "NNSQL_BACKUP_DIR": f"{shared}/backup",
        **options.runtime_env,
        **options.env_file_data,
    }
    return LocalBackend(command=options.command), shared, env


def kubernetes_backend(options: manifests.ClusterOptions) -> tuple[Backend, str, dict]:
    from train.spawn.kube import KubernetesBackend

    return KubernetesBackend(options), manifests.SHARED_DIR, {}


def one_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def strategy_problem(args: argparse.Namespace) -> str | None:
    """Settle --ps from --strategy (0 for multi-worker); the one-line reason when they disagree."""
    if args.strategy == "multi-worker":
        if args.ps:
            return "--ps needs --strategy parameter-server"
        args.ps = 0
        return None
    args.ps = 1 if args.ps is None else args.ps
    return None if args.ps >= 1 else "--strategy parameter-server needs --ps 1 or more"


def launch(args: argparse.Namespace) -> int:
    tasks = args.workers + (1 + (args.ps or 0) if args.strategy == "parameter-server" else 0)
    problem = strategy_problem(args) or limits.check_workers(tasks, args.backend, force=args.force)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if not check_script(args):
        return 2
    script_args = tuple(a for a in args.script_args if a != "--")
    options = cluster_options(args)
    run_id = new_run_id(args.script, args.tag)
    if args.dry_run:
        documents = manifests.all_manifests(run_id, args.script, args.workers, script_args, options)
        print(yaml.safe_dump_all(manifests.redacted(documents), sort_keys=False), end="")
        return 0
    if args.backend == "local":
        print(limits.local_memory_note(tasks), file=sys.stderr)
    run_dir = (RUNS / run_id).resolve()
    run_dir.mkdir(parents=True)
    write_record(
        run_dir, keras=args.keras, **({"namespace": args.namespace} if args.backend != "local" else {})
    )
    if args.backend == "local":
        backend, shared, env = local_backend(run_dir, options)
    else:
        try:
            backend, shared, env = kubernetes_backend(options)
        except Exception as error:  # no kubeconfig, no in-cluster account: the client raises its own types
            write_record(run_dir, state="failed", error=str(error))
            print(f"error: cannot reach Kubernetes: {one_line(error)}", file=sys.stderr)
            return 2
    spec = RunSpec(run_id, args.script.resolve(), script_args, args.workers, run_dir, shared, env, args.ps)
    settings = Settings(start_timeout=args.start_timeout, max_restarts=args.max_restarts, keep=args.keep)
    try:
        with stop_on_signals():
            run_job(backend, spec, settings)
    except JobFailed as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except (Stopped, KeyboardInterrupt) as stop:
        reason = str(stop) or "Ctrl-C"
        print(
            f"stopped by {reason}: every worker was stopped; runs/{run_id}/run.json says so", file=sys.stderr
        )
        return 130
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "tensorboard":
        from train.spawn import tensorboard

        return tensorboard.main(argv[1:], RUNS)
    if argv and argv[0] in commands.NAMES:
        return commands.run_command(argv, RUNS)
    try:
        return launch(run_parser().parse_args(argv))
    except (OSError, ValueError) as error:  # unreadable --env-file, --command, --pod-file, --overlay
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
