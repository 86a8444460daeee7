"""The tolerance an export prints is the one it applied. Found by the fifth hostile pass of issue 32: the
report rounded it to one digit, so `--tolerance 1.5e-5` was printed `tolerance 2e-05` and `--tolerance
1.25e-3` `tolerance 1e-03`: the figure printed was not the bound applied."""

from __future__ import annotations

import pytest

from nnsql.export.publish.parity import ParityReport


@pytest.mark.parametrize("tolerance", [1.5e-5, 1.25e-3, 1e-5, 0.3])
def test_the_summary_prints_the_tolerance_given(tolerance):
    summary = ParityReport(rows=10, max_abs_diff=0.0, tolerance=tolerance).summary()
    assert f"(tolerance {tolerance:g}" in summary, summary
