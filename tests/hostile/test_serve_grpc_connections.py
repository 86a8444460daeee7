"""One client address holding the gRPC port's connections, without a key: bare TCP connections from
127.0.0.2 that send the HTTP/2 preface and nothing more. HTTP caps connections per client address
(`--max-client-connections`, the oldest idle or slow one closed at the cap); gRPC caps them only in all
(grpcio's `max_allowed_incoming_connections`, set from `--max-connections`), so at the cap every other
client's gRPC call is refused (UNAVAILABLE) until the idle timeout closes them, and the attacker simply
reconnects. Known open (strict xfail): it passes once gRPC connections are capped per client address."""

from __future__ import annotations

import socket
import time

import grpc
import pytest

from tests.serve.conftest import ServeProcess, free_port, onnx_repo  # noqa: F401  (the fixture, used below)

pytestmark = pytest.mark.slow
CONNECTIONS = 100  # --max-connections, low so that the test holds few descriptors
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
LIVE = "/inference.GRPCInferenceService/ServerLive"


def live(port: int) -> str:
    """ServerLive from 127.0.0.1, on a connection of its own: its status code's name."""
    options = [("grpc.use_local_subchannel_pool", 1)]
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
        call = channel.unary_unary(LIVE, request_serializer=bytes, response_deserializer=bytes)
        try:
            call(b"", timeout=5)
        except grpc.RpcError as error:
            return error.code().name
    return "OK"


@pytest.mark.xfail(strict=True, reason="gRPC connections are capped in all, not per client address")
def test_one_address_holding_every_grpc_connection_keeps_no_other_client_out(onnx_repo):  # noqa: F811
    port = free_port()
    server = ServeProcess(
        onnx_repo, "--workers", "1", "--grpc-port", str(port), "--max-connections", str(CONNECTIONS)
    )
    held: list[socket.socket] = []
    try:
        server.wait_ready()
        server.wait_for_workers(1)
        assert live(port) == "OK"
        for _ in range(CONNECTIONS + 10):
            attacker = socket.socket()
            attacker.bind(("127.0.0.2", 0))  # another client address: loopback holds 127.0.0.0/8
            attacker.connect(("127.0.0.1", port))
            attacker.sendall(PREFACE)
            held.append(attacker)
        time.sleep(1)
        answers = [live(port) for _ in range(3)]
        assert answers == ["OK"] * 3, f"{answers}\n{server.log()[-1500:]}"
    finally:
        for attacker in held:
            attacker.close()
        server.stop()
