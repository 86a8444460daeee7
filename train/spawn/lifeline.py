"""`python -I train/spawn/lifeline.py PID COMMAND...`: run COMMAND so that the kernel kills it when the
process PID that started it dies (Linux's parent-death signal, which an exec keeps).

Local workers start through it. A spawn that is killed without a chance to stop its workers (SIGKILL, the
OOM killer, a notebook kernel that is killed) then leaves no worker training on by itself. Standard
library only; elsewhere than Linux the command simply runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> int:
    parent, command = int(argv[0]), argv[1:]
    with contextlib.suppress(OSError, AttributeError):  # no prctl here: no lifeline
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent:  # the parent died before the signal was set
        return 1
    os.execvp(command[0], command)
    return 1  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
