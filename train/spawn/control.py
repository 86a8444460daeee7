"""Job control, written once for every backend: start, wait until all workers run, stream the chief's log,
detect a failed worker and restart the whole group (training resumes from the shared BackupAndRestore
directory), then collect the chief's model, timing and logs into runs/<run-id>/ and clean up."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from train.spawn.backend import Backend, Phase, RunSpec, WorkerStatus, write_record

Say = Callable[[str], None]


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


@dataclass(frozen=True)
class Result:
    run_id: str
    attempts: int
    train_seconds: float
    model: Path | None


class LogFollower:
    """Prints the new lines of the chief's log, prefixed, as they arrive."""

    def __init__(self, say: Say) -> None:
        self.say = say
        self.seen = 0

    def reset(self) -> None:
        self.seen = 0

    def follow(self, text: str) -> None:
        complete = text[: text.rfind("\n") + 1]
        for line in complete[self.seen :].splitlines():
            if line.strip():
                self.say(f"[worker 0] {line}")
        self.seen = len(complete)


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
        time.sleep(settings.poll_seconds)


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
        time.sleep(settings.poll_seconds)


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
    follower = LogFollower(say)
    attempt = 0
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
            backend.stop(spec)
            if attempt >= settings.max_restarts:
                raise JobFailed(
                    f"worker {failure.index} failed ({failure.detail}) and "
                    f"{settings.max_restarts} restart(s) "
                    f"are used up; its log: {log}"
                )
            attempt += 1
            follower.reset()
            say(
                f"worker {failure.index} failed ({failure.detail}); restarting the whole group "
                f"(restart {attempt} of {settings.max_restarts}), resuming from the last backup"
            )
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
            + (f"; model: {model}" if model else "; the chief wrote no model to collect")
        )
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
