"""TF-Spawner's `-d [-t TAG]` from any directory: the runs are found by spawn's labels in the namespace,
not only through the runs/ folder of the directory that started them."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import kubernetes_validate
import pytest

from nnsql.train.spawn import __main__ as spawn
from nnsql.train.spawn import cli, kube, manifests
from nnsql.train.spawn.backend import RunSpec
from tests.conftest import REPO
from tests.fixtures import free_port

MNIST = REPO / "train" / "mnist.py"


class NamespaceApi:
    """A fake Kubernetes API (named so: no cluster runs here) holding what was created, per kind and
    namespace, schema-checked; it lists by an equality label selector and deletes by name, as the API
    server does for the calls the backend makes."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict] = {}  # (kind, namespace, name) -> manifest
        self.core = self.batch = self.networking = self
        self.version = SimpleNamespace(get_code=lambda: SimpleNamespace(major="1", minor="31"))

    def kinds(self, namespace: str) -> list[tuple[str, str]]:
        return sorted((kind, name) for kind, ns, name in self.objects if ns == namespace)

    def __getattr__(self, method: str):
        verb, _, kind = method.partition("_namespaced_")
        kind = {"config_map": "ConfigMap", "network_policy": "NetworkPolicy"}.get(kind, kind.capitalize())

        def create(namespace: str, manifest: dict) -> None:
            kubernetes_validate.validate(manifest, "1.37.0", strict=True)
            self.objects[kind, namespace, manifest["metadata"]["name"]] = manifest

        def listed(namespace: str, label_selector: str = "") -> SimpleNamespace:
            wanted = dict(pair.split("=", 1) for pair in label_selector.split(",") if pair)
            items = [
                SimpleNamespace(metadata=SimpleNamespace(name=name, labels=m["metadata"]["labels"]))
                for (k, ns, name), m in self.objects.items()
                if k == kind and ns == namespace and wanted.items() <= m["metadata"]["labels"].items()
            ]
            return SimpleNamespace(items=items)

        def delete(name: str, namespace: str, **_: str) -> None:
            del self.objects[kind, namespace, name]

        return {"create": create, "list": listed, "delete": delete}[verb]


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    api = NamespaceApi()
    monkeypatch.setattr(kube, "connect", lambda: api)
    monkeypatch.setattr(spawn, "RUNS", tmp_path / "elsewhere" / "runs")  # not where the runs started
    return api


def started(api: NamespaceApi, tag: str, namespace: str = "physics") -> str:
    run_id = cli.new_run_id(Path("mnist.py"), tag)
    options = manifests.ClusterOptions(namespace=namespace)
    spec = RunSpec(run_id, MNIST, (), 2, Path("unused"), manifests.SHARED_DIR)
    kube.KubernetesBackend(options, api=api).start(spec, 0)
    return run_id


def test_delete_by_tag_finds_the_runs_by_their_labels(cluster, capsys):
    first, second = started(cluster, "mnist-test"), started(cluster, "mnist-test")
    other = started(cluster, "other")
    elsewhere = started(cluster, "mnist-test", namespace="default")
    assert spawn.main(["-d", "-t", "mnist-test", "-n", "physics"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert sorted(out) == sorted(f"deleted {run} (namespace physics)" for run in (first, second))
    left = cluster.kinds("physics")
    assert len(left) == 5 and all(name.startswith(other) for _, name in left)  # its 5 objects, untouched
    assert len(cluster.kinds("default")) == 5
    assert all(name.startswith(elsewhere) for _, name in cluster.kinds("default"))


def test_delete_without_a_tag_deletes_every_spawn_run_of_the_namespace(cluster, capsys):
    for tag in ("a", "b"):
        started(cluster, tag)
    assert spawn.main(["-d", "-n", "physics"]) == 0
    assert cluster.kinds("physics") == []
    assert spawn.main(["-d", "-n", "physics"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == f"no run of nnsql spawn in {spawn.RUNS}/ or namespace physics"


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:%d"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def test_an_unreachable_cluster_is_a_note_and_local_runs_are_still_deleted(tmp_path, monkeypatch, capsys):
    port = free_port()  # a port nothing listens on
    (tmp_path / "kubeconfig").write_text(KUBECONFIG % port)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    runs = tmp_path / "runs"
    monkeypatch.setattr(spawn, "RUNS", runs)
    (runs / "a-1").mkdir(parents=True)
    (runs / "a-1" / "run.json").write_text('{"backend": "local", "tag": "a"}')
    assert spawn.main(["-d", "-t", "a"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "deleted a-1" and not runs.joinpath("a-1").exists()
    assert err.startswith("note: the cluster was not searched (") and "Traceback" not in err


class RefusingApi(NamespaceApi):
    """NamespaceApi whose API server refuses NetworkPolicies, as RBAC does for a Role from before runs had
    one (named so: a fake; no cluster runs here)."""

    def __getattr__(self, method: str):
        if method == "create_namespaced_network_policy":

            def refuse(namespace: str, manifest: dict) -> None:
                from kubernetes.client import ApiException

                raise ApiException(status=403, reason="Forbidden")

            return refuse
        return super().__getattr__(method)


def test_an_object_the_cluster_refuses_ends_the_run_in_one_line_and_leaves_nothing(
    tmp_path, monkeypatch, capsys
):
    api = RefusingApi()
    monkeypatch.setattr(kube, "connect", lambda: api)
    monkeypatch.setattr(spawn, "RUNS", tmp_path / "runs")
    code = spawn.main(["--backend", "kubernetes", "-w", "2", "-n", "physics", "--no-preflight", str(MNIST)])
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: the cluster refused to create NetworkPolicy ")
    assert "in namespace physics (403 Forbidden)" in err[-1]
    assert "`nnsql spawn rbac --namespace physics --user YOU | kubectl apply -f -`" in err[-1]
    assert "Traceback" not in "\n".join(err)
    assert api.kinds("physics") == []  # the Secret of the run's environment is not left behind
