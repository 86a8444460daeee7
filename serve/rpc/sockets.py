"""The TCP connections of one local port, as the kernel lists them, and this process's descriptors.

`port_sockets` asks the kernel over netlink (sock_diag, as `ss` does): the kernel filters by port and
answers in binary, a few milliseconds for 1,000 connections, with the bytes each connection has received
(tcp_info). Where netlink is not allowed, it reads /proc/self/net/tcp and tcp6 (the whole table of the
network namespace, in text: about three times that), which holds no byte counts: this process's own
sockets are then asked for theirs (TCP_INFO), each through a duplicate of its descriptor.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import socket
import struct

Address = tuple[str, int]
Ends = tuple[Address, Address]  # local, remote
NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
TCP_ESTABLISHED = 1  # once shut down, or closed by the client, a connection no longer counts
INET_DIAG_REQ_BYTECODE = 1
BC_S_GE, BC_S_LE = 2, 3
HEADER = struct.Struct("=IHHII")  # nlmsghdr
DIAG_MSG = struct.Struct(">BBBBHH16s16s")  # inet_diag_msg: family, 3 bytes, then id: sport, dport, src, dst
INODE_AT = 68  # inet_diag_msg's idiag_inode, from the message's start
DIAG_MSG_SIZE = 72  # inet_diag_msg; its attributes (struct rtattr, 4-byte aligned) follow
INET_DIAG_INFO = 2  # the attribute holding struct tcp_info
BYTES_RECEIVED_AT = 128  # tcp_info's tcpi_bytes_received (u64), Linux 4.1 and later
RTATTR = struct.Struct("=HH")


def canonical(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """An address as the HTTP server and grpc name its client (an IPv4-mapped IPv6 one as IPv4)."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def packed(family: int, raw: bytes, port: int) -> Address:
    return host(raw[:4] if family == socket.AF_INET else raw), port


@functools.lru_cache(maxsize=4096)
def host(raw: bytes) -> str:
    """A packed address as text; cached, as a client address comes back look after look."""
    return canonical(ipaddress.ip_address(raw))


def diag_request(family: int, port: int) -> bytes:
    """A dump of the established TCP connections of `family` whose local port is `port`."""
    code = b""
    for i, op in enumerate((BC_S_GE, BC_S_LE)):  # port <= sport <= port; a failed test jumps past the end
        code += struct.pack("=BBH", op, 8, 16 - 8 * i + 4) + struct.pack("=BBH", 0, 0, port)
    extensions = 1 << (INET_DIAG_INFO - 1)
    body = struct.pack("=BBBBI48x", family, socket.IPPROTO_TCP, extensions, 0, 1 << TCP_ESTABLISHED)
    body += struct.pack("=HH", 4 + len(code), INET_DIAG_REQ_BYTECODE) + code
    return HEADER.pack(HEADER.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + body


def diag_sockets(port: int, received: dict[int, int] | None = None) -> dict[int, Ends]:
    """The port's established connections, by inode; `received` is given each one's bytes received."""
    found: dict[int, Ends] = {}
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as link:
        for family in (socket.AF_INET, socket.AF_INET6):
            link.send(diag_request(family, port))
            while not read_answer(link.recv(1 << 16), found, received):
                pass
    return found


def read_answer(data: bytes, found: dict[int, Ends], received: dict[int, int] | None = None) -> bool:
    """Add the sockets of one netlink datagram to `found` (and their bytes received to `received`);
    True at the dump's end."""
    at = 0
    while at + HEADER.size <= len(data):
        length, kind = HEADER.unpack_from(data, at)[:2]
        if kind == NLMSG_DONE:
            return True
        if kind == NLMSG_ERROR:
            error = -struct.unpack_from("=i", data, at + HEADER.size)[0]
            raise OSError(error, f"sock_diag: {os.strerror(error)}")
        message = at + HEADER.size
        family, _, _, _, sport, dport, src, dst = DIAG_MSG.unpack_from(data, message)
        (inode,) = struct.unpack_from("=I", data, message + INODE_AT)
        found[inode] = (packed(family, src, sport), packed(family, dst, dport))
        if received is not None:
            count = bytes_received(data[message + DIAG_MSG_SIZE : at + length])
            if count is not None:
                received[inode] = count
        at += (length + 3) & ~3
    return False


def bytes_received(attributes: bytes) -> int | None:
    """tcpi_bytes_received from a socket's sock_diag attributes (None: the kernel gave none)."""
    at = 0
    while at + RTATTR.size <= len(attributes):
        length, kind = RTATTR.unpack_from(attributes, at)
        if length < RTATTR.size:
            return None
        if kind == INET_DIAG_INFO and length >= RTATTR.size + BYTES_RECEIVED_AT + 8:
            return int(struct.unpack_from("=Q", attributes, at + RTATTR.size + BYTES_RECEIVED_AT)[0])
        at += (length + 3) & ~3
    return None


def decode(field: str) -> Address:
    """An address of /proc/net/tcp (`0100007F:1F90`: 32-bit words in host order) as (host, port)."""
    host, port = field.split(":")
    raw = b"".join(int(host[i : i + 8], 16).to_bytes(4, "little") for i in range(0, len(host), 8))
    return canonical(ipaddress.ip_address(raw)), int(port, 16)


def proc_sockets(port: int) -> dict[int, Ends]:
    suffix = f":{port:04X}"
    found = {}
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            with open(table) as lines:
                next(lines)
                for line in lines:
                    fields = line.split()
                    if fields[1].endswith(suffix) and fields[3] == "01":  # established
                        found[int(fields[9])] = (decode(fields[1]), decode(fields[2]))
        except FileNotFoundError:  # no IPv6
            continue
    return found


def port_sockets(port: int, received: dict[int, int] | None = None) -> dict[int, Ends]:
    """The established connections on local port `port` in this network namespace, every process's:
    inode -> (local, remote); `received` is given the bytes each has received (without netlink: those of
    this process's own sockets)."""
    try:
        return diag_sockets(port, received)
    except OSError:  # netlink not allowed here
        found = proc_sockets(port)
        if received is not None:
            own_bytes_received(found, received)
        return found


def own_bytes_received(inodes: dict[int, Ends], received: dict[int, int]) -> None:
    """Give `received` the bytes received of each of this process's sockets among `inodes`, from its own
    tcp_info (TCP_INFO on a duplicate of its descriptor, checked to be that socket still); other
    processes' sockets are left out."""
    descriptors = socket_fds()
    for inode in inodes:
        if inode in descriptors:
            count = socket_bytes_received(descriptors[inode], inode)
            if count is not None:
                received[inode] = count


def socket_bytes_received(descriptor: int, inode: int) -> int | None:
    """tcpi_bytes_received of this process's socket `descriptor`, if it is socket `inode` still."""
    connection = duplicate(descriptor)
    if connection is None:
        return None
    with connection:  # closing it closes the duplicate
        try:
            if os.fstat(connection.fileno()).st_ino != inode:  # closed and its number reused meanwhile
                return None
            raw = connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, BYTES_RECEIVED_AT + 8)
        except OSError:  # not a TCP socket
            return None
    return (
        int(struct.unpack_from("=Q", raw, BYTES_RECEIVED_AT)[0])
        if len(raw) >= BYTES_RECEIVED_AT + 8
        else None
    )


def duplicate(descriptor: int) -> socket.socket | None:
    """A socket object on a duplicate of this process's `descriptor` (its family read from it); None when
    the descriptor was closed meanwhile or its number reused by something not a socket (a file, a pipe),
    whose duplicate is closed then: socket() refuses it and leaves it open."""
    try:
        copy = os.dup(descriptor)
    except OSError:  # closed meanwhile
        return None
    try:
        return socket.socket(fileno=copy)
    except OSError:
        os.close(copy)
        return None


def socket_fds() -> dict[int, int]:
    """This process's socket descriptors, by inode."""
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            found[int(target[8:-1])] = int(name)
    return found


def normal(address: tuple) -> Address:
    """A socket's address as `socket` gives it ((host, port[, flow, scope])), as the scans give it."""
    return canonical(ipaddress.ip_address(address[0].split("%")[0])), int(address[1])
