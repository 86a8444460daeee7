"""gRPC attacked below grpcio's API, with HTTP/2 frames written by hand on a socket, without a key.

Found by the hostile pass of issue 32: a header block that never ends (HEADERS without END_HEADERS, then
CONTINUATION frames for ever) is read by grpc-core, which kept hundreds of MB per such connection: 4
connections grew a keyed server's worker from 98 MiB to 1.3 GB in 45 s, while no call ever began (no
key is read before the block ends). The connection guard closes a connection that received more than
a bound with no call begun or running on it (serve/rpc/guard.py); the attacker reconnects, and the
worker's memory stays flat while authorised calls keep being answered.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as triton_grpc

from tests.serve.conftest import ServeProcess, free_port, onnx_repo  # noqa: F401  (the fixture, used below)

pytestmark = pytest.mark.slow
KEY = "probe-key-0123456789"
ATTACKERS = 4  # connections, each from an address of its own on loopback
SECONDS = 25
# The worker's peak memory may grow by this much: each connection is read until the guard's next look
# (0.2 s or more), tens of MB over loopback, some of it kept by grpc-core's allocator; measured +169 and
# +215 MiB with the guard (load 9-17 on 2 cores), +941 MiB on the code before (load 14).
GROWTH_MIB = 400
PROBE_SECONDS = 5  # the bound on each authorised answer
# Under a loaded machine (three test workers on 2 cores beside other work) a probe may miss that bound:
# 1 of some 80 did at load 20. Late is allowed for 1 probe in 10; any other error is not.
LATE_SHARE = 0.1

HEADERS, CONTINUATION, SETTINGS = 1, 9, 4


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def literal(name: str, value: str) -> bytes:
    """An HPACK literal header field without indexing, its name new, no Huffman coding (RFC 7541 6.2.2)."""
    return b"\x00" + bytes([len(name)]) + name.encode() + bytes([len(value)]) + value.encode()


def flood(port: int, source: str, stop: threading.Event, closed: list[int]) -> None:
    """A header block that never ends, on a new connection each time the server closes one."""
    fields = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/inference.GRPCInferenceService/ModelInfer"),
    ]
    start = b"".join(literal(name, value) for name, value in fields)
    more = frame(CONTINUATION, 0, 1, literal("x" * 100, "y" * 100) * 70)
    while not stop.is_set():
        with socket.socket() as connection:
            try:
                connection.bind((source, 0))
                connection.connect(("127.0.0.1", port))
                connection.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(SETTINGS, 0, 0))
                connection.sendall(frame(HEADERS, 0, 1, start))  # no END_HEADERS
                while not stop.is_set():
                    connection.sendall(more)
            except OSError:
                closed.append(1)
                time.sleep(0.05)


def assert_answered(answered: list[int], failed: list[str]) -> None:
    """The authorised probes were answered: at least 10, at most LATE_SHARE of them late, none refused."""
    assert len(answered) >= 10, (len(answered), failed[:3])
    assert all("DEADLINE_EXCEEDED" in error for error in failed), failed[:3]
    assert len(failed) <= LATE_SHARE * (len(answered) + len(failed)), failed[:3]


def peak_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))) / 1024


def test_an_endless_header_block_without_a_key_grows_no_worker(onnx_repo, tmp_path):  # noqa: F811
    keys = tmp_path / "keys"
    keys.write_text(KEY + "\n")
    port = free_port()
    server = ServeProcess(onnx_repo, "--workers", "1", "--grpc-port", str(port), "--api-key-file", str(keys))
    stop, closed, answered, failed = threading.Event(), [], [], []
    try:
        server.wait_ready()
        server.wait_for_workers(1)
        (worker,) = server.worker_pids()
        client = triton_grpc.InferenceServerClient(f"127.0.0.1:{port}")
        features = triton_grpc.InferInput("features", [1, 784], "FP32")
        features.set_data_from_numpy(np.zeros((1, 784), np.float32))
        key = {"authorization": f"Bearer {KEY}"}
        client.infer("mnist", [features], headers=key, client_timeout=PROBE_SECONDS)  # warm
        before = peak_mib(worker)
        attackers = [
            threading.Thread(target=flood, args=(port, f"127.0.9.{2 + i}", stop, closed), daemon=True)
            for i in range(ATTACKERS)
        ]
        for attacker in attackers:
            attacker.start()
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline:
            try:
                client.infer("mnist", [features], headers=key, client_timeout=PROBE_SECONDS)
                answered.append(1)
            except triton_grpc.InferenceServerException as error:
                failed.append(str(error)[:200])
            time.sleep(0.2)
        stop.set()
        for attacker in attackers:
            attacker.join(timeout=10)
        grown = peak_mib(worker) - before
    finally:
        stop.set()
        log = server.stop()
    assert_answered(answered, failed)
    assert grown < GROWTH_MIB, f"the worker grew by {grown:.0f} MiB"
    assert closed, "the server never closed a connection that carried no call"
    assert "carrying no call" in log
