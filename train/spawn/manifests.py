"""Kubernetes manifests for one run, as plain dicts (validated against the schema in the tests).

One ConfigMap (the script and a bootstrap), one Secret (from --env-file; never plaintext pod env), one
headless Service (stable DNS for every worker, publishNotReadyAddresses so workers find each other before
they are ready), one Indexed Job (completionMode Indexed, parallelism = completions = N). Every pod builds
TF_CONFIG from its completion index and the stable names <job>-<index>.<service>.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PORT = 2222
SCRIPT_DIR = "/nnsql/script"
SHARED_DIR = "/nnsql/shared"
BOOTSTRAP = """\
import json, os, sys
workers, ps = int(os.environ["TOT_WORKERS"]), int(os.environ.get("NNSQL_PS", "0"))
position = int(os.environ["JOB_COMPLETION_INDEX"])
job, service, port = os.environ["NNSQL_JOB"], os.environ["NNSQL_SERVICE"], os.environ["NNSQL_PORT"]
roles = [("worker", i) for i in range(workers)]
if ps:
    roles = [("chief", 0)] + roles + [("ps", i) for i in range(ps)]
cluster = {}
for number, (kind, _) in enumerate(roles):
    cluster.setdefault(kind, []).append(f"{job}-{number}.{service}:{port}")
kind, index = roles[position]
os.environ["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}})
os.environ["WORKER_NUMBER"] = str(position)
script = os.path.join(os.path.dirname(__file__), "train.py")
os.execvp(sys.executable, [sys.executable, script, *sys.argv[1:]])
"""


@dataclass(frozen=True)
class ClusterOptions:
    namespace: str = "default"
    image: str = "tensorflow/tensorflow:2.21.0"
    cpu: str = "2"
    memory: str = "4Gi"
    gpus: int = 0
    node_selector: dict[str, str] = field(default_factory=dict)
    pvc: str | None = None  # a ReadWriteMany claim for BackupAndRestore and outputs
    env_file_data: dict[str, str] = field(default_factory=dict)
    ttl_seconds: int = 3600
    overlay: dict[str, Any] = field(default_factory=dict)  # deep-merged into the Job
    pod_template: dict[str, Any] = field(default_factory=dict)  # a Pod (TF-Spawner's --pod-file), under ours
    runtime_env: dict[str, str] = field(default_factory=dict)  # which Keras (runtime.environment)
    command: str = ""  # shell lines run before the script (TF-Spawner's --command)
    port: int = PORT
    ps: int = 0  # parameter servers: then task 0 is the chief, the workers follow, the ps come last


def names(run_id: str, attempt: int) -> dict[str, str]:
    return {
        "config": f"{run_id}-script",
        "secret": f"{run_id}-env",
        "service": f"{run_id}-workers",
        "job": f"{run_id}-a{attempt}",
    }


def labels(run_id: str) -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": "nnsql-spawn", "nnsql.io/run": run_id}


def deep_merge(base: dict, overlay: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def config_map(run_id: str, script: Path, options: ClusterOptions) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": names(run_id, 0)["config"],
            "namespace": options.namespace,
            "labels": labels(run_id),
        },
        "data": {"train.py": script.read_text(), "bootstrap.py": BOOTSTRAP, "command.sh": options.command},
    }


def secret(run_id: str, options: ClusterOptions) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": names(run_id, 0)["secret"],
            "namespace": options.namespace,
            "labels": labels(run_id),
        },
        "stringData": dict(options.env_file_data),
    }


def service(run_id: str, options: ClusterOptions) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": names(run_id, 0)["service"],
            "namespace": options.namespace,
            "labels": labels(run_id),
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": labels(run_id),
            "ports": [{"name": "grpc", "port": options.port, "targetPort": options.port}],
        },
    }


def container(
    run_id: str, attempt: int, workers: int, args: tuple[str, ...], options: ClusterOptions
) -> dict:
    resources: dict[str, dict[str, str]] = {
        "requests": {"cpu": options.cpu, "memory": options.memory},
        "limits": {"memory": options.memory},
    }
    if options.gpus:
        resources["limits"]["nvidia.com/gpu"] = str(options.gpus)
    env = [
        {"name": "TOT_WORKERS", "value": str(workers)},
        {"name": "NNSQL_PS", "value": str(options.ps)},
        {"name": "NNSQL_JOB", "value": names(run_id, attempt)["job"]},
        {"name": "NNSQL_SERVICE", "value": names(run_id, attempt)["service"]},
        {"name": "NNSQL_PORT", "value": str(options.port)},
        {"name": "NNSQL_OUTPUT_DIR", "value": f"{SHARED_DIR}/output"},
        {"name": "NNSQL_BACKUP_DIR", "value": f"{SHARED_DIR}/backup"},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        *({"name": key, "value": value} for key, value in sorted(options.runtime_env.items())),
    ]
    # command.sh (empty unless --command) runs in the worker's shell first, then the bootstrap replaces it
    start = f'set -e; . {SCRIPT_DIR}/command.sh; exec python {SCRIPT_DIR}/bootstrap.py "$@"'
    return {
        "name": "worker",
        "image": options.image,
        "command": ["sh", "-c", start, "worker", *args],
        "env": env,
        "envFrom": [{"secretRef": {"name": names(run_id, 0)["secret"]}}],
        "ports": [{"name": "grpc", "containerPort": options.port}],
        "resources": resources,
        "volumeMounts": [
            {"name": "script", "mountPath": SCRIPT_DIR, "readOnly": True},
            {"name": "shared", "mountPath": SHARED_DIR},
        ],
    }


def job(run_id: str, attempt: int, workers: int, args: tuple[str, ...], options: ClusterOptions) -> dict:
    shared = (
        {"name": "shared", "persistentVolumeClaim": {"claimName": options.pvc}}
        if options.pvc
        else {"name": "shared", "emptyDir": {}}
    )
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",  # a failed worker fails the attempt; spawn restarts the whole group
        "subdomain": names(run_id, attempt)["service"],
        "containers": [container(run_id, attempt, workers, args, options)],
        "volumes": [{"name": "script", "configMap": {"name": names(run_id, 0)["config"]}}, shared],
    }
    if options.node_selector:
        pod_spec["nodeSelector"] = dict(options.node_selector)
    pod_spec = under_pod_template(pod_spec, options.pod_template)
    manifest: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": names(run_id, attempt)["job"],
            "namespace": options.namespace,
            "labels": {**labels(run_id), "nnsql.io/attempt": str(attempt)},
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": task_count(workers, options),
            "parallelism": task_count(workers, options),
            "backoffLimit": 0,
            "podReplacementPolicy": "Failed",
            "ttlSecondsAfterFinished": options.ttl_seconds,
            "template": {
                "metadata": {"labels": {**labels(run_id), "nnsql.io/attempt": str(attempt)}},
                "spec": pod_spec,
            },
        },
    }
    if options.ps:  # workers and ps serve until stopped: the Job succeeds when the chief (index 0) does
        manifest["spec"]["successPolicy"] = {"rules": [{"succeededIndexes": "0"}]}
    return deep_merge(manifest, options.overlay)


def task_count(workers: int, options: ClusterOptions) -> int:
    """Pods of one attempt: the workers, plus the chief and the parameter servers in ps training."""
    return workers + (1 + options.ps if options.ps else 0)


def under_pod_template(pod_spec: dict, template: dict) -> dict:
    """The generated pod spec merged over a user's Pod (TF-Spawner's --pod-file): theirs supplies what ours
    lacks (tolerations, image pull secrets, extra volumes and mounts), ours wins where both say something."""
    base = copy.deepcopy(template.get("spec", {}))
    theirs = (base.pop("containers", None) or [{}])[0]
    merged = deep_merge(base, {k: v for k, v in pod_spec.items() if k not in ("containers", "volumes")})
    ours = pod_spec["containers"][0]
    container = deep_merge(theirs, {k: v for k, v in ours.items() if k not in ("env", "volumeMounts")})
    for key in ("env", "volumeMounts"):
        mine = {item["name"] if key == "env" else item["mountPath"] for item in ours[key]}
        kept = [i for i in theirs.get(key, []) if (i["name"] if key == "env" else i["mountPath"]) not in mine]
        container[key] = [*kept, *ours[key]]
    names = {volume["name"] for volume in pod_spec["volumes"]}
    volumes = [v for v in base.get("volumes", []) if v["name"] not in names]
    return {**merged, "containers": [container], "volumes": [*volumes, *pod_spec["volumes"]]}


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
        "metadata": {"name": f"{run_id}-collect", "namespace": options.namespace, "labels": labels(run_id)},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "collect",
                    "image": options.image,
                    "command": ["sleep", "600"],
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
        job(run_id, 0, workers, args, options),
    ]


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines (comments and blank lines ignored) for the run's Secret."""
    values = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        key, separator, value = text.partition("=")
        if not separator or not key.strip().replace("_", "").isalnum():
            raise ValueError(f"{path}:{number}: expected KEY=VALUE")
        values[key.strip()] = value.strip().strip('"').strip("'")
    return values
