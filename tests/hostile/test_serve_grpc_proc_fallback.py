"""The gRPC connection guard where netlink is not allowed (a seccomp profile refusing AF_NETLINK, a
sandbox without sock_diag): only /proc/self/net/tcp lists the port's connections, and it holds no byte
counts. Found by the third hostile pass of issue 32 (read, then checked here): the guard then had no
count at all, so a connection sending an endless header block without a key (which grew a worker by
1.2 GB in 45 s where netlink answers) was bounded by nothing. Now each of the process's own sockets is
asked for its bytes received (TCP_INFO), and the bound on bytes carrying no call holds there too.
Netlink is refused here by replacing the scan over it with one that fails as the kernel's refusal does.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from nnsql.serve.rpc import guard, sockets

SENT = 2 * guard.QUIET_BYTES  # beyond the bound on one connection carrying no call


@pytest.fixture
def no_netlink(monkeypatch):
    def refused(port: int, received: dict[int, int] | None = None) -> dict:
        raise PermissionError(1, "socket(AF_NETLINK): Operation not permitted")

    monkeypatch.setattr(sockets, "diag_sockets", refused)


@pytest.fixture
def connection():
    """A connection accepted by this process (as grpc-core's are), whose bytes a thread reads and drops
    (as grpc-core reads a header block); the client's end."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        accepted, _ = listener.accept()
        reader = threading.Thread(target=lambda: [None for _ in iter(lambda: accepted.recv(1 << 16), b"")])
        reader.start()
        try:
            yield listener.getsockname()[1], client
        finally:
            client.close()
            reader.join(timeout=10)
            accepted.close()


def test_the_bytes_of_own_connections_are_counted_without_netlink(no_netlink, connection):
    port, client = connection
    client.sendall(b"x" * SENT)
    deadline = time.monotonic() + 10  # the reader takes the last bytes in within milliseconds
    while True:
        received: dict[int, int] = {}
        found = sockets.port_sockets(port, received)
        assert len(found) == 1 and received, f"no byte count without netlink: {received}"
        if list(received.values()) == [SENT] or time.monotonic() > deadline:
            break
    assert list(received.values()) == [SENT]


def test_a_connection_carrying_no_call_is_shut_down_without_netlink(no_netlink, connection):
    port, client = connection
    watch = guard.ConnectionGuard(port, 64, 1000, list, activity=lambda: ({}, set()))
    client.sendall(b"x" * SENT)
    client.settimeout(10)
    for _ in range(50):  # the reader takes the bytes in; the kernel counts them as they arrive
        if watch.look():
            break
    else:
        pytest.fail(f"{SENT} bytes carrying no call, and the connection was left open")
    assert client.recv(1) == b"", "shut down: the client reads the end of the stream"
