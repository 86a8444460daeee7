"""What a cluster admin sees: manifests that pass the restricted Pod Security Standard, the RBAC spawn needs
(exactly), a refusal on clusters too old, hostile pod files and env files answered in one line.

The restricted profile's rules are those of kubernetes.io/docs/concepts/security/pod-security-standards;
train/spawn/podsecurity.py writes them as checks, tested here rule by rule on pods that break them."""

from __future__ import annotations

import re
from types import SimpleNamespace

import kubernetes_validate
import pytest
import yaml

from nnsql.train.spawn import __main__ as spawn
from nnsql.train.spawn import envfile, kube, manifests, podsecurity, rbac
from nnsql.train.spawn.backend import RunSpec
from tests.conftest import REPO

MNIST = REPO / "train" / "mnist.py"


def pod_of(job: dict) -> dict:
    return job["spec"]["template"]["spec"]


@pytest.mark.parametrize(
    "options",
    [
        manifests.ClusterOptions(),
        manifests.ClusterOptions(gpus=2, pvc="shared", deadline=3600),
        manifests.ClusterOptions(ps=1, entrypoint="echo hi\npython /script/training-script.py\n"),
    ],
)
def test_generated_pods_pass_the_restricted_profile(options):
    job = manifests.job("run-x", 0, 2, (), options)
    assert podsecurity.violations(pod_of(job)) == []
    assert podsecurity.violations(manifests.collector_pod("run-x", options)["spec"]) == []
    pod = pod_of(job)
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 1000
    kubernetes_validate.validate(job, "1.37.0", strict=True)


def test_a_root_only_image_breaks_only_the_non_root_rules():
    job = manifests.job("run-x", 0, 2, (), manifests.ClusterOptions(run_as_user=None))
    broken = podsecurity.violations(pod_of(job))
    assert [v.why for v in broken] == ["runAsNonRoot is not true"] and broken[0].profile == "restricted"


RESTRICTED = {
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [
        {
            "name": "c",
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        }
    ],
    "volumes": [{"name": "v", "emptyDir": {}}],
}


@pytest.mark.parametrize(
    ("change", "profile", "why"),
    [
        ({"hostNetwork": True}, "baseline", "the node's namespace"),
        ({"hostPID": True}, "baseline", "the node's namespace"),
        ({"hostIPC": True}, "baseline", "the node's namespace"),
        ({"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}, "baseline", "mounts the node's /"),
        ({"c": {"privileged": True}}, "baseline", "a privileged container"),
        ({"c": {"capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}}}, "baseline", "adds ['SYS_ADMIN']"),
        ({"c": {"seccompProfile": {"type": "Unconfined"}}}, "baseline", "no seccomp filter"),
        ({"c": {"procMount": "Unmasked"}}, "baseline", "an unmasked /proc"),
        ({"ports": [{"containerPort": 80, "hostPort": 80}]}, "baseline", "node's ports"),
        ({"c": {"allowPrivilegeEscalation": True}}, "restricted", "allowPrivilegeEscalation is not false"),
        ({"c": {"capabilities": {}}}, "restricted", "does not drop ALL"),
        ({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}, "restricted", "runAsNonRoot"),
        ({"c": {"runAsUser": 0}}, "restricted", "runs as root"),
        ({"securityContext": {"runAsNonRoot": True}}, "restricted", "no RuntimeDefault seccomp"),
        ({"volumes": [{"name": "nfs", "nfs": {"server": "x", "path": "/"}}]}, "restricted", "a nfs volume"),
    ],
)
def test_each_rule_of_the_profile_is_checked(change, profile, why):
    spec = yaml.safe_load(yaml.safe_dump(RESTRICTED))  # a deep copy
    assert podsecurity.violations(spec) == []
    container = spec["containers"][0]
    for key, value in change.items():
        if key == "c":
            container["securityContext"].update(value)
        elif key == "ports":
            container["ports"] = value
        else:
            spec[key] = value
    found = podsecurity.violations(spec)
    assert any(v.profile == profile and why in v.why for v in found), found


def test_deadline_and_the_gpu_image():
    job = manifests.job("r", 0, 2, (), manifests.ClusterOptions(deadline=7200))
    assert job["spec"]["activeDeadlineSeconds"] == 7200
    assert manifests.default_image(0) == "tensorflow/tensorflow:2.21.0"
    assert manifests.default_image(1) == "tensorflow/tensorflow:2.21.0-gpu"


def dry_run(capsys, *args: str) -> tuple[list[dict], str]:
    code = spawn.main(["--backend", "kubernetes", "--dry-run", *args])
    out, err = capsys.readouterr()
    return (list(yaml.safe_load_all(out)) if code == 0 else []), err


def test_gpus_pick_the_gpu_image_and_no_pvc_is_warned(capsys):
    documents, err = dry_run(capsys, "--gpus", "1", str(MNIST))
    (container,) = pod_of(documents[-1])["containers"]
    assert container["image"] == manifests.GPU_IMAGE
    assert "warning: no --pvc: the workers share no volume" in err
    _, err = dry_run(capsys, "--pvc", "shared", str(MNIST))
    assert "no --pvc" not in err


HOSTILE_POD = """
apiVersion: v1
kind: Pod
spec:
  hostNetwork: true
  hostPID: true
  serviceAccountName: cluster-admin-sa
  containers:
  - name: x
    securityContext: {privileged: %s}
    volumeMounts: [{name: host, mountPath: /host}]
  volumes: [{name: host, hostPath: {path: /}}]
"""


def test_a_privileged_pod_file_is_refused_and_other_grants_are_warned(capsys, tmp_path):
    pod_file = tmp_path / "pod.yaml"
    pod_file.write_text(HOSTILE_POD % "true")
    documents, err = dry_run(capsys, "--pvc", "s", "--pod-file", str(pod_file), str(MNIST))
    assert documents == [] and err.strip().splitlines()[-1] == (
        "error: --pod-file/--overlay asks for a privileged container: refused without --allow-privileged"
    )
    documents, err = dry_run(
        capsys, "--pvc", "s", "--pod-file", str(pod_file), "--allow-privileged", str(MNIST)
    )
    assert pod_of(documents[-1])["containers"][0]["securityContext"]["privileged"] is True
    pod_file.write_text(HOSTILE_POD % "false")
    documents, err = dry_run(capsys, "--pvc", "s", "--pod-file", str(pod_file), str(MNIST))
    warnings = [line for line in err.splitlines() if line.startswith("warning: the pods get")]
    for expected in ("hostNetwork", "hostPID", "hostPath", "mounts the node's /", "cluster-admin-sa"):
        assert any(expected in line for line in warnings), (expected, warnings)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('KEY="v"   # c\n', {"KEY": "v"}),
        (
            "export A='x y'\nB=plain # trailing\n# comment\n\nC=\"a\\nb\"\n",
            {"A": "x y", "B": "plain", "C": "a\nb"},
        ),
        ("AWS_SECRET_ACCESS_KEY=abc#def\n", {"AWS_SECRET_ACCESS_KEY": "abc#def"}),
    ],
)
def test_env_files_follow_dotenv(tmp_path, text, expected):
    path = tmp_path / "s3.env"
    path.write_text(text)
    assert envfile.read(path) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("NNSQL_OUTPUT_DIR=/tmp/elsewhere\n", "2: NNSQL_OUTPUT_DIR is set by spawn and cannot be overridden"),
        ("TF_CONFIG={}\n", "2: TF_CONFIG is set by spawn"),
        ("TF_USE_LEGACY_KERAS=0\n", "choose the Keras with --keras"),
        ('A="unterminated\n', "2: expected NAME=value"),
        ("LONELY\n", "2: expected NAME=value; the line has no '='"),
    ],
)
def test_env_files_may_not_override_what_spawn_sets(tmp_path, capsys, monkeypatch, text, message):
    monkeypatch.setattr(spawn, "RUNS", tmp_path / "runs")
    path = tmp_path / "bad.env"
    path.write_text("OK=1\n" + text)
    assert spawn.main(["-w", "1", "--env-file", str(path), str(MNIST)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"error: {path}:") and message in err[-1]
    assert not (tmp_path / "runs").exists()


def test_every_name_the_pods_get_from_spawn_is_reserved():
    job = manifests.job("r", 0, 2, (), manifests.ClusterOptions(runtime_env={"TF_USE_LEGACY_KERAS": "1"}))
    names = {item["name"] for item in pod_of(job)["containers"][0]["env"]}
    assert names <= manifests.RESERVED_ENV
    assert {"TF_CONFIG", "WORKER_NUMBER", "JOB_COMPLETION_INDEX"} <= manifests.RESERVED_ENV


class RecordingApi:
    """A fake Kubernetes API (named so: no cluster runs here) that records each call as (resource, verb)
    the way the API server's RBAC sees it, and answers just enough for every backend method to run."""

    def __init__(self, minor: str = "31") -> None:
        self.verbs = {
            "create": "create",
            "delete": "delete",
            "list": "list",
            "read": "get",
            "connect_get": "get",
        }
        self.calls: set[tuple[str, str]] = set()
        self.core = self.batch = self.networking = self
        self.version = SimpleNamespace(get_code=lambda: SimpleNamespace(major="1", minor=minor))

    def __getattr__(self, method: str):
        match = re.fullmatch(r"(create|delete|list|read|connect_get)_namespaced_(\w+)", method)
        assert match, method
        verb, kind = self.verbs[match[1]], match[2]
        resource = {"pod_log": "pods/log", "pod_exec": "pods/exec"}.get(kind, kind + "s")
        resource = resource.replace("config_maps", "configmaps").replace("network_policys", "networkpolicies")

        def call(*args, **kwargs):
            self.calls.add((resource, verb))
            if resource == "pods/log":
                return "a worker's log\n"
            pod = SimpleNamespace(
                metadata=SimpleNamespace(
                    name="p", annotations={"batch.kubernetes.io/job-completion-index": "0"}
                ),
                status=SimpleNamespace(phase="Running", reason=None),
            )
            item = SimpleNamespace(metadata=SimpleNamespace(name="x"), reason="r", message="m")
            return SimpleNamespace(items=[pod if resource == "pods" else item], **vars(pod))

        return call


def test_rbac_grants_exactly_what_the_backend_calls(tmp_path, monkeypatch, capsys):
    api = RecordingApi()
    backend = kube.KubernetesBackend(manifests.ClusterOptions(pvc="shared"), api=api)
    backend.check_server()
    spec = RunSpec("r", MNIST, (), 2, tmp_path / "r", manifests.SHARED_DIR)

    def packed_outputs(*args, **kwargs):
        api.calls.add(("pods/exec", "get"))
        import base64
        import io
        import tarfile

        buffer = io.BytesIO()
        tarfile.open(fileobj=buffer, mode="w:gz").close()
        return base64.b64encode(buffer.getvalue()).decode()

    monkeypatch.setattr("kubernetes.stream.stream", packed_outputs)
    backend.start(spec, 0)
    backend.start(spec, 1)
    backend.status(spec)
    backend.logs(spec, 0)
    backend.events(spec)
    backend.collect(spec)
    backend.stop(spec)
    backend.delete_run("r")
    granted = {(resource, verb) for _, resource, verbs in rbac.PERMISSIONS for verb in verbs}
    used = api.calls | {("pods/exec", "create")}  # what clusters from 1.35 on check for the exec stream
    assert used == granted
    assert spawn.main(["rbac", "--namespace", "physics", "--user", "alice"]) == 0
    role, binding = yaml.safe_load_all(capsys.readouterr().out)
    assert role["kind"] == "Role" and role["metadata"]["namespace"] == "physics"
    assert {(r["resources"][0], v) for r in role["rules"] for v in r["verbs"]} == granted
    assert binding["subjects"] == [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}]
    for document in (role, binding):
        kubernetes_validate.validate(document, "1.37.0", strict=True)


@pytest.mark.parametrize(
    ("minor", "ps", "message"),
    [
        (
            "28",
            0,
            "the cluster runs Kubernetes 1.28; this run needs 1.29 or newer (the Job's podReplacementPolicy)",
        ),
        (
            "30+",
            1,
            "the cluster runs Kubernetes 1.30; this run needs 1.31 or newer (the Job's successPolicy)",
        ),
        ("29", 0, None),
        ("31", 1, None),
    ],
)
def test_clusters_too_old_are_refused_in_one_line(minor, ps, message):
    backend = kube.KubernetesBackend(manifests.ClusterOptions(ps=ps), api=RecordingApi(minor))
    if message is None:
        backend.check_server()
        return
    with pytest.raises(kube.ClusterTooOld) as error:
        backend.check_server()
    assert str(error.value) == message
