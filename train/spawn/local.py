"""Local backend: N real worker processes on this machine, on free ports, TF_CONFIG as on the cluster."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

from train.spawn.backend import Phase, RunSpec, WorkerStatus
from train.spawn.tfconfig import worker_env


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for probe in sockets:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in sockets]
    finally:
        for probe in sockets:
            probe.close()


class LocalBackend:
    name = "local"

    def __init__(self) -> None:
        self.processes: list[subprocess.Popen] = []
        self.log_paths: list[Path] = []

    def start(self, spec: RunSpec, attempt: int) -> None:
        addresses = [f"127.0.0.1:{port}" for port in free_ports(spec.workers)]
        self.processes, self.log_paths = [], []
        for index in range(spec.workers):
            log_path = spec.run_dir / f"attempt-{attempt}" / f"worker-{index}.log"
            log_path.parent.mkdir(parents=True, exist_ok=True)
            env = {**os.environ, **spec.env, **worker_env(addresses, index), "PYTHONUNBUFFERED": "1"}
            # the script imports what it would import when run from here
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))
            env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
            with log_path.open("wb") as log:
                process = subprocess.Popen(
                    [sys.executable, str(spec.script), *spec.args],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: stop() ends its children too
                )
            self.processes.append(process)
            self.log_paths.append(log_path)
        pids = {str(i): p.pid for i, p in enumerate(self.processes)}
        (spec.run_dir / "workers.json").write_text(json.dumps({"attempt": attempt, "pids": pids}) + "\n")

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
        return path.read_text(errors="replace") if path and path.exists() else ""

    def stop(self, spec: RunSpec) -> None:
        for process in self.processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    def collect(self, spec: RunSpec) -> Path | None:
        """The chief wrote into the shared directory; copy its model files into runs/<id>/model/."""
        source = Path(spec.shared_dir) / "output"
        if not source.is_dir():
            return None
        target = spec.run_dir / "model"
        shutil.copytree(source, target, dirs_exist_ok=True)
        found = sorted(target.glob("*.keras"))
        return found[0] if found else None

    def events(self, spec: RunSpec) -> str:
        return "local processes start immediately; see the worker logs"
