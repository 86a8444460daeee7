"""The CI skip policy, run on small suites of their own in separate pytest processes, and the checks that
make `make test` fail in one line when a component the suite needs is missing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

SUITE = """
import pytest

from tests.ci_skips import needs_endpoint, skip_for_endpoint

def test_needs_an_install():
    pytest.skip("plpython3u is not installed (Debian: postgresql-plpython3-15)")

def test_names_an_endpoint_in_words_only():
    pytest.skip("needs a live Oracle: set ORACLE_DSN and ORACLE_PASSWORD")

@pytest.mark.skipif(True, reason="Debian's chromium is not installed; KUBECONFIG")
def test_marked_skip_naming_an_endpoint():
    pass

@needs_endpoint("ORACLE_DSN", "a live Oracle")
def test_marked_for_an_endpoint():
    pass

def test_skips_for_an_endpoint():
    skip_for_endpoint("S3_TEST_URL", "a live store")

def test_passes():
    pass
"""


def run_suite(directory, text: str, ci: str, *options: str) -> subprocess.CompletedProcess[str]:
    (directory / "test_suite.py").write_text(text)
    env = {**os.environ, "CI": ci, "PYTHONPATH": str(REPO)}
    for variable in ("ORACLE_DSN", "KUBECONFIG", "S3_TEST_URL"):
        env.pop(variable, None)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "tests.ci_skips", "-p", "no:cacheprovider"]
    return subprocess.run([*command, *options, "."], cwd=directory, env=env, capture_output=True, text=True)


# A skip in setup (skipif, a fixture) becomes an error, one in the test body a failure: both fail the run.
# A reason that merely mentions an endpoint's name is not a skip for that endpoint.
@pytest.mark.parametrize(
    ("ci", "options", "code", "summary"),
    [
        ("true", (), 1, "2 failed, 1 passed, 2 skipped, 1 error"),
        ("true", ("-p", "xdist", "-n", "2"), 1, "2 failed, 1 passed, 2 skipped, 1 error"),
        ("", (), 0, "1 passed, 5 skipped"),
    ],
    ids=["ci", "ci-two-workers", "not-ci"],
)
def test_only_endpoint_skips_pass_under_ci(tmp_path, ci, options, code, summary):
    result = run_suite(tmp_path, SUITE, ci, *options, "-rfEs")
    assert result.returncode == code, result.stdout
    assert summary in result.stdout.splitlines()[-1]
    if ci:
        assert "skipped under CI=true" in result.stdout and "plpython3u is not installed" in result.stdout
        for allowed in ("test_marked_for_an_endpoint", "test_skips_for_an_endpoint"):
            assert f"FAILED test_suite.py::{allowed}" not in result.stdout
            assert f"ERROR test_suite.py::{allowed}" not in result.stdout
        for refused in ("test_names_an_endpoint_in_words_only", "test_marked_skip_naming_an_endpoint"):
            assert refused in result.stdout.split("short test summary info")[1]


def test_a_module_skipped_while_collecting_fails_under_ci(tmp_path):
    text = 'import pytest\npytest.importorskip("nnsql_no_such_module")\n\ndef test_never():\n    pass\n'
    result = run_suite(tmp_path, text, "true")
    assert result.returncode != 0 and "skipped while collecting under CI=true" in result.stdout


def test_only_the_three_endpoints_may_be_skipped_for():
    from tests.ci_skips import needs_endpoint, skip_for_endpoint

    with pytest.raises(ValueError, match="ORACLE_PASSWORD"):
        skip_for_endpoint("ORACLE_PASSWORD", "a password")
    with pytest.raises(ValueError, match="CHROMIUM"):
        needs_endpoint("CHROMIUM", "a browser")


def test_ci_run_sets_ci(tmp_path):
    """.ci/run as CI runs it, without CI in its environment, with a `make` that records what it was given."""
    fake = tmp_path / "make"
    fake.write_text(f'#!/bin/sh\necho "make $* CI=$CI" >> {tmp_path / "calls"}\n')
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"PATH": f"{tmp_path}:{os.environ['PATH']}"}
    result = subprocess.run(["bash", str(REPO / ".ci" / "run")], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "calls").read_text().splitlines() == ["make demo CI=true", "make test CI=true"]


def test_apt_install_fails_in_one_line_for_a_user_who_cannot_install(tmp_path):
    """Not root and a package missing: exit 1 naming it (it used to print a note and exit 0, and the run
    then went green with every test of that package skipped)."""
    prefix = ["runuser", "-u", "nobody", "--"] if os.geteuid() == 0 else []
    command = [*prefix, "bash", str(REPO / ".ci" / "apt-install.sh"), "bash", "nnsql-no-such-package"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert "nnsql-no-such-package" in result.stderr and "bash" not in result.stderr.split(":", 1)[1]


def test_make_test_checks_the_components_before_pytest():
    """`make -n test`: what make would run, in order (nothing runs)."""
    planned = subprocess.run(["make", "-n", "test"], cwd=REPO, capture_output=True, text=True, check=True)
    lines = planned.stdout.splitlines()
    check = next(i for i, line in enumerate(lines) if line.endswith("-m tests.components"))
    pytest_run = next(i for i, line in enumerate(lines) if " -m pytest " in line)
    workers = len(os.sched_getaffinity(0)) + 1  # one per core (as nproc counts them) and one more
    assert (
        check < pytest_run and f"-n {workers} " in lines[pytest_run] and "--durations=20" in lines[pytest_run]
    )


@pytest.mark.parametrize("component", ["Chromium", "PostgreSQL", "Fashion-MNIST"])
def test_a_component_present_here_passes_the_check(component):
    command = [sys.executable, "-m", "tests.components", component]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_missing_component_fails_in_one_line_naming_it():
    env = {**os.environ, "PATH": "/nonexistent", "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "tests.components", "Chromium"]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith("error: the test suite needs Chromium: chromium is not installed")
