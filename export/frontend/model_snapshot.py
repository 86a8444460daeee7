"""One private copy of the model the user names: every check and the Keras load read that copy only.

The front end reads a model file several times: its configuration (model_file.py), the data it keeps
outside itself and the weights it stores (model_limits.py), the loss it was compiled with, then Keras
loads it. Read from the user's path each time, a file replaced between a check and the load (by a writer
of its directory, or a download still being written) escaped every check: they read one file, Keras
loaded another. So the file (a SavedModel: its directory) is copied once, from one open descriptor per
file, into a directory only this user can enter (mode 0700), within a size bound, and checked there:
each copied file is a regular file, fully written (fstat of the copy). The copy is removed once the
model is loaded.

Every name is opened relative to the descriptor of the directory that holds it, never through a path:
the model's directory is opened once, the model and the `metadata.json` beside it are opened from that
descriptor (a swap of the directory between the two reads cannot pair one model with another's
metadata), and a SavedModel is walked from descriptor to descriptor, each entry opened without
following a link (O_NOFOLLOW) and judged by fstat of what was opened. A directory inside a SavedModel
swapped for a link while it is copied is refused, or copied as it was; never followed out of the model.
"""

from __future__ import annotations

import errno
import itertools
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
MAX_DEPTH = 32  # directories inside directories of a SavedModel (one nests two: variables/, assets/)
CHUNK = 1 << 20
METADATA_FILE = "metadata.json"  # beside the model: class names, data set, training figures
READING = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC  # O_NONBLOCK: a FIFO is opened without waiting


def max_bytes(max_parameters: int) -> int:
    """The most bytes a model file may hold, given --max-parameters."""
    return BYTES_PER_PARAMETER * max_parameters + OVERHEAD_BYTES


@contextmanager
def model_snapshot(path: str | Path, max_parameters: int) -> Iterator[Path]:
    """A private copy of the model file or SavedModel directory at `path`, removed afterwards, with the
    `metadata.json` beside it (when there is one) copied beside the copy from the same directory; one
    line (ExportError) for a path that is missing, not a regular file or directory, or too large."""
    source = Path(os.path.abspath(path)) if Path(path).name in ("", ".", "..") else Path(path)
    shown = printable(str(path))
    directory = Path(tempfile.mkdtemp(prefix="nnsql-model-"))  # mode 0700: this user's only
    try:
        budget = Budget(max_bytes(max_parameters), shown)
        parent = open_at(None, str(source.parent), shown, follow=True, directory=True)
        try:
            copy = copy_model(parent, source.name, directory, budget, shown)
            metadata = printable(str(source.parent / METADATA_FILE))
            copy_metadata(parent, directory / METADATA_FILE, budget, metadata)
        finally:
            os.close(parent)
        yield copy
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def copy_model(parent: int, name: str, directory: Path, budget: Budget, shown: str) -> Path:
    """Copy the model `name` of the open directory `parent` (followed if a link: the path the user named)
    into `directory`; the copy's path."""
    descriptor = open_at(parent, name, shown, follow=True)
    try:
        found = os.fstat(descriptor)
        if stat.S_ISDIR(found.st_mode):
            copy = directory / "model"
            copy_directory(descriptor, copy, budget, shown, MAX_DEPTH)
        else:
            copy = directory / ("model" + Path(name).suffix)
            copy_file(descriptor, found, copy, budget, shown)
    finally:
        os.close(descriptor)
    return copy


def copy_metadata(parent: int, target: Path, budget: Budget, shown: str) -> None:
    """The metadata.json of the open directory `parent`, when it has one, copied to `target`; a link is
    refused (it would publish another file's JSON as the model's metadata)."""
    try:
        descriptor = os.open(METADATA_FILE, READING | os.O_NOFOLLOW, dir_fd=parent)
    except FileNotFoundError:
        return
    except OSError as error:
        raise refusal(error, shown) from None
    try:
        copy_file(descriptor, os.fstat(descriptor), target, budget, shown)
    finally:
        os.close(descriptor)


def open_at(parent: int | None, name: str, shown: str, *, follow: bool, directory: bool = False) -> int:
    """A descriptor on `name` in the open directory `parent` (None: a path); one line when it cannot be
    opened, or is a link and not `follow` (a SavedModel's entry)."""
    flags = READING | (0 if follow else os.O_NOFOLLOW) | (os.O_DIRECTORY if directory else 0)
    try:
        return os.open(name, flags, dir_fd=parent)
    except FileNotFoundError:
        raise ExportError(f"model file not found: {shown}") from None
    except OSError as error:
        raise refusal(error, shown, " inside a SavedModel") from None


def refusal(error: OSError, shown: str, where: str = "") -> ExportError:
    if error.errno == errno.ELOOP:
        return ExportError(f"{shown} is a symbolic link{where}; refusing to follow it")
    if error.errno == errno.ENOTDIR:
        return ExportError(f"cannot read {shown}: not a directory")
    return ExportError(f"cannot read {shown}: {error.strerror}")


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


def copy_file(descriptor: int, found: os.stat_result, target: Path, budget: Budget, shown: str) -> None:
    """Copy the open file `descriptor` (`found`: its fstat) if it is a regular file; the copy is checked by
    its own descriptor."""
    if not stat.S_ISREG(found.st_mode):
        raise ExportError(f"{shown} is not a regular file; refusing to read it")
    budget.take(found.st_size)  # a declared size beyond the bound is refused before a byte is read
    written = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(written, "wb") as writer:
        copied = 0
        while chunk := os.read(descriptor, CHUNK):
            copied += len(chunk)
            if copied > found.st_size:  # growing while copied: counted as it comes
                budget.take(len(chunk))
            writer.write(chunk)
        writer.flush()
        if os.fstat(writer.fileno()).st_size != copied:
            raise ExportError(f"cannot copy {shown}: the copy is incomplete")


def copy_directory(descriptor: int, target: Path, budget: Budget, shown: str, depth: int) -> None:
    """Copy the open SavedModel directory `descriptor`: each entry opened from it without following a
    link, a directory copied the same way; a link or special file is refused (its data would be another
    file's, as an HDF5 external link's is)."""
    if depth < 0:
        raise ExportError(f"{shown} nests directories more than {MAX_DEPTH} deep; no model does")
    target.mkdir(mode=0o700)
    with os.scandir(descriptor) as entries:  # names only: each is judged by what opening it gives
        names = [entry.name for entry in itertools.islice(entries, budget.entries + 1)]
    for name in names:
        budget.entry()
        inner = f"{shown}/{printable(name)}"
        child = open_at(descriptor, name, inner, follow=False)
        try:
            found = os.fstat(child)
            if stat.S_ISDIR(found.st_mode):
                copy_directory(child, target / name, budget, inner, depth - 1)
            else:
                copy_file(child, found, target / name, budget, inner)
        finally:
            os.close(child)
