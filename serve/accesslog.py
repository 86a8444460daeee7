"""The access log, written off the request path.

A request only builds its entry (a small dict) and puts it on a queue. A listener thread (the standard
library's QueueListener) takes the queued entries every 50 ms, makes each its log record and JSON line,
and writes the lines through a buffer of its own, flushed whenever the queue is empty: a write carries
many lines, and no request waits for a log record, formatting, a lock, a system call or a thread it
woke. Stopping the listener (at the worker's shutdown) writes every line still queued, in order.
"""

from __future__ import annotations

import io
import json
import logging
import queue
import sys
import time
from logging.handlers import QueueHandler, QueueListener
from typing import IO, Any

ACCESS_LOG = logging.getLogger("serve.access")
BUFFER_BYTES = 1 << 16
POLL_SECONDS = 0.05  # the longest a line waits to be written
# Entries waiting while the log's output does not keep up (a pipe nobody reads, a stalled disk): beyond
# these, entries are counted and dropped rather than kept, so a flood of requests cannot grow a worker
# without bound; an entry's path, which a client chooses, is cut to PATH_CHARS.
MAX_PENDING = 10_000
PATH_CHARS = 1024


class Entry(dict):
    """An access log entry: formatted as its JSON line only when written, in the listener's thread."""

    def __str__(self) -> str:
        return json.dumps(self)


_queue: queue.SimpleQueue | None = None  # the listener's, while one runs
_dropped = [0]  # entries not queued since the listener last said so (approximate: no lock)


def log(**fields: Any) -> None:
    """Log a request's entry (nothing is built when the access log is off). With a listener running,
    the entry itself is queued, a fraction of a microsecond: the listener makes the log record."""
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
    """Queues the record as it is: its message is formatted by the listener's handler, not here."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        return record


class PollingListener(QueueListener):
    """Takes the queued records every POLL_SECONDS rather than being woken by each one: a request's
    put then wakes no thread, and the lines are formatted and written in bursts."""

    queue: queue.SimpleQueue

    def prepare(self, record: Any) -> logging.LogRecord:
        """The log record of a queued entry (records queued by the handler pass as they are)."""
        if isinstance(record, Entry):
            return logging.makeLogRecord(
                {
                    "name": ACCESS_LOG.name,
                    "msg": "%s",
                    "args": (record,),
                    "levelno": logging.INFO,
                    "levelname": "INFO",
                }
            )
        return record

    def dequeue(self, block: bool) -> logging.LogRecord:
        while True:
            try:
                return self.queue.get_nowait()
            except queue.Empty:
                if _dropped[0]:
                    return dropped_record()
                if not block:
                    raise
                time.sleep(POLL_SECONDS)


def dropped_record() -> logging.LogRecord:
    """One line for the entries dropped while the output did not keep up."""
    count, _dropped[0] = _dropped[0], 0
    message = f"access log: {count} entries dropped: its output did not keep up with the requests"
    return logging.makeLogRecord(
        {"name": ACCESS_LOG.name, "msg": message, "levelno": logging.WARNING, "levelname": "WARNING"}
    )


class DrainingHandler(logging.StreamHandler):
    """Writes to its own buffer and flushes only when no more record waits in `pending`."""

    def __init__(self, stream: IO[str], pending: queue.SimpleQueue) -> None:
        super().__init__(stream)
        self.pending = pending

    def flush(self) -> None:
        if self.pending.empty():
            super().flush()


def buffered(stream: IO[str]) -> IO[str]:
    """A buffered writer on the stream's file descriptor (stderr is line-buffered: a write per line)."""
    try:
        descriptor = stream.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):  # not a file (a test's capture)
        return stream
    return open(descriptor, "w", buffering=BUFFER_BYTES, closefd=False, encoding="utf-8")


def start(stream: IO[str] | None = None, line_format: str = "%(message)s") -> QueueListener:
    """Send the access log through a queue to a listener thread writing to `stream` (stderr by default);
    the caller stops the listener at shutdown, which writes what is still queued."""
    pending: queue.SimpleQueue = queue.SimpleQueue()
    handler = DrainingHandler(buffered(stream or sys.stderr), pending)
    handler.setFormatter(logging.Formatter(line_format))
    listener = PollingListener(pending, handler)
    for old in list(ACCESS_LOG.handlers):
        ACCESS_LOG.removeHandler(old)
    ACCESS_LOG.addHandler(DeferredQueueHandler(pending))  # for whoever logs through the logger itself
    ACCESS_LOG.propagate = False
    listener.start()
    global _queue
    _queue = pending
    return listener


def stop(listener: QueueListener) -> None:
    """Write every queued line, flush, and give the access log back to the root logger's handlers."""
    global _queue
    _queue = None
    listener.stop()
    dropped = dropped_record() if _dropped[0] else None
    for handler in listener.handlers:
        if dropped is not None:
            handler.handle(dropped)
        logging.StreamHandler.flush(handler)
    for old in list(ACCESS_LOG.handlers):
        ACCESS_LOG.removeHandler(old)
    ACCESS_LOG.propagate = True
