"""`nnsql serve --manifests`: the scorer on Kubernetes, printed as YAML instead of serving.

Three documents, built from the same options as the scorer itself (its port, gRPC port, threads, batching
and limits):
- a Deployment of the scorer image (serve/Containerfile), listening on 0.0.0.0 inside the pod, as a
  non-root user under the restricted Pod Security Standard, with the model repository mounted read-only
  from a PersistentVolumeClaim (`--pvc`; `nnsql export onnx --repo` writes what it holds) and
  readiness/liveness probes on the KServe V2 health endpoints;
- a ClusterIP Service in front of it (http, and grpc with --grpc-port);
- a KServe ServingRuntime (serving.kserve.io/v1alpha1) running the same container for InferenceServices
  of model format `onnx`, with protocol versions v2 (and grpc-v2): KServe's storage initializer puts the
  repository at /mnt/models.

    nnsql serve --manifests --image registry.example.org/nnsql-serve:0.1.0 --pvc models | kubectl apply -f -
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

import nnsql

from . import options

Manifest = dict[str, Any]


class PlainDumper(yaml.SafeDumper):
    """YAML without anchors: a reader (or kubectl diff) sees every value where it applies."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


MOUNT = "/models"
KSERVE_MOUNT = "/mnt/models"  # where KServe's storage initializer puts the model
KEYS_MOUNT = "/etc/nnsql/keys"
USER = 10001  # the image's user (serve/Containerfile)
# The scorer's options that the container repeats as they were given (dest → flag).
PASSED_ON = {
    "threads": "--threads",
    "max_batch_size": "--max-batch-size",
    "max_batch_delay_ms": "--max-batch-delay-ms",
    "max_request_rows": "--max-request-rows",
    "max_body_mb": "--max-body-mb",
    "client_timeout": "--client-timeout",
    "max_connections": "--max-connections",
    "poll_seconds": "--poll-seconds",
    "workers": "--workers",
    "allowed_origins": "--allowed-origins",
}


def add_options(parser: argparse.ArgumentParser) -> None:
    """The scorer's parser gains --manifests and what only the cluster needs."""
    group = parser.add_argument_group("Kubernetes (with --manifests: print manifests instead of serving)")
    group.add_argument(
        "--manifests", action="store_true", help="print a Deployment, Service and ServingRuntime"
    )
    group.add_argument(
        "--image", default=f"nnsql-serve:{nnsql.__version__}", help="scorer image (serve/Containerfile)"
    )
    group.add_argument("--name", default="nnsql-serve", help="name of the Deployment, Service and runtime")
    group.add_argument("--namespace", help="namespace of every manifest (default: kubectl's)")
    group.add_argument("--replicas", type=options.at_least(1), default=1)
    group.add_argument("--pvc", default="nnsql-models", help="PersistentVolumeClaim holding the repository")
    group.add_argument("--api-key-secret", help="Secret whose key `keys` lists the API keys (--api-key-file)")
    group.add_argument("--cpu", default="1", help="CPU requested per pod (default 1)")
    group.add_argument("--memory", default="1Gi", help="memory requested and limited per pod (default 1Gi)")
    parser.set_defaults(scorer_defaults={dest: parser.get_default(dest) for dest in PASSED_ON})


def scorer_arguments(args: argparse.Namespace, repository: str) -> list[str]:
    """The container's arguments: the same scorer, on every interface of the pod."""
    result = ["serve", "--repo", repository, "--host", "0.0.0.0", "--port", str(args.port)]
    if args.grpc_port:
        result += ["--grpc-port", str(args.grpc_port)]
    for dest, flag in PASSED_ON.items():  # what differs from the scorer's defaults
        value = getattr(args, dest, None)
        if value not in (None, "", args.scorer_defaults.get(dest)):
            result += [flag, str(value)]
    if getattr(args, "allowed_hosts", None) is not None:  # the pod is reached by its Service's names
        namespaced = f"{args.name}.{args.namespace}" if args.namespace else ""
        hosts = [args.name, namespaced, ".svc", ".cluster.local", args.allowed_hosts]
        result += ["--allowed-hosts", ",".join(host for host in hosts if host)]
    if args.api_key_secret:
        result += ["--api-key-file", f"{KEYS_MOUNT}/keys"]
    return result


def ports(args: argparse.Namespace) -> list[Manifest]:
    result = [{"name": "http", "containerPort": args.port, "protocol": "TCP"}]
    if args.grpc_port:
        result.append({"name": "grpc", "containerPort": args.grpc_port, "protocol": "TCP"})
    return result


def restricted_security() -> Manifest:
    """The restricted Pod Security Standard, and a read-only root file system (scratch space in /tmp)."""
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": USER,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container(args: argparse.Namespace, repository: str, name: str) -> Manifest:
    mounts: list[Manifest] = [{"name": "tmp", "mountPath": "/tmp"}]
    if repository == MOUNT:
        mounts.append({"name": "models", "mountPath": MOUNT, "readOnly": True})
    if args.api_key_secret:
        mounts.append({"name": "api-keys", "mountPath": KEYS_MOUNT, "readOnly": True})

    def probe(path: str) -> Manifest:
        return {"httpGet": {"path": path, "port": args.port}, "periodSeconds": 5}

    return {
        "name": name,
        "image": args.image,
        "command": ["nnsql"],
        "args": scorer_arguments(args, repository),
        "ports": ports(args),
        "env": [{"name": "HOME", "value": "/tmp"}],
        "resources": {
            "requests": {"cpu": args.cpu, "memory": args.memory},
            "limits": {"memory": args.memory},
        },
        "readinessProbe": probe("/v2/health/ready"),
        "livenessProbe": probe("/v2/health/live"),
        "securityContext": restricted_security(),
        "volumeMounts": mounts,
    }


def metadata(args: argparse.Namespace) -> Manifest:
    result: Manifest = {"name": args.name, "labels": {"app.kubernetes.io/name": args.name}}
    if args.namespace:
        result["namespace"] = args.namespace
    return result


def volumes(args: argparse.Namespace, with_models: bool) -> list[Manifest]:
    result: list[Manifest] = [{"name": "tmp", "emptyDir": {}}]
    if with_models:
        result.append({"name": "models", "persistentVolumeClaim": {"claimName": args.pvc, "readOnly": True}})
    if args.api_key_secret:
        result.append({"name": "api-keys", "secret": {"secretName": args.api_key_secret}})
    return result


def deployment(args: argparse.Namespace) -> Manifest:
    selector = {"app.kubernetes.io/name": args.name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(args),
        "spec": {
            "replicas": args.replicas,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": selector},
                "spec": {
                    "automountServiceAccountToken": False,
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container(args, MOUNT, "scorer")],
                    "volumes": volumes(args, with_models=True),
                },
            },
        },
    }


def service(args: argparse.Namespace) -> Manifest:
    service_ports = [
        {"name": p["name"], "port": p["containerPort"], "targetPort": p["name"]} for p in ports(args)
    ]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(args),
        "spec": {"selector": {"app.kubernetes.io/name": args.name}, "ports": service_ports},
    }


def serving_runtime(args: argparse.Namespace) -> Manifest:
    """KServe's runtime for `modelFormat: onnx`; its container is named kserve-container, as KServe wants."""
    protocols = ["v2", "grpc-v2"] if args.grpc_port else ["v2"]
    return {
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "ServingRuntime",
        "metadata": metadata(args),
        "spec": {
            "supportedModelFormats": [{"name": "onnx", "version": "1", "autoSelect": True}],
            "protocolVersions": protocols,
            "multiModel": False,
            "containers": [container(args, KSERVE_MOUNT, "kserve-container")],
            "volumes": volumes(args, with_models=False),
        },
    }


def documents(args: argparse.Namespace) -> list[Manifest]:
    return [deployment(args), service(args), serving_runtime(args)]


def write(args: argparse.Namespace) -> int:
    """Print the manifests (stdout, for `| kubectl apply -f -`); the next step on stderr."""
    if args.replicas < 1:
        print("error: --replicas must be at least 1", file=sys.stderr)
        return 2
    yaml.dump_all(documents(args), sys.stdout, Dumper=PlainDumper, sort_keys=False)
    print(
        f"next: copy the repository (nnsql export onnx --repo DIR) into PersistentVolumeClaim '{args.pvc}', "
        "then kubectl apply -f the output; with KServe, an InferenceService with modelFormat onnx and "
        f"runtime {args.name}",
        file=sys.stderr,
    )
    return 0
