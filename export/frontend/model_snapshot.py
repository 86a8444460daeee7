"""One private copy of the model the user names: every check and the Keras load read that copy only.

The front end reads a model file several times: its configuration (model_file.py), the data it keeps
outside itself and the weights it stores (model_limits.py), the loss it was compiled with, then Keras
loads it. Read from the user's path each time, a file replaced between a check and the load (by a writer
of its directory, or a download still being written) escaped every check: they read one file, Keras
loaded another. So the file (a SavedModel: its directory) is copied once, from one open descriptor per
file, into a directory only this user can enter (mode 0700), within a size bound, and checked there:
each copied file is a regular file, fully written (fstat of the copy). The copy is removed once the
model is loaded.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from nnsql.text import printable

from ..errors import ExportError

BYTES_PER_PARAMETER = 16  # float64 weights, or float32 ones with an optimizer's two slots each
OVERHEAD_BYTES = 256 << 20  # the configuration, a SavedModel's graph, HDF5's and zip's own structures
MAX_ENTRIES = 10_000  # files and directories of a SavedModel (one holds about ten)
CHUNK = 1 << 20


def max_bytes(max_parameters: int) -> int:
    """The most bytes a model file may hold, given --max-parameters."""
    return BYTES_PER_PARAMETER * max_parameters + OVERHEAD_BYTES


@contextmanager
def model_snapshot(path: str | Path, max_parameters: int) -> Iterator[Path]:
    """A private copy of the model file or SavedModel directory at `path`, removed afterwards; one line
    (ExportError) for a path that is missing, not a regular file or directory, or too large."""
    source, shown = Path(path), printable(str(path))
    try:
        is_directory = stat.S_ISDIR(os.stat(source).st_mode)
    except FileNotFoundError:
        raise ExportError(f"model file not found: {shown}") from None
    except OSError as error:
        raise ExportError(f"cannot read {shown}: {error.strerror}") from None
    directory = Path(tempfile.mkdtemp(prefix="nnsql-model-"))  # mode 0700: this user's only
    try:
        copy = directory / ("model" + ("" if is_directory else source.suffix))
        budget = Budget(max_bytes(max_parameters), shown)
        if is_directory:
            copy_directory(source, copy, budget)
        else:
            copy_file(source, copy, budget, follow=True)
        yield copy
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class Budget:
    """Bytes and entries left to copy; one line naming --max-parameters once either is spent."""

    def __init__(self, size: int, shown: str) -> None:
        self.size, self.limit, self.entries, self.shown = size, size, MAX_ENTRIES, shown

    def take(self, size: int) -> None:
        self.size -= size
        if self.size < 0:
            raise ExportError(
                f"{self.shown} holds more than {self.limit:,} bytes, more than --max-parameters allows "
                f"({BYTES_PER_PARAMETER} bytes a parameter, and {OVERHEAD_BYTES >> 20} MiB); raise it if "
                "the model is really that large"
            )

    def entry(self) -> None:
        self.entries -= 1
        if self.entries < 0:
            raise ExportError(f"{self.shown} holds more than {MAX_ENTRIES:,} files; no model does")


def copy_file(source: Path, target: Path, budget: Budget, *, follow: bool) -> None:
    """Copy the regular file `source` through one descriptor; a link is followed only when `follow`
    (the path the user named), never inside a SavedModel. The copy is checked by its own descriptor."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:  # O_NONBLOCK: opening a FIFO neither waits nor wakes a writer; fstat then refuses it
        descriptor = os.open(source, flags)
    except OSError as error:
        if error.errno == errno.ELOOP and not follow:
            raise ExportError(f"{printable(str(source))} is a symbolic link; refusing to follow it") from None
        raise ExportError(f"cannot read {printable(str(source))}: {error.strerror}") from None
    with os.fdopen(descriptor, "rb", buffering=0) as reader:
        found = os.fstat(reader.fileno())
        if not stat.S_ISREG(found.st_mode):
            raise ExportError(f"{printable(str(source))} is not a regular file; refusing to read it")
        budget.take(found.st_size)  # a declared size beyond the bound is refused before a byte is read
        written = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(written, "wb") as writer:
            copied = 0
            while chunk := reader.read(CHUNK):
                copied += len(chunk)
                if copied > found.st_size:  # growing while copied: counted as it comes
                    budget.take(len(chunk))
                writer.write(chunk)
            writer.flush()
            if os.fstat(writer.fileno()).st_size != copied:
                raise ExportError(f"cannot copy {printable(str(source))}: the copy is incomplete")


def copy_directory(source: Path, target: Path, budget: Budget) -> None:
    """Copy a SavedModel directory; a symbolic link or special file in it is refused (its data would be
    another file's, as an HDF5 external link's is)."""
    target.mkdir(mode=0o700)
    for root, directories, files in os.walk(source, onerror=refuse_walk):
        here = Path(root)
        inside = target / here.relative_to(source)
        for name in directories:
            budget.entry()
            if (here / name).is_symlink():
                raise ExportError(
                    f"{printable(str(here / name))} is a symbolic link inside a SavedModel; refusing to "
                    "follow it"
                )
            (inside / name).mkdir(mode=0o700)
        for name in files:
            budget.entry()
            copy_file(here / name, inside / name, budget, follow=False)


def refuse_walk(error: OSError) -> None:
    raise ExportError(f"cannot read {printable(str(error.filename))}: {error.strerror}")
