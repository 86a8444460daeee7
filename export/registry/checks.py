"""The gate's answer check, kept with each version so that activating it later proves it again.

At export the gate compares the target's answers with Keras's on sample rows. A few of those rows
(STORED_ROWS, spread over the compared ones) are kept with the version: their inputs, what Keras's
`model.predict` returned (or the float64 reference, on a row at scale), each row's tolerance, and the
answers a Keras user reads from them (score, label, labels, predict_proba; None where a row is a tie).
`nnsql models activate` scores those rows with the version's own code in the target and switches only
if every value and answer agrees, as the export did. The document is JSON, so that PostgreSQL's
`nnsql.activate` procedure reads it in SQL too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ExportError
from ..ir import kinds
from ..publish import parity

STORED_ROWS = 32  # enough to catch a wrong weight or version; few enough to check in a second
STORED_VALUES = 250_000  # input values kept at most (a few MB of JSON): fewer rows of large images


@dataclass(frozen=True)
class StoredCheck:
    inputs: dict[str, np.ndarray]  # input name -> rows
    expected: np.ndarray  # rows × every output's values
    allowed: np.ndarray  # each row's tolerance
    answers: dict[str, list[Any]]  # function -> each row's expected answer, None where undecided

    @property
    def rows(self) -> int:
        return len(self.expected)

    def document(self) -> str:
        return json.dumps(
            {
                "shapes": {name: list(values.shape[1:]) for name, values in self.inputs.items()},
                "rows": [
                    {
                        "inputs": {name: values[i].ravel().tolist() for name, values in self.inputs.items()},
                        "expected": self.expected[i].tolist(),
                        "allowed": float(self.allowed[i]),
                        "answers": {f: answers[i] for f, answers in self.answers.items()},
                    }
                    for i in range(self.rows)
                ],
            }
        )


def from_document(text: str | Mapping[str, Any]) -> StoredCheck:
    """The check as stored (JSON text, or the mapping a driver decoded it into)."""
    document = json.loads(text) if isinstance(text, str) else text
    rows, shapes = document["rows"], document["shapes"]
    if not rows:
        raise ExportError("the kept answer check holds no rows: the version cannot be proven; not activated")
    inputs = {
        name: np.asarray([row["inputs"][name] for row in rows], np.float64).reshape(len(rows), *shape)
        for name, shape in shapes.items()
    }
    functions = rows[0]["answers"].keys() if rows else ()
    return StoredCheck(
        inputs=inputs,
        expected=np.asarray([row["expected"] for row in rows], np.float64),
        allowed=np.asarray([row["allowed"] for row in rows], np.float64),
        answers={f: [row["answers"][f] for row in rows] for f in functions},
    )


def plain(value: Any) -> Any:
    """numpy scalars and arrays as JSON's numbers and lists."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value.item() if isinstance(value, np.generic) else value


def stored_check(
    inputs: Mapping[str, np.ndarray],
    expected: np.ndarray,
    allowed: np.ndarray,
    compared: int,
    meaning: tuple[str, tuple[str, ...], int, bool],
) -> StoredCheck:
    """Up to STORED_ROWS of the first `compared` sample rows (fewer when their inputs would hold more
    than STORED_VALUES values), spread over them, that hold finite values and a finite tolerance;
    `meaning` is the first output's (kind, classes, units, several outputs)."""
    kind, classes, units, several = meaning
    usable = np.isfinite(expected[:compared]).all(axis=1) & np.isfinite(allowed[:compared])
    candidates = np.flatnonzero(usable)
    per_row = sum(int(np.prod(np.shape(values)[1:])) for values in inputs.values())
    count = max(1, min(STORED_ROWS, STORED_VALUES // max(per_row, 1)))
    spread = np.unique(np.linspace(0, len(candidates) - 1, count).round().astype(int))
    picked = candidates[spread] if len(candidates) else candidates
    wanted = expected[picked]
    margins = np.where(allowed[picked] > parity.DEFAULT_TOLERANCE, 2 * allowed[picked], parity.TIE_MARGIN)
    keras = kinds.keras_answers(kind, wanted[:, :units], classes, margins, several_outputs=several)
    functions = parity.questions(kind, several_outputs=several)
    answers = {
        f: [None if keras.undecided[f][i] else plain(keras.answers[f][i]) for i in range(len(picked))]
        for f in functions
    }
    return StoredCheck(
        inputs={name: np.asarray(values)[picked] for name, values in inputs.items()},
        expected=wanted,
        allowed=allowed[picked],
        answers=answers,
    )


def disagreement(check: StoredCheck, scores: np.ndarray, answers: Mapping[str, Sequence[object]]) -> str:
    """'' when the version's values and answers on the stored rows agree with those stored; else what
    disagrees first, in a few words."""
    report = parity.compare(check.expected, np.asarray(scores, np.float64), allowed=check.allowed)
    if report.rows_over:
        over = f"{report.rows_over} of {check.rows} stored rows"
        return f"{over} beyond their tolerance (max |Δ| {report.max_abs_diff:.2e})"
    for function, wanted in check.answers.items():
        got = answers[function]
        for row, (expected, actual) in enumerate(zip(wanted, got, strict=True)):
            if expected is not None and not parity.agrees(function, expected, actual, check.allowed[row]):
                return f"{function} answers {actual!r} on stored row {row}, Keras {expected!r}"
    return ""


def require_agreement(
    check: StoredCheck, scores: np.ndarray, answers: Mapping[str, Sequence[object]], what: str
) -> None:
    problem = disagreement(check, scores, answers)
    if problem:
        raise ExportError(f"{what} fails the answer check it was published with: {problem}; not activated")
