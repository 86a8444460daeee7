"""`status RUN`, `logs RUN [--worker I]` and `delete RUN`: what spawn says about, and does to, a past run.

A RUN is a run id, the name of a folder directly under runs/; paths are refused, so `delete` can remove
nothing but a run's own folder (and, for a Kubernetes run, its resources in the namespace it recorded).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

import yaml

from . import latest, manifests, progress
from .backend import read_record

NAMES = ("status", "logs", "delete")
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,120}")


def run_directory(runs: Path, run_id: str) -> Path:
    """runs/<id> for a plain run id; ValueError for anything that could name another directory."""
    if not RUN_ID.fullmatch(run_id) or run_id in (".", ".."):
        raise ValueError(f"{run_id!r} is not a run id (a name listed under {runs}/, not a path)")
    return runs / run_id


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=f"nnsql spawn {argv[0]}", description=__doc__.splitlines()[0] if __doc__ else ""
    )
    parser.add_argument("run", help="the run id, as printed at the start of the run and listed in runs/")
    if argv[0] == "logs":
        parser.add_argument("--worker", type=int, default=0, help="worker index (default 0, the chief)")
    return parser.parse_args(argv[1:])


def show_log(run_dir: Path, record: dict, worker: int) -> None:
    attempt = max(0, int(record.get("attempt", 1)) - 1)
    log = run_dir / f"attempt-{attempt}" / f"worker-{worker}.log"
    if not log.exists():
        print(f"(no log at {log})")
        return
    # bytes decoded as they are (read_text reads each `\r` of a progress bar as a line end)
    print(progress.collapsed(log.read_bytes().decode(errors="replace")), end="")


def delete(run_dir: Path, record: dict) -> None:
    runs, run_dir = run_dir.parent, run_dir.resolve()  # `latest` deletes the run it names
    if record.get("backend") == "kubernetes":
        from .kube import KubernetesBackend

        options = manifests.ClusterOptions(namespace=record.get("namespace", "default"))
        KubernetesBackend(options).delete_run(run_dir.name)
    latest.forget(runs, run_dir)
    shutil.rmtree(run_dir)
    print(f"deleted {run_dir.name}")


def run_command(argv: list[str], runs: Path) -> int:
    args = parse(argv)
    try:
        run_dir = run_directory(runs, args.run)
        record = read_record(run_dir)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except FileNotFoundError:
        print(f"error: no run {args.run!r} in {runs}/", file=sys.stderr)
        return 2
    if argv[0] == "status":
        print(yaml.safe_dump(record, sort_keys=False), end="")
    elif argv[0] == "logs":
        show_log(run_dir, record, args.worker)
    else:
        delete(run_dir, record)
    return 0
