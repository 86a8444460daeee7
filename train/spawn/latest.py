"""runs/latest: a link to the newest run, so that a quick start can name `runs/latest/model/model.keras`
instead of a glob that matches every run from the second one on."""

from __future__ import annotations

import os
import sys
from pathlib import Path

LATEST = "latest"


def point_to(runs: Path, run_dir: Path) -> None:
    """Make runs/latest name `run_dir`, replacing the old link in one rename (a reader never finds none)."""
    link = runs / LATEST
    staged = runs / f".{LATEST}-{run_dir.name}"  # a dot name: never taken for a run
    try:
        staged.unlink(missing_ok=True)
        staged.symlink_to(run_dir.name)  # relative, so the runs folder can be moved or mounted elsewhere
        os.replace(staged, link)
    except OSError as error:  # e.g. runs/latest is a directory of the user's
        staged.unlink(missing_ok=True)
        print(f"warning: {link} not updated: {error.strerror or error}", file=sys.stderr)


def forget(runs: Path, run_dir: Path) -> None:
    """Remove runs/latest when it names `run_dir`, which is being deleted."""
    link = runs / LATEST
    if link.is_symlink() and (runs / os.readlink(link)).resolve() == run_dir.resolve():
        link.unlink()


def is_link(run_dir: Path) -> bool:
    return run_dir.name == LATEST and run_dir.is_symlink()
