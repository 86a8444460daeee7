"""The options of `nnsql spawn` (and of `train.spawn.run`, which parses the same ones), TF-Spawner's
short flags included, and what they become: the cluster options, the checks before anything starts."""

from __future__ import annotations

import argparse
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import yaml

from . import envfile, limits, manifests, podsecurity, podtemplate, preflight, runtime

TF_SPAWNER_SCRIPT = f"{manifests.TF_SPAWNER_DIR}/{manifests.SCRIPT_NAME}"


def new_run_id(script: Path, tag: str | None) -> str:
    return f"{tag_stem(tag or script.stem)}-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:5]}"


def tag_stem(tag: str) -> str:
    """The part of a run id that a tag becomes (lower case, letters, digits and dashes, 20 at most)."""
    return "".join(c if c.isalnum() else "-" for c in tag.lower()).strip("-")[:20] or "run"


# Kubernetes' quantities, the non-negative forms people write
QUANTITY = re.compile(r"[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?")


def quantity(text: str) -> str:
    """A CPU or memory amount as Kubernetes writes it (2, 500m, 4Gi, 1.5G); refused by argparse otherwise,
    rather than by the API server once the run's first objects exist."""
    if not QUANTITY.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Kubernetes quantity (e.g. 2, 500m, 4Gi)")
    return text


def bounded(low: int, high: int | None = None) -> Callable[[str], int]:
    """An int option within [low, high]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value}: must be at least {low}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"{value}: must be at most {high}")
        return value

    return parse


def run_parser(description: str, epilog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nnsql spawn",
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("script", type=Path, nargs="?", help="the training script, unchanged")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, help="-- then the script's own arguments")
    parser.add_argument("-w", "--workers", type=int, default=2)
    parser.add_argument("--backend", choices=["local", "kubernetes"], default="local")
    parser.add_argument("--keras", choices=runtime.CHOICES, default=runtime.DEFAULT, help=runtime.HELP)
    parser.add_argument(
        "--strategy",
        choices=["multi-worker", "parameter-server"],
        help="multi-worker: N workers in TF_CONFIG (MultiWorkerMirroredStrategy); parameter-server: a chief, "
        "N workers and --ps parameter servers (ParameterServerStrategy; the script starts a "
        "tf.distribute.Server in worker and ps tasks); default: parameter-server for a script that "
        "creates a ParameterServerStrategy, else multi-worker",
    )
    parser.add_argument(
        "--ps", type=int, help="parameter servers with --strategy parameter-server (default 1)"
    )
    parser.add_argument("--max-restarts", type=bounded(0), default=2, help="group restarts after failures")
    parser.add_argument("--start-timeout", type=float, default=300, help="seconds to wait for all workers")
    parser.add_argument(
        "--keep", action="store_true", help="keep the pods/processes and resources at the end"
    )
    parser.add_argument(
        "--network",
        choices=["private", "host"],
        default="private",
        help="local workers: private (default) runs them in a network namespace of their own, where only "
        "the run's own processes reach their TensorFlow ports, and nothing outside; host runs them on "
        "this machine's network, their ports open to every host that can reach it (unauthenticated)",
    )
    parser.add_argument("--force", action="store_true", help="allow more workers than the backend's bound")
    parser.add_argument("--no-preflight", action="store_true", help="skip the script's pre-flight check")
    parser.add_argument(
        "-e", "--env-file", type=Path, help="NAME=value lines (dotenv rules), given to workers via a Secret"
    )
    parser.add_argument(
        "--command",
        type=Path,
        help="shell lines each worker runs before the script, with the workers' own python and pip",
    )
    parser.add_argument(
        "-c",
        "--entrypoint",
        type=Path,
        help=f"TF-Spawner's -c: shell lines run instead of the script (pods only; the script is at "
        f"{TF_SPAWNER_SCRIPT} and $NNSQL_SCRIPT_DIR/{manifests.SCRIPT_NAME})",
    )
    parser.add_argument(
        "-t", "--tag", help="name prefix of the run id and its resources (default: the script's)"
    )
    parser.add_argument(
        "-r", "--randomize-tag", action="store_true", help="TF-Spawner's -r: accepted; every run id is unique"
    )
    parser.add_argument(
        "-d",
        "--delete",
        action="store_true",
        help="TF-Spawner's -d: delete the runs tagged -t TAG (every spawn run without -t), found in runs/ "
        "and by their labels in the namespace: folders and cluster resources",
    )
    cluster = parser.add_argument_group("kubernetes")
    cluster.add_argument("-n", "--namespace", default="default")
    cluster.add_argument(
        "-i",
        "--image",
        help=f"default {manifests.IMAGE}, or {manifests.GPU_IMAGE} when the workers ask for GPUs",
    )
    cluster.add_argument(
        "--cpu", type=quantity, help=f"per worker (default: the --pod-file's request, else {manifests.CPU})"
    )
    cluster.add_argument(
        "--memory",
        type=quantity,
        help=f"per worker, request and limit (default: the --pod-file's, else {manifests.MEMORY})",
    )
    cluster.add_argument("--gpus", type=bounded(0), default=0, help="nvidia.com/gpu per worker")
    cluster.add_argument("--node-selector", action="append", default=[], metavar="KEY=VALUE")
    cluster.add_argument("--pvc", help="ReadWriteMany claim shared by the workers (backup and outputs)")
    cluster.add_argument(
        "-p", "--port", type=bounded(1, 65535), default=manifests.PORT, help="the workers' gRPC port"
    )
    cluster.add_argument("--pod-file", type=Path, help="a Pod YAML merged under the generated pod spec")
    cluster.add_argument("--overlay", type=Path, help="YAML deep-merged into the Job manifest")
    cluster.add_argument(
        "--deadline", type=bounded(1), help="seconds an attempt may run (activeDeadlineSeconds)"
    )
    cluster.add_argument(
        "--run-as-user",
        type=int,
        default=manifests.RUN_AS_USER,
        help="the user the workers run as (non-root, as the restricted Pod Security level needs)",
    )
    cluster.add_argument(
        "--run-as-root",
        action="store_true",
        help="for an image that only runs as root: then the namespace must allow the baseline level",
    )
    cluster.add_argument(
        "--allow-privileged", action="store_true", help="keep `privileged: true` from --pod-file or --overlay"
    )
    cluster.add_argument("--dry-run", action="store_true", help="print the manifests (secrets redacted)")
    return parser


def read_yaml(path: Path | None) -> dict:
    return (yaml.safe_load(path.read_text()) or {}) if path else {}


def read_command(path: Path | None) -> str:
    """The --command file; a TF-Spawner entrypoint (one that runs the script itself) is refused here."""
    text = path.read_text() if path else ""
    if manifests.SCRIPT_NAME in text:
        raise ValueError(
            f"{path} runs the training script itself, as a TF-Spawner entrypoint does: pass it with "
            "-c/--entrypoint (--command lines run before the script)"
        )
    return text


def cluster_options(args: argparse.Namespace) -> manifests.ClusterOptions:
    selector = dict(item.split("=", 1) for item in args.node_selector)
    pod_template = read_yaml(args.pod_file)
    gpus = args.gpus or podtemplate.requested_gpus(pod_template)
    asked = podtemplate.requested(pod_template)
    return manifests.ClusterOptions(
        namespace=args.namespace,
        image=args.image or manifests.default_image(gpus),
        cpu=args.cpu or asked.get("cpu", manifests.CPU),
        memory=args.memory or asked.get("memory", manifests.MEMORY),
        gpus=args.gpus,
        node_selector=selector,
        pvc=args.pvc,
        env_file_data=envfile.read(args.env_file) if args.env_file else {},
        overlay=read_yaml(args.overlay),
        pod_template=pod_template,
        runtime_env=runtime.environment(args.keras),
        command=read_command(args.command),
        entrypoint=args.entrypoint.read_text() if args.entrypoint else "",
        port=args.port,
        ps=args.ps,
        deadline=args.deadline,
        run_as_user=None if args.run_as_root else args.run_as_user,
        allow_privileged=args.allow_privileged,
    )


def strategy_problem(args: argparse.Namespace) -> str | None:
    """Settle --strategy (from the script when not given) and --ps (0 for multi-worker); the one-line
    reason when they disagree."""
    if args.strategy is None:
        args.strategy = "parameter-server" if detected_parameter_server(args) else "multi-worker"
    if args.strategy == "multi-worker":
        if args.ps:
            return "--ps needs --strategy parameter-server"
        args.ps = 0
        return None
    args.ps = 1 if args.ps is None else args.ps
    return None if args.ps >= 1 else "--strategy parameter-server needs --ps 1 or more"


def detected_parameter_server(args: argparse.Namespace) -> bool:
    """The script creates a ParameterServerStrategy (the pre-flight's reading; never with --no-preflight)."""
    line = None if args.no_preflight else preflight.parameter_server_line(args.script)
    args.parameter_server_line = line
    return line is not None


def task_count(args: argparse.Namespace) -> int:
    return args.workers + (1 + (args.ps or 0) if args.strategy == "parameter-server" else 0)


def argument_problem(args: argparse.Namespace) -> str | None:
    """The first reason, in one line, why these options cannot start a run."""
    if args.script is None:
        return "the training script is missing (nnsql spawn [options] SCRIPT [-- ARGS])"
    if args.backend == "local" and args.entrypoint:
        return "--entrypoint runs in pods only; on the local backend use --command for set-up lines"
    if args.backend != "local" and args.network != "private":
        return "--network applies to local workers (a Kubernetes run's NetworkPolicy admits only its pods)"
    return strategy_problem(args) or limits.check_workers(task_count(args), args.backend, force=args.force)


def script_report(args: argparse.Namespace) -> preflight.Report:
    if args.no_preflight:
        return preflight.Report()
    report = preflight.check(args.script, args.keras, parameter_server=bool(args.ps))
    line = getattr(args, "parameter_server_line", None)
    if line is not None:
        roles = f"the chief (task 0), {args.workers} worker(s) and {args.ps} ps in TF_CONFIG"
        strategy = "creates ParameterServerStrategy: runs as --strategy parameter-server"
        report.notes.append(f"{args.script}:{line}: {strategy}, {roles}")
    return report


def cluster_report(
    args: argparse.Namespace, options: manifests.ClusterOptions, job: dict, run_id: str
) -> preflight.Report:
    """What the manifests give away beyond the restricted profile, and what a run without --pvc loses."""
    report = preflight.Report()
    if args.backend != "kubernetes":
        if args.pod_file or args.overlay:
            report.warnings.append("--pod-file and --overlay apply to the kubernetes backend only")
        return report
    report.notes.extend(resource_overrides(args, options.pod_template))
    pod = job["spec"]["template"]["spec"]
    if podsecurity.privileged(pod) and not options.allow_privileged:
        report.errors.append(
            "--pod-file/--overlay asks for a privileged container: refused without --allow-privileged"
        )
    changed = unselected_labels(job, run_id)
    if changed:
        report.errors.append(
            f"--overlay changes the pods' labels {changed} that the run's NetworkPolicy and Service select "
            "them by: their TensorFlow ports would be open to every pod of the cluster; leave those labels "
            "as spawn sets them"
        )
    for line in podsecurity.user_additions(pod):
        report.warnings.append(f"the pods get {line}")
    if not options.pvc:
        report.warnings.append(
            "no --pvc: the workers share no volume, so a restarted group cannot resume and the model stays "
            "in the chief's pod, deleted with the Job"
        )
    return report


def unselected_labels(job: dict, run_id: str) -> list[str]:
    """The labels of the run (manifests.labels) that its Job's pods no longer carry as spawn set them:
    an --overlay deep-merged over the pod template can change them, and the NetworkPolicy and Service,
    which select the pods by them, then leave the pods out."""
    metadata = job["spec"]["template"].get("metadata")
    carried = (metadata.get("labels") if isinstance(metadata, dict) else None) or {}
    if not isinstance(carried, dict):
        return sorted(manifests.labels(run_id))
    return sorted(key for key, value in manifests.labels(run_id).items() if carried.get(key) != value)


def resource_overrides(args: argparse.Namespace, pod_template: dict) -> list[str]:
    """One line for each of --cpu/--memory that replaces what the --pod-file asks for."""
    asked = podtemplate.requested(pod_template)
    lines = []
    for name in ("cpu", "memory"):
        given = getattr(args, name)
        if given and name in asked and asked[name] != given:
            lines.append(f"--{name} {given} replaces the pod file's {name} {asked[name]}")
    return lines
