"""`nnsql spawn tensorboard RUN`: TensorBoard over a run's logs, no manual steps.

It serves the TensorBoard event files of the run: while a local run trains, those the chief is writing
under its NNSQL_OUTPUT_DIR; once any run ended (local or Kubernetes), those collected into
runs/<run-id>/model/. A script's TensorBoard callback is collected when its log_dir is under
NNSQL_OUTPUT_DIR, or when the chief prints the directory's absolute path.

TensorBoard runs in a process group of its own (with the data server it starts); SIGTERM, SIGHUP and
Ctrl-C sent to this command are passed on to that whole group, and whatever of it is still there 10 s
later is killed: nothing outlives the command.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from nnsql.text import printable

from . import commands
from .backend import read_record


def has_events(directory: Path) -> bool:
    return directory.is_dir() and next(directory.rglob("events.out.tfevents*"), None) is not None


def log_directory(run_dir: Path) -> Path | None:
    """The collected logs when there are any, else the live output of a local run; ValueError when the
    run's folder or one on the way to its logs is not this user's own directory (see `own_directory`)."""
    own_directory(run_dir)
    for names in (("model",), ("shared", "output")):
        reached = all(own_directory(run_dir.joinpath(*names[: at + 1])) for at in range(len(names)))
        if reached and has_events(run_dir.joinpath(*names)):
            return run_dir.joinpath(*names)
    return None


def own_directory(path: Path) -> bool:
    """Whether `path` is there; ValueError when it is a link, not a directory, or not this user's.
    TensorBoard reads, as this user, whatever its log directory holds or names (event files, a
    projector's checkpoint path) and serves it on its port: in a runs/ others may write, a run folder of
    theirs, or a link they put in one, would choose which of this user's files it serves."""
    found = commands.directory_itself(path, "; refusing to serve its logs")
    if found is None:
        return False
    if found.st_uid != os.getuid():
        raise ValueError(
            f"{printable(str(path))} belongs to user {found.st_uid}, not to you: TensorBoard would read as "
            "you what its files name; refusing to serve its logs"
        )
    return True


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="nnsql spawn tensorboard", description=__doc__)
    parser.add_argument("run", help="the run id (listed in runs/)")
    parser.add_argument("--port", type=int, default=6006)
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: this machine only)"
    )
    return parser.parse_args(argv)


def main(argv: list[str], runs: Path) -> int:
    args = parse(argv)
    try:
        run_dir = commands.run_directory(runs, args.run)
        read_record(run_dir)
        logs = log_directory(run_dir)
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if logs is None:
        print(
            f"error: run {args.run} has no TensorBoard event files yet; give the script's TensorBoard "
            "callback a log_dir under $NNSQL_OUTPUT_DIR, or print its absolute path from the chief",
            file=sys.stderr,
        )
        return 2
    print(f"TensorBoard for {args.run} at http://{args.host}:{args.port}/ (logs: {logs}); Ctrl-C to stop")
    command = [sys.executable, "-m", "tensorboard.main", "--logdir", str(logs)]
    command += ["--host", args.host, "--port", str(args.port)]
    return serve(command)


FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
GRACE = 10.0  # seconds the group has to end once this command is told to stop


def group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def end_group(group: int, grace: float = GRACE) -> None:
    """SIGTERM to every process of the group, SIGKILL to those still there after `grace` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while group_alive(group) and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


def serve(command: list[str], grace: float = GRACE) -> int:
    """Run `command` in a process group of its own until it ends or this process is told to stop; 0 when
    it was stopped on request, else its exit status. Once told to stop, the group has `grace` seconds to
    end, its first process included: one that ignores or lingers on the signal is killed then."""
    process = subprocess.Popen(command, start_new_session=True)
    stopped: list[float] = []

    def forward(number: int, frame: object) -> None:
        stopped.append(time.monotonic())
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, number)

    previous = {number: signal.signal(number, forward) for number in FORWARDED}
    try:
        code = wait_unless_stopped(process, stopped, grace)
    finally:
        end_group(process.pid, grace=left_of(grace, stopped))
        process.wait()
        for number, action in previous.items():
            signal.signal(number, action)
    return 0 if stopped else code


def left_of(grace: float, stopped: list[float]) -> float:
    """Seconds of the grace left: all of it before a stop request, then what the time since it leaves."""
    return max(0.0, grace - (time.monotonic() - stopped[0])) if stopped else grace


def wait_unless_stopped(process: subprocess.Popen[bytes], stopped: list[float], grace: float) -> int:
    """The process's exit status, or -1 when it is still running `grace` seconds after a stop request."""
    while True:
        try:
            return process.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            if stopped and left_of(grace, stopped) == 0.0:
                return -1
