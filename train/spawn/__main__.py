"""`nnsql spawn`: run a tf.distribute script with N workers, locally or on Kubernetes.

nnsql spawn -w 2 job.py                          # 2 local worker processes, legacy tf.keras
nnsql spawn -w 2 train/mnist.py -- --dataset digits
nnsql spawn --backend kubernetes -w 4 --pvc shared job.py   # stock TensorFlow image
nnsql spawn --backend kubernetes -w 8 --dry-run job.py      # print the manifests
nnsql spawn status RUN | logs RUN [--worker I] | delete RUN | tensorboard RUN
nnsql spawn rbac --namespace NS                  # the Role a cluster admin grants

Save the model on every worker, as TensorFlow's multi-worker guide does (the chief alone would wait for
the others for ever): `model.save(output_path("model.keras"))` with `from nnsql.train.spawn import
output_path` writes the chief's copy under $NNSQL_OUTPUT_DIR and the others' to temporary paths. Everything
the chief writes under $NNSQL_OUTPUT_DIR, and, for local runs, any .keras/.h5 file or SavedModel directory
whose path the chief prints, is copied into runs/<run-id>/model/. From a notebook: `from nnsql.train.spawn
import run`.

next step: the run's last line prints it, e.g.
nnsql export duckdb --model runs/<run-id>/model/model.keras --db scores.duckdb --name mymodel
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from nnsql import quiet
from nnsql.train.spawn import cli, commands, latest, manifests
from nnsql.train.spawn.backend import Backend, RunSpec, read_record, write_record
from nnsql.train.spawn.control import JobFailed, Settings, Stopped, run_job, stop_on_signals
from nnsql.train.spawn.preflight import Report

if TYPE_CHECKING:
    from nnsql.train.spawn.kube import KubernetesBackend

RUNS = Path("runs")
DESCRIPTION = (
    "Run a tf.distribute script with N workers (TF_CONFIG, WORKER_NUMBER and TOT_WORKERS set for each), "
    "watch it, restart the whole group when a worker fails (training resumes from the shared "
    "BackupAndRestore directory, NNSQL_BACKUP_DIR) and collect the chief's model into runs/<run-id>/. "
    "Other commands: status RUN, logs RUN, delete RUN, tensorboard RUN, rbac --namespace NS."
)


class Refused(Exception):
    """The run cannot start; the message is the one line to print, `code` the exit status."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def parse(argv: list[str]) -> argparse.Namespace:
    return cli.run_parser(DESCRIPTION, __doc__ or "").parse_args(argv)


def show(report: Report) -> None:
    for kind, lines in (("note", report.notes), ("warning", report.warnings), ("error", report.errors)):
        for line in lines:
            print(f"{kind}: {line}", file=sys.stderr)


def local_backend(
    run_dir: Path, options: manifests.ClusterOptions, keep: bool = False, network: str = "private"
) -> tuple[Backend, str, dict]:
    from nnsql.train.spawn.local import LocalBackend

    shared = str(run_dir / "shared")
    env = {
        "NNSQL_OUTPUT_DIR": f"{shared}/output",
        "NNSQL_BACKUP_DIR": f"{shared}/backup",
        **options.runtime_env,
        **options.env_file_data,
    }
    return LocalBackend(command=options.command, lifeline=not keep, network=network), shared, env


def kubernetes_backend(options: manifests.ClusterOptions) -> tuple[Backend, str, dict]:
    from nnsql.train.spawn.kube import ClusterTooOld, KubernetesBackend

    try:
        backend = KubernetesBackend(options)
        backend.check_server()
    except ClusterTooOld as error:
        raise Refused(f"error: {error}") from None
    except ModuleNotFoundError:  # the k8s extra is missing: `nnsql` names the command that installs it
        raise
    except Exception as error:  # no kubeconfig, no in-cluster account: the client raises its own types
        raise Refused(f"error: cannot reach Kubernetes: {one_line(error)}") from None
    return backend, manifests.SHARED_DIR, {}


def one_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def checked(args: argparse.Namespace) -> tuple[manifests.ClusterOptions, list[dict], str]:
    """Options, manifests and run id of a run that may start; Refused (after the notes) otherwise."""
    problem = cli.argument_problem(args)
    if problem:
        raise Refused(f"error: {problem}")
    script = cli.script_report(args)
    show(script)
    if script.errors:
        raise Refused("")
    options = cli.cluster_options(args)
    run_id = cli.new_run_id(args.script, args.tag)
    script_args = tuple(a for a in args.script_args if a != "--")
    documents = manifests.all_manifests(run_id, args.script, args.workers, script_args, options)
    cluster = cli.cluster_report(args, options, documents[-1], run_id)
    show(cluster)
    if cluster.errors:
        raise Refused("")
    return options, documents, run_id


def check_network(network: str) -> None:
    """Refuse, before the run's folder and its workers exist, a private network this machine cannot make
    (never a silent fall-back to open ports); warn once about the open ports of `--network host`."""
    from nnsql.train.spawn import local, netns

    if network == "host":
        print(f"warning: {local.HOST_NETWORK_WARNING}", file=sys.stderr)
        return
    problem = netns.problem()
    if problem:
        raise Refused(f"error: {local.private_network_refusal(problem)}")


def prepare(args: argparse.Namespace, runs: Path) -> tuple[Backend, RunSpec, Settings]:
    """Everything a run needs, its folder created: the backend, what to run, how to watch it."""
    options, _, run_id = checked(args)
    if args.backend == "local":
        check_network(args.network)
        print(cli.limits.local_memory_note(cli.task_count(args)), file=sys.stderr)
    run_dir = (runs / run_id).resolve()
    run_dir.mkdir(parents=True)  # new, so this user's: nobody else has planted anything in it
    run_dir.chmod(run_dir.stat().st_mode & ~0o022)  # nor can, whatever the umask (a shared group's 002)
    latest.point_to(runs, run_dir)
    write_record(
        run_dir,
        keras=args.keras,
        tag=cli.tag_stem(args.tag) if args.tag else None,
        **({"namespace": args.namespace} if args.backend != "local" else {}),
    )
    if args.backend == "local":
        backend, shared, env = local_backend(run_dir, options, keep=args.keep, network=args.network)
    else:
        try:
            backend, shared, env = kubernetes_backend(options)
        except Refused as refused:
            write_record(run_dir, state="failed", error=str(refused))
            raise
    script_args = tuple(a for a in args.script_args if a != "--")
    spec = RunSpec(run_id, args.script.resolve(), script_args, args.workers, run_dir, shared, env, args.ps)
    return (
        backend,
        spec,
        Settings(start_timeout=args.start_timeout, max_restarts=args.max_restarts, keep=args.keep),
    )


def launch(args: argparse.Namespace) -> int:
    if args.dry_run:
        _, documents, _ = checked(args)
        print(yaml.safe_dump_all(manifests.redacted(documents), sort_keys=False), end="")
        return 0
    backend, spec, settings = prepare(args, RUNS)
    try:
        with stop_on_signals():
            run_job(backend, spec, settings)
    except JobFailed as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except (Stopped, KeyboardInterrupt) as stop:
        reason = str(stop) or "Ctrl-C"
        run = spec.run_id
        print(f"stopped by {reason}: every worker was stopped; runs/{run}/run.json says so", file=sys.stderr)
        return 130
    return 0


def delete_tagged(args: argparse.Namespace) -> int:
    """TF-Spawner's `-d [-t TAG]`: every run of that tag (of any tag without -t) recorded in runs/ or
    labelled in the namespace, whichever directory this runs from: folders and cluster resources."""
    stem = cli.tag_stem(args.tag) if args.tag else None
    recorded = commands.recorded_runs(RUNS)  # folders of runs/ itself: a planted link is no run
    local = [d for d in recorded if stem is None or read_record(d).get("tag") == stem]
    cluster = cluster_backend(args.namespace)
    remote = sorted(labelled_runs(cluster, stem) - {d.name for d in local}) if cluster else []
    what = f"tagged {args.tag!r}" if stem else "of nnsql spawn"
    if not local and not remote:
        print(f"no run {what} in {RUNS}/" + (f" or namespace {args.namespace}" if cluster else ""))
        return 0
    names = ", ".join([d.name for d in local] + remote)
    if sys.stdin.isatty() and input(f"delete {names}? y/[n] ").strip().lower() != "y":
        return 1
    for run_dir in local:
        commands.delete(run_dir, read_record(run_dir))
    for run in remote:
        assert cluster is not None
        cluster.delete_run(run)
        print(f"deleted {run} (namespace {args.namespace})")
    return 0


def labelled_runs(cluster: KubernetesBackend, stem: str | None) -> set[str]:
    try:
        return cluster.labelled_runs(stem)
    except Exception as error:  # unreachable API server, no rights: the client raises its own types
        print(f"note: the cluster was not searched ({one_line(error)}); runs/ only", file=sys.stderr)
        return set()


def cluster_backend(namespace: str) -> KubernetesBackend | None:
    """The cluster of the kubeconfig (or the pod's account); None, with a note, when there is none."""
    try:
        from nnsql.train.spawn.kube import KubernetesBackend

        return KubernetesBackend(manifests.ClusterOptions(namespace=namespace))
    except Exception as error:  # no kubernetes package, no kubeconfig, no in-cluster account
        print(f"note: the cluster was not searched ({one_line(error)}); runs/ only", file=sys.stderr)
        return None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "tensorboard":
        from nnsql.train.spawn import tensorboard

        return tensorboard.main(argv[1:], RUNS)
    if argv and argv[0] == "rbac":
        from nnsql.train.spawn import rbac

        return rbac.main(argv[1:])
    if argv and argv[0] in commands.NAMES:
        return commands.run_command(argv, RUNS)
    try:
        args = parse(argv)
        return delete_tagged(args) if args.delete else launch(args)
    except Refused as refused:
        if str(refused):
            print(refused, file=sys.stderr)
        return refused.code
    except (OSError, ValueError) as error:  # unreadable --env-file, --command, --pod-file, --overlay
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
