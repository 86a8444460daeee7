"""A private copy of a model file, taken once, from which every step of loading reads.

The exporter reads a model file several times before a model exists: its configuration as data (the
check for code, model_code.py), the weights it stores (model_limits.py), then Keras's own reader. Each
opened the user's path anew, so whoever could write that path (a shared directory, a mounted bucket)
could let the checks see a harmless file and swap in one with a Lambda for Keras, whose bytecode then
ran as the exporting user. So the file (or a SavedModel's directory) is copied first into a directory
only the user can read (`tempfile.mkdtemp`, mode 0700), through one descriptor per file, and every
step reads that copy: what was checked is what loads. The copy is removed once the model is loaded.

Only regular files are copied (a FIFO would block the copy, a device never end it), at most what
`--max-parameters` allows in all (a sparse file of gigabytes costs its writer no disk, its copy would),
and a directory at most `MAX_DEPTH` levels deep (a link to a parent would never end).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from nnsql.text import printable

from ..errors import ExportError

MAX_DEPTH = 16  # a SavedModel nests 2 levels (variables/, assets/)
CHUNK = 1 << 24


@dataclass
class Budget:
    """The bytes left to copy, out of what --max-parameters allows."""

    left: int
    max_parameters: int

    def exceeded(self, source: Path) -> ExportError:
        return ExportError(
            f"{printable_path(source)}: the model's files hold more bytes than --max-parameters "
            f"{self.max_parameters:,} allows (16 bytes a parameter, plus 256 MiB); raise it if the "
            "model is really that large"
        )


def printable_path(path: Path) -> str:
    return printable(str(path))


@contextmanager
def private_copy(path: Path, max_parameters: int) -> Iterator[Path]:
    """A copy of `path` (a file or a directory) under a new private directory, with the same name;
    removed on leaving. ExportError (one line) for what cannot or must not be copied, or holds more
    than 16 bytes a parameter (float64 weights, or float32 ones with an optimizer's two slots and its
    own) and 256 MiB (the configuration, the format's own) in all."""
    if not path.exists():
        raise ExportError(f"model file not found: {printable_path(path)}")
    directory = Path(tempfile.mkdtemp(prefix="nnsql-model-"))
    try:
        local = directory / (path.name or "model")
        budget = Budget(16 * max_parameters + (256 << 20), max_parameters)
        if path.is_dir():
            copy_tree(path, local, budget, depth=0)
        else:
            copy_file(path, local, budget)
        yield local
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def copy_tree(source: Path, target: Path, budget: Budget, *, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ExportError(f"{printable_path(source)}: directories nested more than {MAX_DEPTH} deep")
    target.mkdir(mode=0o700)
    with os.scandir(source) as entries:
        for entry in entries:
            if entry.is_dir():
                copy_tree(Path(entry.path), target / entry.name, budget, depth=depth + 1)
            else:
                copy_file(Path(entry.path), target / entry.name, budget)


def copy_file(source: Path, target: Path, budget: Budget) -> None:
    """One descriptor opened without blocking (a FIFO's open would wait for a writer), checked to be a
    regular file, copied whole; never more than what is left of the budget."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise ExportError(f"cannot read {printable_path(source)}: {error.strerror}") from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise ExportError(f"{printable_path(source)} is not a regular file; refusing to read it")
        if status.st_size > budget.left:
            raise budget.exceeded(source)
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            copy_bytes(fd, out, source, budget)
        finally:
            os.close(out)
    finally:
        os.close(fd)


def copy_bytes(fd: int, out: int, source: Path, budget: Budget) -> None:
    while True:
        try:
            sent = os.sendfile(out, fd, None, min(CHUNK, budget.left + 1))
        except OSError as error:
            raise ExportError(f"cannot read {printable_path(source)}: {error.strerror}") from None
        if sent == 0:
            return
        budget.left -= sent
        if budget.left < 0:
            raise budget.exceeded(source)
