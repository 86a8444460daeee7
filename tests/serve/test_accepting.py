"""The workers of `nnsql serve` share the connections that arrive together, instead of the first one
woken taking them all (which left a core idle and doubled every request's latency)."""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

from tests.fixtures import wait_for


def socket_inodes(pid: int) -> set[str]:
    """The inodes of the process's sockets, as /proc/PID/fd shows them ("socket:[INODE]")."""
    inodes = set()
    for entry in os.scandir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            target = os.readlink(entry.path)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    return inodes


def accepted_inodes(port: int, clients: list[socket.socket]) -> set[str]:
    """The inodes of the server's ends of these clients' connections to `port` (/proc/net/tcp): which
    worker holds each is then read from its file descriptors, whatever other sockets it opens or closes."""
    peers = {client.getsockname()[1] for client in clients}
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, inode = fields[1], fields[2], fields[9]
        if int(local.split(":")[1], 16) == port and int(remote.split(":")[1], 16) in peers and inode != "0":
            inodes.add(inode)
    return inodes


def taken_by(workers: list[int], port: int, clients: list[socket.socket]) -> list[int]:
    """How many of the clients' connections each worker holds."""
    accepted = accepted_inodes(port, clients)
    return sorted(len(socket_inodes(pid) & accepted) for pid in workers)


def test_connections_opened_together_are_shared_by_the_workers(serve_process):
    server = serve_process("--workers", "2")
    server.wait_for_workers(2)
    workers = server.worker_pids()
    clients = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(64)]
    try:
        wait_for(lambda: sum(taken_by(workers, server.port, clients)) >= 64, seconds=30)
        taken = taken_by(workers, server.port, clients)
        assert taken[0] >= 16, f"connections per worker: {taken}"
    finally:
        for client in clients:
            client.close()
