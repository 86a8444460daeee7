"""Reading a file of the model repository as hostile input: only a regular file (a FIFO would block the
reader for ever, /dev/zero would fill its memory), at most a given size, and, for files whose text a
client may see (labels, a config's error), only from inside their own directory: a link out of it (to
/proc/self/environ, which holds the server's keys) is refused rather than followed. Links inside the
directory are followed, as a Kubernetes ConfigMap volume lays its files out (`labels.txt ->
..data/labels.txt`)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .validation import InvalidVersion


def read_regular(path: Path, limit: int | None = None, *, within: Path | None = None) -> bytes:
    """The file's bytes; InvalidVersion in one line (naming the file, never its directory) when it
    cannot be read, is not a regular file, resolves outside `within`, or holds more than `limit` bytes."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise InvalidVersion(f"{path.name}: {error.strerror or type(error).__name__}") from None
    with os.fdopen(descriptor, "rb") as file:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise InvalidVersion(f"{path.name}: not a regular file")
        if limit is not None and status.st_size > limit:  # a sparse file of gigabytes costs no disk
            raise InvalidVersion(f"{path.name} is larger than {limit} bytes")
        if within is not None and not inside(opened_path(descriptor, path), within):
            raise InvalidVersion(f"{path.name}: a link out of its directory")
        try:
            raw = file.read() if limit is None else file.read(limit + 1)
        except OSError as error:
            raise InvalidVersion(f"{path.name}: {error.strerror or type(error).__name__}") from None
    if limit is not None and len(raw) > limit:
        raise InvalidVersion(f"{path.name} is larger than {limit} bytes")
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
