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

from export import budget, ir, kinds, parity
from export.frontend_outputs import OutputKinds, output_kinds
from export.keras_frontend import load_model, read_metadata, to_ir
from export.model_limits import DEFAULT_LIMITS, Limits
from export.names import check_model_name
from export.samples import SampleSet, sample_inputs
from export.target import Capabilities


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
    keeps scoring. The three stores share one implementation of the steps, export/store.py's
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
    parity_seconds: float = budget.DEFAULT_SECONDS  # sample rows scored in the database: see export/budget.py
    trust_model_code: bool = False  # load a file that holds code (export/model_code.py)
    limits: Limits = DEFAULT_LIMITS
    quiet: bool = False
    output: str | None = None  # --output: the first output's kind, instead of the one read from the model
    classes: tuple[str, ...] = ()  # --classes: instead of metadata.json's


@dataclass(frozen=True)
class Prepared:
    """Everything computed before the database is touched."""

    graph: ir.Graph
    metadata: dict[str, Any]
    samples: SampleSet
    expected: np.ndarray
    # what the graph's kinds were read from (say_kind reports it)
    kinds: OutputKinds = field(default_factory=lambda: OutputKinds((), "as compiled"))


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
    samples = sample_inputs(graph, metadata, request.sample_rows)
    feeds = [samples.inputs[spec.name] for spec in graph.inputs]
    predicted = model.predict(feeds if len(feeds) > 1 else feeds[0], verbose=0)
    expected = joined(predicted)
    return Prepared(graph=graph, metadata=metadata, samples=samples, expected=expected, kinds=read)


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
        report, source = verify(store, request, prepared, target)
        parity.require(report, target)
        record = record_of(request, prepared, version, report, source)
        store.activate(record)
        if request.load_test_data:
            features, labels = load_test_split(prepared.metadata)
            store.load_test_data(request.name, features, labels)
    return record


def score_samples(
    store: Store, request: ExportRequest, prepared: Prepared, target: str
) -> tuple[np.ndarray, budget.Outcome]:
    """The staged version's scores of as many sample rows as the parity budget allows (export/budget.py)."""
    kernel = getattr(store, "kernel", "")
    return budget.score_within_budget(
        lambda start, stop: store.scores(request.name, budget.rows_of(prepared.samples.inputs, start, stop)),
        prepared.samples.rows,
        budget.Budget(seconds=request.parity_seconds),
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
        metadata=json.dumps(prepared.metadata),
        parity=report,
        sample_source=source,
        output_kind=graph.kind,
    )


def verify(
    store: Store, request: ExportRequest, prepared: Prepared, target: str
) -> tuple[parity.ParityReport, str]:
    """The staged version's `predict` against model.predict on the sample rows the parity budget allows
    (export/budget.py), then the answers of every function the kind offers against a Keras user's
    (export/parity.py) on rows spread over those: as many as the budget scored once per function (each
    function runs the network again), at most ANSWER_ROWS. Returns the report and the sample source."""
    graph, inputs = prepared.graph, prepared.samples.inputs
    actual, scored = score_samples(store, request, prepared, target)
    report = parity.compare(prepared.expected[: scored.rows], actual, request.tolerance)
    source = scored.describe(prepared.samples.source)
    several = bool(graph.outputs)
    functions = parity.questions(graph.kind, several_outputs=several)
    if not functions:
        return report, source
    count = min(ANSWER_ROWS, max(budget.MINIMUM_ROWS, scored.rows // len(functions)))
    rows = spread(scored.rows, count)
    answers = store.answers(request.name, {k: v[rows] for k, v in inputs.items()}, functions)
    checks = parity.check_answers(
        graph.kind,
        prepared.expected[rows, : graph.first_size],
        graph.classes,
        answers,
        request.tolerance,
        several_outputs=several,
    )
    numbered = [  # a disagreement named by its row in the whole sample
        replace(
            c, first_disagreement=None if c.first_disagreement is None else int(rows[c.first_disagreement])
        )
        for c in checks
    ]
    return replace(report, answers=tuple(numbered)), source


ANSWER_ROWS = 250  # sample rows whose answers (score, label, ...) are checked: each reruns the network


def spread(rows: int, most: int) -> np.ndarray:
    """Up to `most` row indices spread evenly over `rows` (all of them when they are fewer)."""
    return np.unique(np.linspace(0, rows - 1, min(rows, most)).round().astype(int))


def describe_kind(kind: str, evidence: str) -> str:
    """One line for the export report: the kind, what it was read from, and how Keras users read it."""
    functions = ", ".join(kinds.KINDS[kind].functions)
    return f"output: {kind} ({evidence}); functions: {functions}; Keras's reading: {kinds.KINDS[kind].rule}"


def load_test_split(metadata: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The test split of the data set the model was trained on (named in its metadata)."""
    import imagedata as data
    from export.errors import ExportError

    name = metadata.get("dataset")
    if not name:
        raise ExportError("--load-test-data needs metadata.json with 'dataset' beside the model")
    try:
        dataset = data.load(name)
    except data.DataUnavailable as error:
        raise ExportError(str(error)) from error
    return dataset.x_test, dataset.y_test
