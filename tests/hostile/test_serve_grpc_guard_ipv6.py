"""The gRPC connection guard against clients on IPv6, with grpcio's own peer strings: grpcio names an
IPv6 peer with its brackets percent-encoded (`ipv6:%5B::1%5D:5000`), and a call running on such a
connection must keep it from being shut down, as it does for an IPv4 one. Found by the hostile pass of
issue 32: the guard read no address from that string, so beyond the caps the connection of a call in
progress was shut down (the call failed) before the idle connection an attacker opened after it."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from nnsql.serve.rpc import guard, sockets

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SECONDS = 10  # bound on each wait below: the call and the handler are local, answered in milliseconds


def has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


pytestmark = pytest.mark.skipif(not has_ipv6_loopback(), reason="no IPv6 loopback here")


class Held:
    """A gRPC server on [::1] whose one method records its caller's peer and waits until released."""

    def __init__(self) -> None:
        self.peers: list[str] = []
        self.entered, self.release = threading.Event(), threading.Event()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        handler = grpc.unary_unary_rpc_method_handler(self.wait)
        self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("s", {"wait": handler})])
        self.port = self.server.add_insecure_port("[::1]:0")
        self.server.start()

    def wait(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        self.peers.append(context.peer())
        self.entered.set()
        self.release.wait(SECONDS)
        return b"done"


def accepted(port: int, count: int) -> bool:
    """Whether the server (this process) has accepted `count` connections of `port` (the kernel lists a
    connection once its handshake is done, before grpcio accepts it and holds a descriptor)."""
    deadline = time.monotonic() + SECONDS
    while time.monotonic() < deadline:
        listed, fds = sockets.port_sockets(port), sockets.socket_fds()
        if len(listed) == count and all(inode in fds for inode in listed):
            return True
        time.sleep(0.01)
    return False


@pytest.fixture
def held() -> Iterator[Held]:
    server = Held()
    yield server
    server.release.set()
    server.server.stop(grace=None)


def test_grpcio_ipv6_peer_strings_name_the_connection():
    port = 5000
    assert guard.peer_address(f"ipv6:%5B::1%5D:{port}") == ("::1", port)
    assert guard.peer_address(f"ipv6:%5Bfe80::1%25eth0%5D:{port}") == ("fe80::1", port)
    assert guard.peer_address(f"ipv4:127.0.0.1:{port}") == ("127.0.0.1", port)


def test_a_call_running_over_ipv6_keeps_its_connection_beyond_the_caps(held):
    options = [("grpc.use_local_subchannel_pool", 1)]
    with grpc.insecure_channel(f"[::1]:{held.port}", options=options) as channel:
        method = channel.unary_unary("/s/wait", request_serializer=bytes, response_deserializer=bytes)
        running = method.future(b"", timeout=SECONDS)
        assert held.entered.wait(SECONDS)
        with socket.create_connection(("::1", held.port)) as idle:  # the same address, after it, idle
            idle.sendall(PREFACE)
            assert accepted(held.port, 2)
            watch = guard.ConnectionGuard(held.port, 1, 100, lambda: list(held.peers))
            assert watch.look() == 1  # the address holds 2 connections, 1 allowed
            held.release.set()
            assert running.result(timeout=SECONDS) == b"done"  # the running call's connection was kept
            idle.settimeout(SECONDS)
            while idle.recv(65536):  # the idle one was shut down: read to its end
                pass
