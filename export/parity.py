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
    rows_over: int = 0  # rows further from their reference than allowed

    @property
    def passed(self) -> bool:
        return self.rows_over == 0 and self.argmax_disagreements == 0

    def as_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        return (
            f"parity on {self.rows} rows: max |Δp| = {self.max_abs_diff:.2e} "
            f"(tolerance {self.tolerance:.0e}), argmax agreement {self.argmax_agreement:.2%}"
        )


def _is_tie(reference_row: np.ndarray, chosen: int, margin: float = TIE_MARGIN) -> bool:
    return bool(reference_row.max() - reference_row[chosen] <= margin)


def compare(
    reference: np.ndarray,
    candidate: np.ndarray,
    tolerance: float = DEFAULT_TOLERANCE,
    allowed: np.ndarray | None = None,
) -> ParityReport:
    """Compare probability matrices row by row; argmax differences on exact ties do not count.

    `allowed` is each row's tolerance (default: `tolerance`); a row allowed more is a float32 target's
    row at scale (export/pipeline.py), and a row allowed infinity is scored but not compared (its
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
        raise ParityError("the target returned NaN or infinite probabilities where TensorFlow does not")
    distance = np.where(missing, 0.0, np.abs(reference - candidate))
    per_row = distance.max(axis=1) if reference.size else np.zeros(len(reference))
    ref_arg, cand_arg = reference.argmax(axis=1), candidate.argmax(axis=1)
    differing = np.flatnonzero(ref_arg != cand_arg)
    margins = np.where(allowed > tolerance, 2 * allowed, TIE_MARGIN)
    real = [i for i in differing if not _is_tie(reference[i], int(cand_arg[i]), margins[i])]
    rows = len(reference)
    return ParityReport(
        rows=rows,
        max_abs_diff=float(per_row.max()) if rows else 0.0,
        argmax_agreement=float((ref_arg == cand_arg).mean()) if rows else 1.0,
        argmax_disagreements=len(real),
        tolerance=tolerance,
        rows_over=int((per_row > allowed).sum()),
    )


def require(report: ParityReport, target: str) -> None:
    if not report.passed:
        raise ParityError(
            f"{target} scores disagree with TensorFlow: {report.summary()}, "
            f"{report.argmax_disagreements} class disagreement(s); version not published"
        )
