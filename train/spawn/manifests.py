"""Kubernetes manifests for one run, as plain dicts (validated against the schema in the tests).

One ConfigMap (the script, the bootstrap, the --command lines and the output_path helper), one Secret (from
--env-file; never plaintext pod env), one headless Service (stable DNS for every worker,
publishNotReadyAddresses so workers find each other before they are ready), one Indexed Job
(completionMode Indexed, parallelism = completions = N). Every pod runs train/spawn/bootstrap.py first,
which builds TF_CONFIG from its completion index and the stable names <job>-<index>.<service>.
One NetworkPolicy lets only the run's own pods reach its pods: TensorFlow's gRPC server (every worker's,
on PORT) has no authentication, and whoever reaches it runs TensorFlow ops in the pod (reads its files and
mounted secrets, writes the model the run hands back).

The pods meet the "restricted" Pod Security Standard (podsecurity.py checks it): no privilege escalation,
every capability dropped, the RuntimeDefault seccomp profile, a non-root user (RUN_AS_USER unless
--run-as-root for an image that cannot run otherwise), no service-account token.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnsql.files import shipped

from . import podtemplate

PORT = 1999  # TF-Spawner's; local workers take free ports below the ephemeral range instead (local.py)
CPU = "2"  # a worker's request when neither --cpu nor a --pod-file says
MEMORY = "4Gi"
SCRIPT_DIR = "/nnsql/script"
SHARED_DIR = "/nnsql/shared"
PACKAGES_DIR = "/nnsql/packages"  # per pod: what the bootstrap installs (tf-keras on a stock image)
TF_SPAWNER_DIR = "/script"  # TF-Spawner mounts the script as /script/training-script.py
SCRIPT_NAME = "training-script.py"  # TF-Spawner's name; not importable, so it shadows no `train` package
IMAGE = "tensorflow/tensorflow:2.21.0"
GPU_IMAGE = "tensorflow/tensorflow:2.21.0-gpu"
RUN_AS_USER = 1000  # the worker image's user; a stock TensorFlow image runs as any user
# Run by the container command before anything else: prints the exports (TF_CONFIG...) it evaluates.
PRELUDE = (
    "set -e\n"
    'exports=$(python "$NNSQL_SCRIPT_DIR/bootstrap.py")\n'
    'eval "$exports"\n'
    '. "$NNSQL_SCRIPT_DIR/command.sh"\n'
)
RUN_SCRIPT = 'exec python "$NNSQL_SCRIPT_DIR/training-script.py" "$@"\n'
# Names spawn sets in every worker; an --env-file may not set them (envfile.py).
RESERVED_ENV = frozenset(
    {
        "TF_CONFIG",
        "WORKER_NUMBER",
        "TOT_WORKERS",
        "JOB_COMPLETION_INDEX",
        "TF_USE_LEGACY_KERAS",
        "PYTHONUNBUFFERED",
        "NNSQL_PS",
        "NNSQL_JOB",
        "NNSQL_SERVICE",
        "NNSQL_PORT",
        "NNSQL_ATTEMPT",
        "NNSQL_IMAGE",
        "NNSQL_SCRIPT_DIR",
        "NNSQL_SHARED_DIR",
        "NNSQL_PACKAGES",
        "NNSQL_OUTPUT_DIR",
        "NNSQL_BACKUP_DIR",
    }
)


@dataclass(frozen=True)
class ClusterOptions:
    namespace: str = "default"
    image: str = IMAGE
    cpu: str = CPU
    memory: str = MEMORY
    gpus: int = 0
    node_selector: dict[str, str] = field(default_factory=dict)
    pvc: str | None = None  # a ReadWriteMany claim for BackupAndRestore and outputs
    env_file_data: dict[str, str] = field(default_factory=dict)
    ttl_seconds: int = 3600
    overlay: dict[str, Any] = field(default_factory=dict)  # deep-merged into the Job
    pod_template: dict[str, Any] = field(default_factory=dict)  # a Pod (TF-Spawner's --pod-file), under ours
    runtime_env: dict[str, str] = field(default_factory=dict)  # which Keras (runtime.environment)
    command: str = ""  # shell lines run before the script (--command)
    entrypoint: str = ""  # shell lines run instead of the script (TF-Spawner's -c), after the bootstrap
    port: int = PORT
    ps: int = 0  # parameter servers: then task 0 is the chief, the workers follow, the ps come last
    deadline: int | None = None  # the Job's activeDeadlineSeconds (--deadline)
    run_as_user: int | None = RUN_AS_USER  # None: the image's own user (--run-as-root)
    allow_privileged: bool = False  # keep `privileged: true` from a --pod-file


def default_image(gpus: int) -> str:
    """TensorFlow's own image: the GPU variant when the workers ask for GPUs."""
    return GPU_IMAGE if gpus else IMAGE


def names(run_id: str, attempt: int) -> dict[str, str]:
    return {
        "config": f"{run_id}-script",
        "secret": f"{run_id}-env",
        "service": f"{run_id}-workers",
        "job": f"{run_id}-a{attempt}",
        "policy": f"{run_id}-peers",
    }


def labels(run_id: str) -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": "nnsql-spawn", "nnsql.io/run": run_id}


def metadata(name: str, run_id: str, options: ClusterOptions) -> dict:
    return {"name": name, "namespace": options.namespace, "labels": labels(run_id)}


def config_map(run_id: str, script: Path, options: ClusterOptions) -> dict:
    here = shipped("train", "spawn")
    data = {
        SCRIPT_NAME: script.read_text(),
        "bootstrap.py": (here / "bootstrap.py").read_text(),
        "output_path.py": (here / "output.py").read_text(),
        "command.sh": options.command,
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(names(run_id, 0)["config"], run_id, options),
        "data": data,
    }


def secret(run_id: str, options: ClusterOptions) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": metadata(names(run_id, 0)["secret"], run_id, options),
        "stringData": dict(options.env_file_data),
    }


def service(run_id: str, options: ClusterOptions) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(names(run_id, 0)["service"], run_id, options),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": labels(run_id),
            "ports": [{"name": "grpc", "port": options.port, "targetPort": options.port}],
        },
    }


def network_policy(run_id: str, options: ClusterOptions) -> dict:
    """Ingress to the run's pods from the run's pods only, on every port (egress is left open): any other
    pod of the cluster could otherwise run TensorFlow ops in a worker through its gRPC port."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(names(run_id, 0)["policy"], run_id, options),
        "spec": {
            "podSelector": {"matchLabels": labels(run_id)},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": labels(run_id)}}]}],
        },
    }


def container_command(options: ClusterOptions, args: tuple[str, ...]) -> list[str]:
    """The bootstrap's exports, the --command lines, then the script, or TF-Spawner's entrypoint (bash,
    as TF-Spawner runs it) in its place. `$@` holds the script's arguments."""
    if options.entrypoint:
        return ["/bin/bash", "-c", PRELUDE + options.entrypoint, "worker", *args]
    return ["sh", "-c", PRELUDE + RUN_SCRIPT, "worker", *args]


def worker_env(run_id: str, attempt: int, workers: int, options: ClusterOptions) -> list[dict[str, str]]:
    values = {
        "TOT_WORKERS": str(workers),
        "NNSQL_PS": str(options.ps),
        "NNSQL_JOB": names(run_id, attempt)["job"],
        "NNSQL_SERVICE": names(run_id, attempt)["service"],
        "NNSQL_PORT": str(options.port),
        "NNSQL_ATTEMPT": str(attempt),
        "NNSQL_IMAGE": options.image,
        "NNSQL_SCRIPT_DIR": SCRIPT_DIR,
        "NNSQL_SHARED_DIR": SHARED_DIR,
        "NNSQL_PACKAGES": PACKAGES_DIR,
        "NNSQL_OUTPUT_DIR": f"{SHARED_DIR}/output",
        "NNSQL_BACKUP_DIR": f"{SHARED_DIR}/backup",
        "PYTHONUNBUFFERED": "1",
        **dict(sorted(options.runtime_env.items())),
    }
    return [{"name": key, "value": value} for key, value in values.items()]


def container(
    run_id: str, attempt: int, workers: int, args: tuple[str, ...], options: ClusterOptions
) -> dict:
    resources: dict[str, dict[str, str]] = {
        "requests": {"cpu": options.cpu, "memory": options.memory},
        "limits": {"memory": options.memory},
    }
    # --cpu replaced the pod file's cpu: its cpu limit follows, or the request could exceed it
    replaced = options.cpu != podtemplate.requested(options.pod_template).get("cpu", options.cpu)
    if replaced and "cpu" in (podtemplate.first_resources(options.pod_template).get("limits") or {}):
        resources["limits"]["cpu"] = options.cpu
    if options.gpus:
        resources["limits"]["nvidia.com/gpu"] = str(options.gpus)
    return {
        "name": "worker",
        "image": options.image,
        "command": container_command(options, args),
        "env": worker_env(run_id, attempt, workers, options),
        "envFrom": [{"secretRef": {"name": names(run_id, 0)["secret"]}}],
        "ports": [{"name": "grpc", "containerPort": options.port}],
        "resources": resources,
        "securityContext": container_security(options),
        "volumeMounts": [
            {"name": "script", "mountPath": SCRIPT_DIR, "readOnly": True},
            {"name": "script", "mountPath": TF_SPAWNER_DIR, "readOnly": True},
            {"name": "shared", "mountPath": SHARED_DIR},
            {"name": "packages", "mountPath": PACKAGES_DIR},
        ],
    }


def container_security(options: ClusterOptions) -> dict:
    if options.allow_privileged:  # the user's pod file asks for privilege and --allow-privileged grants it
        return {}
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def pod_security(options: ClusterOptions) -> dict:
    """Restricted: a non-root user (with its group owning the shared volume), RuntimeDefault seccomp."""
    context: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
    if options.run_as_user is not None:
        user = options.run_as_user
        context.update(runAsNonRoot=True, runAsUser=user, runAsGroup=user, fsGroup=user)
    return context


def pod_spec(run_id: str, attempt: int, workers: int, args: tuple[str, ...], options: ClusterOptions) -> dict:
    shared = (
        {"name": "shared", "persistentVolumeClaim": {"claimName": options.pvc}}
        if options.pvc
        else {"name": "shared", "emptyDir": {}}
    )
    spec: dict[str, Any] = {
        "restartPolicy": "Never",  # a failed worker fails the attempt; spawn restarts the whole group
        "subdomain": names(run_id, attempt)["service"],
        "automountServiceAccountToken": False,  # a worker has no business with the Kubernetes API
        "enableServiceLinks": False,
        "securityContext": pod_security(options),
        "containers": [container(run_id, attempt, workers, args, options)],
        "volumes": [
            {"name": "script", "configMap": {"name": names(run_id, 0)["config"]}},
            shared,
            {"name": "packages", "emptyDir": {}},
        ],
    }
    if options.node_selector:
        spec["nodeSelector"] = dict(options.node_selector)
    return podtemplate.under_pod_template(spec, options.pod_template)


def job(run_id: str, attempt: int, workers: int, args: tuple[str, ...], options: ClusterOptions) -> dict:
    tasks = task_count(workers, options)
    spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": tasks,
        "parallelism": tasks,
        "backoffLimit": 0,
        "podReplacementPolicy": "Failed",
        "ttlSecondsAfterFinished": options.ttl_seconds,
        "template": {
            "metadata": {"labels": {**labels(run_id), "nnsql.io/attempt": str(attempt)}},
            "spec": pod_spec(run_id, attempt, workers, args, options),
        },
    }
    if options.deadline:
        spec["activeDeadlineSeconds"] = options.deadline
    if options.ps:  # workers and ps serve until stopped: the Job succeeds when the chief (index 0) does
        spec["successPolicy"] = {"rules": [{"succeededIndexes": "0"}]}
    manifest = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            **metadata(names(run_id, attempt)["job"], run_id, options),
            "labels": {**labels(run_id), "nnsql.io/attempt": str(attempt)},
        },
        "spec": spec,
    }
    return podtemplate.deep_merge(manifest, options.overlay)


def task_count(workers: int, options: ClusterOptions) -> int:
    """Pods of one attempt: the workers, plus the chief and the parameter servers in ps training."""
    return workers + (1 + options.ps if options.ps else 0)


def redacted(documents: list[dict]) -> list[dict]:
    """The manifests as --dry-run prints them: every Secret value replaced, keys kept."""
    shown = copy.deepcopy(documents)
    for document in shown:
        if document.get("kind") == "Secret":
            for key in ("stringData", "data"):
                if key in document:
                    document[key] = {name: "<redacted>" for name in document[key]}
    return shown


def collector_pod(run_id: str, options: ClusterOptions) -> dict:
    """A short-lived pod that mounts the run's shared volume so spawn can copy the chief's outputs out."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata(f"{run_id}-collect", run_id, options),
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": pod_security(options),
            "containers": [
                {
                    "name": "collect",
                    "image": options.image,
                    "command": ["sleep", "600"],
                    "securityContext": container_security(ClusterOptions()),
                    "volumeMounts": [{"name": "shared", "mountPath": SHARED_DIR, "readOnly": True}],
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                }
            ],
            "volumes": [{"name": "shared", "persistentVolumeClaim": {"claimName": options.pvc}}],
        },
    }


# Run inside the collector pod: the output directory as a base64 tar.gz on stdout (text-safe over exec).
PACK_OUTPUT = (
    "import base64, io, sys, tarfile; buffer = io.BytesIO(); "
    f"archive = tarfile.open(fileobj=buffer, mode='w:gz'); archive.add('{SHARED_DIR}/output', arcname='.'); "
    "archive.close(); sys.stdout.write(base64.b64encode(buffer.getvalue()).decode())"
)


def all_manifests(
    run_id: str, script: Path, workers: int, args: tuple[str, ...], options: ClusterOptions
) -> list[dict]:
    return [
        config_map(run_id, script, options),
        secret(run_id, options),
        service(run_id, options),
        network_policy(run_id, options),  # before the Job: no worker listens before it holds
        job(run_id, 0, workers, args, options),
    ]
