"""The access log, written off the request path.

A request makes its entry's JSON line (orjson) and puts it on a queue, as a string: orjson's own bytes
keep the buffer it reserved, several KiB, which a queue of them would hold. A writer thread takes the
queued lines every 50 ms, joins them and writes them in one write through a buffer of its own: no
request waits for a lock, a system call or a thread it woke. In a serving worker the writer's CPU per
line was about three times what the same work costs measured apart (each entry out of the cache by its
turn), so the writer is left the least work: joining strings. An entry orjson refuses or that is not
ASCII (rare: a client's path, a model's name) is queued as it is, and the writer formats it. Stopping
the writer (at the worker's shutdown) writes every line still queued, in order.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import queue
import sys
import threading
from logging.handlers import QueueHandler
from typing import IO, Any

import orjson

ACCESS_LOG = logging.getLogger("serve.access")
BUFFER_BYTES = 1 << 16
POLL_SECONDS = 0.05  # the longest a line waits to be written
# Entries waiting while the log's output does not keep up (a pipe nobody reads, a stalled disk): beyond
# these, entries are counted and dropped rather than kept, so a flood of requests cannot grow a worker
# without bound; an entry's path, which a client chooses, is cut to PATH_CHARS.
MAX_PENDING = 10_000
PATH_CHARS = 1024


class Entry(dict):
    """An access log entry formatted by the writer's thread: one orjson refuses or that is not ASCII,
    or any logged while no writer runs (through the logger)."""

    def json(self) -> str:
        """Compact JSON, in ASCII: a client's path with other characters (a C1 control such as U+009B
        can drive a terminal) is written with \\u escapes. orjson takes a twentieth of the standard
        library's time; the standard library serves only the rare entry that is not ASCII, or that
        orjson refuses: a model named by a directory whose name is not UTF-8 holds lone surrogates."""
        return ascii_line(self) or json.dumps(self, separators=(",", ":"), default=repr)

    def __str__(self) -> str:
        return self.json()


Queued = str | Entry | logging.LogRecord  # a line made by the request, an entry, a record
_queue: queue.SimpleQueue | None = None  # the writer's, while one runs
_dropped = [0]  # entries not queued since the writer last said so (approximate: no lock)


def log(**fields: Any) -> None:
    """Log a request's entry (nothing is built when the access log is off). With a writer running, its
    JSON line is queued, about half a microsecond in all: the writer only writes it."""
    if not ACCESS_LOG.isEnabledFor(logging.INFO):
        return
    path = fields.get("path")
    if isinstance(path, str) and len(path) > PATH_CHARS:
        fields["path"] = path[:PATH_CHARS] + "..."
    if _queue is None:
        ACCESS_LOG.info("%s", Entry(fields))
    elif _queue.qsize() < MAX_PENDING:
        _queue.put(made(fields))
    else:
        _dropped[0] += 1


def ascii_line(fields: dict[str, Any]) -> str | None:
    """The entry's compact JSON by orjson when it is ASCII; None when orjson refuses it or it is not."""
    try:
        line = orjson.dumps(fields).decode()
    except TypeError:  # orjson.JSONEncodeError
        return None
    return line if line.isascii() else None


def made(fields: dict[str, Any]) -> str | Entry:
    """The entry's compact JSON in ASCII, as Entry.json writes it; the entry itself when orjson refuses
    it or it is not ASCII, for the writer to format."""
    return ascii_line(fields) or Entry(fields)


class DeferredQueueHandler(QueueHandler):
    """Queues the record as it is: its message is formatted by the writer, not here."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        return record


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
    text = environ.get("CONTENT_LENGTH", "")
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
    """The thread that takes the queued lines every POLL_SECONDS and writes them at once, in one write
    and one flush. A line a request made becomes `[worker 0] {"method": ...}` by joining strings; an
    entry, a log record, or a line under a line format that needs a record, goes through the formatter."""

    def __init__(self, stream: IO[str], line_format: str) -> None:
        self.queue: queue.SimpleQueue[Queued] = queue.SimpleQueue()
        self.stream = stream
        self.formatter = logging.Formatter(line_format)
        self.around = around_message(line_format)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, name="access-log", daemon=True)

    def run(self) -> None:
        while not self.stopping.wait(POLL_SECONDS):
            self.drain()
        self.drain()

    def drain(self) -> None:
        lines: list[str] = []
        before, after = self.around or ("", "")
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                break
            if type(item) is str and self.around is not None:  # nearly every line: joined, no more
                lines.append(before + item + after)
                continue
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
        if isinstance(item, str):  # under a line format that needs a record's other fields
            item = entry_record(item)
        elif isinstance(item, Entry):
            if self.around is not None:
                return self.around[0] + item.json() + self.around[1]
            item = entry_record(item)
        return self.formatter.format(item)


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
    """Send the access log through a queue to a writer thread writing to `stream` (stderr by default);
    the caller stops the writer at shutdown, which writes what is still queued."""
    writer = Writer(buffered(stream or sys.stderr), line_format)
    for old in list(ACCESS_LOG.handlers):
        ACCESS_LOG.removeHandler(old)
    ACCESS_LOG.addHandler(DeferredQueueHandler(writer.queue))  # for whoever logs through the logger itself
    ACCESS_LOG.propagate = False
    writer.thread.start()
    global _queue
    _queue = writer.queue
    return writer


def stop(writer: Writer) -> None:
    """Write every queued line, flush, and give the access log back to the root logger's handlers."""
    global _queue
    _queue = None
    writer.stopping.set()
    writer.thread.join()
    for old in list(ACCESS_LOG.handlers):
        ACCESS_LOG.removeHandler(old)
    ACCESS_LOG.propagate = True
