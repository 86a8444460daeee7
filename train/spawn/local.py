"""Local backend: N real worker processes on this machine, on free ports, TF_CONFIG as on the cluster."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from nnsql.files import import_root, shipped
from nnsql.text import printable

from ..objectstore import PRIVATE_NETWORK, STAGED_LINE
from . import netns
from .backend import Phase, RunSpec, WorkerStatus, collected_model, own_directory, own_file, worker_umask
from .control import JobFailed
from .tfconfig import worker_env


def free_ports(count: int, rng: random.Random | None = None) -> list[int]:
    """`count` ports free to bind now, for the workers' gRPC servers, chosen below the kernel's range of
    ephemeral ports. A port the kernel hands out for binding to 0 returns to that range when the probe
    closes, and any outgoing connection on the machine may take it before the worker binds it (TensorFlow
    then fails with "Could not start gRPC server"); a port below that range is only taken by a process
    binding it on purpose."""
    rng = rng or random.Random()
    low = ephemeral_range()[0]
    low = low if low > PORTS_FROM + 100 * count else 65536  # a range starting low: any port above
    chosen: list[int] = []
    for _ in range(200 * count):
        port = rng.randrange(PORTS_FROM, low)
        if port not in chosen and can_bind(port):
            chosen.append(port)
            if len(chosen) == count:
                return chosen
    raise RuntimeError(f"no {count} free ports between {PORTS_FROM} and {low} on 127.0.0.1")


PORTS_FROM = 20000  # above the ports services commonly listen on


def ephemeral_range() -> tuple[int, int]:
    """Linux's ip_local_port_range (its default where it cannot be read)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def can_bind(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# The folder holding the nnsql package (a checkout's root, or site-packages): local workers import
# nnsql.train from it wherever spawn is started (a pod gets it from the worker image, or the bootstrap).
PROJECT_ROOT = import_root()

LIFELINE = shipped("train", "spawn", "lifeline.py")

# An absolute path the chief prints (a model file, a SavedModel or a TensorBoard log directory): a word
# of its own, or quoted, or after `=` or `(`; never a slash inside a word (`data/../home/alice/x.keras`).
PRINTED_PATH = re.compile(r"""(?:^|(?<=[\s'"`=(\[,]))(/[^\s'"`]+)""", re.MULTILINE)


def is_output(path: Path) -> bool:
    if path.is_file():
        return path.suffix in (".keras", ".h5", ".hdf5")
    return path.is_dir() and (
        (path / "saved_model.pb").is_file() or next(path.rglob("events.out.tfevents*"), None) is not None
    )


def printed_outputs(log: str, since: float) -> list[Path]:
    """Models and TensorBoard logs the chief wrote during the run and named in its output, newest first.
    Only the script's own words name outputs: the lines nnsql.train.data prints about what it staged
    hold bucket keys, which whoever may write the bucket chooses (a key can spell a path of the user's,
    `data/x /home/alice/best.keras .csv`), and are skipped. A path with `..` in it is not taken either.
    What the rest names is still checked like data: see `foreign`."""
    found: dict[Path, float] = {}
    words = "\n".join(line for line in log.splitlines() if not line.startswith(STAGED_LINE))
    for text in PRINTED_PATH.findall(words):
        path = Path(text.rstrip(".,;:)]"))
        if ".." in path.parts:
            continue
        if path.exists() and path.stat().st_mtime >= since and is_output(path):
            found[path] = path.stat().st_mtime
    return sorted(found, key=found.__getitem__, reverse=True)


def say_not_collected(path: Path, why: str) -> None:
    print(f"not collected: {printable(str(path))} {why}", file=sys.stderr)


def refuse_link(path: Path) -> None:
    say_not_collected(path, "is a symbolic link (outputs are copied, never followed)")


def foreign(path: Path) -> bool:
    """Whether `path` belongs to another user (it is left out, and named): what the run wrote is the
    spawning user's, and another user's file must never become the model, whatever names it."""
    if path.lstat().st_uid == os.geteuid():
        return False
    say_not_collected(path, "is owned by another user (only the run's own files are collected)")
    return True


def collectable(path: Path, copy: Path) -> bool:
    """Whether a printed path is copied to `copy`: never a link, another user's file, or over what was
    collected already (the chief's own outputs come first, and a name in the log never replaces them)."""
    if path.is_symlink():
        refuse_link(path)
        return False
    if foreign(path):
        return False
    if copy.exists():
        say_not_collected(path, f"({copy} was collected already: a printed path never replaces it)")
        return False
    return True


def copy_outputs(source: Path, target: Path) -> None:
    """Copy the directory `source` into `target`, leaving out (and naming) every symbolic link: a worker
    could otherwise hand back any file its user can read, such as a link to /etc/passwd saved as
    model.keras, and spawn would report it as the model."""

    def links(directory: str, names: list[str]) -> list[str]:
        found = [name for name in names if os.path.islink(os.path.join(directory, name))]
        for name in found:
            refuse_link(Path(directory, name))
        return found + [name for name in names if name not in found and foreign(Path(directory, name))]

    shutil.copytree(source, target, ignore=links, dirs_exist_ok=True)


class NetworkUnavailable(JobFailed):
    """No private network for the workers; the message is the one line to print."""


def private_network_refusal(why: str) -> str:
    return (
        f"cannot keep the workers off the network: {why}; --network host runs them anyway, with their "
        "TensorFlow ports open to every host that can reach this machine"
    )


HOST_NETWORK_WARNING = (
    "--network host: the workers' TensorFlow ports (no authentication: whoever connects runs code as you) "
    "are open to every host that can reach this machine"
)


def signal_group(group: int, number: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone already
        os.killpg(group, number)


class LocalBackend:
    name = "local"

    def __init__(self, command: str = "", lifeline: bool = True, network: str = "private") -> None:
        self.processes: list[subprocess.Popen] = []
        self.log_paths: list[Path] = []
        self.command = command  # shell lines each worker runs before the script (--command)
        # workers die with spawn (train/spawn/lifeline.py), unless they are to outlive it (--keep)
        self.lifeline = lifeline
        # "private": the attempt's workers share a network namespace of their own (train/spawn/netns.py)
        self.network = network
        self.holder: netns.Holder | None = None
        self.started = 0.0

    def start(self, spec: RunSpec, attempt: int) -> None:
        addresses = [f"127.0.0.1:{port}" for port in free_ports(spec.tasks)]
        self.processes, self.log_paths = [], []
        self.started = self.started or time.time()
        for name in ("NNSQL_OUTPUT_DIR", "NNSQL_BACKUP_DIR"):  # there before the script starts
            if spec.env.get(name):
                own_directory(Path(spec.env[name]))
        if self.network == "private":
            try:
                self.holder = netns.Holder.start()
            except netns.Unavailable as error:  # checked before the run: only a change since then
                raise NetworkUnavailable(private_network_refusal(str(error))) from None
        for index in range(spec.tasks):
            log_path = spec.run_dir / f"attempt-{attempt}" / f"worker-{index}.log"
            own_directory(log_path.parent)
            env = {**os.environ, **spec.env, **worker_env(addresses, index, spec.ps), "PYTHONUNBUFFERED": "1"}
            # the script imports what it would import when run from here, and `python` or `pip` in --command
            # lines are this Python's, as in a pod they are the image's
            path = [os.getcwd(), str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]
            env["PYTHONPATH"] = os.pathsep.join(filter(None, path))
            env["PATH"] = os.pathsep.join(filter(None, [str(Path(sys.executable).parent), env.get("PATH")]))
            env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
            env[PRIVATE_NETWORK] = self.network  # what a failed download advises (train/objectstore.py)
            with open(own_file(log_path), "wb") as log:
                process = subprocess.Popen(
                    self.worker_command(spec),
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: stop() ends its children too
                    umask=worker_umask(),  # what the script saves, no other user may replace
                )
            self.processes.append(process)
            self.log_paths.append(log_path)
        pids = {str(i): p.pid for i, p in enumerate(self.processes)}
        with open(own_file(spec.run_dir / "workers.json"), "w") as record:
            record.write(json.dumps({"attempt": attempt, "pids": pids}) + "\n")

    def worker_command(self, spec: RunSpec) -> list[str]:
        command = [sys.executable, str(spec.script), *spec.args]
        if self.command:
            command = ["bash", "-c", f'set -e\n{self.command}\nexec "$@"', "worker", *command]
        if self.lifeline:
            # by path, isolated (-I): a `train` package in the user's folder must not shadow ours
            command = [sys.executable, "-I", str(LIFELINE), str(os.getpid()), *command]
        # nsenter execs without forking: the worker keeps its pid, its parent (spawn) and its lifeline
        return self.holder.join(command) if self.holder else command

    def status(self, spec: RunSpec) -> list[WorkerStatus]:
        result = []
        for index, process in enumerate(self.processes):
            code = process.poll()
            if code is None:
                result.append(WorkerStatus(index, Phase.RUNNING))
            elif code == 0:
                result.append(WorkerStatus(index, Phase.SUCCEEDED))
            else:
                result.append(WorkerStatus(index, Phase.FAILED, f"exit status {code}"))
        return result

    def logs(self, spec: RunSpec, index: int) -> str:
        path = self.log_paths[index] if index < len(self.log_paths) else None
        # bytes decoded as they are: read_text would turn a progress bar's every `\r` into a new line
        return path.read_bytes().decode(errors="replace") if path and path.exists() else ""

    def stop(self, spec: RunSpec) -> None:
        """Signal every worker's whole process group, the dead leaders' too: a crashed worker's own child
        processes live on in its group. SIGKILL what is left after 10 s."""
        for process in self.processes:
            signal_group(process.pid, signal.SIGTERM)
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
            signal_group(process.pid, signal.SIGKILL)
            process.wait()
        if self.holder:  # the namespace ends with the last of its processes
            self.holder.stop()
            self.holder = None

    def collect(self, spec: RunSpec) -> Path | None:
        """Copy what the chief wrote under NNSQL_OUTPUT_DIR, and the models it printed the paths of, into
        runs/<id>/model/; returns the model to export (backend.collected_model)."""
        source = Path(spec.shared_dir) / "output"
        target = spec.run_dir / "model"
        if source.is_dir():
            copy_outputs(source, target)
        printed = []
        for path in printed_outputs(self.logs(spec, 0), self.started):
            copy = target / path.name
            if not collectable(path, copy):
                continue
            if path.is_dir():
                copy_outputs(path, copy)
            else:
                own_directory(target)
                shutil.copy2(path, copy)
            printed.append(copy)
        return collected_model(target, printed)

    def events(self, spec: RunSpec) -> str:
        return "local processes start immediately; see the worker logs"

    def has_backup(self, spec: RunSpec) -> bool | None:
        backup = spec.env.get("NNSQL_BACKUP_DIR")
        return backup is not None and any(path.is_file() for path in Path(backup).rglob("*"))
