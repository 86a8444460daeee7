"""The worker's hand-written HTTP/1.1 front end (serve/server.py) against clients that a standard server
answers: half-closed sockets, pipelined requests, a refusal after requests already received, request
targets that are not paths. The real app and gate on a real loopback socket, in this process."""

from __future__ import annotations

import re
import socket
import time

import pytest

from nnsql.serve.app import create_app
from nnsql.serve.server import MAX_PIPELINED, Limits, Server
from tests.sockets import serving

KEY = b"Authorization: Bearer k3y\r\n"
READY = b"GET /v2/health/ready HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
MODELS = b"GET /v2/models/mnist HTTP/1.1\r\nHost: 127.0.0.1\r\n" + KEY + b"\r\n"


@pytest.fixture(scope="module")
def front_end(onnx_repo, tmp_path_factory):
    """The port of a Server (2 pool threads) over the real app, with an API key."""
    keys = tmp_path_factory.mktemp("keys") / "keys"
    keys.write_text("k3y\n")
    app = create_app({"REPO": str(onnx_repo), "POLL_SECONDS": 0, "API_KEY_FILE": str(keys)})
    listener = socket.create_server(("127.0.0.1", 0))
    server = Server(app, app.extensions["gate"].admit, Limits(threads=2), "127.0.0.1")
    with serving(server, listener, 10):
        yield listener.getsockname()[1]
    listener.close()
    app.extensions["repository"].close()


def exchange(port: int, data: bytes, *, half_close: bool = False, seconds: float = 3.0) -> bytes:
    """What the server answers to `data` until it closes the connection (or `seconds` pass)."""
    with socket.create_connection(("127.0.0.1", port), timeout=seconds) as connection:
        connection.sendall(data)
        if half_close:
            connection.shutdown(socket.SHUT_WR)
        received = b""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                chunk = connection.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                return received
            received += chunk
        return received + b"<still open>"


def statuses(answer: bytes) -> list[str]:
    return [status.decode() for status in re.findall(rb"HTTP/1\.1 (\d{3}) ", answer)]


def test_a_half_closed_connection_gets_its_answers_then_closes(front_end):
    """`shutdown(SHUT_WR)` after the request (nc -N, some health checkers): the answer still comes.
    The old front end closed at the client's EOF and answered nothing."""
    assert statuses(exchange(front_end, READY, half_close=True)) == ["200"]
    answer = exchange(front_end, READY + MODELS + READY, half_close=True)
    assert statuses(answer) == ["200", "200", "200"]
    assert answer.endswith(b"}\n") and b"Connection: close" in answer.split(b"HTTP/1.1 ")[-1]


def test_pipelined_requests_are_all_answered_in_order(front_end):
    """More pipelined requests than are queued at once: reading waits, nothing is refused."""
    count = MAX_PIPELINED + 8
    answer = exchange(front_end, (READY + MODELS) * count, half_close=True, seconds=10)
    assert statuses(answer) == ["200"] * 2 * count
    assert answer.count(b'"name":"mnist"') == count


def test_a_refusal_after_pipelined_requests_comes_after_their_answers(front_end):
    """A request without the key (or malformed, or after Connection: close) behind a good one: the
    good one is answered first. The old front end closed without answering either."""
    missing_key = b"GET /v2/models/mnist HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    assert statuses(exchange(front_end, MODELS + missing_key)) == ["200", "401"]
    assert statuses(exchange(front_end, MODELS + b"BAD\r\n\r\n")) == ["200", "400"]
    closing = b"GET /v2/health/ready HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    assert statuses(exchange(front_end, closing + READY)) == ["200"]


@pytest.mark.parametrize(
    ("request_line", "status"),
    [
        (b"CONNECT 127.0.0.1:22 HTTP/1.1", "400"),
        (b"OPTIONS * HTTP/1.1", "404"),
        (b"POST /score?" + b"a=1&" * 20 + b" HTTP/1.1", "400"),
    ],
)
def test_request_targets_the_app_cannot_route_are_answered_not_dropped(front_end, request_line, status):
    """These raised inside the parser's callback: a traceback in the log and no answer at all."""
    headers = b"\r\nHost: 127.0.0.1\r\n" + KEY + b"Content-Length: 0\r\n\r\n"
    answer = exchange(front_end, request_line + headers, half_close=True)
    assert statuses(answer) == [status]


@pytest.mark.parametrize("coding", ["gzip, chunked", "identity", "deflate"])
def test_a_transfer_coding_other_than_chunked_is_refused(front_end, coding):
    """The parser decodes the chunks of `gzip, chunked` and would hand gzip's bytes on as a JSON body; a
    coding the server does not apply is refused with 501, as RFC 9112 says, before any body is read."""
    request = (
        b"POST /v2/models/mnist/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + KEY
        + f"Transfer-Encoding: {coding}\r\nContent-Type: application/json\r\n\r\n".encode()
        + b"5\r\n{}{}{\r\n0\r\n\r\n"
    )
    answer = exchange(front_end, request)
    assert statuses(answer) == ["501"] and not answer.endswith(b"<still open>"), answer[:300]


def test_a_chunked_body_is_still_served(front_end):
    body = (
        b'{"inputs": [{"name": "features", "shape": [1, 784], "datatype": "FP32", "data": ['
        + b",".join([b"0"] * 784)
        + b"]}]}"
    )
    request = (
        b"POST /v2/models/mnist/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + KEY
        + b"Transfer-Encoding: chunked\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
        + f"{len(body):x}\r\n".encode()
        + body
        + b"\r\n0\r\n\r\n"
    )
    assert statuses(exchange(front_end, request)) == ["200"]
