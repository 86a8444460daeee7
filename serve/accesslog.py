"""The access log, written off the request path.

A request only builds its entry (a small dict) and puts it on a queue. A writer thread takes the
queued entries every 50 ms, makes each its JSON line (without a log record: the logging module's
record, formatter and handler cost several times the line itself) and writes them all in one write
through a buffer of its own: no request waits for formatting, a lock, a system call or a thread it
woke. Stopping the writer (at the worker's shutdown) writes every line still queued, in order.
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
    """An access log entry: formatted as its JSON line only when written, in the writer's thread."""

    def json(self) -> str:
        """Compact JSON, in ASCII: a client's path with other characters (a C1 control such as U+009B
        can drive a terminal) is written with \\u escapes. orjson takes a twentieth of the standard
        library's time; the standard library serves only the rare entry that is not ASCII, or that
        orjson refuses: a model named by a directory whose name is not UTF-8 holds lone surrogates."""
        try:
            text = orjson.dumps(self).decode()
        except TypeError:  # orjson.JSONEncodeError
            text = ""
        if text and text.isascii():
            return text
        return json.dumps(self, separators=(",", ":"), default=repr)

    def __str__(self) -> str:
        return self.json()


_queue: queue.SimpleQueue | None = None  # the writer's, while one runs
_dropped = [0]  # entries not queued since the writer last said so (approximate: no lock)


def log(**fields: Any) -> None:
    """Log a request's entry (nothing is built when the access log is off). With a writer running, the
    entry itself is queued, a fraction of a microsecond: the writer makes its line."""
    if not ACCESS_LOG.isEnabledFor(logging.INFO):
        return
    path = fields.get("path")
    if isinstance(path, str) and len(path) > PATH_CHARS:
        fields["path"] = path[:PATH_CHARS] + "..."
    if _queue is None:
        ACCESS_LOG.info("%s", Entry(fields))
    elif _queue.qsize() < MAX_PENDING:
        _queue.put(Entry(fields))
    else:
        _dropped[0] += 1


class DeferredQueueHandler(QueueHandler):
    """Queues the record as it is: its message is formatted by the writer, not here."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        return record


def entry_record(entry: Entry) -> logging.LogRecord:
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
    """The thread that takes the queued entries every POLL_SECONDS and writes their lines at once, in
    one write and one flush. An entry becomes its line directly (`[worker 0] {"method": ...}`); a log
    record, or an entry under a line format that needs one, goes through the formatter."""

    def __init__(self, stream: IO[str], line_format: str) -> None:
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
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
        lines = []
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                break
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

    def line(self, item: Entry | logging.LogRecord) -> str:
        if isinstance(item, Entry):
            if self.around is not None:
                return self.around[0] + item.json() + self.around[1]
            item = entry_record(item)
        return self.formatter.format(item)


def buffered(stream: IO[str]) -> IO[str]:
    """A buffered writer on the stream's file descriptor (stderr is line-buffered: a write per line)."""
    try:
        descriptor = stream.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):  # not a file (a test's capture)
        return stream
    return open(descriptor, "w", buffering=BUFFER_BYTES, closefd=False, encoding="utf-8")


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
