"""The gRPC guard lists this process's socket descriptors, then duplicates each to ask its byte count
(where netlink is not allowed) or to shut its connection down. A client that opens and closes
connections frees descriptor numbers the worker soon reuses, for a model file, a pipe or an eventfd,
between the listing and the duplicate. Found by the fourth hostile pass of issue 32 (read, then shown
here): `socket.socket(fileno=os.dup(fd))` refuses a descriptor that is not a socket and leaves the
duplicate open, so each such look leaked a descriptor for as long as the worker ran. A duplicate that
is not a socket is now closed.
"""

from __future__ import annotations

import os
from pathlib import Path

from nnsql.serve.rpc import guard, sockets

LOOKS = 50


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_descriptor_reused_by_a_file_is_not_counted_and_nothing_leaks(tmp_path: Path):
    model = tmp_path / "model.onnx"
    model.write_bytes(b"\x08\x07")
    with open(model, "rb") as file:
        inode = os.fstat(file.fileno()).st_ino  # the same number: only socket() tells them apart
        before = open_descriptors()
        counts = [sockets.socket_bytes_received(file.fileno(), inode) for _ in range(LOOKS)]
        after = open_descriptors()
    assert counts == [None] * LOOKS
    assert after == before, f"{after - before} descriptors leaked by {LOOKS} looks"


def test_a_descriptor_reused_by_a_pipe_is_not_shut_and_nothing_leaks():
    reader, writer = os.pipe()
    try:
        seen = guard.Seen(fd=reader, local=("127.0.0.1", 1), remote=("127.0.0.1", 2), since=0.0)
        before = open_descriptors()
        shut = [guard.shut(seen) for _ in range(LOOKS)]
        after = open_descriptors()
    finally:
        os.close(reader)
        os.close(writer)
    assert shut == [False] * LOOKS
    assert after == before, f"{after - before} descriptors leaked by {LOOKS} shut-downs"
