"""Kubernetes backend through the official client (no operator): the manifests of manifests.py, applied,
watched, read and deleted by label. Needs a kubeconfig (KUBECONFIG or ~/.kube/config) or in-cluster config."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from train.spawn import manifests
from train.spawn.backend import Phase, RunSpec, WorkerStatus


def load_config() -> None:
    from kubernetes import config

    try:
        config.load_kube_config()
    except Exception:  # not on a workstation: try the pod's service account
        config.load_incluster_config()


class KubernetesBackend:
    name = "kubernetes"

    def __init__(self, options: manifests.ClusterOptions) -> None:
        from kubernetes import client

        load_config()
        self.options = options
        self.core: Any = client.CoreV1Api()
        self.batch: Any = client.BatchV1Api()
        self.attempt = 0

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
        }[kind]
        create(self.namespace, manifest)

    def start(self, spec: RunSpec, attempt: int) -> None:
        self.attempt = attempt
        if attempt == 0:
            for manifest in manifests.all_manifests(
                spec.run_id, spec.script, spec.workers, spec.args, self.options
            ):
                self._create(manifest)
        else:
            self._create(manifests.job(spec.run_id, attempt, spec.workers, spec.args, self.options))

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
                messages.append(f"{pod.metadata.name}: {event.reason}: {event.message}")
        return "; ".join(messages) or "no events (is the namespace right?)"

    def stop(self, spec: RunSpec) -> None:
        name = manifests.names(spec.run_id, self.attempt)["job"]
        with contextlib.suppress(Exception):  # already gone
            self.batch.delete_namespaced_job(name, self.namespace, propagation_policy="Foreground")

    def delete_run(self, run_id: str) -> None:
        """Everything labelled with the run: jobs, pods, service, config map, secret."""
        selector = f"nnsql.io/run={run_id}"
        for job in self.batch.list_namespaced_job(self.namespace, label_selector=selector).items:
            self.batch.delete_namespaced_job(
                job.metadata.name, self.namespace, propagation_policy="Background"
            )
        for lister, deleter in (
            (self.core.list_namespaced_service, self.core.delete_namespaced_service),
            (self.core.list_namespaced_config_map, self.core.delete_namespaced_config_map),
            (self.core.list_namespaced_secret, self.core.delete_namespaced_secret),
        ):
            for item in lister(self.namespace, label_selector=selector).items:
                deleter(item.metadata.name, self.namespace)

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
        found = sorted(target.glob("*.keras"))
        return found[0] if found else None
