"""The CI skip policy, run on a small suite of its own in a separate pytest process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

SUITE = """
import pytest

def test_needs_an_install():
    pytest.skip("plpython3u is not installed (Debian: postgresql-plpython3-15)")

def test_needs_an_endpoint():
    pytest.skip("needs a live Oracle: set ORACLE_DSN and ORACLE_PASSWORD")

@pytest.mark.skipif(True, reason="Debian's chromium is not installed")
def test_marked_skip():
    pass

def test_passes():
    pass
"""


# a skip in setup (skipif, a fixture) becomes an error, one in the test body a failure: both fail the run
@pytest.mark.parametrize(
    ("ci", "code", "summary"),
    [("true", 1, "1 failed, 1 passed, 1 skipped, 1 error"), ("", 0, "1 passed, 3 skipped")],
)
def test_only_endpoint_skips_pass_under_ci(tmp_path, ci, code, summary):
    (tmp_path / "test_suite.py").write_text(SUITE)
    env = {**os.environ, "CI": ci, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "tests.ci_skips", "-p", "no:cacheprovider", "."]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == code, result.stdout
    assert summary in result.stdout.splitlines()[-1]
    if ci:
        assert "skipped under CI=true" in result.stdout and "plpython3u is not installed" in result.stdout
