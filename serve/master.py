"""The master process of `nnsql serve`: start-up checks, the shared listening socket, and the
workers' lives (start, restart, stop). See serve/__main__.py for the picture and serve/worker.py for a
worker. Kept free of Flask, numpy and onnxruntime imports: it starts in a blink and forks nothing.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnsql.serve import rundir
from nnsql.serve.coordination import Coordinator
from nnsql.serve.gate import read_api_keys
from nnsql.serve.worker import ENVIRONMENT

REPO_ROOT = Path(__file__).resolve().parents[1]
QUICK_DEATH = 10.0  # seconds: a worker that dies sooner after its start counts towards giving up
GIVE_UP_AFTER = 3  # quick deaths in a row
STOP_GRACE = 10.0  # seconds running requests get to finish on shutdown


class StartError(Exception):
    """Why the server cannot start, in one line."""


def check_start(args: argparse.Namespace) -> socket.socket:
    """Check what a user can get wrong before anything starts; the bound listening socket."""
    if not args.repo.exists():
        raise StartError(f"model repository {args.repo} does not exist (nnsql export onnx writes one)")
    if not args.repo.is_dir():
        raise StartError(f"model repository {args.repo} is not a directory")
    try:
        read_api_keys(args.api_key_file)
    except ValueError as error:
        raise StartError(str(error)) from None
    listener = listen(args.host, args.port)
    if args.grpc_port is not None:
        probe(args.host, args.grpc_port)
    return listener


def listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        listener = socket.create_server((host, port), family=family, backlog=2048)
    except socket.gaierror as error:
        raise StartError(f"cannot listen on {host}: {error.strerror}") from None
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise StartError(
                f"port {port} on {host} is already in use: stop the other server or pick --port"
            ) from None
        raise StartError(f"cannot listen on {host}:{port}: {error.strerror}") from None
    listener.set_inheritable(True)
    return listener


def probe(host: str, port: int) -> None:
    """The gRPC port is free: bound once without SO_REUSEPORT and closed. Each worker's gRPC server then
    binds it with SO_REUSEPORT (grpcio's default), sharing it; a foreign process already holding it
    would otherwise share our traffic without a word."""
    try:
        listen(host, port).close()
    except StartError:
        raise StartError(
            f"cannot listen for gRPC on {host}:{port}: the port is in use or not allowed"
        ) from None


def raise_file_limit() -> None:
    """Open files up to the hard limit: each connection is one, and --max-connections defaults to 1000."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


@dataclass
class Worker:
    index: int
    process: subprocess.Popen
    started: float = field(default_factory=time.monotonic)


class Master:
    def __init__(
        self,
        listener: socket.socket,
        args: argparse.Namespace,
        app: dict[str, Any],
        limits: dict[str, Any],
        grpc: dict[str, Any] | None = None,
    ) -> None:
        self.listener = listener
        self.args = args
        for removed in rundir.remove_stale():
            print(f"removed {removed}: left by a server that was killed", file=sys.stderr)
        self.run_dir, self.run_lock = rundir.create()
        self.settings = {
            "app": app | {"RUN_DIR": str(self.run_dir)},
            "limits": limits,
            "fd": listener.fileno(),
            "host": args.host,
            "port": listener.getsockname()[1],
            "grace": STOP_GRACE,
            "access_log": args.access_log,
            "grpc": grpc,
            "master": os.getpid(),
        }
        self.coordinator = Coordinator(args.repo, self.run_dir / "repository", args.poll_seconds)
        self.workers: dict[int, Worker] = {}
        self.stopping = False
        self.quick_deaths = 0
        self.tick_error = ""

    def environment(self, index: int) -> dict[str, str]:
        metrics = self.run_dir / "metrics"
        metrics.mkdir(exist_ok=True)
        return os.environ | {
            ENVIRONMENT: json.dumps(self.settings | {"index": index}),
            "PROMETHEUS_MULTIPROC_DIR": str(metrics),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
            "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1"),
        }

    def start_worker(self, index: int) -> None:
        process = subprocess.Popen(
            [sys.executable, "-m", "nnsql.serve.worker"],
            env=self.environment(index),
            pass_fds=(self.listener.fileno(),),
            cwd=REPO_ROOT,
        )
        self.workers[index] = Worker(index, process)

    def run(self) -> int:
        raise_file_limit()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self.request_stop)
        self.coordinator.plan()
        for index in range(self.args.workers):
            self.start_worker(index)
        url = f"http://{self.args.host}:{self.settings['port']}/"
        shape = f"{self.args.workers} workers × {self.args.threads} threads"
        print(f"serving {self.args.repo} on {url} with {shape}", flush=True)
        if self.settings["grpc"]:
            print(f"serving gRPC (KServe V2) on {self.args.host}:{self.args.grpc_port}", flush=True)
        status = 0
        try:
            while not self.stopping:
                time.sleep(0.02)
                if not self.restart_dead():
                    status = 1
                    break
                live = [index for index, worker in self.workers.items() if worker.process.poll() is None]
                self.tick(live)
        finally:
            self.stop_all()
        return status

    def tick(self, live: list[int]) -> None:
        """A round of the coordinator; an error (a full disk, a file that vanished) is said once and
        the workers keep serving what they serve."""
        try:
            self.coordinator.tick(live)
        except OSError as error:
            if str(error) != self.tick_error:
                print(f"error: the model repository could not be followed: {error}", file=sys.stderr)
            self.tick_error = str(error)
        else:
            self.tick_error = ""

    def request_stop(self, signum: int, frame: Any) -> None:
        self.stopping = True

    def restart_dead(self) -> bool:
        """Restart workers that died; False when they keep dying at start."""
        for index, worker in list(self.workers.items()):
            code = worker.process.poll()
            if code is None or self.stopping:
                continue
            self.forget_metrics(worker.process.pid)
            quick = time.monotonic() - worker.started < QUICK_DEATH
            self.quick_deaths = self.quick_deaths + 1 if quick else 0
            if self.quick_deaths >= GIVE_UP_AFTER:
                print("error: the workers keep failing at start (see above); stopping", file=sys.stderr)
                return False
            print(f"worker {index} ended with exit code {code}; starting another", file=sys.stderr)
            self.start_worker(index)
        return True

    def forget_metrics(self, pid: int) -> None:
        """Drop a dead worker's live gauges (its counters stay: totals never go backwards)."""
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid, str(self.run_dir / "metrics"))

    def stop_all(self) -> None:
        self.listener.close()
        for worker in self.workers.values():
            if worker.process.poll() is None:
                worker.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE + 5
        for worker in self.workers.values():
            try:
                worker.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait()
        shutil.rmtree(self.run_dir, ignore_errors=True)
        os.close(self.run_lock)
