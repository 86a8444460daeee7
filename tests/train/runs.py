"""The run folders a test's spawn created (runs/latest links to the newest of them)."""

from __future__ import annotations

from pathlib import Path


def run_folders(runs: Path) -> list[Path]:
    return sorted(path for path in runs.iterdir() if not path.is_symlink() and not path.name.startswith("."))


def only_run(runs: Path) -> Path:
    """The one run under runs/, which runs/latest names."""
    (run_dir,) = run_folders(runs)
    assert (runs / "latest").resolve() == run_dir.resolve()
    return run_dir
