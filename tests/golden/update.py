"""`python -m tests.golden.update`: write the golden files from today's generators, for review as a diff.

The golden tests only compare (tests/golden/graphs.py `check_golden`). This command runs the test files
that call it with a staging folder set, so that each test leaves the text it generated there, then copies
the texts into tests/golden/ and names the files that changed. Tests whose text changed fail in that run,
as they should until the new files are in place; a run pytest could not complete copies nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.golden.graphs import GOLDEN_DIR, STAGING

TESTS = GOLDEN_DIR.parent
REPO = TESTS.parent


def golden_test_files() -> list[Path]:
    """The test files that compare generated text with a golden file."""
    uses = "from tests.golden.graphs import check_golden"
    return sorted(path for path in TESTS.rglob("test_*.py") if uses in path.read_text())


def collect(staging: Path) -> int:
    """Run the golden test files with `staging` set; pytest's exit status."""
    files = [str(path.relative_to(REPO)) for path in golden_test_files()]
    environment = {**os.environ, STAGING: str(staging)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *files]
    return subprocess.run(command, cwd=REPO, env=environment, check=False).returncode


def copy(staging: Path) -> list[str]:
    """Copy the staged texts into tests/golden/; the names of the files whose text changed."""
    changed = []
    for staged in sorted(staging.iterdir()):
        target = GOLDEN_DIR / staged.name
        if not target.exists() or target.read_text() != staged.read_text():
            shutil.copyfile(staged, target)
            changed.append(staged.name)
    return changed


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="nnsql-golden-") as folder:
        staging = Path(folder)
        status = collect(staging)
        if status not in (0, 1):  # not a test's failure: interrupted, a collection or usage error
            print(f"error: pytest did not complete the golden tests (exit {status}); nothing copied")
            return 1
        changed = copy(staging)
    for name in changed:
        print(f"updated tests/golden/{name}: review the diff")
    print(f"{len(changed)} golden file(s) changed")
    if status == 1 and not changed:
        print("error: the golden tests failed with every text unchanged: see pytest's report above")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
