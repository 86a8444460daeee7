"""The access log, written off the request path.

A request appends its entry, the fields as given, to a plain list: no lock (an append is atomic under
the GIL), no formatting, no system call, no thread woken while one is already on its way. A writer
thread sleeps until the first entry after an idle spell wakes it, lets the entries gather for
POLL_SECONDS, takes all those waiting (one slice of the list: entries appended meanwhile stay, in
order) and makes and writes their lines in one write through a buffer of its own; an idle worker's
writer does not wake. Inside a worker serving 16 connections, a request's share cost 13.5–15 µs of CPU
a line when it made the line and queued it (orjson, `round(x, 3)`, a queue: each step cold by its turn,
about 1 µs measured apart), 6.6–8.6 µs appending the fields; the writer's 3.6–4.4 µs, 2.8–3.1 µs.
A V2 inference (serve.fastpath, nearly every request) appends a tuple of the values it has, and the
writer names and computes the fields: a worker logging 64 connections used 3.0 % more CPU a request than
one not logging with the fields appended, -0.2 % with the tuple (medians of 8 alternated runs, load
15-20; the runs' own spread is ±5 %).
A line is compact JSON in ASCII (orjson; the standard library for the rare entry orjson refuses or
that is not ASCII: a client's path, a model's name). Stopping the writer (at the worker's shutdown)
writes every line still waiting, in order.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import queue
import sys
import threading
import time
from typing import IO, Any

import orjson

ACCESS_LOG = logging.getLogger("serve.access")
BUFFER_BYTES = 1 << 16
# The longest a line waits to be written. Each turn of the writer takes Python's lock twice (after its
# wait, after its write): in a busy worker on a busy machine a turn can hold every request thread until
# the writer is scheduled, so turns are few, and shorter only when FULL_TURN entries wait.
POLL_SECONDS = 0.25
FULL_TURN = 1000
# Entries waiting while the log's output does not keep up (a pipe nobody reads, a stalled disk): beyond
# these, entries are counted and dropped rather than kept, so a flood of requests cannot grow a worker
# without bound; an entry's path, which a client chooses, is cut to PATH_CHARS.
MAX_PENDING = 10_000
PATH_CHARS = 1024
# How long a worker's shutdown waits for the writer to write what is waiting: an output that never takes
# them (a pipe nobody reads) must not keep the worker from ending; those lines are then lost.
STOP_SECONDS = 5.0


class Entry(dict):
    """An access log entry formatted by the writer's thread: one orjson refuses or that is not ASCII,
    or any logged while no writer runs (through the logger)."""

    def json(self) -> str:
        """Compact JSON, in ASCII: a client's path with other characters (a C1 control such as U+009B
        can drive a terminal) is written with \\u escapes. orjson takes a twentieth of the standard
        library's time; the standard library serves only the rare entry that is not ASCII, or that
        orjson refuses: a model named by a directory whose name is not UTF-8 holds lone surrogates."""
        return line_of(self)

    def __str__(self) -> str:
        return self.json()


# A request's fields; a V2 inference's values as the fast path has them (see `inference`); or a record
# said through the logger.
Queued = dict[str, Any] | tuple[Any, ...] | logging.LogRecord
_pending: list[Queued] = []  # appended by requests, taken from the front by the writer
_dropped = [0]  # entries not kept since the writer last said so (approximate: no lock)
_writer: Writer | None = None  # the running writer, if any


def log(**fields: Any) -> None:
    """Log a request's entry (nothing is built when the access log is off). With a writer running, the
    fields are appended for it as they are: the writer makes the line."""
    if not ACCESS_LOG.isEnabledFor(logging.INFO):
        return
    path = fields.get("path")
    if isinstance(path, str) and len(path) > PATH_CHARS:
        fields["path"] = path[:PATH_CHARS] + "..."
    writer = _writer
    if writer is None:
        ACCESS_LOG.info("%s", Entry(fields))
    elif len(_pending) < MAX_PENDING:  # keep()'s work, written out: a call less on the request path
        _pending.append(fields)
        if writer.asleep or len(_pending) == FULL_TURN:
            writer.asleep = False
            writer.wake.put(None)
    else:
        _dropped[0] += 1


def inference(path: str, status: int, started: float, model: str | None, length: str, size: int) -> None:
    """A V2 inference's entry (serve.fastpath), kept as the values the request has: a tuple, no field
    named, computed or checked on the request path (the writer does it). Call it only when the access
    log is on."""
    writer = _writer
    if writer is None or len(_pending) >= MAX_PENDING:
        log(**inference_fields((path, status, started, time.perf_counter(), model, length, size)))
        return
    _pending.append((path, status, started, time.perf_counter(), model, length, size))
    if writer.asleep or len(_pending) == FULL_TURN:
        writer.asleep = False
        writer.wake.put(None)


def inference_fields(values: tuple[Any, ...]) -> dict[str, Any]:
    """The fields of an entry `inference` kept, as `log` takes them."""
    path, status, started, ended, model, length, size = values
    if len(path) > PATH_CHARS:
        path = path[:PATH_CHARS] + "..."
    return {
        "method": "POST",
        "path": path,
        "status": status,
        "ms": round(1e6 * (ended - started)) / 1000,
        "model": model,
        "bytes_in": length_of(length),
        "bytes_out": size,
    }


def keep(writer: Writer, item: Queued) -> None:
    """Append an entry for the writer, within MAX_PENDING, and wake the writer if it sleeps or a turn's
    entries wait. Two requests may both wake it: its next turn is then shorter, no more."""
    if len(_pending) >= MAX_PENDING:
        _dropped[0] += 1
        return
    _pending.append(item)  # before the writer's flag is read: a writer that set it sees this entry
    if writer.asleep or len(_pending) == FULL_TURN:
        writer.asleep = False
        writer.wake.put(None)


def waiting() -> int:
    """Entries waiting for the writer."""
    return len(_pending)


def line_of(fields: dict[str, Any]) -> str:
    """The entry's compact JSON in ASCII: orjson's, else the standard library's."""
    return ascii_line(fields) or json.dumps(fields, separators=(",", ":"), default=repr)


def ascii_line(fields: dict[str, Any]) -> str | None:
    """The entry's compact JSON by orjson when it is ASCII; None when orjson refuses it or it is not."""
    try:
        line = orjson.dumps(fields).decode()
    except TypeError:  # orjson.JSONEncodeError
        return None
    return line if line.isascii() else None


class PendingHandler(logging.Handler):
    """Appends the record as it is for the writer: its message is formatted by the writer, not here."""

    def __init__(self, writer: Writer) -> None:
        super().__init__()
        self.writer = writer

    def emit(self, record: logging.LogRecord) -> None:
        keep(self.writer, record)


def entry_record(entry: Entry | str) -> logging.LogRecord:
    return logging.makeLogRecord(
        {"name": ACCESS_LOG.name, "msg": "%s", "args": (entry,), "levelno": logging.INFO, "levelname": "INFO"}
    )


def dropped_record() -> logging.LogRecord:
    """One line for the entries dropped while the output did not keep up."""
    count, _dropped[0] = _dropped[0], 0
    message = f"access log: {count} entries dropped: its output did not keep up with the requests"
    return logging.makeLogRecord(
        {"name": ACCESS_LOG.name, "msg": message, "levelno": logging.WARNING, "levelname": "WARNING"}
    )


def failed_record(error: Exception) -> logging.LogRecord:
    """One line for an entry that could not be written."""
    message = f"access log: an entry could not be written ({type(error).__name__})"
    return logging.makeLogRecord(
        {"name": ACCESS_LOG.name, "msg": message, "levelno": logging.WARNING, "levelname": "WARNING"}
    )


def bytes_in(environ: dict) -> int:
    """A request body's size for its entry: the length the WSGI server gives (serve/server.py gives it
    for every body, a chunked one's too), else 0. The Flask hook and serve.fastpath both log this."""
    return length_of(environ.get("CONTENT_LENGTH", ""))


def length_of(text: str) -> int:
    """A CONTENT_LENGTH's value as a number, 0 when it holds no plain number."""
    return int(text) if text.isdigit() else 0


def around_message(line_format: str) -> tuple[str, str] | None:
    """What the line format puts before and after the message, when the message is all it takes from
    a record (`[worker 0] %(message)s`); None when it needs a record's other fields."""
    if line_format.count("%(message)s") != 1:
        return None
    before, after = line_format.split("%(message)s")
    if "%(" in before + after:
        return None
    return before.replace("%%", "%"), after.replace("%%", "%")


class Writer:
    """The thread that writes the waiting entries, in one write and one flush a turn. It sleeps until an
    entry wakes it (`asleep`, `wake`), then lets entries gather for POLL_SECONDS (less when FULL_TURN
    entries wait, or it is stopped) and writes all that are waiting. An entry becomes
    `[worker 0] {"method": ...}` by joining strings; a log record, or an entry under a line format that
    needs a record's other fields, goes through the formatter."""

    def __init__(self, stream: IO[str], line_format: str) -> None:
        self.stream = stream
        self.formatter = logging.Formatter(line_format)
        self.around = around_message(line_format)
        self.asleep = False  # set by the writer before it sleeps; the first entry after clears it
        self.wake: queue.SimpleQueue[None] = queue.SimpleQueue()
        self.stopping = False
        self.thread = threading.Thread(target=self.run, name="access-log", daemon=True)

    def run(self) -> None:
        while not self.stopping:
            self.asleep = True
            if not _pending:  # read after the flag is set: an entry appended meanwhile woke us
                self.wake.get()
            self.asleep = False
            self.gather()
            self.drain()
        self.drain()

    def gather(self) -> None:
        """Let a turn's entries gather for POLL_SECONDS, unless FULL_TURN wait or the writer is stopped.
        A wake-up left over from an earlier turn (a request saw the writer asleep just as it woke) is
        read and ignored: ending the turn on it wrote a line or two a turn, a write and a GIL hand-over
        a request at one connection."""
        deadline = time.monotonic() + POLL_SECONDS
        while not self.stopping and len(_pending) < FULL_TURN:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            with contextlib.suppress(queue.Empty):
                self.wake.get(timeout=left)

    def drain(self) -> None:
        count = len(_pending)
        taken = _pending[:count]
        del _pending[:count]  # entries appended since `count` was read stay, in order
        lines: list[str] = []
        for item in taken:
            try:
                lines.append(self.line(item))
            except Exception as error:  # one entry never stops the writer: said, and the others written
                lines.append(self.formatter.format(failed_record(error)))
        if _dropped[0]:
            lines.append(self.formatter.format(dropped_record()))
        if lines:
            with contextlib.suppress(OSError, ValueError):  # the reader went away: the lines are lost
                self.stream.write("\n".join(lines) + "\n")
                self.stream.flush()

    def line(self, item: Queued) -> str:
        if isinstance(item, tuple):
            item = inference_fields(item)
        if isinstance(item, dict):
            if self.around is not None:  # nearly every line: joined, no more
                return self.around[0] + line_of(item) + self.around[1]
            item = entry_record(Entry(item))
        return self.formatter.format(item)

    def stop(self, seconds: float) -> bool:
        """Ask the writer to write what waits and end; False if it is still writing after `seconds`."""
        self.stopping = True
        self.wake.put(None)
        self.thread.join(seconds)
        return not self.thread.is_alive()


def buffered(stream: IO[str]) -> IO[str]:
    """A buffered writer on the stream's file descriptor (stderr is line-buffered: a write per line).
    A character UTF-8 cannot encode (a lone surrogate in a record said through the logger) is written
    escaped: failing, it would lose every line of the writer's turn."""
    try:
        descriptor = stream.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):  # not a file (a test's capture)
        return stream
    return open(
        descriptor, "w", buffering=BUFFER_BYTES, closefd=False, encoding="utf-8", errors="backslashreplace"
    )


def start(stream: IO[str] | None = None, line_format: str = "%(message)s") -> Writer:
    """Send the access log to a writer thread writing to `stream` (stderr by default); the caller stops
    the writer at shutdown, which writes what is still waiting."""
    writer = Writer(buffered(stream or sys.stderr), line_format)
    for old in list(ACCESS_LOG.handlers):
        ACCESS_LOG.removeHandler(old)
    ACCESS_LOG.addHandler(PendingHandler(writer))  # for whoever logs through the logger itself
    ACCESS_LOG.propagate = False
    writer.thread.start()
    global _writer
    _writer = writer
    return writer


def stop(writer: Writer) -> None:
    """Write every waiting line, flush, and give the access log back to the root logger's handlers.
    An output that takes nothing for STOP_SECONDS loses the lines still waiting (the writer's thread, a
    daemon, is left blocked in its write) rather than hold the worker's shutdown for ever."""
    global _writer
    _writer = None
    if writer.stop(STOP_SECONDS):
        writer.drain()  # an entry appended as the writer ended
    else:
        del _pending[:]  # never written: a writer started later must not write them
    for old in list(ACCESS_LOG.handlers):
        ACCESS_LOG.removeHandler(old)
    ACCESS_LOG.propagate = True
