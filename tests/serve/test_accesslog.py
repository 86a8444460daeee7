"""The access log is written by a thread of its own: a stalled log stream never holds a request, and
every line is written, in order, by the time the server has stopped."""

from __future__ import annotations

import io
import json
import logging
import threading

import requests

from nnsql.serve import accesslog


class StalledStream(io.StringIO):
    """A log destination whose writes wait until `flowing` is set (a full pipe, a slow disk)."""

    def __init__(self) -> None:
        super().__init__()
        self.flowing = threading.Event()

    def write(self, text: str) -> int:
        self.flowing.wait(timeout=60)
        return super().write(text)


def paths(text: str) -> list[str]:
    return [json.loads(line.split("] ", 1)[-1])["path"] for line in text.splitlines() if '"path"' in line]


def test_a_stalled_log_stream_holds_no_request(live, caplog):
    caplog.set_level(logging.INFO, logger="serve.access")
    stream = StalledStream()
    listener = accesslog.start(stream)
    try:
        asked = [f"/v2/models/mnist/versions/{n}/ready" for n in range(1, 21)]
        for path in asked:  # each answered although no line could be written yet
            assert requests.get(f"{live.url}{path}", timeout=10).status_code in (200, 404)
        assert stream.getvalue() == ""
        stream.flowing.set()
    finally:
        accesslog.stop(listener)
    assert paths(stream.getvalue()) == asked


def test_every_line_is_written_in_order_by_the_end_of_the_server(serve_process):
    server = serve_process("--workers", "1")
    asked = [f"/v2/models/mnist/versions/{n}/ready" for n in range(1, 301)]
    with requests.Session() as session:
        for path in asked:
            session.get(f"{server.url}{path}", timeout=10)
    logged = [
        p for p in paths(server.stop()) if p.startswith("/v2/models/")
    ]  # at once: lines still queued must be written before the worker ends
    assert logged == asked
