"""What each sample row of the parity gate is compared with, and within what (docs/numerics.md).

Always Keras, never the exporter's own IR: Keras in float64 (export/frontend/float64.py) where float32
rounding would blur the comparison, else Keras's own `model.predict`. Keras in float64 runs only on the
rows that are checked, once each.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np

from ..errors import ExportError
from ..frontend.float64 import Predictor
from ..ir import graph as ir
from .samples import SampleSet

# A float32 target's values may be this many times as far from Keras in float64 as float32 rounding of the
# row's inputs moves them (the largest of three seeded draws); measured on a classifier of raw momenta, 6,000
# rows near p = 0.5: float32 sums in another order reach 7 times it, Keras 12 times.
FLOAT32_ROUNDING = 16.0
ROUNDING = 2.0**-23  # float32's relative spacing at 1
DRAWS = 3  # seeded draws of a row's inputs moved by ROUNDING
# ... but never more than this times max(1, |value|): a gap beyond it is not rounding (a wrong weight moves
# values by 1e-2 or more), whatever the measurement says.
FLOAT32_CAP = 1e-3
# Keras in float64 further than this times max(1, |value|) from float32 Keras on an ordinary row is another
# function (a layer whose rebuild lost state), not rounding: 1e-4 is the most seen on raw momenta.
UNFAITHFUL = 1e-2


@dataclass
class Gate:
    """What each sample row is compared with and within what, computed only for the rows that are checked.

    Ordinary rows are compared with Keras: a float64 target with Keras run in float64 (the same
    architecture and weights, export/frontend/float64.py), a float32 target with float32 Keras
    (`model.predict`), which it should match as closely as two float32 computations do. Rows at scale are
    compared with Keras in float64 on every target: float32 Keras's own rounding there exceeds 1e-5. Every
    row is held to `tolerance` per value (export/publish/parity.py `bounds`); a row at scale that Keras
    cannot score finitely (an exponential beyond float32's range) is scored, so it must not raise, but not
    compared (tolerance ∞)."""

    keras: np.ndarray  # float32 model.predict of every sample row, outputs joined
    float64: Predictor | None  # Keras in float64 on rows of `feeds`; None: float32 Keras is the judge
    feeds: list[np.ndarray]  # the sample rows, per input in the model's order
    floats: list[bool]  # per input: floating-point (token indices are never perturbed)
    at_scale: np.ndarray
    masked: np.ndarray  # per row: some input is all padding (0): a masked average over it is 0/0
    tolerance: float
    float32: bool
    # --tolerance not given: a float32 target's rows at scale are held to their float32 bound where it
    # exceeds the tolerance (float32_tolerances); a tolerance asked for bounds every row
    rounding_at_scale: bool = False
    cache: dict[int, np.ndarray] = field(default_factory=dict)
    float32_cache: dict[int, float] = field(default_factory=dict)  # float32_tolerances, per row

    def exact(self, rows: np.ndarray) -> np.ndarray:
        """Keras in float64 on `rows`, each computed once; float32 Keras where it cannot be had."""
        missing = np.array([row for row in rows if int(row) not in self.cache], dtype=int)
        computed = self.in_float64_keras(missing) if missing.size and self.float64 is not None else None
        if computed is None:
            computed = self.keras[missing]
        self.cache.update({int(row): values for row, values in zip(missing, computed, strict=True)})
        return np.array([self.cache[int(row)] for row in rows]).reshape(len(rows), -1)

    def in_float64_keras(self, rows: np.ndarray) -> np.ndarray | None:
        """Keras in float64 on `rows`, or None (said once on stderr) when Keras cannot run the model in
        float64 or the rebuilt model is not the same function: more than UNFAITHFUL × max(1, |value|)
        from float32 Keras on an ordinary row, which no rounding explains. Keras in float32 then judges."""
        assert self.float64 is not None
        try:
            computed = self.float64([feed[rows] for feed in self.feeds])
        except ExportError as error:
            self.without_float64(str(error))
            return None
        ordinary = ~self.at_scale[rows] & np.isfinite(self.keras[rows]).all(axis=1)
        with np.errstate(invalid="ignore"):
            gap = np.abs(computed - self.keras[rows]) / np.maximum(1.0, np.abs(self.keras[rows]))
        if (np.nan_to_num(gap, nan=np.inf)[ordinary] > UNFAITHFUL).any():
            self.without_float64("Keras rebuilt in float64 does not compute what the model does")
            return None
        return computed

    def without_float64(self, reason: str) -> None:
        print(f"note: {reason}; every row is compared with float32 Keras", file=sys.stderr, flush=True)
        self.float64 = None

    def in_float64(self, rows: np.ndarray) -> np.ndarray:
        chosen: np.ndarray = self.at_scale[rows] | (not self.float32)
        return chosen

    def expected(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=int)
        values: np.ndarray = self.keras[rows].astype(np.float64).reshape(len(rows), -1)
        chosen = np.flatnonzero(self.in_float64(rows))
        if chosen.size:
            values[chosen] = self.exact(rows[chosen])
        return values

    def allowed(self, rows: np.ndarray) -> np.ndarray:
        """Each row's tolerance: `tolerance`, or ∞ for a row at scale beyond Keras's range; at default
        settings on a float32 target (`rounding_at_scale`), a row at scale's float32 tolerance where it
        exceeds `tolerance`."""
        rows = np.asarray(rows, dtype=int)
        allowed = np.full(len(rows), self.tolerance)
        scaled = np.flatnonzero(self.at_scale[rows])
        if scaled.size:
            finite = np.isfinite(self.exact(rows[scaled])).all(axis=1)
            finite &= np.isfinite(self.keras[rows[scaled]].reshape(len(scaled), -1)).all(axis=1)
            allowed[scaled[~finite]] = np.inf
            loosened = scaled[finite] if self.rounding_at_scale and self.float32 else scaled[:0]
            if loosened.size:
                own = self.float32_tolerances(rows[loosened])
                allowed[loosened] = np.maximum(self.tolerance, own)
        return allowed

    def float32_tolerances(self, rows: np.ndarray) -> np.ndarray:
        """Per row at scale, its float32 bound as a tolerance (a value's bound is it × max(1, |value|),
        parity.bounds): FLOAT32_ROUNDING times how far Keras's float64 values move when the row's float
        inputs move by float32's relative rounding, over max(1, |value|), at most FLOAT32_CAP; 0 when
        Keras cannot run in float64. Each row's is computed once."""
        missing = np.array([row for row in rows if int(row) not in self.float32_cache], dtype=int)
        if missing.size:
            exact = self.exact(missing)
            moved = self.moved(missing, exact) if self.float64 is not None else None
            relative = np.zeros_like(exact)
            if moved is not None:
                scale = np.maximum(1.0, np.nan_to_num(np.abs(exact), nan=1.0))
                relative = np.minimum(FLOAT32_ROUNDING * moved / scale, FLOAT32_CAP)
            worst = relative.max(axis=1, initial=0.0)
            self.float32_cache.update(
                {int(row): float(value) for row, value in zip(missing, worst, strict=True)}
            )
        return np.array([self.float32_cache[int(row)] for row in rows], np.float64)

    def float32_bound(self, row: int) -> float:
        """How far float32 rounding may move the row's values from what they are compared with:
        FLOAT32_ROUNDING times how far Keras's float64 values move when the row's float inputs move by
        float32's relative rounding, capped at FLOAT32_CAP times max(1, |value|), for the value that moves
        most; twice that where the row is compared with float32 Keras (both sides round). 0 when Keras
        cannot run in float64."""
        one = np.array([row])
        exact = self.exact(one)
        moved = self.moved(one, exact) if self.float64 is not None else None
        if moved is None:
            return 0.0
        cap = FLOAT32_CAP * np.maximum(1.0, np.nan_to_num(np.abs(exact[0]), nan=1.0))
        sides = 1.0 if self.in_float64(one)[0] else 2.0
        return sides * float(np.minimum(FLOAT32_ROUNDING * moved[0], cap).max(initial=0.0))

    def moved(self, rows: np.ndarray, exact: np.ndarray) -> np.ndarray | None:
        """How far Keras's float64 values of each row move, at most over DRAWS draws (seeded by the row),
        when its float inputs move by float32's relative rounding (token indices stay). Every draw of
        every row is scored in one call."""
        assert self.float64 is not None
        generators = [np.random.default_rng(int(row)) for row in rows]
        draws = [
            [
                feed[rows] * (1 + ROUNDING * np.stack([g.uniform(-1, 1, feed.shape[1:]) for g in generators]))
                if floating
                else feed[rows]
                for feed, floating in zip(self.feeds, self.floats, strict=True)
            ]
            for _ in range(DRAWS)
        ]
        try:
            values = self.float64([np.concatenate(each) for each in zip(*draws, strict=True)])
        except ExportError:
            return None
        with np.errstate(all="ignore"):
            gaps = np.abs(values.reshape(DRAWS, len(rows), -1) - exact)
        moved: np.ndarray = np.nan_to_num(gaps, nan=0.0).max(axis=0)
        return moved


def gate_for(
    graph: ir.Graph,
    samples: SampleSet,
    keras_scores: np.ndarray,
    tolerance: float,
    float32: bool,
    float64: Predictor | None = None,
    *,
    rounding_at_scale: bool = False,
) -> Gate:
    """The gate of these sample rows (see Gate); refuses a model whose own Keras scores are NaN or infinite
    on an ordinary row (one that is neither at scale nor wholly padding). `rounding_at_scale`: --tolerance
    was not given (Gate.allowed)."""
    feeds = [samples.inputs[spec.name] for spec in graph.inputs]
    masked = fully_masked(feeds, len(keras_scores))
    flat = refuse_nonfinite(keras_scores, samples, masked)
    return Gate(
        keras=flat,
        float64=float64,
        feeds=feeds,
        floats=[spec.dtype != "int32" for spec in graph.inputs],
        at_scale=samples.at_scale,
        masked=masked,
        tolerance=tolerance,
        float32=float32,
        rounding_at_scale=rounding_at_scale,
    )


def refuse_nonfinite(keras_scores: np.ndarray, samples: SampleSet, masked: np.ndarray) -> np.ndarray:
    """Keras's scores as rows of float64 values; refused in one line when Keras itself answers NaN or
    infinity on an ordinary row (one neither at scale nor wholly padding)."""
    flat = np.asarray(keras_scores, dtype=np.float64).reshape(len(keras_scores), -1)
    broken = np.flatnonzero(~np.isfinite(flat).all(axis=1) & ~samples.at_scale & ~masked)
    if broken.size:
        raise ExportError(
            f"Keras itself answers NaN or infinity on {samples.describe(int(broken[0]))} "
            f"({broken.size} ordinary row(s)): a model whose own scores are not finite is not exported"
        )
    return flat


def fully_masked(feeds: list[np.ndarray], rows: int) -> np.ndarray:
    """Per row: some input is all padding (0), so a masked average over it sees no step (0/0)."""
    masked = np.zeros(rows, bool)
    for feed in feeds:
        masked |= ~np.asarray(feed).reshape(rows, -1).any(axis=1)
    return masked


def expectations(
    graph: ir.Graph,
    samples: SampleSet,
    keras_scores: np.ndarray,
    tolerance: float,
    float32: bool,
    float64: Predictor | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Every sample row's reference and tolerance at once (see Gate): for a caller that checks them all."""
    gate = gate_for(graph, samples, keras_scores, tolerance, float32, float64)
    rows = np.arange(len(gate.keras))
    return gate.expected(rows), gate.allowed(rows)
