"""A private network for local workers: one network namespace per attempt, shared by the run's workers
and by nothing else, with its own loopback interface up.

Every worker runs TensorFlow's gRPC server, which has no authentication and listens on every interface
(its address is hard-coded as `0.0.0.0:PORT`): whoever reaches the port runs TensorFlow ops as the user
who trained. Inside the namespace the only interface is the namespace's own `lo`, so only the run's own
processes reach the workers, and the workers reach no network outside either.

`python -I train/spawn/netns.py PID` is the holder: it makes a new user namespace (the caller's uid and gid
mapped to themselves, so no privilege is needed, and none is gained) and a network namespace in it, brings
`lo` up while it still holds CAP_NET_ADMIN there, prints `ready`, and waits; it dies with the process PID
(Linux's parent-death signal) or when `Holder.stop` ends it. Workers join it with util-linux
`nsenter --user --net --preserve-credentials`, so they run as the user's own uid. Standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
READY = "ready"
START_SECONDS = 30  # a Python start-up and three small writes: seconds even on a loaded machine

# why unshare(2) is refused, as a user can act on it
REASONS = {
    errno.EPERM: "user namespaces are not permitted here (a container's seccomp profile, or "
    "kernel.unprivileged_userns_clone=0)",
    errno.ENOSPC: "user namespaces are disabled here (user.max_user_namespaces is 0, or used up)",
    errno.EINVAL: "this kernel has no user or network namespaces",
    errno.ENOSYS: "this kernel has no unshare(2)",
    errno.EUSERS: "too many nested user namespaces",
}


def make_namespace() -> None:
    """Move this process into a new user and network namespace, itself mapped to itself, `lo` up."""
    uid, gid = os.getuid(), os.getgid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
        number = ctypes.get_errno()
        raise OSError(number, REASONS.get(number, f"unshare: {os.strerror(number)}"))
    try:
        Path("/proc/self/setgroups").write_text("deny")  # the only way an unprivileged gid_map is accepted
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    except OSError as error:
        raise OSError(error.errno, f"cannot map the user into its namespace ({error.strerror})") from None
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            request = struct.pack("16sH14x", b"lo", 0)
            flags = struct.unpack("16sH14x", fcntl.ioctl(probe, SIOCGIFFLAGS, request))[1]
            fcntl.ioctl(probe, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))
    except OSError as error:
        raise OSError(error.errno, f"cannot bring up the namespace's loopback ({error.strerror})") from None


def main(argv: list[str]) -> int:
    """The holder of a namespace, until it is killed or the process `argv[0]` (its parent) dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != int(argv[0]):  # the parent died before the signal was set
        return 1
    try:
        make_namespace()
    except OSError as error:
        print(error.strerror or error, flush=True)
        return 1
    print(READY, flush=True)
    while True:
        signal.pause()


class Unavailable(Exception):
    """The namespace cannot be made here; the message says why, in one line."""


HOLDER = Path(__file__)  # inside the package (nnsql/train/spawn/), as an installed wheel has it


class Holder:
    """A running holder: `join(command)` is `command` run inside its namespace."""

    def __init__(self, process: subprocess.Popen, nsenter: str) -> None:
        self.process, self.nsenter = process, nsenter

    @classmethod
    def start(cls) -> Holder:
        nsenter = shutil.which("nsenter")
        if nsenter is None:
            raise Unavailable("nsenter (util-linux) is not installed")
        command = [sys.executable, "-I", str(HOLDER), str(os.getpid())]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        holder = cls(process, nsenter)
        line = ready_line(process)
        if line != READY:
            holder.stop()
            raise Unavailable(line or f"the namespace holder ended (exit status {process.returncode})")
        return holder

    def join(self, command: list[str]) -> list[str]:
        target = str(self.process.pid)
        return [self.nsenter, "--target", target, "--user", "--net", "--preserve-credentials", "--", *command]

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()


def ready_line(process: subprocess.Popen) -> str:
    """The holder's first line (`ready`, or why it failed); '' when it said nothing in time."""
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(START_SECONDS):
            return ""
    return process.stdout.readline().strip()


def problem() -> str | None:
    """Why no private network can be made here (one line), or None: a namespace is made and joined once,
    as the workers will join theirs."""
    try:
        holder = Holder.start()
    except Unavailable as error:
        return str(error)
    try:
        joined = subprocess.run(holder.join(["true"]), capture_output=True, text=True, check=False)
    finally:
        holder.stop()
    if joined.returncode != 0:
        lines = (joined.stderr or "").strip().splitlines() or [f"exit status {joined.returncode}"]
        return f"a process cannot join the namespace ({lines[-1]})"
    return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
