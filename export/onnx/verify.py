"""The ONNX target's gate: onnxruntime's scores of the sample rows against what they are compared with,
within the parity budget, and what the scorer answers from them (export/onnx/fileformat.py) against a Keras
user's reading; the rows kept for activating the version again later."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np

from ..publish import budget, parity
from ..publish.gate import Gate
from ..publish.pipeline import spread
from ..registry.checks import STORED_ROWS, stored_check
from . import fileformat as scorer
from .runtime import batch_predict, load_session
from .samples import TARGET, Samples


@dataclass(frozen=True)
class Meaning:
    """What the first output means (export/ir/kinds.py) and its labels: how the scorer's answers are read."""

    kind: str
    units: int
    classes: tuple[str, ...]
    several: bool

    def checks(
        self,
        wanted: np.ndarray,
        onnx_scores: np.ndarray,
        tolerance: float,
        allowed: np.ndarray | None = None,
    ) -> tuple[parity.AnswerCheck, ...]:
        """What the scorer answers from onnxruntime's values (export/onnx/fileformat.py: the class, label or
        labels and probabilities it returns) against a Keras user's reading of what they are compared with
        (Keras's values; the float64 reference on rows at scale, within `allowed`)."""
        answered = scorer.answers(self.kind, onnx_scores[:, : self.units], list(self.classes))
        asked = {f: answered[f] for f in parity.questions(self.kind, several_outputs=self.several)}
        first = wanted[:, : self.units]
        return parity.check_answers(
            self.kind,
            first,
            self.classes,
            asked,
            tolerance,
            several_outputs=self.several,
            allowed=allowed,
        )


def check_parity(
    path: Path,
    sets: list[Samples],
    expected: list[tuple[np.ndarray, Gate | None]],
    tolerance: float,
    limits: budget.Budget,
    progress: bool,
    meaning: Meaning,
) -> tuple[parity.ParityReport, str]:
    """onnxruntime's scores of each sample set against what it is compared with (Samples.expected), within
    the parity budget, and what the scorer answers from them against a Keras user's reading (`meaning`);
    raises ParityError on a disagreement. Returns the last set's report and its sample source."""
    session = load_session(path)
    for each, (keras_scores, gate) in zip(sets, expected, strict=True):
        samples = each.rows
        actual, outcome = budget.score_within_budget(
            partial(batch_predict, session, samples.inputs),
            samples.rows,
            limits,
            where="onnxruntime",
            progress=progress,
        )
        rows = np.arange(outcome.rows)
        wanted = keras_scores[: outcome.rows] if gate is None else gate.expected(rows)
        scored = None if gate is None else gate.allowed(rows)
        masked = None if gate is None else gate.masked[rows]
        report = parity.compare(wanted, actual, tolerance, scored, masked=masked, outputs=each.columns())
        checks = meaning.checks(wanted, actual, tolerance, scored)
        report = replace(report, answers=checks)
        parity.require(report, TARGET, None if gate is None else gate.float32_bound, samples.describe)
    return report, outcome.describe(samples.source)


def kept_check(
    samples: Samples, scored: tuple[np.ndarray, Gate | None], report: parity.ParityReport, meaning: Meaning
) -> str:
    """A few of the rows the gate compared, with what they were compared with (Keras's references for
    those rows alone), for activating this version later (export/registry/checks.py)."""
    keras_scores, gate = scored
    rows = spread(min(report.rows, samples.rows.rows), 2 * STORED_ROWS)
    inputs = {name: values[rows] for name, values in samples.rows.inputs.items()}
    if gate is None:
        wanted, allowed = keras_scores[rows].reshape(len(rows), -1), np.full(len(rows), report.tolerance)
    else:
        wanted, allowed = gate.expected(rows), gate.allowed(rows)
    described = (meaning.kind, meaning.classes, meaning.units, meaning.several)
    return stored_check(inputs, wanted, allowed, len(rows), described).document()
