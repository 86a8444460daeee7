"""`python -m train.spawn tensorboard RUN`: TensorBoard over a run's logs, no manual steps.

It serves the TensorBoard event files of the run: while a local run trains, those the chief is writing
under its NNSQL_OUTPUT_DIR; once any run ended (local or Kubernetes), those collected into
runs/<run-id>/model/. A script's TensorBoard callback is collected when its log_dir is under
NNSQL_OUTPUT_DIR, or when the chief prints the directory's absolute path.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from train.spawn import commands
from train.spawn.backend import read_record


def has_events(directory: Path) -> bool:
    return directory.is_dir() and next(directory.rglob("events.out.tfevents*"), None) is not None


def log_directory(run_dir: Path) -> Path | None:
    """The collected logs when there are any, else the live output of a local run."""
    for candidate in (run_dir / "model", run_dir / "shared" / "output"):
        if has_events(candidate):
            return candidate
    return None


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m train.spawn tensorboard", description=__doc__)
    parser.add_argument("run", help="the run id (listed in runs/)")
    parser.add_argument("--port", type=int, default=6006)
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: this machine only)"
    )
    return parser.parse_args(argv)


def main(argv: list[str], runs: Path) -> int:
    args = parse(argv)
    try:
        run_dir = commands.run_directory(runs, args.run)
        read_record(run_dir)
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    logs = log_directory(run_dir)
    if logs is None:
        print(
            f"error: run {args.run} has no TensorBoard event files yet; give the script's TensorBoard "
            "callback a log_dir under $NNSQL_OUTPUT_DIR, or print its absolute path from the chief",
            file=sys.stderr,
        )
        return 2
    print(f"TensorBoard for {args.run} at http://{args.host}:{args.port}/ (logs: {logs}); Ctrl-C to stop")
    command = [sys.executable, "-m", "tensorboard.main", "--logdir", str(logs)]
    command += ["--host", args.host, "--port", str(args.port)]
    try:
        return subprocess.run(command, check=False).returncode
    except KeyboardInterrupt:
        return 0
