"""A worker's descriptor 2 as a pipe of its own, so that native code cannot block on the log's output.

onnxruntime (and TensorFlow, gRPC) write their warnings straight to descriptor 2 from C++, past the
queue of serve/oplog.py, and onnxruntime does it while it builds a session holding Python's lock: with
the log's output a pipe nobody reads, one model that made it warn (an initializer no node uses, one line
each) froze the whole worker, heartbeat included, for good. Its lines also quoted the model's names as
they are, line breaks and terminal escapes included.

So `capture()` points descriptor 2 at a pipe whose writing end never blocks (a write that finds it full
fails: those bytes are lost, never waited for) and reads it from a thread that says each line through
the operator's queue, on one printable line. The pipe holds 1 MiB where the system allows: a burst a
native library writes while it holds Python's lock (the reader needs that lock too) goes through whole
up to that size. Python's own writes to sys.stderr (warnings, a thread's traceback) become lines of the
same queue; the access log and the queue's writer use the real output.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import io
import os
import re
import sys
import threading

from nnsql.text import printable

from . import oplog

PIPE_BYTES = 1 << 20
LONGEST_LINE = 4096  # bytes of one line kept; the rest of it is cut
COLOUR = re.compile(rb"\x1b\[[0-9;]*m")  # onnxruntime colours its lines even into a pipe


class Said(io.TextIOBase):
    """sys.stderr of a captured worker: text written to it is said line by line, never waited for. Its
    file descriptor is the real output's, for whoever writes there on its own (the access log)."""

    def __init__(self, descriptor: int, prefix: str) -> None:
        self.descriptor = descriptor
        self.prefix = prefix
        self.partial = ""

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.descriptor

    def write(self, text: str) -> int:
        *lines, self.partial = (self.partial + text).split("\n")
        self.partial = self.partial[:LONGEST_LINE]
        for line in lines:
            self.say(self.prefix + printable(line))
        return len(text)

    def say(self, line: str) -> None:
        """Queued while the operator's queue runs; written at once before and after it (a traceback
        printed as the worker ends, once the queue has stopped)."""
        if oplog.running():
            oplog.say(line, self)
        else:
            oplog.write(self.descriptor, line)


def capture(prefix: str) -> None:
    """From now on, descriptor 2 is a pipe that never blocks its writers, read by a thread of its own;
    sys.stderr says its lines. Call it before any native library starts writing."""
    real = os.dup(2)
    os.set_inheritable(real, False)
    reader, writer = os.pipe2(os.O_CLOEXEC)
    with contextlib.suppress(OSError):  # beyond /proc/sys/fs/pipe-max-size: the default 64 KiB
        fcntl.fcntl(writer, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    os.set_blocking(writer, False)  # this pipe's own: the real output's blocking mode is left alone
    sys.stderr.flush()
    os.dup2(writer, 2)
    os.close(writer)
    sys.stderr = Said(real, prefix)
    atexit.register(oplog.stop)  # a traceback said as the worker ends is written before it is gone
    threading.Thread(target=forward, args=(reader, sys.stderr), name="native-output", daemon=True).start()


def forward(reader: int, said: Said) -> None:
    """Say every line written into the pipe, until its writers are gone."""
    partial = b""
    while chunk := os.read(reader, 1 << 16):
        *lines, partial = (partial + chunk).split(b"\n")
        partial = partial[:LONGEST_LINE]
        for line in lines:
            text = COLOUR.sub(b"", line[:LONGEST_LINE]).decode(errors="backslashreplace")
            said.say(said.prefix + printable(text))
