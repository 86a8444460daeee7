import numpy as np
import pytest

from export import parity
from export.errors import ParityError


def test_identical_scores_pass():
    p = np.array([[0.2, 0.8], [0.6, 0.4]])
    report = parity.compare(p, p.copy())
    assert report.passed and report.max_abs_diff == 0 and report.argmax_agreement == 1


def test_difference_above_tolerance_fails():
    p = np.array([[0.2, 0.8]])
    report = parity.compare(p, p + np.array([[2e-5, -2e-5]]))
    assert not report.passed
    with pytest.raises(ParityError, match="version not published"):
        parity.require(report, "duckdb")


def test_argmax_flip_on_exact_tie_is_not_a_disagreement():
    reference = np.array([[0.5, 0.5, 0.0]])
    candidate = np.array([[0.4999999, 0.5000001, 0.0]])
    report = parity.compare(reference, candidate)
    assert report.argmax_disagreements == 0 and report.passed


def test_argmax_flip_without_tie_fails_even_within_tolerance():
    reference = np.array([[0.50001, 0.49999]])
    candidate = np.array([[0.499995, 0.500005]])
    report = parity.compare(reference, candidate, tolerance=1e-4)
    assert report.argmax_disagreements == 1 and not report.passed


def test_nan_from_target_is_an_error():
    with pytest.raises(ParityError, match="NaN"):
        parity.compare(np.ones((1, 2)), np.array([[np.nan, 1.0]]))
