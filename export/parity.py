"""Parity between a target's scores and TensorFlow's: the check every export ends with.

Tolerance: float32 parity, max |p_target − p_tf| ≤ 1e-5. TensorFlow computes in float32, whose
relative rounding is ~6e-8 per operation; over a 784-term dot product and a softmax the accumulated error
in a probability stays well under 1e-6, so 1e-5 leaves a 10× margin while still catching a wrong weight,
layout or activation (those move probabilities by 1e-2 or more).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from export.errors import ParityError

DEFAULT_TOLERANCE = 1e-5
# Two classes whose TensorFlow probabilities are closer than this are an exact tie for argmax purposes.
TIE_MARGIN = 1e-6


@dataclass(frozen=True)
class ParityReport:
    rows: int
    max_abs_diff: float
    argmax_agreement: float
    argmax_disagreements: int
    tolerance: float

    @property
    def passed(self) -> bool:
        return self.max_abs_diff <= self.tolerance and self.argmax_disagreements == 0

    def as_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        return (
            f"parity on {self.rows} rows: max |Δp| = {self.max_abs_diff:.2e} "
            f"(tolerance {self.tolerance:.0e}), argmax agreement {self.argmax_agreement:.2%}"
        )


def _is_tie(reference_row: np.ndarray, chosen: int) -> bool:
    return bool(reference_row.max() - reference_row[chosen] <= TIE_MARGIN)


def compare(
    reference: np.ndarray, candidate: np.ndarray, tolerance: float = DEFAULT_TOLERANCE
) -> ParityReport:
    """Compare probability matrices row by row; argmax differences on exact ties do not count."""
    reference = np.asarray(reference, dtype=np.float64)
    candidate = np.asarray(candidate, dtype=np.float64)
    if reference.shape != candidate.shape:
        raise ParityError(f"shape mismatch: TensorFlow {reference.shape}, target {candidate.shape}")
    if not np.all(np.isfinite(candidate)):
        raise ParityError("the target returned NaN or infinite probabilities")
    max_diff = float(np.abs(reference - candidate).max()) if reference.size else 0.0
    ref_arg, cand_arg = reference.argmax(axis=1), candidate.argmax(axis=1)
    differing = np.flatnonzero(ref_arg != cand_arg)
    real = [i for i in differing if not _is_tie(reference[i], int(cand_arg[i]))]
    rows = len(reference)
    return ParityReport(
        rows=rows,
        max_abs_diff=max_diff,
        argmax_agreement=float((ref_arg == cand_arg).mean()) if rows else 1.0,
        argmax_disagreements=len(real),
        tolerance=tolerance,
    )


def require(report: ParityReport, target: str) -> None:
    if not report.passed:
        raise ParityError(
            f"{target} scores disagree with TensorFlow: {report.summary()}, "
            f"{report.argmax_disagreements} class disagreement(s); version not published"
        )
