"""Parity between a target and TensorFlow: the check every export ends with, on numbers and on meaning.

Numbers: what the target's `predict` returns against `model.predict`, max |Δ| ≤ 1e-5 (float32 parity).
TensorFlow computes in float32, whose relative rounding is ~6e-8 per operation; over a 784-term dot
product and a softmax the accumulated error in a probability stays well under 1e-6, so 1e-5 leaves a 10×
margin while still catching a wrong weight, layout or activation (those move values by 1e-2 or more).

Meaning: what the user queries (`score`, `label`, `labels`, `predict_proba`) against what a Keras user
computes from `model.predict` in the output kind's convention (export/ir/kinds.py: argmax, p > 0.5, the
labels above the threshold). A row whose Keras value lies within TIE_MARGIN of the threshold, or whose
two best classes lie within it, may go either way in another float order and is not counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from nnsql.export.errors import ParityError
from nnsql.export.ir import kinds

DEFAULT_TOLERANCE = 1e-5
# Keras values closer than this to a threshold, or two classes this close, are a tie for the answers.
TIE_MARGIN = 1e-6


@dataclass(frozen=True)
class AnswerCheck:
    """One function's answers against the Keras user's on the sample rows."""

    function: str
    rule: str
    compared: int  # rows compared (near-ties left out)
    disagreements: int
    first_disagreement: int | None = None  # 0-based sample row

    def summary(self) -> str:
        return f"{self.function} ({self.rule}) {self.compared - self.disagreements}/{self.compared}"


@dataclass(frozen=True)
class ParityReport:
    rows: int
    max_abs_diff: float
    tolerance: float
    rows_over: int = 0  # rows further from their reference than allowed
    answers: tuple[AnswerCheck, ...] = ()

    @property
    def passed(self) -> bool:
        return self.rows_over == 0 and not any(a.disagreements for a in self.answers)

    @property
    def agreement(self) -> float:
        """The share of compared answers that agree with Keras's (1 when the kind has none: values)."""
        compared = sum(a.compared for a in self.answers)
        return 1.0 - sum(a.disagreements for a in self.answers) / compared if compared else 1.0

    def as_dict(self) -> dict:
        return {**asdict(self), "agreement": self.agreement}

    def summary(self) -> str:
        numbers = (
            f"parity on {self.rows} rows: max |Δ| = {self.max_abs_diff:.2e} (tolerance {self.tolerance:.0e})"
        )
        if not self.answers:
            return numbers
        return f"{numbers}; agreeing with Keras: " + ", ".join(a.summary() for a in self.answers)


def compare(
    reference: np.ndarray,
    candidate: np.ndarray,
    tolerance: float = DEFAULT_TOLERANCE,
    allowed: np.ndarray | None = None,
) -> ParityReport:
    """The numbers: model.predict (or the float64 reference, for rows at scale) against the target's
    predict, row by row.

    `allowed` is each row's tolerance (default: `tolerance`); a row allowed more is a float32 target's
    row at scale (export/publish/pipeline.py), and a row allowed infinity is scored but not compared (its
    reference is itself infinite). A value the reference gives as NaN (Keras's 0/0 of a fully masked
    average) must be NaN in the target too."""
    reference = np.asarray(reference, dtype=np.float64)
    candidate = np.asarray(candidate, dtype=np.float64)
    if reference.shape != candidate.shape:
        raise ParityError(f"shape mismatch: TensorFlow {reference.shape}, target {candidate.shape}")
    allowed = np.full(len(reference), tolerance) if allowed is None else np.asarray(allowed, np.float64)
    compared = np.isfinite(allowed)
    reference, candidate, allowed = reference[compared], candidate[compared], allowed[compared]
    missing = np.isnan(reference)
    if np.isinf(candidate).any() or (np.isnan(candidate) != missing).any():
        raise ParityError("the target returned NaN or infinite values where TensorFlow does not")
    distance = np.where(missing, 0.0, np.abs(reference - candidate))
    per_row = distance.max(axis=1) if reference.size else np.zeros(len(reference))
    rows = len(reference)
    return ParityReport(
        rows=rows,
        max_abs_diff=float(per_row.max()) if rows else 0.0,
        tolerance=tolerance,
        rows_over=int((per_row > allowed).sum()),
    )


RULES = {
    "score": {"binary": "1 when p > 0.5", "logits": "argmax of softmax", "probabilities": "argmax"},
    "label": {"": "the class of score"},
    "labels": {"": "p > 0.5"},
    "predict_proba": {"binary": "[1 - p, p]", "logits": "softmax of the logits", "": "as predict"},
}


def rule(function: str, kind: str, units: int) -> str:
    if function == "score" and kind == "logits" and units == 1:
        return "1 when sigmoid > 0.5"
    if function == "predict_proba" and kind == "logits" and units == 1:
        return "[1 - sigmoid, sigmoid]"
    forms = RULES[function]
    return forms.get(kind, forms.get("", ""))


def agrees(function: str, expected: object, actual: object, tolerance: float) -> bool:
    if function == "predict_proba":
        if actual is None or len(actual) != len(expected):  # type: ignore[arg-type]
            return False
        got, wanted = np.asarray(actual, float), np.asarray(expected, float)
        missing = np.isnan(wanted)  # Keras's 0/0 (a fully masked average) must be NaN there too
        if (np.isnan(got) != missing).any():
            return False
        return bool(np.abs(got - wanted)[~missing].max(initial=0.0) <= tolerance)
    if function == "labels":
        return actual is not None and list(actual) == list(expected)  # type: ignore[call-overload]
    if function == "score":  # a driver may return an integral NUMBER as a float
        return actual is not None and float(actual) == expected  # type: ignore[arg-type]
    return actual == expected


def check_answers(
    kind: str,
    first: np.ndarray,
    classes: tuple[str, ...],
    actual: Mapping[str, Sequence[object]],
    tolerance: float = DEFAULT_TOLERANCE,
    *,
    several_outputs: bool = False,
    allowed: np.ndarray | None = None,
) -> tuple[AnswerCheck, ...]:
    """Each queried function's answers (`actual`, one per sample row) against the Keras user's, read
    from Keras's first output (rows × units). `allowed` is each row's tolerance, as in `compare`: a row
    allowed more (a float32 target's row at scale) counts as a tie within twice that, and a row allowed
    infinity is not compared."""
    rows_allowed = np.full(len(first), tolerance) if allowed is None else np.asarray(allowed, np.float64)
    margins = np.where(rows_allowed > tolerance, 2 * rows_allowed, TIE_MARGIN)
    comparable = np.isfinite(rows_allowed)
    margins = np.where(comparable, margins, 0.0)
    expected = kinds.keras_answers(
        kind, np.where(comparable[:, None], first, 0.0), classes, margins, several_outputs=several_outputs
    )
    checks = []
    for function, answers in actual.items():
        wanted, undecided = expected.answers[function], expected.undecided[function]
        rows = [i for i in range(len(wanted)) if comparable[i] and not undecided[i]]
        wrong = [i for i in rows if not agrees(function, wanted[i], answers[i], rows_allowed[i])]
        checks.append(
            AnswerCheck(
                function=function,
                rule=rule(function, kind, int(np.asarray(first).shape[1])),
                compared=len(rows),
                disagreements=len(wrong),
                first_disagreement=wrong[0] if wrong else None,
            )
        )
    return tuple(checks)


def questions(kind: str, *, several_outputs: bool = False) -> tuple[str, ...]:
    """The functions the gate queries beside predict: every one the kind answers with."""
    return tuple(
        function
        for function in ("predict_proba", "score", "label", "labels")
        if kinds.offers(kind, function) and not (several_outputs and function == "predict_proba")
    )


def require(report: ParityReport, target: str) -> None:
    if report.passed:
        return
    wrong = [a for a in report.answers if a.disagreements]
    detail = "; ".join(
        f"{a.function} disagrees with Keras's {a.rule} on {a.disagreements} row(s), first row "
        f"{a.first_disagreement}"
        for a in wrong
    )
    raise ParityError(
        f"{target} disagrees with TensorFlow: {report.summary()}"
        + (f"; {detail}" if detail else "")
        + "; version not published"
    )
