"""Reading a file of the model repository as hostile input: only a regular file, looked at before it is
opened (a FIFO would block the reader for ever, /dev/zero would fill its memory, opening a device can
act), at most a given size, and, for files whose text a client may see (labels, a config's error), only
from inside their own directory: a link out of it (to /proc/self/environ, which holds the server's keys)
is refused rather than followed. Links inside the directory are followed, as a Kubernetes ConfigMap
volume lays its files out (`labels.txt -> ..data/labels.txt`). A directory is read up to MAX_ENTRIES
entries."""

from __future__ import annotations

import itertools
import os
import stat
from pathlib import Path

from nnsql.text import printable

from .validation import InvalidVersion

# Entries read from one directory of the repository per scan: a directory of a million entries (made
# by anyone who can write to the repository) costs a scan no more than this many.
MAX_ENTRIES = 10_000


def open_regular(path: Path, *, follow: bool = True) -> int:
    """A descriptor open for reading on the file at `path`, only if it is a regular file; OSError
    otherwise. The file is looked at before it is opened: opening a device can act (a tape rewinds, a
    watchdog starts) and opening a FIFO wakes the writer waiting on it. On Linux the path is taken once
    (O_PATH, which opens nothing) and the very file looked at is then opened through /proc, so no swap
    between the look and the open can slip another file in; elsewhere the open is checked to be of the
    file looked at. `follow=False` refuses a link (O_NOFOLLOW)."""
    nofollow = 0 if follow else os.O_NOFOLLOW
    reading = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if hasattr(os, "O_PATH") and os.path.isdir("/proc/self/fd"):
        handle = os.open(path, os.O_PATH | os.O_CLOEXEC | nofollow)
        try:
            refuse_irregular(os.fstat(handle))  # a link itself (not followed) is refused here
            return os.open(f"/proc/self/fd/{handle}", reading)  # /proc's entry is a link: followed
        finally:
            os.close(handle)
    before = os.stat(path, follow_symlinks=follow)
    refuse_irregular(before)
    descriptor = os.open(path, reading | nofollow)
    opened = os.fstat(descriptor)
    if (opened.st_dev, opened.st_ino) != (before.st_dev, before.st_ino):
        os.close(descriptor)
        raise OSError("replaced while it was opened")
    return descriptor


def refuse_irregular(status: os.stat_result) -> None:
    if not stat.S_ISREG(status.st_mode):
        raise OSError("not a regular file")


def read_regular(
    path: Path, limit: int | None = None, *, within: Path | None = None, follow: bool = True
) -> bytes:
    """The file's bytes; InvalidVersion in one line (naming the file, never its directory) when it
    cannot be read, is not a regular file, resolves outside `within`, or holds more than `limit` bytes
    (`follow=False`: or is a link). The name is shown escaped: a Triton config chooses it (a label file's
    name with a line break cut the reason the log and the index gave to what came before the break)."""
    name = printable(path.name)
    try:
        descriptor = open_regular(path, follow=follow)
    except OSError as error:
        raise InvalidVersion(f"{name}: {error.strerror or error}") from None
    with os.fdopen(descriptor, "rb") as file:
        status = os.fstat(descriptor)
        if limit is not None and status.st_size > limit:  # a sparse file of gigabytes costs no disk
            raise InvalidVersion(f"{name} is larger than {limit} bytes")
        if within is not None and not inside(opened_path(descriptor, path), within):
            raise InvalidVersion(f"{name}: a link out of its directory")
        try:
            raw = file.read() if limit is None else file.read(limit + 1)
        except OSError as error:
            raise InvalidVersion(f"{name}: {error.strerror or type(error).__name__}") from None
    if limit is not None and len(raw) > limit:
        raise InvalidVersion(f"{name} is larger than {limit} bytes")
    return raw


def opened_path(descriptor: int, path: Path) -> str:
    """The real path of the file opened (not of a link swapped in since the open)."""
    try:
        return os.readlink(f"/proc/self/fd/{descriptor}")
    except OSError:  # no /proc: the path as it resolves now
        return os.path.realpath(path)


def inside(real: str, directory: Path) -> bool:
    home = os.path.realpath(directory)
    return os.path.commonpath([home, real]) == home


def listed(directory: Path, limit: int = MAX_ENTRIES) -> tuple[list[Path], bool]:
    """The first `limit` entries of a directory, in the file system's order, and whether it holds more;
    OSError when it cannot be read."""
    with os.scandir(directory) as entries:
        first = [Path(entry.path) for entry in itertools.islice(entries, limit + 1)]
    return first[:limit], len(first) > limit
