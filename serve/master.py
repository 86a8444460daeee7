"""The master process of `nnsql serve`: start-up checks, the shared listening socket, and the
workers' lives (start, restart, stop). See serve/__main__.py for the picture and serve/worker.py for a
worker. Kept free of Flask, numpy and onnxruntime imports: it starts in a blink and forks nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from nnsql.files import import_root

from . import oplog, rundir
from .coordination import Coordinator
from .gate import read_admin_key, read_api_keys
from .listening import StartError, listen, probe, spread
from .liveness import Watch, beat_path
from .oplog import say
from .worker import ENVIRONMENT

REPO_ROOT = import_root()
GIVE_UP_AFTER = 3  # start-up failures in a row of one worker (it died before it served) stop the server
STABLE = 60.0  # seconds: a worker that served this long before it died is started again at once
MAX_BACK_OFF = 30.0  # seconds between starts of a worker that keeps dying after it served
WATCH_EVERY = 1.0  # seconds between looks at the workers' heartbeats
STOP_GRACE = 10.0  # seconds running requests get to finish on shutdown
# Seconds between the master's rounds while the workers and it agree on a change (serve.coordination),
# and otherwise: each round costs about 0.2 ms of CPU on a loaded machine, the wake-up included.
BUSY_TICK = 0.02
IDLE_TICK = 0.1


def check_start(args: argparse.Namespace) -> list[socket.socket]:
    """Check what a user can get wrong before anything starts; the bound listening sockets, one per
    worker."""
    if not args.repo.exists():
        raise StartError(f"model repository {args.repo} does not exist (nnsql export onnx writes one)")
    if not args.repo.is_dir():
        raise StartError(f"model repository {args.repo} is not a directory")
    try:
        scoring = read_api_keys(args.api_key_file)
        admin = read_admin_key(args.model_control, args.admin_key_env)
    except ValueError as error:
        raise StartError(str(error)) from None
    if admin & scoring:
        raise StartError(f"--admin-key-env {args.admin_key_env}: the admin key must not be a scoring key")
    listener = listen(args.host, args.port)
    if args.grpc_port is not None:
        probe(args.host, args.grpc_port)
    return spread(listener, args.workers)


def raise_file_limit() -> None:
    """Open files up to the hard limit: each connection is one, and --max-connections defaults to 1000."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


@dataclass
class Worker:
    index: int
    process: subprocess.Popen
    watch: Watch
    ready_at: float | None = None  # when the master learnt that it serves
    restart_at: float | None = None  # set once it died: when the next one starts


def back_off(crashes: int) -> float:
    """Seconds to wait before starting a worker again after its `crashes`-th death in a row after it
    served: none the first time, then 1, 2, 4 … up to 30 s, so a crash on every request cannot make
    the master spin, and one crash costs nothing."""
    return 0.0 if crashes <= 1 else min(MAX_BACK_OFF, 2.0 ** (crashes - 2))


class Master:
    def __init__(
        self,
        listeners: list[socket.socket],
        args: argparse.Namespace,
        app: dict[str, Any],
        limits: dict[str, Any],
        grpc: dict[str, Any] | None = None,
    ) -> None:
        self.listeners = listeners  # one per worker index (serve.master.spread)
        self.args = args
        for removed in rundir.remove_stale():
            say(f"removed {removed}: left by a server that was killed")
        self.run_dir, self.run_lock = rundir.create()
        (self.run_dir / "workers").mkdir()
        self.settings = {
            "app": app | {"RUN_DIR": str(self.run_dir)},
            "limits": limits,
            "host": args.host,
            "port": listeners[0].getsockname()[1],
            "grace": STOP_GRACE,
            "access_log": args.access_log,
            "grpc": grpc,
            "master": os.getpid(),
        }
        self.coordinator = Coordinator(args.repo, self.run_dir / "repository", args.poll_seconds)
        self.workers: dict[int, Worker] = {}
        self.stopping = False
        self.start_failures: dict[int, int] = {}  # index -> deaths before serving, in a row
        self.crashes: dict[int, int] = {}  # index -> deaths after serving, each soon after the last
        self.last_watch = 0.0
        self.tick_error = ""

    def environment(self, index: int) -> dict[str, str]:
        metrics = self.run_dir / "metrics"
        metrics.mkdir(exist_ok=True)
        return os.environ | {
            ENVIRONMENT: json.dumps(self.settings | {"index": index, "fd": self.listener(index).fileno()}),
            "PROMETHEUS_MULTIPROC_DIR": str(metrics),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
            "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1"),
            # glibc's arenas, one per allocating thread: grpc-core's memory under a long reconnecting
            # flood kept rising with the default and stayed flat with two (docs/security.md)
            "MALLOC_ARENA_MAX": os.environ.get("MALLOC_ARENA_MAX", "2"),
        }

    def listener(self, index: int) -> socket.socket:
        """The worker's own listening socket: a worker started again takes over its predecessor's, with
        the connections waiting in it."""
        return self.listeners[index % len(self.listeners)]

    def start_worker(self, index: int) -> None:
        process = subprocess.Popen(
            [sys.executable, "-m", "nnsql.serve.worker"],
            env=self.environment(index),
            pass_fds=(self.listener(index).fileno(),),
            cwd=REPO_ROOT,
        )
        self.workers[index] = Worker(index, process, Watch(process.pid, beat_path(self.run_dir, process.pid)))

    def run(self) -> int:
        raise_file_limit()
        oplog.start()  # from here on, a log output nobody reads cannot stall the master
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self.request_stop)
        self.coordinator.plan()
        for index in range(self.args.workers):
            self.start_worker(index)
        url = f"http://{self.args.host}:{self.settings['port']}/"
        shape = f"{self.args.workers} workers × {self.args.threads} threads"
        say(f"serving {self.args.repo} on {url} with {shape}", sys.stdout)
        if self.settings["grpc"]:
            say(f"serving gRPC (KServe V2) on {self.args.host}:{self.args.grpc_port}", sys.stdout)
        status = 0
        try:
            while not self.stopping:
                time.sleep(BUSY_TICK if self.coordinator.busy() else IDLE_TICK)
                if not self.restart_dead():
                    status = 1
                    break
                self.watch_workers()
                live = [index for index, worker in self.workers.items() if worker.process.poll() is None]
                self.tick(live)
        finally:
            self.stop_all()
            oplog.stop()
        return status

    def tick(self, live: list[int]) -> None:
        """A round of the coordinator; an error (a full disk, a file that vanished) is said once and
        the workers keep serving what they serve."""
        try:
            self.coordinator.tick(live)
        except OSError as error:
            if str(error) != self.tick_error:
                say(f"error: the model repository could not be followed: {error}")
            self.tick_error = str(error)
        else:
            self.tick_error = ""

    def request_stop(self, signum: int, frame: Any) -> None:
        self.stopping = True

    def restart_dead(self) -> bool:
        """Start workers again that died (after their back-off); False when one keeps failing at start."""
        for index, worker in list(self.workers.items()):
            if self.stopping:
                break
            if worker.restart_at is None:
                code = worker.process.poll()
                if code is None:
                    continue
                if not self.died(worker, code):
                    return False
            assert worker.restart_at is not None
            if time.monotonic() >= worker.restart_at:
                self.start_worker(index)
        return True

    def died(self, worker: Worker, code: int) -> bool:
        """Count a death and set when the next worker starts; False when this worker failed at start
        (before it served: an import, a port, a model that kills its process) too many times in a row.
        Deaths after serving (a crash, the OOM killer, a kill) never stop the server."""
        self.forget_metrics(worker.process.pid)
        worker.watch.look()  # it may have said it served just before it died
        self.note_ready(worker)
        worker.watch.forget()
        index = worker.index
        delay = 0.0
        if worker.ready_at is None:
            self.start_failures[index] = self.start_failures.get(index, 0) + 1
            if self.start_failures[index] >= GIVE_UP_AFTER:
                failed = f"failed at start {GIVE_UP_AFTER} times in a row (see above)"
                say(f"error: worker {index} {failed}; stopping")
                return False
        else:
            served = time.monotonic() - worker.ready_at
            self.crashes[index] = 1 if served >= STABLE else self.crashes.get(index, 0) + 1
            delay = back_off(self.crashes[index])
        later = f" in {delay:g} s" if delay else ""
        say(f"worker {index} ended with exit code {code}; starting another{later}")
        worker.restart_at = time.monotonic() + delay
        return True

    def note_ready(self, worker: Worker) -> None:
        if worker.watch.ready and worker.ready_at is None:
            worker.ready_at = time.monotonic()
            self.start_failures[worker.index] = 0

    def watch_workers(self) -> None:
        """Kill a worker that is stopped or hung (no heartbeat and no CPU for --worker-timeout): it
        would hold back every reload and its clients' requests; the next round starts another. A
        worker that is silent but busy (a long model load) is waited for, and said so once."""
        now = time.monotonic()
        if now - self.last_watch < WATCH_EVERY:
            return
        self.last_watch = now
        timeout = self.args.worker_timeout
        for worker in self.workers.values():
            if worker.restart_at is not None or worker.process.poll() is not None:
                continue
            verdict = worker.watch.verdict(timeout)
            self.note_ready(worker)
            name = f"worker {worker.index} (pid {worker.process.pid})"
            silent = f"has not answered for {worker.watch.silent_for():.0f} s"
            if verdict == "unresponsive":
                say(f"{name} {silent} and is stopped or idle: killing it")
                worker.process.kill()
            elif verdict == "busy" and not worker.watch.busy_said:
                say(f"{name} {silent} but is using CPU (a long model load?): waiting")
                worker.watch.busy_said = True

    def forget_metrics(self, pid: int) -> None:
        """Drop a dead worker's live gauges (its counters stay: totals never go backwards)."""
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid, str(self.run_dir / "metrics"))

    def stop_all(self) -> None:
        for listener in self.listeners:
            listener.close()
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
