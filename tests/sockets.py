"""Which process holds the server's end of a loopback TCP connection, read from /proc (Linux).

A connection the kernel completed but no process accepted yet sits in the listening socket's queue with
no file (inode 0): only connections a worker took in are counted as held.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ESTABLISHED = "01"


def held_sockets(pid: int) -> set[int]:
    """The socket inodes among the open files of `pid`."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed since the listing
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def address(text: str) -> tuple[str, int]:
    """/proc/net/tcp's `0100007F:1F90` as ("127.0.0.1", 8080)."""
    host, port = text.split(":")
    return ".".join(str(byte) for byte in reversed(bytes.fromhex(host))), int(port, 16)


def server_ends(port: int) -> dict[tuple[str, int], int]:
    """Established IPv4 connections whose local end is `port`: {the client's (address, port): inode}."""
    ends = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == ESTABLISHED and address(fields[1])[1] == port:
            ends[address(fields[2])] = int(fields[9])
    return ends


def holders(port: int, clients: list[socket.socket], pids: list[int]) -> Counter[int | None]:
    """How many of the `clients` connected to `port` each pid among `pids` holds the server's end of;
    None counts those no process holds (not accepted yet, or closed by the server)."""
    owner = {inode: pid for pid in pids for inode in held_sockets(pid)}
    ends = server_ends(port)
    return Counter(owner.get(ends.get(client.getsockname(), 0)) for client in clients)


@contextmanager
def serving(server: Any, listener: socket.socket, seconds: float) -> Iterator[None]:
    """nnsql's HTTP Server (serve/server.py) accepting on `listener` from an event loop of its own thread,
    for the block; then closed with a grace of one second and its thread joined."""
    import uvloop

    loop = uvloop.new_event_loop()
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start(listener))
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(seconds)
    try:
        yield
    finally:
        asyncio.run_coroutine_threadsafe(server.close(grace=1), loop).result(seconds)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(seconds)
