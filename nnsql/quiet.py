"""TensorFlow's start-up lines kept out of every command's output, unless `--verbose` (or NNSQL_VERBOSE=1).

Importing TensorFlow prints a dozen lines on stderr that read like errors in the middle of a command's
output: oneDNN and CPU-feature notes, "Could not find cuda drivers", "failed call to cuInit" (an `E0000`
line on every machine without a GPU). Most are written by C++ code before TensorFlow reads
`TF_CPP_MIN_LOG_LEVEL`, so the variable alone cannot hide them. Every command therefore calls `install()`
first; it

- sets `TF_CPP_MIN_LOG_LEVEL=2` as a default (the user's own value wins; child processes inherit it),
- and, when something first imports `tensorflow`, runs that import (and the device probe where the CUDA
  lines come from) with file descriptor 2 passed through a filter that drops only those known lines.
  Everything else written meanwhile, warnings and tracebacks included, reaches stderr unchanged.

TensorFlow itself is imported only when a command needs it; `install()` costs nothing otherwise.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import logging
import os
import re
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from types import ModuleType

VERBOSE_FLAG = "--verbose"
VERBOSE_ENV = "NNSQL_VERBOSE"
VERBOSE = False  # what install() found: --verbose or NNSQL_VERBOSE
NOISE = re.compile(
    rb"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR\s*$"
    rb"|^[IW]\d{4} [\d:. ]+\d+ [\w.]+:\d+\] "  # absl INFO and WARNING lines
    rb"|^E\d{4} [\d:. ]+\d+ (cuda|cudnn|cufft|cublas|gpu)\w*\.cc:\d+\] "  # no GPU here: not an error
    rb"|^To enable the following instructions: .*rebuild TensorFlow with the appropriate compiler flags"
)

# Warnings that libraries raise about their own code, which no user of nnsql can act on.
THIRD_PARTY_WARNINGS = (
    # Keras's ONNX export (keras/src/export/tf2onnx_lib.py) probes np.object under numpy 2: every
    # `nnsql export onnx` printed it with the line of Keras's source.
    r"In the future `np\.object` will be defined as the corresponding NumPy scalar",
)


def verbose_requested(argv: Sequence[str]) -> bool:
    """`--verbose` among the command's own options (not after `--`, where a user script's options start)."""
    options = argv[: list(argv).index("--")] if "--" in argv else argv
    return VERBOSE_FLAG in options or os.environ.get(VERBOSE_ENV, "") not in ("", "0")


def without_verbose(argv: Sequence[str]) -> list[str]:
    """argv with the command's `--verbose` removed (a user script's `--verbose` after `--` is kept)."""
    end = list(argv).index("--") if "--" in argv else len(argv)
    return [arg for i, arg in enumerate(argv) if i >= end or arg != VERBOSE_FLAG]


def is_noise(line: str) -> bool:
    """Whether a line another process printed is one of TensorFlow's start-up lines (hidden unless
    verbose): spawn echoes worker 0's log through this."""
    return not VERBOSE and NOISE.match(line.encode(errors="replace")) is not None


def install(argv: list[str] | None = None) -> bool:
    """What every command runs first. Removes `--verbose` from `argv` (default: `sys.argv`, edited in
    place) and, unless it was there, hides TensorFlow's start-up lines. Returns True when verbose."""
    arguments = sys.argv[1:] if argv is None else argv
    verbose = verbose_requested(arguments)
    if argv is None:
        sys.argv[1:] = without_verbose(arguments)
    else:
        argv[:] = without_verbose(arguments)
    global VERBOSE
    VERBOSE = verbose
    if verbose:
        return True
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    for message in THIRD_PARTY_WARNINGS:
        warnings.filterwarnings("ignore", message=message)
    if "tensorflow" not in sys.modules and not any(isinstance(f, QuietImport) for f in sys.meta_path):
        sys.meta_path.insert(0, QuietImport())
    return False


@contextlib.contextmanager
def filtered_stderr(noise: re.Pattern[bytes] = NOISE) -> Iterator[None]:
    """File descriptor 2 (C++ and Python writes alike) through a filter dropping the lines `noise` matches."""
    sys.stderr.flush()
    saved = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    forwarder = threading.Thread(target=forward, args=(read_end, saved, noise), daemon=True)
    forwarder.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # the pipe's last writer closes: the forwarder reads to the end and stops
        forwarder.join()
        os.close(saved)


def forward(read_end: int, target: int, noise: re.Pattern[bytes]) -> None:
    with os.fdopen(read_end, "rb") as lines:
        for line in lines:
            if not noise.match(line):
                os.write(target, line)


def quiet_python_loggers() -> None:
    """TensorFlow's Python warnings on loading a model, ERROR and above kept: "WARNING:absl:..." notes on
    saving and loading, and the two dozen "WARNING:tensorflow:Value in checkpoint could not be found in
    the restored object: (root).optimizer..." lines a SavedModel prints at exit, loaded without its
    optimizer (export needs none)."""
    for name in ("absl", "tensorflow"):
        logging.getLogger(name).setLevel(logging.ERROR)


class QuietImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of the first `tensorflow` import in `filtered_stderr`."""

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)  # once: TensorFlow's own imports and later ones go the usual way
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = QuietLoader(spec.loader)
        return spec


class QuietLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        with filtered_stderr():
            self.loader.exec_module(module)
            with contextlib.suppress(Exception):  # where cuInit is first called, and its E0000 line
                module.config.list_physical_devices("GPU")
        quiet_python_loggers()

    def __getattr__(self, name: str) -> object:  # get_resource_reader, is_package, ... of the real loader
        return getattr(self.loader, name)
