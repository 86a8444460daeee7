"""Clients holding the gRPC port's connections, without a key: bare TCP connections that send the HTTP/2
preface and nothing more. As over HTTP, gRPC connections are capped per client address
(`--max-client-connections`) and in all (`--max-connections`), and at either cap the oldest connection
with no call running is closed (serve/rpc/guard.py): one address holding more than its share, or many
addresses holding the total, keep no other client out."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import pytest

from tests.serve.conftest import ServeProcess, free_port, onnx_repo  # noqa: F401  (the fixture, used below)

pytestmark = pytest.mark.slow
CONNECTIONS = 100  # --max-connections, low so that the test holds few descriptors
PER_CLIENT = 8  # --max-client-connections
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
LIVE = "/inference.GRPCInferenceService/ServerLive"
METADATA = "/inference.GRPCInferenceService/ServerMetadata"  # needs the key
KEY = "grpc-connections-key"
SETTLE = 1.5  # seconds for the guard (a look every 0.2 s) to close what is beyond the caps


def call(port: int, method: str, metadata: tuple = ()) -> str:
    """One call from 127.0.0.1, on a connection of its own: its status code's name."""
    options = [("grpc.use_local_subchannel_pool", 1)]
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
        stub = channel.unary_unary(method, request_serializer=bytes, response_deserializer=bytes)
        try:
            stub(b"", timeout=5, metadata=metadata)
        except grpc.RpcError as error:
            return error.code().name
    return "OK"


def bare(port: int, host: str) -> socket.socket:
    """A connection from `host` (loopback holds 127.0.0.0/8) that sends the preface and waits."""
    attacker = socket.socket()
    attacker.bind((host, 0))
    attacker.connect(("127.0.0.1", port))
    attacker.sendall(PREFACE)
    return attacker


def still_open(connection: socket.socket) -> bool:
    """Whether the server has not closed `connection` (what it sent so far is read and dropped)."""
    connection.setblocking(False)
    try:
        while connection.recv(65536):
            pass
    except BlockingIOError:
        return True
    except OSError:  # reset
        return False
    return False  # end of stream


@contextmanager
def server(onnx_repo, tmp_path, *args: str) -> Iterator[tuple[ServeProcess, int, list[socket.socket]]]:  # noqa: F811
    keys = tmp_path / "keys"
    keys.write_text(KEY + "\n")
    port = free_port()
    process = ServeProcess(
        onnx_repo, "--workers", "1", "--grpc-port", str(port), "--api-key-file", str(keys), *args
    )
    held: list[socket.socket] = []
    try:
        process.wait_ready()
        process.wait_for_workers(1)
        assert call(port, LIVE) == "OK"
        yield process, port, held
    finally:
        for attacker in held:
            attacker.close()
        process.stop()


def test_one_address_holding_every_grpc_connection_keeps_no_other_client_out(onnx_repo, tmp_path):  # noqa: F811
    with server(onnx_repo, tmp_path, "--max-connections", str(CONNECTIONS)) as (process, port, held):
        held += [bare(port, "127.0.0.2") for _ in range(CONNECTIONS + 10)]
        time.sleep(SETTLE)
        answers = [call(port, LIVE) for _ in range(3)]
        assert answers == ["OK"] * 3, f"{answers}\n{process.log()[-1500:]}"
        assert sum(map(still_open, held)) == 64  # the address keeps its share (--max-client-connections)


def test_many_addresses_holding_every_grpc_connection_keep_no_newcomer_with_a_key_out(onnx_repo, tmp_path):  # noqa: F811
    args = ("--max-connections", str(CONNECTIONS), "--max-client-connections", str(PER_CLIENT))
    with server(onnx_repo, tmp_path, *args) as (process, port, held):
        hosts = [f"127.0.0.{n}" for n in range(2, 41)]  # 39 addresses, each within its share
        held += [bare(port, hosts[n % len(hosts)]) for n in range(CONNECTIONS + 10)]
        time.sleep(SETTLE)
        assert sum(map(still_open, held)) == CONNECTIONS  # the oldest 10 were closed
        key = (("x-api-key", KEY),)
        answers = [call(port, METADATA, key) for _ in range(3)]
        assert answers == ["OK"] * 3, f"{answers}\n{process.log()[-1500:]}"
        assert call(port, METADATA) == "UNAUTHENTICATED"  # the key is still needed
