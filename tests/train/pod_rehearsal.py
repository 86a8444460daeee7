"""A rehearsal of the generated Kubernetes pods on this machine, where no cluster and no container engine
can run.

What is exact: the ConfigMap's files, the container's command and its environment (the Job's `env` and the
Secret's values), the completion index, the Python environment the image holds, one network namespace per
pod with its own address on a shared bridge (so every pod listens on the same gRPC port, as on a cluster),
and the stable names <job>-<index>.<service> resolving to those addresses through /etc/hosts.

What stands in for the cluster:
- the image is a virtual environment under build/pod-images/, created once from PyPI and kept (keyed by
  the package and version): `tensorflow-cpu` of the pinned release for the default image, `tensorflow` for
  the GPU image (TensorFlow's own images hold no tf-keras, no project code);
- volumes are directories, and the mount paths in the command and the environment are rewritten to them
  (a ConfigMap, one directory per emptyDir per pod, one directory per claim shared by all pods);
- the pods' package index is a folder of wheels downloaded from PyPI (PIP_NO_INDEX, PIP_FIND_LINKS), since
  the pods' network namespaces reach nothing outside; the pods run as this user (root in a user namespace
  when this is not root), not as runAsUser.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO
from tests.fixtures import locked

BUILD = REPO / "build" / "pod-images"
NETWORK = "10.244.0"
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def pinned(package: str) -> str:
    """The version requirements.txt pins for `package`."""
    match = re.search(rf"^{re.escape(package)}==(\S+)$", (REPO / "requirements.txt").read_text(), re.M)
    assert match, f"{package} is not pinned in requirements.txt"
    return match[1]


def image_environment(distribution: str) -> Path:
    """A virtual environment holding only `distribution` (tensorflow-cpu or tensorflow) at the pinned
    TensorFlow release, and what it depends on: created once, then reused. The `tensorflow` one starts as
    a hard-linked copy of the `tensorflow-cpu` one (both depend on exactly the same packages) with the one
    distribution swapped, which saves most of a second installation."""
    version = pinned("tensorflow")
    venv = BUILD / f"{distribution}-{version}"
    with locked(venv.with_name(venv.name + ".lock")):  # one builder at a time, the others reuse it
        return made_image(distribution, version, venv)


def made_image(distribution: str, version: str, venv: Path) -> Path:
    done = venv / "rehearsal-image.json"
    if done.exists():
        return venv
    partial = venv.with_name(venv.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    pip = [str(partial / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    install = installer(partial)
    if distribution == "tensorflow-cpu":
        subprocess.run([sys.executable, "-m", "venv", str(partial)], check=True)
        subprocess.run([*install, f"{distribution}=={version}"], check=True)
    else:
        cpu = image_environment("tensorflow-cpu")
        subprocess.run(["cp", "-al", str(cpu), str(partial)], check=True)
        (partial / done.name).unlink()
        subprocess.run([*pip, "uninstall", "--quiet", "--yes", "tensorflow-cpu"], check=True)
        subprocess.run([*install, "--no-deps", f"{distribution}=={version}"], check=True)
    subprocess.run([*pip, "check"], check=True, stdout=subprocess.DEVNULL)
    (partial / done.name).write_text(json.dumps({"holds": f"{distribution}=={version}"}) + "\n")
    shutil.rmtree(venv, ignore_errors=True)
    partial.rename(venv)
    return venv


def installer(venv: Path) -> list[str]:
    """The command that installs packages into `venv`: uv where `make setup` put it beside this Python
    (parallel downloads, and TensorFlow's dependencies already in its cache from the project's own
    install), else the environment's pip. Either leaves pip in the environment, as the images hold it."""
    uv = Path(sys.executable).parent / "uv"
    if uv.exists():
        return [str(uv), "pip", "install", "--quiet", "--python", str(venv / "bin" / "python")]
    return [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "install", "--quiet"]


def wheel_index() -> Path:
    """The pods' package index: the tf-keras wheel of the pinned release, downloaded once."""
    folder = BUILD / f"index-tf-keras-{pinned('tf-keras')}"
    with locked(folder.with_name(folder.name + ".lock")):
        if any(folder.glob("*.whl")):
            return folder
        download = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", str(folder)]
        subprocess.run([*download, f"tf-keras=={pinned('tf-keras')}"], check=True)
    return folder


@dataclass(frozen=True)
class PodRun:
    index: int
    exit_code: int
    log: str


def by_kind(documents: list[dict]) -> dict[str, dict]:
    return {document["kind"]: document for document in documents}


def volume_paths(pod: dict, root: Path, index: int) -> dict[str, Path]:
    """Where each volume of pod `index` lives here."""
    paths = {}
    for volume in pod["volumes"]:
        if "configMap" in volume:
            paths[volume["name"]] = root / "configmap"
        elif "persistentVolumeClaim" in volume:
            paths[volume["name"]] = root / "claims" / volume["persistentVolumeClaim"]["claimName"]
        else:
            paths[volume["name"]] = root / f"pod-{index}" / volume["name"]
        paths[volume["name"]].mkdir(parents=True, exist_ok=True)
    return paths


def mapper(container: dict, volumes: dict[str, Path]):
    """Rewrites every mount path in a string to the directory standing in for its volume."""
    mounts = sorted(((m["mountPath"], volumes[m["name"]]) for m in container["volumeMounts"]), reverse=True)
    pattern = re.compile(
        r"(?<![\w./-])(" + "|".join(re.escape(path) for path, _ in mounts) + r")(?=$|[/\s\"':])"
    )
    local = dict(mounts)
    return lambda text: pattern.sub(lambda match: str(local[match[1]]), text)


def pod_spec(documents: list[dict], root: Path, image: Path, index: int, index_dir: Path) -> dict:
    kinds = by_kind(documents)
    pod = kinds["Job"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volumes = volume_paths(pod, root, index)
    rewrite = mapper(container, volumes)
    home = root / f"pod-{index}" / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": f"{image / 'bin'}:{IMAGE_PATH}",
        "HOME": str(home),
        "HOSTNAME": f"{kinds['Job']['metadata']['name']}-{index}",
        "JOB_COMPLETION_INDEX": str(index),
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(index_dir),
        **kinds["Secret"].get("stringData", {}),
        **{item["name"]: rewrite(item["value"]) for item in container["env"]},
    }
    return {
        "command": [rewrite(part) for part in container["command"]],
        "env": env,
        "address": f"{NETWORK}.{10 + index}",
        "log": str(root / f"pod-{index}.log"),
        "workdir": str(home),
    }


def rehearse(
    documents: list[dict], root: Path, image: Path, index_dir: Path, timeout: float = 600
) -> list[PodRun]:
    """Every pod of the Job's first attempt, run to the end; each one's exit status and log."""
    kinds = by_kind(documents)
    (root / "configmap").mkdir(parents=True, exist_ok=True)
    for name, text in kinds["ConfigMap"]["data"].items():
        (root / "configmap" / name).write_text(text)
    job = kinds["Job"]
    pods = [pod_spec(documents, root, image, i, index_dir) for i in range(job["spec"]["completions"])]
    service = kinds["Service"]["metadata"]["name"]
    hosts = root / "hosts"
    names = [f"{pod['address']} {job['metadata']['name']}-{i}.{service}" for i, pod in enumerate(pods)]
    hosts.write_text("127.0.0.1 localhost\n" + "\n".join(names) + "\n")
    spec = root / "network.json"
    spec.write_text(json.dumps({"gateway": f"{NETWORK}.1", "hosts": str(hosts), "pods": pods}))
    namespaces = ["unshare", "--net", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc"]
    if os.geteuid() != 0:
        namespaces += ["--user", "--map-root-user"]
    result = root / "result.json"
    driver = Path(__file__).with_name("pod_network.py")
    subprocess.run(
        [*namespaces, sys.executable, str(driver), str(spec), str(result)], check=True, timeout=timeout
    )
    codes = json.loads(result.read_text())["exit_codes"]
    return [
        PodRun(i, code, Path(pod["log"]).read_text())
        for i, (code, pod) in enumerate(zip(codes, pods, strict=True))
    ]


def collect(documents: list[dict], root: Path) -> Path:
    """What the collector pod does: the claim's output directory packed by the same code, unpacked here."""
    import base64
    import io
    import tarfile

    from nnsql.train.spawn import manifests

    claim = by_kind(documents)["Job"]["spec"]["template"]["spec"]
    (volume,) = [v for v in claim["volumes"] if "persistentVolumeClaim" in v]
    shared = root / "claims" / volume["persistentVolumeClaim"]["claimName"]
    code = manifests.PACK_OUTPUT.replace(manifests.SHARED_DIR, str(shared))
    packed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    target = root / "collected"
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(packed)), mode="r:gz") as archive:
        archive.extractall(target, filter="data")
    return target
