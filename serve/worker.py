"""One worker of `nnsql serve`: started by the master (serve/__main__.py) as
`python -m nnsql.serve.worker`, with its settings as JSON in NNSQL_SERVE_WORKER and the listening socket
inherited as a file descriptor. It builds the Flask app (its own models, batchers and pool threads),
serves HTTP on the shared socket with serve.server on uvloop, and starts the servers other modules
registered in `app.extensions["servers"]` (each a callable `app -> stop`: gRPC goes there).

It stops on SIGTERM (running requests finish first) or when the master is gone; SIGINT is the
master's to handle (Ctrl-C reaches the whole process group).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nnsql import quiet
from nnsql.serve import accesslog, native_output, oplog, rundir
from nnsql.serve.liveness import Heartbeat
from nnsql.text import printable

ENVIRONMENT = "NNSQL_SERVE_WORKER"
LOG = logging.getLogger("nnsql.serve.worker")


async def serve(settings: dict[str, Any], heartbeat: Heartbeat) -> None:
    from nnsql.serve.app import create_app
    from nnsql.serve.server import Limits, Server

    app = create_app(settings["app"] | {"WORKER_INDEX": settings["index"]})
    server = Server(
        app, app.extensions["gate"].admit, Limits(**settings["limits"]), settings["host"], settings["port"]
    )
    starters = list(app.extensions.get("servers", []))
    if settings.get("grpc"):
        from nnsql.serve.rpc.server import grpc_service

        grpc = dict(settings["grpc"])
        starters.append(grpc_service(grpc.pop("host"), grpc.pop("port"), **grpc))
    stoppers: list[Callable[[], None]] = [start(app) for start in starters]
    listener = socket.socket(fileno=settings["fd"])
    await server.start(listener)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stopping.set)
    heartbeat.serving()
    while not stopping.is_set():
        try:
            await asyncio.wait_for(stopping.wait(), timeout=1.0)
        except TimeoutError:
            if os.getppid() != settings["master"]:  # the master died without stopping us
                break
    await server.close(grace=float(settings.get("grace", 10.0)))
    for stop in stoppers:
        stop()
    app.extensions["repository"].close()


def return_large_blocks() -> None:
    """Blocks of a MiB and more mapped on their own, so they go back to the system once freed: request
    bodies and gRPC messages come and go, and glibc would otherwise keep each size it saw in its heap
    (a worker's memory then grows with every burst of large calls and never shrinks)."""
    import contextlib
    import ctypes

    with contextlib.suppress(OSError, AttributeError):  # not glibc: its own policy
        ctypes.CDLL("libc.so.6").mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD


class OneLine(logging.Formatter):
    """Every message on one printable line: a name a writer of the repository chose (a model directory
    named with a line break or a terminal escape) is shown escaped, so it can neither forge a log line
    nor drive the operator's terminal. A traceback the server logs with a message keeps its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return printable(super().formatMessage(record))


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return_large_blocks()
    settings = json.loads(os.environ[ENVIRONMENT])
    line_format = f"[worker {settings['index']}] %(message)s"
    oplog.start(logging.INFO, formatter=OneLine(line_format))  # never waits for stderr
    native_output.capture(
        f"[worker {settings['index']}] (stderr) "
    )  # nor does onnxruntime's C++, writing on fd 2
    access_writer = None
    if settings.get("access_log", False):  # written by a thread of its own, off the request path
        access_writer = accesslog.start(sys.stderr, f"[worker {settings['index']}] %(message)s")
    else:
        logging.getLogger("serve.access").setLevel(logging.WARNING)
    run_dir = Path(settings["app"]["RUN_DIR"])
    share = rundir.hold(run_dir)  # None: the master was killed before this worker got here

    def abandon() -> None:
        """The master ended while this worker was starting: nobody will commit its models."""
        rundir.leave(run_dir, share)
        os._exit(1)

    heartbeat = Heartbeat(run_dir, settings["master"], abandon).start()
    import uvloop

    try:
        uvloop.run(serve(settings, heartbeat))
    finally:
        if access_writer is not None:
            accesslog.stop(access_writer)  # every queued line written before the worker ends
        oplog.stop()
        rundir.leave(run_dir, share)  # removes the run directory if the master was killed
    return 0


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
