"""The run directory of `nnsql serve` (`$TMPDIR/nnsql-serve-*`: plans, acknowledgements, metrics,
heartbeats), and how it never outlives the server.

Its `lock` file is held with a shared flock by the master and by each worker, each on its own open
file. The kernel drops a process's flock when the process ends, however it ends (SIGKILL too), so:
- the master removes the directory when it stops;
- a worker that ends after the master (the master was killed) tries to take the lock exclusively:
  it succeeds only when no other process of the server holds it any more, and then removes the
  directory (the last one out);
- a server starting later removes the directories of its own user whose lock nobody holds: the proof
  that every process of that server has ended (both of them were killed at once).
The lock file is created under another name, locked, then renamed into place, so a directory whose
`lock` exists is held by its creator for as long as that creator lives. A directory without one
(being created, or left by an older version) is never touched.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import tempfile
from pathlib import Path

PREFIX = "nnsql-serve-"
LOCK = "lock"


def create() -> tuple[Path, int]:
    """A new run directory, and the descriptor of its lock, held shared until closed (or the end)."""
    run_dir = Path(tempfile.mkdtemp(prefix=PREFIX))
    pending = run_dir / f".{LOCK}"
    fd = os.open(pending, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    pending.rename(run_dir / LOCK)
    return run_dir, fd


def hold(run_dir: Path) -> int | None:
    """A worker's share of the lock: its descriptor, or None when the directory is gone already."""
    try:
        fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def remove_if_unheld(run_dir: Path) -> bool:
    """Remove the directory if no process holds its lock (all of its server have ended)."""
    try:
        fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    shutil.rmtree(run_dir, ignore_errors=True)  # still holding it: nobody can start using it meanwhile
    os.close(fd)
    return True


def leave(run_dir: Path, fd: int | None) -> bool:
    """A worker's last act: give up its share and, if it was the last process of the server holding
    one (the master was killed), remove the directory. Its share is closed first, so of two workers
    ending at once at least one sees the other's share gone."""
    if fd is not None:
        os.close(fd)
    return remove_if_unheld(run_dir)


def remove_stale(parent: Path | None = None) -> list[Path]:
    """Remove the run directories in `parent` (the temporary directory) that belong to this user and
    whose server has ended entirely; the ones removed."""
    parent = Path(parent or tempfile.gettempdir())
    removed = []
    try:
        entries = list(parent.glob(f"{PREFIX}*"))
    except OSError:
        return []
    for entry in entries:
        try:
            info = entry.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            continue
        if remove_if_unheld(entry):
            removed.append(entry)
    return removed
