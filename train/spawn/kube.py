"""Kubernetes backend through the official client (no operator): the manifests of manifests.py, applied,
watched, read and deleted by label. Needs a kubeconfig (KUBECONFIG or ~/.kube/config) or in-cluster config,
a cluster recent enough for the Job fields a run uses (MINIMUM_VERSION), and the rights rbac.py lists."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

from nnsql.text import printable

from . import manifests
from .backend import Phase, RunSpec, WorkerStatus, collected_model
from .control import JobFailed


def load_config() -> None:
    from kubernetes import config

    try:
        config.load_kube_config()
    except Exception:  # not on a workstation: try the pod's service account
        config.load_incluster_config()


def connect() -> Any:
    """The cluster's `core`, `batch`, `networking` and `version` API clients, from the kubeconfig or the
    pod's account."""
    from kubernetes import client

    load_config()
    api = type("Api", (), {})()
    api.core, api.batch, api.version = client.CoreV1Api(), client.BatchV1Api(), client.VersionApi()
    api.networking = client.NetworkingV1Api()
    return api


MANAGED = "app.kubernetes.io/managed-by=nnsql-spawn"
# A run id is the tag's stem, the UTC start time and a random suffix (cli.new_run_id).
TAGGED_RUN = re.compile(r"(?P<tag>.+)-[0-9]{8}-[0-9]{6}-[0-9a-f]{5}")


def tag_of(run_id: str) -> str | None:
    match = TAGGED_RUN.fullmatch(run_id)
    return match["tag"] if match else None


# The oldest Kubernetes whose Jobs honour each field a run's manifests use (enabled by default there).
MINIMUM_VERSION = {"podReplacementPolicy": (1, 29), "successPolicy": (1, 31)}


class ClusterTooOld(ValueError):
    """The API server is older than the Job fields of this run need."""


def server_version(version: Any) -> tuple[int, int]:
    """(major, minor) from the API server's /version (minor may read "29+" on managed clusters)."""
    return int(str(version.major).rstrip("+")), int(str(version.minor).rstrip("+"))


def check_version(version: tuple[int, int], ps: int) -> None:
    needed = ["podReplacementPolicy", *(["successPolicy"] if ps else [])]
    field = max(needed, key=MINIMUM_VERSION.__getitem__)
    major, minor = MINIMUM_VERSION[field]
    if version < (major, minor):
        raise ClusterTooOld(
            f"the cluster runs Kubernetes {version[0]}.{version[1]}; this run needs {major}.{minor} or newer "
            f"(the Job's {field})"
        )


def refusal(manifest: dict[str, Any], namespace: str, error: Exception) -> str:
    """One line for an object the cluster did not create: the API server's status and reason, and for a
    403 what grants the right (a Role made by an older release lacks networkpolicies)."""
    status, reason = getattr(error, "status", None), getattr(error, "reason", None)
    text = str(error).strip()
    cause = f"{status} {reason}" if status else (text.splitlines()[0] if text else type(error).__name__)
    cause = printable(cause)  # the API server's (or a proxy's) words: no escape may reach the terminal
    what = f"{manifest['kind']} {manifest['metadata']['name']}"
    hint = ""
    if status == 403:
        hint = (
            f"; a cluster admin grants what a run needs with `nnsql spawn rbac --namespace {namespace} "
            "--user YOU | kubectl apply -f -` (a Role made before runs had a NetworkPolicy lacks it)"
        )
    return f"the cluster refused to create {what} in namespace {namespace} ({cause}){hint}"


class KubernetesBackend:
    name = "kubernetes"

    def __init__(self, options: manifests.ClusterOptions, api: Any = None) -> None:
        """`api`: an object with `core`, `batch`, `networking` and `version` API clients (tests); else the
        real ones."""
        api = connect() if api is None else api
        self.options = options
        self.core: Any = api.core
        self.batch: Any = api.batch
        self.networking: Any = api.networking
        self.version_api: Any = api.version
        self.attempt = 0

    def check_server(self) -> None:
        """ClusterTooOld, in one line, before anything is created on a cluster too old for the run."""
        check_version(server_version(self.version_api.get_code()), self.options.ps)

    @property
    def namespace(self) -> str:
        return self.options.namespace

    def _create(self, manifest: dict[str, Any]) -> None:
        kind = manifest["kind"]
        create: Any = {
            "ConfigMap": self.core.create_namespaced_config_map,
            "Secret": self.core.create_namespaced_secret,
            "Service": self.core.create_namespaced_service,
            "Job": self.batch.create_namespaced_job,
            "NetworkPolicy": self.networking.create_namespaced_network_policy,
        }[kind]
        create(self.namespace, manifest)

    def start(self, spec: RunSpec, attempt: int) -> None:
        """The run's objects (the Job alone on a restart). One the API server refuses ends the run in one
        line, what was created of it deleted: a Secret of the run's environment left behind holds its
        --env-file values."""
        self.attempt = attempt
        documents = (
            manifests.all_manifests(spec.run_id, spec.script, spec.workers, spec.args, self.options)
            if attempt == 0
            else [manifests.job(spec.run_id, attempt, spec.workers, spec.args, self.options)]
        )
        for manifest in documents:
            try:
                self._create(manifest)
            except Exception as error:  # the client's ApiException, or no answer at all
                with contextlib.suppress(Exception):
                    self.delete_run(spec.run_id)
                raise JobFailed(refusal(manifest, self.namespace, error)) from None

    def _pods(self, spec: RunSpec) -> list[Any]:
        selector = f"nnsql.io/run={spec.run_id},nnsql.io/attempt={self.attempt}"
        return self.core.list_namespaced_pod(self.namespace, label_selector=selector).items

    def status(self, spec: RunSpec) -> list[WorkerStatus]:
        phases = {
            "Pending": Phase.PENDING,
            "Running": Phase.RUNNING,
            "Succeeded": Phase.SUCCEEDED,
            "Failed": Phase.FAILED,
        }
        result = {}
        for pod in self._pods(spec):
            index = int(pod.metadata.annotations.get("batch.kubernetes.io/job-completion-index", "0"))
            result[index] = WorkerStatus(
                index, phases.get(pod.status.phase, Phase.PENDING), pod.status.reason or ""
            )
        return [result.get(i, WorkerStatus(i, Phase.PENDING)) for i in range(spec.tasks)]

    def logs(self, spec: RunSpec, index: int) -> str:
        for pod in self._pods(spec):
            if pod.metadata.annotations.get("batch.kubernetes.io/job-completion-index") == str(index):
                try:
                    return self.core.read_namespaced_pod_log(pod.metadata.name, self.namespace)
                except Exception:  # not started yet
                    return ""
        return ""

    def events(self, spec: RunSpec) -> str:
        messages = []
        for pod in self._pods(spec):
            selector = f"involvedObject.name={pod.metadata.name}"
            for event in self.core.list_namespaced_event(self.namespace, field_selector=selector).items[-3:]:
                messages.append(printable(f"{pod.metadata.name}: {event.reason}: {event.message}"))
        return "; ".join(messages) or "no events (is the namespace right?)"

    def has_backup(self, spec: RunSpec) -> bool | None:
        """Without --pvc every pod had a volume of its own, gone with it; with one, the bootstrap of the
        next attempt says what it finds."""
        return None if self.options.pvc else False

    def stop(self, spec: RunSpec) -> None:
        name = manifests.names(spec.run_id, self.attempt)["job"]
        with contextlib.suppress(Exception):  # already gone
            self.batch.delete_namespaced_job(name, self.namespace, propagation_policy="Foreground")

    def delete_run(self, run_id: str) -> None:
        """Everything labelled with the run: jobs, pods, service, config map, secret, network policy."""
        selector = f"nnsql.io/run={run_id}"
        for job in self.batch.list_namespaced_job(self.namespace, label_selector=selector).items:
            self.batch.delete_namespaced_job(
                job.metadata.name, self.namespace, propagation_policy="Background"
            )
        for lister, deleter in (
            (self.core.list_namespaced_service, self.core.delete_namespaced_service),
            (self.core.list_namespaced_config_map, self.core.delete_namespaced_config_map),
            (self.core.list_namespaced_secret, self.core.delete_namespaced_secret),
            (
                self.networking.list_namespaced_network_policy,
                self.networking.delete_namespaced_network_policy,
            ),
        ):
            for item in lister(self.namespace, label_selector=selector).items:
                deleter(item.metadata.name, self.namespace)

    def labelled_runs(self, tag: str | None) -> set[str]:
        """Run ids that spawn's labels mark in the namespace, of one tag's stem or (None) of every tag."""
        found = set()
        for lister in (
            self.batch.list_namespaced_job,
            self.core.list_namespaced_service,
            self.core.list_namespaced_config_map,
            self.core.list_namespaced_secret,
            self.networking.list_namespaced_network_policy,
        ):
            for item in lister(self.namespace, label_selector=MANAGED).items:
                found.add((item.metadata.labels or {}).get("nnsql.io/run", ""))
        return {run for run in found if run and (tag is None or tag_of(run) == tag)}

    def collect(self, spec: RunSpec) -> Path | None:
        """Logs of every worker into runs/<id>/, and the chief's outputs from the shared volume (--pvc)
        through a short-lived collector pod; without --pvc the model stayed in the finished pod."""
        attempt_dir = spec.run_dir / f"attempt-{self.attempt}"
        attempt_dir.mkdir(parents=True, exist_ok=True)
        for index in range(spec.tasks):
            (attempt_dir / f"worker-{index}.log").write_text(self.logs(spec, index))
        if not self.options.pvc:
            return None
        return self._copy_outputs(spec)

    def _copy_outputs(self, spec: RunSpec) -> Path | None:
        import base64
        import io
        import tarfile
        import time

        from kubernetes.stream import stream

        pod = manifests.collector_pod(spec.run_id, self.options)
        name = pod["metadata"]["name"]
        self.core.create_namespaced_pod(self.namespace, pod)
        try:
            deadline = time.monotonic() + 300
            while self.core.read_namespaced_pod(name, self.namespace).status.phase != "Running":
                if time.monotonic() > deadline:
                    return None
                time.sleep(1)
            packed = stream(
                self.core.connect_get_namespaced_pod_exec,
                name,
                self.namespace,
                command=["python", "-c", manifests.PACK_OUTPUT],
                stderr=False,
                stdin=False,
                stdout=True,
                tty=False,
            )
            target = spec.run_dir / "model"
            with tarfile.open(fileobj=io.BytesIO(base64.b64decode(packed)), mode="r:gz") as archive:
                archive.extractall(target, filter="data")
        finally:
            self.core.delete_namespaced_pod(name, self.namespace)
        return collected_model(target)
