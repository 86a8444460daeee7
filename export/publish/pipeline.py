"""The export pipeline shared by every database target.

load the model → IR → capability check (nothing written yet) → sample rows and TensorFlow's predictions →
then the store's lifecycle (Store): stage the new version (tensors, scoring code), verify its in-database
scores of the samples against TensorFlow's (parity), activate it (registry row, switch). A failure anywhere
discards what was staged, so the previous version keeps scoring.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from nnsql.export.errors import ExportError, ScoringFailure
from nnsql.export.frontend import float64
from nnsql.export.frontend.float64 import Predictor
from nnsql.export.frontend.model import load_model, read_metadata, to_ir
from nnsql.export.frontend.model_limits import DEFAULT_LIMITS, Limits
from nnsql.export.frontend.outputs import OutputKinds, output_kinds
from nnsql.export.ir import graph as ir
from nnsql.export.ir import kinds
from nnsql.export.names import check_model_name
from nnsql.export.publish import budget, parity
from nnsql.export.publish.samples import SampleSet, sample_inputs
from nnsql.export.target import Capabilities


@dataclass(frozen=True)
class VersionRecord:
    name: str
    version: int
    sha256: str
    input_spec: str  # JSON
    classes: str  # JSON
    source: str
    metadata: str  # JSON
    parity: parity.ParityReport
    sample_source: str
    output_kind: str = "probabilities"

    def registry_row(self) -> dict[str, object]:
        """Column → value for the registry table that every database target shares (see sql/); the
        store adds `active` in its database's spelling."""
        return {
            "name": self.name,
            "version": self.version,
            "sha256": self.sha256,
            "input_spec": self.input_spec,
            "classes": self.classes,
            "source": self.source,
            "metadata": self.metadata,
            "parity_rows": self.parity.rows,
            "parity_max_abs_diff": self.parity.max_abs_diff,
            "parity_argmax_agreement": self.parity.agreement,
            "parity_tolerance": self.parity.tolerance,
            "parity_sample_source": self.sample_source,
            "output_kind": self.output_kind,
        }


class Store(Protocol):
    """A database target's steps of the export lifecycle, which `publish` runs in this order inside
    `session()` (the registry ready, one export at a time): `next_version`; `stage` writes the new version
    beside the active one; `register` writes its registry row, inactive; `scores` (what `predict` returns)
    and `answers` (what the functions users query return) are what the verify step compares with
    TensorFlow; `activate` completes the registry row and switches. Leaving the session by an exception
    discards what was staged: PostgreSQL and DuckDB roll their one transaction back, Oracle (whose DDL
    commits) drops the staged version's package and rows (`discard`). Either way the previous version
    keeps scoring. The three stores share one implementation of the steps, export/publish/store.py's
    RegistryStore."""

    def session(self) -> AbstractContextManager[None]: ...
    def next_version(self, name: str) -> int: ...
    def stage(self, name: str, version: int, graph: ir.Graph) -> None: ...
    def register(self, record: VersionRecord) -> None: ...
    def scores(self, name: str, inputs: dict[str, np.ndarray]) -> np.ndarray: ...
    def answers(
        self, name: str, inputs: dict[str, np.ndarray], functions: tuple[str, ...]
    ) -> dict[str, list]: ...
    def activate(self, record: VersionRecord) -> None: ...
    def load_test_data(self, name: str, features: np.ndarray, labels: np.ndarray) -> None: ...
    def close(self) -> None: ...

    progress: bool


@dataclass(frozen=True)
class ExportRequest:
    model_path: Path
    name: str
    sample_rows: int = 1000
    tolerance: float = parity.DEFAULT_TOLERANCE
    load_test_data: bool = False
    samples_file: Path | None = None  # the user's own sample rows (--samples)
    parity_seconds: float = (
        budget.DEFAULT_SECONDS
    )  # sample rows scored in the database: see export/publish/budget.py
    trust_model_code: bool = False  # load a file that holds code (export/frontend/model_code.py)
    limits: Limits = DEFAULT_LIMITS
    quiet: bool = False
    output: str | None = None  # --output: the first output's kind, instead of the one read from the model
    classes: tuple[str, ...] = ()  # --classes: instead of metadata.json's


# A float32 target's values may be this many times as far from Keras in float64 as float32 rounding of the
# row's inputs moves them (the largest of three seeded draws); measured on a classifier of raw momenta, 6,000
# rows near p = 0.5: float32 sums in another order reach 7 times it, Keras 12 times.
FLOAT32_ROUNDING = 16.0
ROUNDING = 2.0**-23  # float32's relative spacing at 1
# ... but never more than this times max(1, |value|): a gap beyond it is not rounding (a wrong weight moves
# values by 1e-2 or more), whatever the measurement says.
FLOAT32_CAP = 1e-3


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
    masked: np.ndarray  # per row: every input value is padding (0), so every step is masked
    tolerance: float
    float32: bool
    cache: dict[int, np.ndarray] = field(default_factory=dict)

    def exact(self, rows: np.ndarray) -> np.ndarray:
        """Keras in float64 on `rows`, each computed once."""
        missing = np.array([row for row in rows if int(row) not in self.cache], dtype=int)
        if missing.size and self.float64 is not None:
            computed = self.float64([feed[missing] for feed in self.feeds])
            self.cache.update({int(row): values for row, values in zip(missing, computed, strict=True)})
        elif missing.size:
            self.cache.update({int(row): self.keras[row].astype(np.float64) for row in missing})
        return np.array([self.cache[int(row)] for row in rows]).reshape(len(rows), -1)

    def in_float64(self, rows: np.ndarray) -> np.ndarray:
        return self.at_scale[rows] | (not self.float32)

    def expected(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=int)
        values = self.keras[rows].astype(np.float64).reshape(len(rows), -1)
        chosen = np.flatnonzero(self.in_float64(rows))
        if chosen.size:
            values[chosen] = self.exact(rows[chosen])
        return values

    def allowed(self, rows: np.ndarray) -> np.ndarray:
        """Each row's tolerance: `tolerance`, or ∞ for a row at scale beyond Keras's range."""
        rows = np.asarray(rows, dtype=int)
        allowed = np.full(len(rows), self.tolerance)
        scaled = np.flatnonzero(self.at_scale[rows])
        if scaled.size:
            finite = np.isfinite(self.exact(rows[scaled])).all(axis=1)
            finite &= np.isfinite(self.keras[rows[scaled]].reshape(len(scaled), -1)).all(axis=1)
            allowed[scaled[~finite]] = np.inf
        return allowed

    def float32_bound(self, row: int) -> float:
        """How far float32 rounding may move the row's values from what they are compared with:
        FLOAT32_ROUNDING times how far Keras's float64 values move when the row's float inputs move by
        float32's relative rounding, capped at FLOAT32_CAP times max(1, |value|), for the value that moves
        most; twice that where the row is compared with float32 Keras (both sides round)."""
        if self.float64 is None:
            return 0.0
        generator = np.random.default_rng(row)
        exact = self.exact(np.array([row]))[0]
        moved = np.zeros_like(exact)
        for _ in range(3):
            nearby = [
                feed[row : row + 1] * (1 + ROUNDING * generator.uniform(-1, 1, feed[row : row + 1].shape))
                if floating
                else feed[row : row + 1]
                for feed, floating in zip(self.feeds, self.floats, strict=True)
            ]
            with np.errstate(all="ignore"):
                shifted = np.nan_to_num(np.abs(self.float64(nearby)[0] - exact), nan=0.0)
            moved = np.maximum(moved, shifted)
        cap = FLOAT32_CAP * np.maximum(1.0, np.nan_to_num(np.abs(exact), nan=1.0))
        sides = 1.0 if self.in_float64(np.array([row]))[0] else 2.0
        return sides * float(np.minimum(FLOAT32_ROUNDING * moved, cap).max(initial=0.0))


def gate_for(
    graph: ir.Graph,
    samples: SampleSet,
    keras_scores: np.ndarray,
    tolerance: float,
    float32: bool,
    float64: Predictor | None = None,
) -> Gate:
    """The gate of these sample rows (see Gate); refuses a model whose own Keras scores are NaN or infinite
    on an ordinary row (one that is neither at scale nor wholly padding)."""
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
    """Per row: every value of every input is 0 (padding), so a masked model sees no step at all."""
    masked = np.ones(rows, bool)
    for feed in feeds:
        masked &= ~np.asarray(feed).reshape(rows, -1).any(axis=1)
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


@dataclass(frozen=True)
class Prepared:
    """Everything computed before the database is touched: the sample rows and their gate (what each is
    compared with, computed for the rows the parity budget scores)."""

    graph: ir.Graph
    metadata: dict[str, Any]
    samples: SampleSet
    gate: Gate
    # what the graph's kinds were read from (say_kind reports it)
    kinds: OutputKinds = field(default_factory=lambda: OutputKinds((), "as compiled"))

    @property
    def expected(self) -> np.ndarray:
        """Every row's reference (for a target that checks rows of its own choosing)."""
        return self.gate.expected(np.arange(self.samples.rows))

    @property
    def allowed(self) -> np.ndarray:
        """Every row's largest bound (a target checking one bound per row: Oracle's check_row)."""
        rows = np.arange(self.samples.rows)
        reference = np.nan_to_num(np.abs(self.expected), nan=0.0, posinf=0.0)
        return self.gate.allowed(rows) * np.maximum(1.0, reference.max(axis=1, initial=0.0))


def prepare(request: ExportRequest, capabilities: Capabilities) -> Prepared:
    """Validate, compile to IR and compute TensorFlow's reference scores. Writes nothing."""
    check_model_name(request.name)
    model = load_model(request.model_path, trust_code=request.trust_model_code, limits=request.limits)
    metadata = read_metadata(request.model_path)
    classes = request.classes or tuple(metadata.get("classes", ()))
    graph = to_ir(
        model,
        target=capabilities.target,
        classes=classes,
        path=request.model_path,
        requested=request.output,
        strict=True,
    )
    read = output_kinds(model, request.model_path, request.output)  # what the kinds were read from
    capabilities.check(graph)
    samples = sample_inputs(graph, metadata, request.sample_rows, request.samples_file)
    feeds = [samples.inputs[spec.name] for spec in graph.inputs]
    predicted = joined(model.predict(feeds if len(feeds) > 1 else feeds[0], verbose=0))
    gate = gate_for(
        graph, samples, predicted, request.tolerance, capabilities.float32, float64.predictor(model)
    )
    return Prepared(graph=graph, metadata=metadata, samples=samples, gate=gate, kinds=read)


def joined(predicted: Any) -> np.ndarray:
    """Keras's predictions, several outputs joined row by row as the graph joins them."""
    if isinstance(predicted, list | tuple):
        return np.concatenate([np.asarray(p).reshape(len(p), -1) for p in predicted], axis=1)
    return np.asarray(predicted)


def input_spec_json(graph: ir.Graph) -> str:
    return json.dumps([{"name": s.name, "shape": list(s.shape), "dtype": s.dtype} for s in graph.inputs])


def publish(store: Store, request: ExportRequest, prepared: Prepared, target: str) -> VersionRecord:
    """Stage a new version, verify its scores, activate it; or raise, discarding it, with the old one
    still active (see Store)."""
    graph = prepared.graph
    with store.session():
        version = store.next_version(request.name)
        store.stage(request.name, version, graph)
        unverified = parity.ParityReport(rows=0, max_abs_diff=0.0, tolerance=request.tolerance)
        store.register(record_of(request, prepared, version, unverified, prepared.samples.source))
        try:
            report, source = verify(store, request, prepared, target)
        except ScoringFailure as failure:
            raise ExportError(
                f"{target} raised on {prepared.samples.describe(failure.row)} in {failure.function}: "
                f"{failure.reason}; version not published"
            ) from None
        gate = prepared.gate
        bound = gate.float32_bound if gate.float32 else None
        parity.require(report, target, bound, prepared.samples.describe)
        record = record_of(request, prepared, version, report, source)
        store.activate(record)
        if request.load_test_data:
            features, labels = load_test_split(prepared.metadata)
            store.load_test_data(request.name, features, labels)
    return record


def score_samples(
    store: Store, request: ExportRequest, prepared: Prepared, target: str, seconds: float | None = None
) -> tuple[np.ndarray, budget.Outcome]:
    """The staged version's scores of as many sample rows as `seconds` (default: the whole parity budget)
    allow (export/publish/budget.py). A ScoringFailure names its row in the whole sample set, not in the
    batch that raised."""
    kernel = getattr(store, "kernel", "")

    def score_rows(start: int, stop: int) -> np.ndarray:
        try:
            return store.scores(request.name, budget.rows_of(prepared.samples.inputs, start, stop))
        except ScoringFailure as failure:
            raise ScoringFailure(failure.row + start, failure.function, failure.reason) from None

    return budget.score_within_budget(
        score_rows,
        prepared.samples.rows,
        budget.Budget(
            seconds=request.parity_seconds if seconds is None else seconds, whole=request.parity_seconds
        ),
        where=f"{target} ({kernel})" if kernel else target,
        progress=store.progress,
    )


def record_of(
    request: ExportRequest, prepared: Prepared, version: int, report: parity.ParityReport, source: str
) -> VersionRecord:
    graph = prepared.graph
    return VersionRecord(
        name=request.name,
        version=version,
        sha256=graph.sha256(),
        input_spec=input_spec_json(graph),
        classes=json.dumps(list(graph.classes)),
        source=str(request.model_path),
        metadata=json.dumps({**prepared.metadata, "parity_bounds": report.bounds()}),
        parity=report,
        sample_source=source,
        output_kind=graph.kind,
    )


def verify(
    store: Store, request: ExportRequest, prepared: Prepared, target: str
) -> tuple[parity.ParityReport, str]:
    """The staged version's `predict` against Keras on the sample rows the parity budget allows
    (export/publish/budget.py), then the answers of every function the kind offers against a Keras user's
    (export/publish/parity.py) on rows spread over those (`answer_rows`: each function runs the network
    again). The two halves share the parity budget: each gets half of it when the kind has answers to
    check. Keras's reference is computed for those rows only (Gate). Returns the report and the sample
    source."""
    graph, inputs, gate = prepared.graph, prepared.samples.inputs, prepared.gate
    several = bool(graph.outputs)
    functions = parity.questions(graph.kind, several_outputs=several)
    share = request.parity_seconds / 2 if functions else request.parity_seconds
    actual, scored = score_samples(store, request, prepared, target, share)
    checked = np.arange(scored.rows)
    report = parity.compare(
        gate.expected(checked),
        actual,
        request.tolerance,
        gate.allowed(checked),
        masked=gate.masked[checked],
        outputs=output_columns(graph),
    )
    source = scored.describe(prepared.samples.source)
    if not functions:
        return report, source
    count = answer_rows(scored, share, len(functions))
    rows = spread(scored.rows, count)
    try:
        answers = store.answers(request.name, {k: v[rows] for k, v in inputs.items()}, functions)
    except ScoringFailure as failure:  # named by its row in the whole sample
        raise ScoringFailure(int(rows[failure.row]), failure.function, failure.reason) from None
    checks = parity.check_answers(
        graph.kind,
        gate.expected(rows)[:, : graph.first_size],
        graph.classes,
        answers,
        request.tolerance,
        several_outputs=several,
        allowed=gate.allowed(rows),
    )
    numbered = [  # a disagreement named by its row in the whole sample
        replace(
            c, first_disagreement=None if c.first_disagreement is None else int(rows[c.first_disagreement])
        )
        for c in checks
    ]
    return replace(report, answers=tuple(numbered)), source


def output_columns(graph: ir.Graph) -> tuple[tuple[str, int, int], ...]:
    """Each output's name and columns in a joined row (one output: all of them, named by its kind)."""
    if graph.outputs:
        return tuple((output.name, output.start, output.stop) for output in graph.outputs)
    return ((graph.kind, 0, graph.first_size),)


ANSWER_ROWS = 250  # sample rows whose answers (score, label, ...) are checked: each reruns the network
# rows each function is checked on whatever they cost (spread: ordinary rows and rows at scale)
ANSWER_MINIMUM = 4


def answer_rows(scored: budget.Outcome, seconds: float, functions: int) -> int:
    """How many rows the answers are checked on: no more than `seconds` allow at the cost of a row that
    scoring measured, once per function, nor than cost what scoring cost (a third of its rows for three
    functions), between ANSWER_MINIMUM and ANSWER_ROWS, and never more rows than were scored."""
    per_row = scored.seconds / max(scored.rows, 1)
    affordable = int(seconds / (per_row * functions)) if per_row > 0 else ANSWER_ROWS
    return min(ANSWER_ROWS, scored.rows, max(ANSWER_MINIMUM, min(affordable, scored.rows // functions)))


def spread(rows: int, most: int) -> np.ndarray:
    """Up to `most` row indices spread evenly over `rows` (all of them when they are fewer)."""
    return np.unique(np.linspace(0, rows - 1, min(rows, most)).round().astype(int))


def describe_kind(kind: str, evidence: str) -> str:
    """One line for the export report: the kind, what it was read from, and how Keras users read it."""
    functions = ", ".join(kinds.KINDS[kind].functions)
    return f"output: {kind} ({evidence}); functions: {functions}; Keras's reading: {kinds.KINDS[kind].rule}"


def load_test_split(metadata: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The test split of the data set the model was trained on (named in its metadata)."""
    import nnsql.imagedata as data

    name = metadata.get("dataset")
    if not name:
        raise ExportError("--load-test-data needs metadata.json with 'dataset' beside the model")
    try:
        dataset = data.load(name)
    except data.DataUnavailable as error:
        raise ExportError(str(error)) from error
    return dataset.x_test, dataset.y_test
