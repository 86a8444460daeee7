"""Job control, written once for every backend: start, wait until all workers run, stream the chief's log,
detect a failed worker and restart the whole group (training resumes from the shared BackupAndRestore
directory when a backup is there), then collect the chief's model, timing and logs into runs/<run-id>/ and
clean up. A failure that repeats identically (the same error ending a worker's log in two attempts in a
row: a bug in the script, a missing package) is not restarted again."""

from __future__ import annotations

import contextlib
import re
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from nnsql import quiet

from . import progress
from .backend import Backend, Phase, RunSpec, WorkerStatus, write_record

Say = Callable[[str], None]

NO_MODEL_HINT = (
    "save it with model.save(output_path('model.keras')), from nnsql.train.spawn import output_path, "
    "or print the absolute path it is saved to"
)


class JobFailed(Exception):
    """The job did not finish: the message says which worker failed and where its log is."""


class Stopped(BaseException):
    """spawn itself was told to stop (SIGTERM, SIGHUP): like Ctrl-C, the group is stopped and recorded."""


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into `Stopped`, so the job's cleanup runs; further signals are ignored
    while it does (a second Ctrl-C must not cut the cleanup short)."""
    signals = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)

    def handler(number: int, frame: object) -> None:
        for each in signals:
            signal.signal(each, signal.SIG_IGN)
        if number == signal.SIGINT:
            raise KeyboardInterrupt
        raise Stopped(signal.Signals(number).name)

    previous = {number: signal.signal(number, handler) for number in signals}
    try:
        yield
    finally:
        for number, action in previous.items():
            signal.signal(number, action)


@dataclass(frozen=True)
class Settings:
    start_timeout: float = 300.0
    poll_seconds: float = 1.0
    max_restarts: int = 2
    keep: bool = False
    stop: threading.Event = field(default_factory=threading.Event)  # set: stop the job (the Python API)


def pause(settings: Settings) -> None:
    """Sleep one poll, or raise Stopped as soon as someone asks the job to stop."""
    if settings.stop.wait(settings.poll_seconds):
        raise Stopped("request")


# The line that ends a Python traceback ("ValueError: ...") or the bootstrap's refusal ("nnsql: error: ...").
ERROR_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception|Exit)\b.*|nnsql: error: .*)$")
# Errors a worker reports because another worker failed: they say nothing about the cause.
PEER_ERRORS = ("UnavailableError", "CancelledError", "DeadlineExceededError", "Collective ops is aborted")


def causes(log: str) -> set[str]:
    """The errors that ended a worker's log (none for a worker killed or stopped from outside)."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    tail = [line for line in lines[-40:] if ERROR_LINE.match(line)]
    return {line for line in tail[-1:] if not any(peer in line for peer in PEER_ERRORS)}


def attempt_causes(backend: Backend, spec: RunSpec) -> set[str]:
    return set().union(*(causes(backend.logs(spec, index)) for index in range(spec.tasks)))


@dataclass(frozen=True)
class Result:
    run_id: str
    attempts: int
    train_seconds: float
    model: Path | None


class LogFollower:
    """Prints the new lines of the chief's log, prefixed, as they arrive; TensorFlow's start-up lines
    (the cuInit `E0000` line, oneDNN notes) only with --verbose: the log file keeps them. A progress bar's
    redraws (`\r`) are one line: its last state, and on a terminal (`live`) one line redrawn meanwhile."""

    def __init__(self, say: Say, live: Say | None = None) -> None:
        self.say = say
        self.live = live
        self.seen = 0
        self.showing = ""

    def reset(self) -> None:
        self.seen = 0

    def follow(self, text: str) -> None:
        complete = text[: text.rfind("\n") + 1]
        lines = [line for line in progress.final_states(complete[self.seen :]) if line]
        if lines and self.showing and self.live:
            self.live("")  # the live line gives way to the lines that ended
            self.showing = ""
        for line in lines:
            if not quiet.is_noise(line):
                self.say(f"[worker 0] {line}")
        self.seen = len(complete)
        self.redraw(progress.final_state(text[len(complete) :]))

    def redraw(self, partial: str) -> None:
        if self.live and partial != self.showing:
            self.live(f"[worker 0] {partial}" if partial else "")
            self.showing = partial


def wait_until_running(backend: Backend, spec: RunSpec, settings: Settings) -> list[WorkerStatus]:
    deadline = time.monotonic() + settings.start_timeout
    while True:
        states = backend.status(spec)
        if len(states) == spec.tasks and all(s.phase != Phase.PENDING for s in states):
            return states
        if time.monotonic() > deadline:
            waiting = [s.index for s in states if s.phase == Phase.PENDING]
            raise JobFailed(
                f"workers {waiting} not running after {settings.start_timeout:.0f}s; "
                f"events: {backend.events(spec)}"
            )
        pause(settings)


def watch(backend: Backend, spec: RunSpec, settings: Settings, follower: LogFollower) -> WorkerStatus | None:
    """Until every worker succeeded (returns None) or one failed (returns its status)."""
    while True:
        states = backend.status(spec)
        follower.follow(backend.logs(spec, 0))
        failed = [s for s in states if s.phase == Phase.FAILED]
        if failed:
            return failed[0]
        # parameter-server training ends with its chief; workers and ps serve until they are stopped
        completing = states[:1] if spec.ps else states
        if completing and all(s.phase == Phase.SUCCEEDED for s in completing):
            return None
        pause(settings)


def resuming(backend: Backend, spec: RunSpec) -> str:
    """What the restarted group will start from, as far as this side can tell."""
    backup = backend.has_backup(spec)
    if backup is None:
        return "resuming from NNSQL_BACKUP_DIR if the script wrote a backup there (the chief's log says)"
    if backup:
        return "resuming from the last backup"
    return "starting over: there is no backup in NNSQL_BACKUP_DIR"


def run_job(backend: Backend, spec: RunSpec, settings: Settings, say: Say = print) -> Result:
    write_record(
        spec.run_dir,
        run_id=spec.run_id,
        backend=backend.name,
        workers=spec.workers,
        ps=spec.ps,
        script=str(spec.script),
        args=list(spec.args),
        state="starting",
        started=time.time(),
    )
    started = time.monotonic()
    follower = LogFollower(say, live=progress.terminal_line if say is print and sys.stdout.isatty() else None)
    attempt, previous = 0, set[str]()
    try:
        while True:
            tasks = f"{spec.workers} worker(s)" + (f", a chief and {spec.ps} ps" if spec.ps else "")
            say(f"{spec.run_id}: attempt {attempt + 1}, starting {tasks} on {backend.name}")
            backend.start(spec, attempt)
            wait_until_running(backend, spec, settings)
            write_record(spec.run_dir, state="running", attempt=attempt + 1)
            failure = watch(backend, spec, settings, follower)
            if failure is None:
                break
            log = spec.run_dir / f"attempt-{attempt}" / f"worker-{failure.index}.log"
            found = attempt_causes(backend, spec)
            backend.stop(spec)
            what = f"worker {failure.index} failed ({failure.detail})"
            if found & previous:
                raise JobFailed(
                    f"{what} with the same error as in the attempt before ({sorted(found & previous)[0]}): "
                    f"not restarting a failure that repeats; its log: {log}"
                )
            if attempt >= settings.max_restarts:
                raise JobFailed(f"{what} and {settings.max_restarts} restart(s) are used up; its log: {log}")
            attempt, previous = attempt + 1, found
            follower.reset()
            restart = f"restart {attempt} of {settings.max_restarts}"
            say(f"{what}; restarting the whole group ({restart}), {resuming(backend, spec)}")
        seconds = time.monotonic() - started
        model = backend.collect(spec)
        write_record(
            spec.run_dir,
            state="succeeded",
            attempts=attempt + 1,
            train_seconds=round(seconds, 2),
            model=str(model) if model else None,
        )
        say(
            f"{spec.run_id}: succeeded in {seconds:.1f}s after {attempt + 1} attempt(s)"
            + (f"; model: {model}" if model else f"; the chief wrote no model to collect ({NO_MODEL_HINT})")
        )
        if model:
            export = f"nnsql export duckdb --model {shlex.quote(str(model))} --db scores.duckdb"
            say(f"next: {export} --name mymodel")
        return Result(spec.run_id, attempt + 1, seconds, model)
    except (Stopped, KeyboardInterrupt) as stop:
        backend.stop(spec)
        write_record(spec.run_dir, state="stopped", error=f"stopped by {stop or 'Ctrl-C'}", ended=time.time())
        raise
    except BaseException as error:
        backend.stop(spec)
        write_record(
            spec.run_dir, state="failed", error=str(error) or type(error).__name__, ended=time.time()
        )
        raise
    finally:
        if not settings.keep:
            backend.stop(spec)
