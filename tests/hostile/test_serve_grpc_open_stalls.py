"""gRPC health checks without a key, on a keyed server: they take no room (serve/rpc/calls.py).

Found by a hostile pass, without a key: the health checks (ServerLive, ServerReady) need none, and
were calls like the others, waiting in the room for their message. A client with 120 connections (from
40 loopback addresses), each holding one health check that never sends its message and opening a new
connection as soon as the server ends it, kept every keyed ModelInfer out: none of 4 answered within
5 s each over 20 s (load 1.9). Each new connection is a newcomer that never stalled, entitled to a
0.5 s turn, and the keyed client's call waited among them for room. Now a health check's request (no
fields) is never waited for: the answer is made at once on the event loop.
"""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as triton_grpc

from tests.hostile.test_serve_grpc_frames import HEADERS, SETTINGS, assert_answered, frame, literal
from tests.serve.conftest import ServeProcess, free_port, onnx_repo  # noqa: F401  (the fixture, used below)

pytestmark = pytest.mark.slow
KEY = "probe-key-0123456789"
ATTACKERS = 120  # connections, reopened as each call ends
ADDRESSES = 40  # loopback addresses they come from: 3 each, far within the per-address cap
SECONDS = 20
PROBES = 15  # keyed inferences, 5 s each at most (test_serve_grpc_frames.PROBE_SECONDS)
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(SETTINGS, 0, 0)
HEALTH = b"".join(
    literal(name, value)
    for name, value in [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/inference.GRPCInferenceService/ServerLive"),
        (":authority", "x"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]
)
ENDED = {1, 3, 7}  # HEADERS (the trailers), RST_STREAM, GOAWAY: the call is over


def call_ended(connection: socket.socket, stop: threading.Event) -> None:
    """Until the server ends the call (or closes the connection, or the test ends)."""
    pending = b""
    while not stop.is_set():
        try:
            data = connection.recv(65536)
        except TimeoutError:
            continue
        if not data:
            return
        pending += data
        while len(pending) >= 9 and len(pending) >= 9 + int.from_bytes(pending[:3], "big"):
            if pending[3] in ENDED:
                return
            pending = pending[9 + int.from_bytes(pending[:3], "big") :]


def stall(port: int, source: str, stop: threading.Event) -> None:
    """A health check whose message never comes, on a new connection each time the server ends one."""
    while not stop.is_set():
        with socket.socket() as connection:
            try:
                connection.bind((source, 0))
                connection.connect(("127.0.0.1", port))
                connection.settimeout(0.5)
                connection.sendall(PREFACE + frame(HEADERS, 4, 1, HEALTH))  # END_HEADERS, no message
                call_ended(connection, stop)
            except OSError:
                pass
        time.sleep(0.05)  # answered at once now: the attacker need not spin


def test_keyless_health_checks_that_never_send_keep_no_keyed_call_out(onnx_repo, tmp_path):  # noqa: F811
    keys = tmp_path / "keys"
    keys.write_text(KEY + "\n")
    port = free_port()
    server = ServeProcess(onnx_repo, "--workers", "1", "--grpc-port", str(port), "--api-key-file", str(keys))
    stop, answered, failed = threading.Event(), [], []
    attackers = [
        threading.Thread(target=stall, args=(port, f"127.0.41.{2 + i % ADDRESSES}", stop), daemon=True)
        for i in range(ATTACKERS)
    ]
    try:
        server.wait_ready()
        server.wait_for_workers(1)
        client = triton_grpc.InferenceServerClient(f"127.0.0.1:{port}")
        features = triton_grpc.InferInput("features", [1, 784], "FP32")
        features.set_data_from_numpy(np.zeros((1, 784), np.float32))
        key = {"authorization": f"Bearer {KEY}"}
        client.infer("mnist", [features], headers=key, client_timeout=30)  # warm
        assert client.is_server_live() and client.is_server_ready()  # health checks with their message
        for attacker in attackers:
            attacker.start()
        time.sleep(2)  # the stalled checks are in
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline and len(answered) < PROBES:
            try:
                client.infer("mnist", [features], headers=key, client_timeout=5)
                answered.append(1)
            except triton_grpc.InferenceServerException as error:
                failed.append(str(error)[:200])
            time.sleep(0.2)
        client.close()
    finally:
        stop.set()
        for attacker in attackers:
            attacker.join(5)
        server.stop()
    assert_answered(answered, failed)
