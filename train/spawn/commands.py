"""`status RUN`, `logs RUN [--worker I]` and `delete RUN`: what spawn says about, and does to, a past run.

A RUN is a run id, the name of a folder directly under runs/; paths are refused, so `delete` can remove
nothing but a run's own folder (and, for a Kubernetes run, its resources in the namespace it recorded).
runs/ may be a shared group's folder: a run's folder is a directory of runs/ itself, never a link
(another writer of runs/ may plant one to a directory elsewhere), `latest` names a run of runs/ by its
plain name, and a run's files are opened without following links, as regular files only.
"""

from __future__ import annotations

import argparse
import errno
import os
import re
import shutil
import stat
import sys
from pathlib import Path

import yaml

from nnsql.text import printable

from . import latest, manifests, progress
from .backend import read_record

NAMES = ("status", "logs", "delete")
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,120}")


def run_directory(runs: Path, run_id: str) -> Path:
    """runs/<id> for a plain run id naming a directory of runs/ itself (`latest`: the run it names);
    ValueError for anything that could name another directory: a path, or a link planted in runs/."""
    if not RUN_ID.fullmatch(run_id) or run_id in (".", ".."):
        raise ValueError(f"{run_id!r} is not a run id (a name listed under {runs}/, not a path)")
    if latest.is_link(runs / run_id):
        run_id = latest_run(runs)
    directory_itself(runs / run_id, ", not a run's folder; refusing it")  # absent: "no run", said later
    return runs / run_id


def directory_itself(path: Path, refusal: str) -> os.stat_result | None:
    """`path`'s own status (never a link's target), None when it is not there; ValueError "PATH is a
    symbolic link" or "... not a directory", followed by `refusal`, when it is not a directory itself."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(found.st_mode):
        what = "a symbolic link" if stat.S_ISLNK(found.st_mode) else "not a directory"
        raise ValueError(f"{printable(str(path))} is {what}{refusal}")
    return found


def latest_run(runs: Path) -> str:
    """The run runs/latest names: spawn writes it as a run's plain name, never a path."""
    named = os.readlink(runs / latest.LATEST)
    if not RUN_ID.fullmatch(named) or named in (".", "..", latest.LATEST):
        raise ValueError(f"{runs}/latest names {printable(named)!r}, not a run of {runs}/; refusing it")
    return named


def recorded_runs(runs: Path) -> list[Path]:
    """Every run folder of runs/ holding a run record, in name order; links and other entries skipped."""
    if not runs.is_dir():
        return []
    with os.scandir(runs) as entries:
        folders = [
            Path(entry.path)
            for entry in entries
            if RUN_ID.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False)
        ]
    return sorted(folder for folder in folders if os.path.lexists(folder / "run.json"))


def open_file(run_dir: Path, *names: str) -> int:
    """A descriptor of run_dir/names..., each name opened from its parent's descriptor without
    following a link; a FIFO is neither waited on nor woken. OSError (ELOOP for a link) otherwise."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    descriptor = os.open(run_dir, flags | os.O_DIRECTORY)
    try:
        for name in names[:-1]:
            inner = os.open(name, flags | os.O_DIRECTORY, dir_fd=descriptor)
            os.close(descriptor)
            descriptor = inner
        return os.open(names[-1], flags, dir_fd=descriptor)
    finally:
        os.close(descriptor)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=f"nnsql spawn {argv[0]}", description=__doc__.splitlines()[0] if __doc__ else ""
    )
    parser.add_argument("run", help="the run id, as printed at the start of the run and listed in runs/")
    if argv[0] == "logs":
        parser.add_argument("--worker", type=int, default=0, help="worker index (default 0, the chief)")
    return parser.parse_args(argv[1:])


def show_log(run_dir: Path, record: dict, worker: int) -> None:
    attempt = max(0, int(record.get("attempt", 1)) - 1)
    names = (f"attempt-{attempt}", f"worker-{worker}.log")
    log = run_dir.joinpath(*names)
    try:
        descriptor = open_file(run_dir, *names)
    except FileNotFoundError:
        print(f"(no log at {log})")
        return
    except OSError as error:
        reason = "a symbolic link" if error.errno in (errno.ELOOP, errno.ENOTDIR) else error.strerror
        raise ValueError(f"cannot read the log {printable(str(log))}: {reason}") from None
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise ValueError(f"{printable(str(log))} is not a log (not a regular file); refusing it")
        # bytes decoded as they are (read_text reads each `\r` of a progress bar as a line end)
        print(progress.collapsed(file.read().decode(errors="replace")), end="")


def delete(run_dir: Path, record: dict) -> None:
    """Remove the run's folder, a directory of runs/ itself: removed from runs/'s descriptor, where a
    link swapped in for the folder meanwhile is refused (shutil.rmtree), never followed."""
    runs = run_dir.parent
    if record.get("backend") == "kubernetes":
        from .kube import KubernetesBackend

        options = manifests.ClusterOptions(namespace=record.get("namespace", "default"))
        KubernetesBackend(options).delete_run(run_dir.name)
    latest.forget(runs, run_dir)
    folder = os.open(runs, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        shutil.rmtree(run_dir.name, dir_fd=folder)
    finally:
        os.close(folder)
    print(f"deleted {run_dir.name}")


def run_command(argv: list[str], runs: Path) -> int:
    args = parse(argv)
    try:
        run_dir = run_directory(runs, args.run)
        record = read_record(run_dir)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except FileNotFoundError:
        print(f"error: no run {args.run!r} in {runs}/", file=sys.stderr)
        return 2
    try:
        if argv[0] == "status":
            print(yaml.safe_dump(record, sort_keys=False), end="")
        elif argv[0] == "logs":
            show_log(run_dir, record, args.worker)
        else:
            delete(run_dir, record)
    except (ValueError, OSError) as error:  # a link swapped in for the run's folder, a FIFO as a log
        print(f"error: {printable(str(error))}", file=sys.stderr)
        return 2
    return 0
