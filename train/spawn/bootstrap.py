"""The first thing every pod runs, with the image's own Python, before the user's script or entrypoint.

The container command evaluates what it prints (`export NAME=value` lines); everything it says to people
goes to stderr, prefixed `nnsql:`. It
- builds TF_CONFIG and WORKER_NUMBER from the pod's completion index and the stable names
  <job>-<index>.<service> of the headless Service (train/spawn/tfconfig.py builds the same locally);
- creates NNSQL_OUTPUT_DIR and NNSQL_BACKUP_DIR, and says on a restarted attempt whether a backup is there;
- under --keras 2 (TF_USE_LEGACY_KERAS=1) makes sure tf_keras imports: a stock TensorFlow image holds
  Keras 3 only, so the tf-keras release matching the image's TensorFlow is installed into the pod's
  package directory (NNSQL_PACKAGES), or the pod stops with one line naming the fixes;
- makes `from nnsql.train.spawn import output_path` work in an image without the project
(train/spawn/output.py).

Standard library only, and Python 3.8 syntax: it runs in whatever image the user names.
"""

import importlib.util
import json
import os
import shlex
import subprocess
import sys

TENSORFLOW_DISTRIBUTIONS = (
    "tensorflow",
    "tensorflow-cpu",
    "tensorflow-gpu",
    "tensorflow-intel",
    "tf-nightly",
)
WORKER_IMAGE = "the project's worker image (train/spawn/image/Containerfile, then --image)"


def say(text):
    print("nnsql: " + text, file=sys.stderr, flush=True)


def fail(text):
    say("error: " + text)
    sys.exit(3)


def tf_config(env):
    """TF_CONFIG of this pod's task: task 0 is the chief in parameter-server training, then the workers,
    then the parameter servers; each task's address is its pod's stable name."""
    workers, ps = int(env["TOT_WORKERS"]), int(env.get("NNSQL_PS", "0"))
    position = int(env["JOB_COMPLETION_INDEX"])
    job, service, port = env["NNSQL_JOB"], env["NNSQL_SERVICE"], env["NNSQL_PORT"]
    roles = [("worker", i) for i in range(workers)]
    if ps:
        roles = [("chief", 0)] + roles + [("ps", i) for i in range(ps)]
    cluster = {}
    for number, (kind, _) in enumerate(roles):
        cluster.setdefault(kind, []).append(f"{job}-{number}.{service}:{port}")
    kind, index = roles[position]
    return json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}})


def prepare_directories(env):
    for name in ("NNSQL_OUTPUT_DIR", "NNSQL_BACKUP_DIR"):
        if env.get(name):
            os.makedirs(env[name], exist_ok=True)
    attempt, backup = int(env.get("NNSQL_ATTEMPT", "0")), env.get("NNSQL_BACKUP_DIR", "")
    if attempt and env.get("JOB_COMPLETION_INDEX") == "0":
        files = sum(len(names) for _, _, names in os.walk(backup)) if backup else 0
        if files:
            say(f"attempt {attempt + 1}: resuming from the backup in {backup} ({files} files)")
        else:
            say(f"attempt {attempt + 1}: no backup in {backup}: training starts from the beginning")


def tensorflow_release():
    """(distribution, version) of the TensorFlow installed here, or None."""
    from importlib import metadata

    for name in TENSORFLOW_DISTRIBUTIONS:
        try:
            return name, metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def install_tf_keras(env, packages):
    """tf-keras matching the image's TensorFlow, into `packages` (without dependencies: TensorFlow is
    here already). Returns True when tf_keras was missing and is now installed."""
    if env.get("TF_USE_LEGACY_KERAS") != "1" or importlib.util.find_spec("tf_keras") is not None:
        return False
    image = env.get("NNSQL_IMAGE") or "this image"
    release = tensorflow_release()
    if release is None:
        fail(f"{image} holds no TensorFlow: use an image with TensorFlow and tf-keras, or {WORKER_IMAGE}")
    distribution, version = release
    requirement = "tf-keras~={}.0".format(".".join(version.split(".")[:2]))
    say(
        f"{image} has {distribution} {version} but not tf-keras, on which --keras 2 runs model.fit: "
        f"installing {requirement} into {packages}"
    )
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    command += ["--no-deps", "--target", packages, requirement]
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
        reason = lines[-1] if lines else f"pip exit status {done.returncode}"
        fail(
            f"could not install {requirement} ({reason}): use an image that has it (pip install "
            f"{requirement}) or {WORKER_IMAGE}; or --keras 3 for a script written for Keras 3"
        )
    return True


def install_helper(env, packages):
    """nnsql.train.spawn's output_path for images without the project; True when it was added."""
    source = os.path.join(env["NNSQL_SCRIPT_DIR"], "output_path.py")
    if importlib.util.find_spec("nnsql") is not None or not os.path.isfile(source):
        return False  # the project's image (or nnsql installed)
    package = os.path.join(packages, "nnsql", "train", "spawn")
    os.makedirs(package, exist_ok=True)
    for parent in ("nnsql", os.path.join("nnsql", "train")):
        with open(os.path.join(packages, parent, "__init__.py"), "w"):
            pass
    with open(source) as helper, open(os.path.join(package, "__init__.py"), "w") as copy:
        copy.write(helper.read())
    return True


def main():
    env = dict(os.environ)
    exports = {"TF_CONFIG": tf_config(env), "WORKER_NUMBER": env["JOB_COMPLETION_INDEX"]}
    prepare_directories(env)
    packages = env.get("NNSQL_PACKAGES") or os.path.join(env.get("TMPDIR") or "/tmp", "nnsql-packages")
    added = [install_tf_keras(env, packages), install_helper(env, packages)]
    if any(added):
        path = [packages] + [part for part in env.get("PYTHONPATH", "").split(os.pathsep) if part]
        exports["PYTHONPATH"] = os.pathsep.join(path)
    for name, value in exports.items():
        print(f"export {name}={shlex.quote(value)}")


if __name__ == "__main__":
    main()
