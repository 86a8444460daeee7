"""Parity between a target and TensorFlow: the check every export ends with, on numbers and on meaning.

Numbers: what the target's `predict` returns against Keras, value by value. Each value has its own bound,
computed from that value alone: `tolerance` (default 1e-5) where Keras's value lies in [-1, 1]
(probabilities, and anything that small), `tolerance × |value|` beyond (logits and regression values grow
with the input). So one output's magnitude never widens another's: an energy of 5e4 beside a softmax head
bounds the energy by 0.5 and each probability still by 1e-5. TensorFlow computes in float32, whose
relative rounding is ~6e-8 per operation; over a 784-term dot product and a softmax the accumulated error in
a probability stays well under 1e-6, so 1e-5 leaves a 10× margin while still catching a wrong weight,
layout or activation (those move values by 1e-2 or more). The bound is the tolerance asked for on every
target: a float32 target that cannot meet it on a row is refused, naming the bound float32 rounding there
allows (export/publish/pipeline.py), and the user may ask for that tolerance.

NaN agrees with nothing, but where Keras documents it: the 0/0 of a masked average over a row whose every
step is masked (`masked` rows), which the target must give as NaN too.

Meaning: what the user queries (`score`, `label`, `labels`, `predict_proba`) against what a Keras user
computes from `model.predict` in the output kind's convention (export/ir/kinds.py: argmax, p > 0.5, the
labels above the threshold). A row whose Keras value lies within TIE_MARGIN of the threshold, or whose
two best classes lie within it, may go either way in another float order and is not counted; for logits
beyond [-1, 1] the margin is twice the first output's own bound on that row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..errors import ParityError
from ..ir import kinds

DEFAULT_TOLERANCE = 1e-5
# Keras values closer than this to a threshold, or two classes this close, are a tie for the answers.
TIE_MARGIN = 1e-6
RULE = "tolerance where |Keras| ≤ 1, tolerance × |Keras| beyond, per value"
# At default settings a float32 target's rows at scale are held to their float32 bound (publish/gate.py)
AT_SCALE = "rows at scale within their float32 bound"


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
class OutputParity:
    """One output's figures on the compared rows: its largest |Δ| and the largest bound applied to it."""

    name: str
    max_abs_diff: float
    max_bound: float

    def summary(self) -> str:
        return f"{self.name} {self.max_abs_diff:.2e} ≤ {self.max_bound:.1e}"


@dataclass(frozen=True)
class Over:
    """The first row further from Keras than its bound: its worst value's |Δ| and bound."""

    row: int  # 0-based, among the compared rows as given
    difference: float
    bound: float


@dataclass(frozen=True)
class ParityReport:
    rows: int
    max_abs_diff: float
    tolerance: float
    rows_over: int = 0  # rows with a value further from its reference than its bound
    answers: tuple[AnswerCheck, ...] = ()
    outputs: tuple[OutputParity, ...] = ()
    first_over: Over | None = None
    rule: str = RULE

    @property
    def passed(self) -> bool:
        return self.rows_over == 0 and not any(a.disagreements for a in self.answers)

    @property
    def agreement(self) -> float:
        """The share of compared answers that agree with Keras's (1 when the kind has none: values)."""
        compared = sum(a.compared for a in self.answers)
        return 1.0 - sum(a.disagreements for a in self.answers) / compared if compared else 1.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "agreement": self.agreement}

    def bounds(self) -> dict[str, Any]:
        """The bound applied, as the registry and metadata.json record it: the rule and, per output,
        the largest |Δ| and the largest bound one of its values was held to."""
        return {
            "tolerance": self.tolerance,
            "rule": self.rule,
            "outputs": [asdict(output) for output in self.outputs],
        }

    def summary(self) -> str:
        numbers = (
            f"parity on {self.rows} rows: max |Δ| = {self.max_abs_diff:.2e} (tolerance {self.tolerance:g}"
        )
        if AT_SCALE in self.rule:
            numbers += f", {AT_SCALE}"
        if any(output.max_bound > self.tolerance for output in self.outputs) or len(self.outputs) > 1:
            numbers += ", ×|value| beyond 1: " + ", ".join(output.summary() for output in self.outputs)
        numbers += ")"
        if not self.answers:
            return numbers
        return f"{numbers}; agreeing with Keras: " + ", ".join(a.summary() for a in self.answers)


def bounds(reference: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Each value's bound: its row's tolerance (`allowed`), times |value| where that exceeds 1."""
    magnitude = np.nan_to_num(np.abs(reference), nan=1.0, posinf=1.0)
    bound: np.ndarray = np.asarray(allowed, np.float64).reshape(-1, 1) * np.maximum(1.0, magnitude)
    return bound


Columns = Sequence[tuple[str, int, int]]  # an output's name and its columns [start, stop) in a joined row


def compare(
    reference: np.ndarray,
    candidate: np.ndarray,
    tolerance: float = DEFAULT_TOLERANCE,
    allowed: np.ndarray | None = None,
    *,
    masked: np.ndarray | None = None,
    outputs: Columns = (),
) -> ParityReport:
    """The numbers: Keras (float32 `model.predict`, or Keras in float64: export/publish/pipeline.py)
    against the target's predict, value by value, each within its bound (`bounds`).

    `allowed` is each row's tolerance (default: `tolerance`); a row allowed infinity is scored but not
    compared (its reference is itself infinite). A value the reference gives as NaN agrees only on a
    `masked` row (Keras's 0/0 of an average over no step), and only with NaN."""
    reference = np.asarray(reference, dtype=np.float64)
    candidate = np.asarray(candidate, dtype=np.float64)
    if reference.shape != candidate.shape:
        raise ParityError(f"shape mismatch: TensorFlow {reference.shape}, target {candidate.shape}")
    allowed = np.full(len(reference), tolerance) if allowed is None else np.asarray(allowed, np.float64)
    masked = np.zeros(len(reference), bool) if masked is None else np.asarray(masked, bool)
    compared = np.flatnonzero(np.isfinite(allowed))
    reference, candidate = reference[compared], candidate[compared]
    missing = np.isnan(reference) & masked[compared].reshape(-1, *[1] * (reference.ndim - 1))
    if np.isinf(candidate).any() or (np.isnan(candidate) & ~np.isnan(reference)).any():
        raise ParityError("the target returned NaN or infinite values where TensorFlow does not")
    if (missing & ~np.isnan(candidate)).any():
        raise ParityError("the target returned numbers where TensorFlow gives NaN (a fully masked average)")
    width = int(np.prod(reference.shape[1:]))
    flat, got = reference.reshape(len(reference), width), candidate.reshape(len(candidate), width)
    agreed = missing.reshape(flat.shape) & np.isnan(got)
    distance = np.where(agreed, 0.0, np.nan_to_num(np.abs(flat - got), nan=np.inf))
    bound = bounds(flat, allowed[compared])
    over = np.asarray((distance > bound).any(axis=1), dtype=bool)
    rows = len(flat)
    finite = np.where(np.isfinite(distance), distance, 0.0)
    return ParityReport(
        rows=rows,
        max_abs_diff=float(distance.max()) if distance.size else 0.0,
        tolerance=tolerance,
        rows_over=int(over.sum()),
        outputs=per_output(finite, np.where(agreed, 0.0, bound), outputs or (("output", 0, flat.shape[1]),)),
        first_over=first_over(distance, bound, over, compared),
    )


def per_output(distance: np.ndarray, bound: np.ndarray, outputs: Columns) -> tuple[OutputParity, ...]:
    return tuple(
        OutputParity(
            name,
            float(distance[:, start:stop].max(initial=0.0)),
            float(bound[:, start:stop].max(initial=0.0)),
        )
        for name, start, stop in outputs
    )


def first_over(distance: np.ndarray, bound: np.ndarray, over: np.ndarray, rows: np.ndarray) -> Over | None:
    if not over.any():
        return None
    row = int(np.flatnonzero(over)[0])
    beyond = distance[row] > bound[row]
    worst = int(np.argmax(np.where(beyond, distance[row] / np.maximum(bound[row], 1e-300), 0.0)))
    return Over(int(rows[row]), float(distance[row, worst]), float(bound[row, worst]))


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
    allowed infinity is not compared. Ties are decided from the first output alone (`margins`)."""
    rows_allowed = np.full(len(first), tolerance) if allowed is None else np.asarray(allowed, np.float64)
    comparable = np.isfinite(rows_allowed)
    base = np.where(comparable, rows_allowed, 0.0)
    margins = np.where(comparable, tie_margins(first, base), 0.0)
    expected = kinds.keras_answers(
        kind, np.where(comparable[:, None], first, 0.0), classes, margins, several_outputs=several_outputs
    )
    checks = []
    for function, answers in actual.items():
        wanted, undecided = expected.answers[function], expected.undecided[function]
        rows = [i for i in range(len(wanted)) if comparable[i] and not undecided[i]]
        wrong = [i for i in rows if not agrees(function, wanted[i], answers[i], base[i])]
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


def tie_margins(first: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Per row, how close to a threshold (or two classes to each other) Keras's first output may be for
    the answer to go either way: TIE_MARGIN, or twice the largest bound of the first output's own values
    where they exceed [-1, 1] (logits, which a target may give within that bound)."""
    widest = bounds(np.asarray(first, np.float64), allowed).max(axis=1, initial=0.0)
    return np.where(widest > allowed, 2 * widest, TIE_MARGIN)


def questions(kind: str, *, several_outputs: bool = False) -> tuple[str, ...]:
    """The functions the gate queries beside predict: every one the kind answers with."""
    return tuple(
        function
        for function in ("predict_proba", "score", "label", "labels")
        if kinds.offers(kind, function) and not (several_outputs and function == "predict_proba")
    )


def require(
    report: ParityReport,
    target: str,
    float32_bound: Callable[[int], float] | None = None,
    describe: Callable[[int], str] = lambda row: f"sample row {row}",
) -> None:
    """Raise ParityError, in one line, unless the report passed. For a float32 target, `float32_bound`
    gives how far float32 rounding alone may move a row's worst value: a row over the tolerance but within
    it cannot meet the tolerance asked for (the message names the bound it could meet); beyond it, the
    target disagrees with TensorFlow."""
    if report.passed:
        return
    over = report.first_over
    rounding = float32_bound(over.row) if over is not None and float32_bound is not None else None
    if over is not None and rounding is not None and over.difference <= rounding:
        raise ParityError(
            f"{target} cannot meet --tolerance {report.tolerance:g} on {describe(over.row)}: max |Δ| "
            f"{over.difference:.2g} (its bound {over.bound:.2g}); the float32 bound there is "
            f"{rounding:.2g}; version not published"
        )
    wrong = [a for a in report.answers if a.disagreements]
    detail = [
        f"{a.function} disagrees with Keras's {a.rule} on {a.disagreements} row(s), first row "
        f"{a.first_disagreement}"
        for a in wrong
    ]
    if over is not None:
        beyond = f"first {describe(over.row)}: |Δ| {over.difference:.2g} > bound {over.bound:.2g}"
        detail.insert(0, beyond + ("" if rounding is None else f" (float32 bound there {rounding:.2g})"))
    raise ParityError(
        f"{target} disagrees with TensorFlow: {report.summary()}"
        + "".join(f"; {line}" for line in detail)
        + "; version not published"
    )
