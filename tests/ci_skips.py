"""A pytest plugin: under CI=true a skip fails the run unless it is for an endpoint that cannot exist here.

Only three endpoints may be missing on a CI machine: a live Oracle (ORACLE_DSN), a Kubernetes cluster
(KUBECONFIG) and a live object store (S3_TEST_URL). A test that needs one says so with the
`needs_endpoint` mark or calls `skip_for_endpoint`; both raise `EndpointSkipped`, and the policy reads
the variable that exception carries, never the text of a reason. Any other skip (PostgreSQL, plpython,
Chromium, Fashion-MNIST, a pip package: whatever `make setup` installs), a skip while collecting
included, means an install step is missing and shows up red instead of green-with-skips.
"""

from __future__ import annotations

import os

import pytest

ENDPOINTS = frozenset({"ORACLE_DSN", "KUBECONFIG", "S3_TEST_URL"})


class EndpointSkipped(pytest.skip.Exception):  # type: ignore[misc,name-defined]
    """A skip because the environment variable naming a live endpoint is not set."""

    def __init__(self, variable: str, why: str) -> None:
        if variable not in ENDPOINTS:
            raise ValueError(f"{variable} is not an endpoint a CI machine may lack: {sorted(ENDPOINTS)}")
        super().__init__(f"set {variable} to run this test: {why}", _use_item_location=True)
        self.variable = variable


def skip_for_endpoint(variable: str, why: str) -> None:
    """Skip the running test when `variable` is unset (an endpoint this machine does not have)."""
    if not os.environ.get(variable):
        raise EndpointSkipped(variable, why)


def needs_endpoint(variable: str, why: str) -> pytest.MarkDecorator:
    """A mark: the test runs only when `variable` names a live endpoint."""
    if variable not in ENDPOINTS:
        raise ValueError(f"{variable} is not an endpoint a CI machine may lack: {sorted(ENDPOINTS)}")
    return pytest.mark.endpoint(variable, why)


def ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "endpoint(variable, why): needs a live endpoint named by a variable")


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("endpoint"):
        skip_for_endpoint(*mark.args)


def allowed(call: pytest.CallInfo) -> bool:
    """Whether the skip in `call` is one for an endpoint (its exception, not its wording, says so)."""
    skipped = call.excinfo.value if call.excinfo is not None else None
    return isinstance(skipped, EndpointSkipped) and skipped.variable in ENDPOINTS


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if not (ci() and report.skipped) or hasattr(report, "wasxfail") or allowed(call):
        return
    reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = f"skipped under CI=true, which allows skips only for {sorted(ENDPOINTS)}: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """A module skipped while collecting (an importorskip, a module-level skip) fails under CI=true:
    an endpoint's test skips through the mark, at run time."""
    outcome = yield
    report = outcome.get_result()
    if ci() and report.skipped:
        reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped while collecting under CI=true: {reason}"
