"""The workers of `nnsql serve` share the connections that arrive together, instead of the first one
woken taking them all (which left a core idle and doubled every request's latency)."""

from __future__ import annotations

import contextlib
import os
import socket
import time

from tests.fixtures import wait_for


def sockets_of(pid: int) -> int:
    count = 0
    for entry in os.scandir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            count += os.readlink(entry.path).startswith("socket:")
    return count


def test_connections_opened_together_are_shared_by_the_workers(serve_process):
    server = serve_process("--workers", "2")
    server.wait_for_workers(2)
    workers = server.worker_pids()
    before = {pid: sockets_of(pid) for pid in workers}
    clients = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(64)]
    try:
        wait_for(lambda: sum(sockets_of(pid) - before[pid] for pid in workers) >= 64, seconds=30)
        time.sleep(0.2)
        taken = sorted(sockets_of(pid) - before[pid] for pid in workers)
        assert taken[0] >= 16, f"connections per worker: {taken}"
    finally:
        for client in clients:
            client.close()
