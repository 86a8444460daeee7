import numpy as np
import pytest

from nnsql.export.errors import ParityError
from nnsql.export.publish import parity


def test_identical_scores_pass():
    p = np.array([[0.2, 0.8], [0.6, 0.4]])
    report = parity.compare(p, p.copy())
    assert report.passed and report.max_abs_diff == 0 and report.agreement == 1


def test_difference_above_tolerance_fails():
    p = np.array([[0.2, 0.8]])
    report = parity.compare(p, p + np.array([[2e-5, -2e-5]]))
    assert not report.passed
    with pytest.raises(ParityError, match="version not published"):
        parity.require(report, "duckdb")


def test_argmax_flip_on_exact_tie_is_not_a_disagreement():
    reference = np.array([[0.5, 0.5, 0.0]])
    (check,) = parity.check_answers("probabilities", reference, ("a", "b", "c"), {"score": [1]})
    assert check.disagreements == 0 and check.compared == 0


def test_argmax_flip_without_tie_fails_even_within_tolerance():
    reference = np.array([[0.50001, 0.49999]])
    checks = parity.check_answers("probabilities", reference, ("a", "b"), {"score": [1]}, tolerance=1e-4)
    report = parity.ParityReport(rows=1, max_abs_diff=1e-5, tolerance=1e-4, answers=checks)
    assert checks[0].disagreements == 1 and not report.passed
    with pytest.raises(ParityError, match="score disagrees with Keras's argmax on 1 row"):
        parity.require(report, "duckdb")


@pytest.mark.parametrize(
    ("p", "score", "counted"),
    [(0.7, 1, True), (0.3, 0, True), (0.5, 0, False), (0.5000001, 0, False), (0.51, 0, True)],
)
def test_binary_scores_by_keras_rule(p, score, counted):
    """p > 0.5 is class 1 (Keras's binary_accuracy); p within the tie margin of 0.5 counts either way."""
    (check,) = parity.check_answers("binary", np.array([[p]]), ("0", "1"), {"score": [score]})
    assert check.compared == int(counted)
    assert check.disagreements == (1 if counted and score != int(p > 0.5) else 0)


def test_labels_of_a_multilabel_output_are_those_above_the_threshold():
    q = np.array([[0.9, 0.2, 0.6], [0.1, 0.1, 0.1]])
    good = parity.check_answers("multilabel", q, ("a", "b", "c"), {"labels": [["a", "c"], []]})
    bad = parity.check_answers("multilabel", q, ("a", "b", "c"), {"labels": [["a"], []]})
    assert good[0].disagreements == 0 and bad[0].disagreements == 1 and bad[0].first_disagreement == 0


def test_logits_read_through_softmax_and_sigmoid():
    z = np.array([[2.0, -1.0, 0.5]])
    (proba,) = parity.check_answers("logits", z, ("a", "b", "c"), {"predict_proba": [[0.5, 0.3, 0.2]]})
    assert proba.disagreements == 1
    softmax = np.exp(z) / np.exp(z).sum()
    (proba,) = parity.check_answers("logits", z, ("a", "b", "c"), {"predict_proba": softmax.tolist()})
    assert proba.disagreements == 0
    (score,) = parity.check_answers("logits", np.array([[-0.2]]), ("no", "yes"), {"score": [0]})
    assert score.disagreements == 0 and score.rule == "1 when sigmoid > 0.5"


def test_nan_from_target_is_an_error():
    with pytest.raises(ParityError, match="NaN"):
        parity.compare(np.ones((1, 2)), np.array([[np.nan, 1.0]]))


def test_a_fully_masked_rows_nan_probabilities_agree_only_with_nan():
    """Keras gives NaN for a masked average over no step; the target must give NaN in the same places."""
    nan = float("nan")
    reference = np.array([[nan, nan, nan], [0.2, 0.3, 0.5]])
    same = {"predict_proba": [[nan, nan, nan], [0.2, 0.3, 0.5]]}
    (check,) = parity.check_answers("probabilities", reference, ("a", "b", "c"), same)
    assert check.disagreements == 0
    numbers = {"predict_proba": [[0.3, 0.3, 0.4], [0.2, 0.3, 0.5]]}
    (check,) = parity.check_answers("probabilities", reference, ("a", "b", "c"), numbers)
    assert check.disagreements == 1 and check.first_disagreement == 0


REFERENCE = np.array([[0.2, 0.8], [0.5, 30.0]])
OFF = np.array([[0.2, 0.8], [0.5, 30.01]])  # the second row's value 30 off by 0.01, beyond 1e-5 × 30


def test_a_refusal_names_the_first_row_over_its_difference_and_bound():
    report = parity.compare(REFERENCE, OFF)
    assert report.first_over is not None and report.first_over.row == 1
    with pytest.raises(ParityError, match=r"first sample row 1: \|Δ\| 0\.01 > bound 0\.0003;") as refused:
        parity.require(report, "duckdb")
    assert "\n" not in str(refused.value)


def test_a_float32_target_names_the_bound_it_could_meet_only_within_float32_rounding():
    report = parity.compare(REFERENCE, OFF)
    with pytest.raises(
        ParityError, match=r"^onnx cannot meet --tolerance 1e-05 on sample row 1: .*bound there is 0\.05;"
    ):
        parity.require(report, "onnx", lambda row: 0.05)
    with pytest.raises(
        ParityError, match=r"^onnx disagrees with TensorFlow: .*\(float32 bound there 0\.001\)"
    ):
        parity.require(report, "onnx", lambda row: 0.001)


def test_the_summary_prints_each_outputs_largest_difference_and_bound():
    report = parity.compare(REFERENCE, REFERENCE, outputs=(("classes", 0, 1), ("energy", 1, 2)))
    assert "classes 0.00e+00 ≤ 1.0e-05, energy 0.00e+00 ≤ 3.0e-04" in report.summary()
    energy = report.bounds()["outputs"][1]
    assert energy["name"] == "energy" and energy["max_bound"] == pytest.approx(3e-4, rel=1e-12)
