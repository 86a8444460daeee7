"""The server's lines for the operator (the master's, and each worker's log records), written by a
thread of their own.

The master restarts workers and follows the repository, a worker loads models and serves: neither may
wait for its own log. stderr may be a pipe nobody reads (a collector that stalled); a write into a full
pipe blocks, and a master blocked in `print` restarts nothing, a worker blocked in a log call while it
loads never serves. So a line is only queued; a writer thread writes it with os.write (not through
sys.stderr's buffer, whose lock a blocked thread would hold at exit). While the output does not keep
up, at most MAX_WAITING lines wait; later ones are counted and dropped, and the count is written once
the output takes lines again. A line whose output went away (EPIPE, a full disk) is lost. The access
log has its own bounded queue (serve/accesslog.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import sys
import threading
from typing import Any

MAX_WAITING = 1000  # lines; the master says a few lines a minute when all is well
STOP_SECONDS = 2.0  # what the master's exit waits for the lines still waiting

_lines: queue.Queue[tuple[int, str] | None] = queue.Queue(MAX_WAITING)
_dropped = [0]  # lines not queued since the writer last said so (the master's one thread counts)
_writer: threading.Thread | None = None


def say(line: str, stream: Any = None) -> None:
    """A line for the operator on stderr (or `stream`, e.g. sys.stdout); never waits for the output.
    Before `start()` (or after `stop()`) the line is printed at once."""
    stream = stream or sys.stderr
    if _writer is None:
        with contextlib.suppress(OSError, ValueError):  # ValueError: a stream closed after a failure
            print(line, file=stream, flush=True)
        return
    try:
        _lines.put_nowait((stream.fileno(), line))
    except queue.Full:
        _dropped[0] += 1
    except (OSError, ValueError):  # a stream without a descriptor: nowhere to write
        pass


def running() -> bool:
    """Lines are queued for the writer thread (between `start()` and `stop()`)."""
    return _writer is not None


def write(descriptor: int, line: str) -> None:
    data = (line + "\n").encode(errors="backslashreplace")
    with contextlib.suppress(OSError):  # the reader went away, a full disk: the line is lost
        while data:
            data = data[os.write(descriptor, data) :]


def run() -> None:
    while (item := _lines.get()) is not None:
        if _dropped[0]:
            dropped, _dropped[0] = _dropped[0], 0
            write(2, f"{dropped} log lines dropped: the output did not keep up")
        write(*item)


class SayHandler(logging.Handler):
    """Log records, said as the other lines."""

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            say(self.format(record))


def start(
    level: int = logging.WARNING, line_format: str = "%(message)s", formatter: logging.Formatter | None = None
) -> None:
    """From now on, write the process's lines and log records (of `level` and above, formatted by
    `formatter`, else by `line_format`) from a thread of their own."""
    global _writer
    if _writer is not None:
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    _writer = threading.Thread(target=run, name="operator-log", daemon=True)
    _writer.start()
    handler = SayHandler()
    handler.setFormatter(formatter or logging.Formatter(line_format))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)


def stop(seconds: float = STOP_SECONDS) -> None:
    """Write the lines still waiting, for at most `seconds`: an output that takes nothing cannot hold
    the master's exit (the writer is a daemon thread, left blocked)."""
    global _writer
    writer, _writer = _writer, None
    if writer is None:
        return
    try:
        _lines.put(None, timeout=seconds)
    except queue.Full:
        return
    writer.join(seconds)
