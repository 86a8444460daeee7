"""A pytest plugin: after the run, what happened to the blocks of each documentation page (how many ran,
how many did not and why) and the totals, read from the reports, which pytest-xdist's workers send back."""

from __future__ import annotations

import pytest

PROPERTY = "docs-blocks"
COUNTS = "docs-block-counts"


def recorded(terminalreporter: pytest.TerminalReporter, property_name: str) -> list:
    return [
        value
        for report in terminalreporter.stats.get("passed", [])
        for name, value in getattr(report, "user_properties", [])
        if name == property_name
    ]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = recorded(terminalreporter, PROPERTY)
    if lines:
        terminalreporter.write_sep("-", f"the blocks of {len(lines)} documentation pages")
        for line in sorted(lines):
            terminalreporter.write_line(line)
        counts = recorded(terminalreporter, COUNTS)  # (ran, rehearsed, not run) of each page
        ran, rehearsed, not_run = (sum(page[column] for page in counts) for column in range(3))
        terminalreporter.write_line(f"in all: {ran} blocks ran, {rehearsed} rehearsed, {not_run} not run")
