"""A pytest plugin: after the run, what happened to the blocks of each documentation page (how many ran,
how many did not and why), read from the reports, which pytest-xdist's workers send back."""

from __future__ import annotations

import pytest

PROPERTY = "docs-blocks"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = [
        value
        for report in terminalreporter.stats.get("passed", [])
        for name, value in getattr(report, "user_properties", [])
        if name == PROPERTY
    ]
    if lines:
        terminalreporter.write_sep("-", f"the blocks of {len(lines)} documentation pages")
        for line in sorted(lines):
            terminalreporter.write_line(line)
