"""The gRPC connection guard (serve/rpc/guard.py) on real sockets of this process: a listener on
127.0.0.1 and clients bound to other loopback addresses, as grpcio's connections are seen."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator

import pytest

from nnsql.serve.rpc import guard, sockets


class Port:
    """A listening port and the server ends of its connections, oldest first."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(256)
        self.number = self.listener.getsockname()[1]
        self.clients: list[socket.socket] = []
        self.accepted: list[socket.socket] = []

    def connect(self, host: str) -> socket.socket:
        client = socket.socket()
        client.bind((host, 0))
        client.connect(("127.0.0.1", self.number))
        self.clients.append(client)
        self.accepted.append(self.listener.accept()[0])
        return client

    def shut_down(self) -> list[bool]:
        """For each accepted connection, oldest first: whether it was shut down (its client reads EOF)."""
        ended = []
        for client in self.clients:
            try:
                ended.append(client.recv(1, socket.MSG_DONTWAIT) == b"")
            except BlockingIOError:  # open, nothing sent: the guard's shutdown is done when look() returns
                ended.append(False)
        return ended

    def close(self) -> None:
        for s in [*self.clients, *self.accepted, self.listener]:
            s.close()


@pytest.fixture
def port() -> Iterator[Port]:
    opened = Port()
    yield opened
    opened.close()


def peer(client: socket.socket) -> str:
    """The client as grpc names the peer of a server connection."""
    host, number = client.getsockname()
    return f"ipv4:{host}:{number}"


def test_netlink_and_proc_list_the_same_connections(port):
    for n in range(5):
        port.connect(f"127.0.0.{2 + n}")
    listed = sockets.diag_sockets(port.number)
    assert listed == sockets.proc_sockets(port.number)
    assert sorted(remote for _, remote in listed.values()) == sorted(c.getsockname() for c in port.clients)
    assert {local for local, _ in listed.values()} == {("127.0.0.1", port.number)}  # not the listener


def test_an_address_beyond_its_share_loses_its_oldest_idle_connections(port):
    for _ in range(5):
        port.connect("127.0.0.2")
    busy = port.connect("127.0.0.2")  # the oldest but one with a call running
    port.clients.insert(0, port.clients.pop())
    port.accepted.insert(0, port.accepted.pop())
    other = [port.connect("127.0.0.3") for _ in range(3)]
    watch = guard.ConnectionGuard(port.number, 3, 100, lambda: [peer(busy)])
    assert watch.look() == 3
    # 127.0.0.2 keeps 3: the busy one and its 2 newest; 127.0.0.3, within its share, keeps all 3
    assert port.shut_down() == [False, True, True, True, False, False] + [False] * len(other)
    assert watch.look() == 0  # within the caps now


def test_at_the_total_cap_the_oldest_idle_connections_make_room(port):
    for n in range(6):
        port.connect(f"127.0.0.{2 + n}")
    watch = guard.ConnectionGuard(port.number, 64, 4, lambda: [])
    assert watch.look() == 2
    assert port.shut_down() == [True, True, False, False, False, False]


def test_a_descriptor_reused_for_another_socket_is_left_alone(port):
    port.connect("127.0.0.2")
    port.connect("127.0.0.3")
    (inode, ends), _ = sorted(sockets.diag_sockets(port.number).items(), key=lambda item: item[1][1])
    assert ends[1][0] == "127.0.0.2"
    # the descriptor scanned for 127.0.0.2's connection now holds 127.0.0.3's (closed and reused)
    reused = guard.Seen(port.accepted[1].fileno(), *ends, 0.0)
    assert not guard.shut(reused)
    assert guard.shut(guard.Seen(sockets.socket_fds()[inode], *ends, 0.0))
    assert port.shut_down() == [True, False]


def test_the_guard_says_an_error_once_and_stops_with_its_server(port, caplog):
    port.connect("127.0.0.2")
    port.connect("127.0.0.2")

    def failing() -> list[str]:
        raise RuntimeError("no peers")

    watch = guard.ConnectionGuard(port.number, 1, 100, failing)
    with caplog.at_level(logging.WARNING, logger="nnsql.serve.rpc"):
        watch.start()
        threading.Event().wait(1.0)  # several looks, each failing the same way
        watch.stop()
    assert not watch.thread.is_alive()
    assert [r.getMessage() for r in caplog.records] == ["gRPC connection guard: RuntimeError: no peers"]
    assert port.shut_down() == [False, False]


@pytest.mark.parametrize(
    ("peer_name", "address"),
    [
        ("ipv4:127.0.0.2:5000", ("127.0.0.2", 5000)),
        ("ipv6:[::1]:5000", ("::1", 5000)),
        ("ipv6:[::ffff:127.0.0.2]:5000", ("127.0.0.2", 5000)),
        ("unix:/tmp/socket", None),
    ],
)
def test_grpc_peer_names_read_as_the_scans_give_addresses(peer_name, address):
    assert guard.peer_address(peer_name) == address


def test_the_guard_runs_with_its_grpc_server_and_stops_with_it(live):
    watching = live.grpc_server.guard
    assert watching.thread.is_alive()
    assert watching.port == int(live.grpc_url.rsplit(":", 1)[1])
    live.grpc_server.stop(grace=None)
    assert not watching.thread.is_alive()


class Counted(guard.Seen):
    """A connection that counts how often it is compared with another (`==`, as `in` over a list does)."""

    comparisons = 0

    def __eq__(self, other: object) -> bool:
        Counted.comparisons += 1
        return self is other

    __hash__ = object.__hash__


def test_choosing_the_connections_to_close_is_linear_in_the_connections():
    """5,000 connections, half of them one address's excess: choosing among them compares no two
    connections (each is looked at once after the sort), where a membership test over the chosen list
    compared each kept one with every chosen one (12.5 million comparisons)."""
    count = 5_000
    seen = [
        Counted(fd, ("127.0.0.1", 9000), (f"127.0.{n % 2}.2", 40000 + n), float(n))
        for n, fd in enumerate(range(100, 100 + count))
    ]
    Counted.comparisons = 0
    chosen = guard.victims(seen, set(), per_client=1_250, total=2_000)
    assert Counted.comparisons <= count  # at most one per connection
    # each address loses its 1,250 oldest (the first 2,500 seen, alternating), then the 500 oldest of
    # the 2,500 kept go for the total cap
    assert [c.fd for c in chosen] == [c.fd for c in seen[:3_000]]
