"""Caps on the gRPC port's connections per client address, and in all, with the HTTP server's rules.

grpcio caps connections only in all, and refuses newcomers at its cap. Its connections are sockets of
this process, so a thread looks at the port's connections every `INTERVAL` seconds (serve/rpc/sockets.py:
the kernel's list, each with its inode). Within both caps, that is all. Beyond them, /proc/self/fd says
which inodes are this process's descriptors: a client address (an IPv6 one's /64, serve/clients.py) with
more than `per_client` connections has its excess shut down, then the excess beyond `total` in all, each
time the connections with no call running first (`busy` gives the peers that have one), of those the ones
that never carried a call needing a key (`keyed` gives those that did: a keyless flood cannot earn that),
then the oldest. grpc-core sees the connection end and frees it. grpcio's own cap is set above `total`
(`headroom`), so that newcomers come in and the guard makes room for them, as the HTTP server does at
its cap.

A connection also goes, whatever the caps, once it has received more than `QUIET_BYTES` since a call
last began on it or a call's message last came in (`activity` gives both): bytes that carry no call.
grpc-core reads an endless header block (HEADERS, then CONTINUATION frames that never end it: no call
ever begins) and kept about 300 MB per such connection, so 4 connections without a key grew a worker by
1.2 GB in 45 s. A call's own header block is at most 16 KiB; a connection with a call in the room
waiting for its message may receive that message too (`message_bytes` more: the room holds few calls).
A call merely waiting, or running, earns nothing more: a call held waiting for a message that never
comes once let the same connection's endless header block grow a worker by 800 MB in 25 s. And the
bytes that carry no call, summed over the connections, stay within `QUIET_TOTAL`: beyond it the
connections that carried the most go first (600 connections of 1 MB each held 900 MB). Counted from the
kernel's byte count (tcp_info, over netlink; where only /proc answers, from each of this process's
sockets' own tcp_info).

Before a shutdown, the descriptor is duplicated and its addresses checked against the scan (it may have
been closed and reused since). An error is one warning line; the guard never stops the worker.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote

from ..clients import client_group
from .sockets import Address, Ends, canonical, duplicate, normal, port_sockets, socket_fds

LOG = logging.getLogger("nnsql.serve.rpc")
INTERVAL = 0.2  # seconds between two looks
QUIET_BYTES = 1 << 20  # bytes a connection may receive with no call begun or message received on it
QUIET_TOTAL = 64 << 20  # such bytes of all connections: a client address's 64 connections' worth
PACE = 50  # a look's CPU time, times this, is the least pause after it (at most 2% of a core)


def headroom(total: int, per_client: int) -> int:
    """Connections grpcio lets in beyond `total`, for the guard to close: one address's worth at least."""
    return max(per_client, 16, total // 10)


@dataclass
class Seen:
    """A connection of the gRPC port: its descriptor, its addresses, and when the guard first saw it."""

    fd: int
    local: Address
    remote: Address
    since: float

    @property
    def client(self) -> str:
        """The client the per-address cap counts it for: the IPv4 address, the IPv6 /64."""
        return client_group(self.remote[0])


@functools.lru_cache(maxsize=8192)
def peer_address(peer: str) -> Address | None:
    """grpc's peer string (`ipv4:127.0.0.1:5000`; IPv6 percent-encoded, `ipv6:%5B::1%5D:5000`, its zone
    `%25eth0` too) as (host, port)."""
    host, _, port = unquote(peer.partition(":")[2]).rpartition(":")
    try:
        return canonical(ipaddress.ip_address(host.strip("[]").split("%")[0])), int(port)
    except ValueError:  # not an IP address (a unix socket, say)
        return None


def victims(
    seen: list[Seen], busy: set[Address], per_client: int, total: int, keyed: frozenset[Address] = frozenset()
) -> list[Seen]:
    """The connections to close: beyond `per_client` per client address, then beyond `total` in all;
    idle ones first (no call running on them), of those the ones that never carried a keyed call, then
    the oldest (first seen, then the lowest descriptor: of connections seen in the same look, usually the
    first accepted). One pass over them after the sort: linear in the connections."""
    order = sorted(seen, key=lambda s: (s.remote in busy, s.remote in keyed, s.since, s.fd))
    excess = Counter(s.client for s in seen)
    chosen: list[Seen] = []
    kept: list[Seen] = []
    for connection in order:
        if excess[connection.client] > per_client:
            excess[connection.client] -= 1
            chosen.append(connection)
        else:
            kept.append(connection)
    return chosen + kept[: max(0, len(kept) - total)]


def shut(connection: Seen) -> bool:
    """Shut down the connection behind `connection.fd` if that descriptor is still the same connection."""
    dup = duplicate(connection.fd)
    if dup is None:  # closed meanwhile, or no longer a socket
        return False
    with dup:
        try:
            local, remote = dup.getsockname(), dup.getpeername()
        except OSError:
            return False
        if (normal(local), normal(remote)) != (connection.local, connection.remote):
            return False  # the descriptor was reused for another socket
        dup.shutdown(socket.SHUT_RDWR)
    return True


class ConnectionGuard:
    """The thread that caps the connections of gRPC port `port`; `busy` gives the peers (grpc's peer
    strings) with a call running, `keyed` those that carried a call needing a key."""

    def __init__(
        self,
        port: int,
        per_client: int,
        total: int,
        busy: Callable[[], list[str]],
        keyed: Callable[[], list[str]] = list,
        activity: Callable[[], tuple[dict[str, int], set[str]]] | None = None,
        message_bytes: int = 0,
    ) -> None:
        self.port, self.per_client, self.total, self.busy, self.keyed = port, per_client, total, busy, keyed
        self.activity, self.message_bytes = activity, message_bytes
        self.first_seen: dict[int, float] = {}  # by inode
        self.quiet: dict[int, tuple[int, int]] = {}  # by inode: bytes received, calls begun at its last call
        self.foreign: set[int] = set()  # inodes of other processes' connections (other workers')
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, name="grpc-guard", daemon=True)
        self.warned: set[str] = set()

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(timeout=5)

    def run(self) -> None:
        """Look every `INTERVAL` seconds, or less often when looks are costly: at most 1/`PACE` of a core."""
        pause = INTERVAL
        while not self.stopping.wait(pause):
            started = time.thread_time()
            try:
                self.look()
            except Exception as error:  # never the worker's end: said once per kind
                message = f"gRPC connection guard: {type(error).__name__}: {error}"
                if message not in self.warned:
                    self.warned.add(message)
                    LOG.warning("%s", message)
            pause = max(INTERVAL, PACE * (time.thread_time() - started))

    def look(self) -> int:
        """One look: shut down what is beyond the caps; how many were shut down."""
        received: dict[int, int] = {}
        everyone = port_sockets(self.port, received)  # every process's: within the caps, so are this one's
        now = time.monotonic()
        self.first_seen = {inode: self.first_seen.get(inode, now) for inode in everyone}
        flooding = self.carrying_no_call(everyone, received)
        if not flooding and within(
            Counter(client_group(remote[0]) for _, remote in everyone.values()), self.per_client, self.total
        ):
            return 0
        fds = socket_fds()
        self.foreign |= {inode for inode in flooding if inode not in fds}
        flooded = [
            c
            for c in (Seen(fds[i], *everyone[i], self.first_seen[i]) for i in flooding if i in fds)
            if shut(c)
        ]
        if flooded:
            LOG.info(
                "closed %d gRPC connection(s) that sent bytes carrying no call (more than %d on one, or %d "
                "on all; from %s)",
                len(flooded),
                QUIET_BYTES,
                QUIET_TOTAL,
                flooded[0].client,
            )
            return len(flooded)  # the caps at the next look, without them
        seen = [Seen(fds[i], *ends, self.first_seen[i]) for i, ends in everyone.items() if i in fds]
        busy = {address for address in map(peer_address, self.busy()) if address is not None}
        keyed = frozenset(address for address in map(peer_address, self.keyed()) if address is not None)
        closed = [c for c in victims(seen, busy, self.per_client, self.total, keyed) if shut(c)]
        if closed:
            LOG.info(
                "closed %d gRPC connection(s) beyond the caps (%d open, %d from %s)",
                len(closed),
                len(seen),
                sum(1 for s in seen if s.client == closed[0].client),
                closed[0].client,
            )
        return len(closed)

    def carrying_no_call(self, everyone: dict[int, Ends], received: dict[int, int]) -> list[int]:
        """The connections (inodes) that received more than QUIET_BYTES (and a message, with a call
        waiting for it) since a call last began on them or a message came in, then those that carried
        the most until the rest carried QUIET_TOTAL at most; other processes' connections look quiet
        too, and are left alone by the caller."""
        if self.activity is None or not received:
            return []
        begun, receiving = self.activity()
        calls = {address: count for peer, count in begun.items() if (address := peer_address(peer))}
        reading = {address for address in map(peer_address, receiving) if address is not None}
        quiet, flooding, carried = {}, [], []
        self.foreign = {inode for inode in self.foreign if inode in everyone}
        for inode, (_, remote) in everyone.items():
            count = received.get(inode)
            if count is None or inode in self.foreign:
                continue
            before = self.quiet.get(inode, (0, 0))  # new: counted from its start
            progress = calls.get(remote)  # None once forgotten: no progress, whatever it was
            if progress is not None and progress != before[1]:
                quiet[inode] = (count, progress)
                continue
            quiet[inode] = before
            allowed = QUIET_BYTES + (self.message_bytes if remote in reading else 0)
            if count - before[0] > allowed:
                flooding.append(inode)
            elif remote not in reading:
                carried.append((count - before[0], inode))
        self.quiet = quiet
        return flooding + beyond_total(carried)


def beyond_total(carried: list[tuple[int, int]]) -> list[int]:
    """Of (bytes carrying no call, inode), those to close, most bytes first, so that the others' sum is
    within QUIET_TOTAL."""
    left = sum(size for size, _ in carried)
    chosen = []
    for size, inode in sorted(carried, reverse=True):
        if left <= QUIET_TOTAL:
            break
        chosen.append(inode)
        left -= size
    return chosen


def within(clients: Counter[str], per_client: int, total: int) -> bool:
    return clients.total() <= total and all(count <= per_client for count in clients.values())
