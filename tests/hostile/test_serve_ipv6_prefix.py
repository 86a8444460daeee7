"""Per-address connection caps count an IPv6 client by its /64 (serve/clients.py). One host is given a
whole /64 and may use any address in it (privacy addresses, or simply `ip addr add`): counted by /128,
it opened `--max-client-connections` connections from each of as many addresses as it liked, over HTTP
and gRPC alike.

Real sockets, in a network namespace of their own (`unshare --net`, as root) whose loopback holds
addresses of two /64s, so nothing of the machine's own network is touched."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ONE_HOST = [f"fd00:6e6e::{n:x}" for n in range(16, 22)]  # six addresses of one /64
OTHER_HOST = ["fd00:6e6f::1", "fd00:6e6f::2"]  # another /64
SERVER = "fd00:6e6e::1"
CAP = 3  # --max-client-connections
SECONDS = 10  # bound on every wait: everything is on loopback


def test_a_client_is_its_ipv4_address_or_its_ipv6_slash_64():
    from nnsql.serve.clients import client_group

    assert client_group("fd00:6e6e::10") == client_group("fd00:6e6e::ffff:ffff:ffff:ffff") == "fd00:6e6e::/64"
    assert client_group("fd00:6e6e:0:1::10") == "fd00:6e6e:0:1::/64"  # the next /64: another client
    assert client_group("::ffff:192.0.2.7") == client_group("192.0.2.7") == "192.0.2.7"
    assert client_group("fe80::1%eth0") == "fe80::/64"
    assert client_group("127.0.0.2") != client_group("127.0.0.3")
    assert client_group("not an address") == "not an address"


def can_make_namespaces() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    return subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode == 0


def in_namespace(scenario: str) -> str:
    """Run this module's `scenario` in a fresh network namespace; its output."""
    code = f"import tests.hostile.test_serve_ipv6_prefix as t; t.{scenario}()"
    run = subprocess.run(
        ["unshare", "--net", sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


namespaced = pytest.mark.skipif(not can_make_namespaces(), reason="needs root and unshare --net")


def set_up_addresses() -> None:
    """The namespace's loopback, up, with the server's and the clients' addresses."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    for address in [SERVER, *ONE_HOST, *OTHER_HOST]:
        subprocess.run(["ip", "-6", "addr", "add", f"{address}/64", "dev", "lo", "nodad"], check=True)


def connect(port: int, source: str) -> socket.socket:
    client = socket.socket(socket.AF_INET6)
    client.settimeout(SECONDS)
    client.bind((source, 0))
    client.connect((SERVER, port))
    return client


def ended(client: socket.socket) -> bool:
    """Whether the guard shut it down (the client reads EOF; the shutdown is done when look() returns)."""
    client.settimeout(None)  # blocking: MSG_DONTWAIT then says at once whether EOF is there
    try:
        return client.recv(1, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False


def grpc_guard_scenario() -> None:
    from nnsql.serve.rpc import guard, sockets

    set_up_addresses()
    listener = socket.create_server((SERVER, 0), family=socket.AF_INET6, backlog=64)
    port = listener.getsockname()[1]
    clients = [connect(port, source) for source in ONE_HOST + OTHER_HOST]
    accepted = [listener.accept()[0] for _ in clients]
    assert len(sockets.port_sockets(port)) == len(clients)
    closed = guard.ConnectionGuard(port, CAP, 100, lambda: []).look()
    print(json.dumps([closed, [ended(client) for client in clients]]))
    for s in [*clients, *accepted, listener]:
        s.close()


def http_scenario() -> None:
    from nnsql.serve.server import Limits, Server
    from tests.sockets import serving

    set_up_addresses()
    listener = socket.create_server((SERVER, 0), family=socket.AF_INET6, backlog=64)
    port = listener.getsockname()[1]
    server = Server(None, lambda *request: 0, Limits(max_client_connections=CAP, threads=1), SERVER, port)
    with serving(server, listener, SECONDS):
        clients = [connect(port, source) for source in ONE_HOST + OTHER_HOST]
        answers = []
        for client in clients:
            client.settimeout(1.0)
            try:
                answers.append(client.recv(4096).split(b"\r\n")[0].decode())
            except TimeoutError:
                answers.append("open")
        print(json.dumps(answers))
        for client in clients:
            client.close()


@namespaced
def test_the_grpc_guard_counts_one_slash_64_as_one_client():
    """Six connections from six addresses of one /64 and two from another, a cap of 3 per client: the
    first /64 loses its 3 oldest, the other keeps both (by /128 no address was beyond the cap)."""
    closed, shut = json.loads(in_namespace("grpc_guard_scenario"))
    assert closed == 3
    assert shut == [True] * 3 + [False] * 5


@namespaced
def test_the_http_server_counts_one_slash_64_as_one_client():
    """The same clients over HTTP: the fourth to sixth connections of the first /64 are refused with a
    429 as they arrive; the other /64's are let in."""
    answers = json.loads(in_namespace("http_scenario"))
    assert answers == ["open"] * CAP + ["HTTP/1.1 429 Too Many Requests"] * 3 + ["open"] * 2
