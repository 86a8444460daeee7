"""The documentation: the README within its size, its links alive, and docs/ built by MkDocs with --strict
(every page of the navigation present, every page in the navigation, every link and anchor resolved)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

README_LIMIT = 8 * 1024


def build(root: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(root / "site")]
    return subprocess.run(
        [*command, "--config-file", str(root / "mkdocs.yml")], capture_output=True, text=True, timeout=300
    )


def test_the_docs_build_strictly(tmp_path):
    """Built from a copy: the build writes its site into tmp_path, never into the checkout."""
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    result = build(tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "install" / "index.html").is_file()


def test_a_broken_link_fails_the_build(tmp_path):
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    page = tmp_path / "docs" / "install.md"
    page.write_text(page.read_text() + "\nSee [nothing](nothing-here.md).\n")
    result = build(tmp_path)
    assert result.returncode != 0 and "nothing-here.md" in result.stderr


def test_the_readme_is_short_and_its_links_lead_somewhere():
    readme = (REPO / "README.md").read_text()
    assert len(readme.encode()) <= README_LIMIT
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    assert targets and [t for t in targets if not t.startswith("http") and not (REPO / t).exists()] == []
