"""The listening sockets of `nnsql serve`: bound by the master before any worker starts (so a port in
use is one line, not a worker crash), one per worker, and inherited by the workers as file descriptors.
Free of heavy imports: the master uses it.
"""

from __future__ import annotations

import errno
import socket


class StartError(Exception):
    """Why the server cannot start, in one line."""


def listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        listener = socket.create_server((host, port), family=family, backlog=2048)
    except socket.gaierror as error:
        raise StartError(f"cannot listen on {host}: {error.strerror}") from None
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise StartError(
                f"port {port} on {host} is already in use: stop the other server or pick --port"
            ) from None
        raise StartError(f"cannot listen on {host}:{port}: {error.strerror}") from None
    listener.set_inheritable(True)
    return listener


def spread(listener: socket.socket, count: int) -> list[socket.socket]:
    """`count` listening sockets on the listener's address (SO_REUSEPORT), one per worker: the kernel
    spreads new connections over them by their addresses, whichever worker runs at that moment. One
    socket shared by the workers gave the connections a client opens together to the worker woken
    first (64 against 0 was seen): the other core then served nobody."""
    if count <= 1:
        return [listener]
    address, family = listener.getsockname(), listener.family
    listener.close()  # checked free above; bound again with SO_REUSEPORT
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(address)
            sock.listen(2048)
            sock.set_inheritable(True)
    except OSError as error:
        for sock in sockets:
            sock.close()
        raise StartError(f"cannot listen on port {address[1]}: {error.strerror}") from None
    return sockets


def probe(host: str, port: int) -> None:
    """The gRPC port is free: bound once without SO_REUSEPORT and closed. Each worker's gRPC server then
    binds it with SO_REUSEPORT (grpcio's default), sharing it; a foreign process already holding it
    would otherwise share our traffic without a word."""
    try:
        listen(host, port).close()
    except StartError:
        raise StartError(
            f"cannot listen for gRPC on {host}:{port}: the port is in use or not allowed"
        ) from None
