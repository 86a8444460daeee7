"""The publish step every target shares, the last pass of the compile pipeline (export/compile.py). What it
works on (the request, the prepared check, the store's steps, the version record) is
export/publish/version.py, and imported from here too.

The store's lifecycle (Store): stage the new version (tensors and scoring code, or ONNX's model file),
verify its scores of the samples against TensorFlow's (parity), activate it (registry row or repository
document, switch). A failure anywhere discards what was staged, so the previous version keeps scoring.
The SQL targets publish their IR (`ir.Graph`); ONNX, which converts the Keras model itself, publishes
what its scores mean (`Signature`), read from the IR when the IR reads the model.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import ExportError, ScoringFailure
from ..ir import graph as ir
from ..ir import kinds
from ..registry.carry import carried_classes
from ..registry.checks import STORED_ROWS, StoredCheck, stored_check
from . import budget, parity
from .version import Checked as Checked
from .version import ExportRequest as ExportRequest
from .version import Model
from .version import Prepared as Prepared
from .version import Signature as Signature
from .version import Store as Store
from .version import VersionRecord as VersionRecord
from .version import Versions as Versions


def joined(predicted: Any) -> np.ndarray:
    """Keras's predictions, several outputs joined row by row as the graph joins them."""
    if isinstance(predicted, list | tuple):
        return np.concatenate([np.asarray(p).reshape(len(p), -1) for p in predicted], axis=1)
    return np.asarray(predicted)


def input_spec_json(graph: Signature) -> str:
    return json.dumps([{"name": s.name, "shape": list(s.shape), "dtype": s.dtype} for s in graph.inputs])


def publish(
    store: Versions[Model], request: ExportRequest, prepared: Checked[Model], target: str
) -> VersionRecord:
    """Stage a new version, verify its scores, activate it; or raise, discarding it, with the old one
    still active (see Store)."""
    with store.session():
        version = store.next_version(request.name)
        prepared = kept_classes(store, request, prepared)
        store.stage(request.name, version, prepared.graph)
        unverified = parity.ParityReport(rows=0, max_abs_diff=0.0, tolerance=request.tolerance)
        store.register(record_of(request, prepared, version, unverified, prepared.samples.source))
        for samples, gate in prepared.also:
            passed(store, request, replace(prepared, samples=samples, gate=gate, also=()), target)
        report, source = passed(store, request, prepared, target)
        record = record_of(request, prepared, version, report, source)
        store.activate(record)
        store.keep(record, kept_check(request, prepared, report))
        if request.load_test_data:
            features, labels = load_test_split(prepared.metadata)
            store.load_test_data(request.name, features, labels)
    return record


def passed(
    store: Versions[Model], request: ExportRequest, prepared: Checked[Model], target: str
) -> tuple[parity.ParityReport, str]:
    """The staged version verified on the prepared sample rows (`verify`), or refused in one line."""
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
    return report, source


def kept_classes(store: Versions[Model], request: ExportRequest, prepared: Checked[Model]) -> Checked[Model]:
    """The prepared version with the active version's class names when none were given (--classes,
    metadata.json) and its output has as many classes (export/registry/carry.py)."""
    if request.classes or prepared.metadata.get("classes"):
        return prepared
    graph = prepared.graph
    classes = carried_classes(graph.kind, graph.first_size, (), store.active_classes(request.name))
    if classes == graph.classes:
        return prepared
    return replace(prepared, graph=replace(graph, classes=classes))


def kept_check(request: ExportRequest, prepared: Checked[Model], report: parity.ParityReport) -> StoredCheck:
    """A few of the rows the gate compared, with what they were compared with and each row's tolerance
    (bounded per value as the gate bounds it): the check that activating this version later runs again
    (export/registry/checks.py). Keras's references are computed for those rows alone."""
    graph = prepared.graph
    rows = spread(report.rows, 2 * STORED_ROWS)
    inputs = {name: values[rows] for name, values in prepared.samples.inputs.items()}
    meaning = (graph.kind, graph.classes, graph.first_size, bool(graph.outputs))
    gate = prepared.gate
    return stored_check(inputs, gate.expected(rows), gate.allowed(rows), len(rows), meaning)


def score_samples(
    store: Versions[Model],
    request: ExportRequest,
    prepared: Checked[Model],
    target: str,
    seconds: float | None = None,
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
            seconds=request.parity_seconds if seconds is None else seconds,
            whole=request.parity_seconds,
            estimate=row_seconds(prepared.graph, f"{target}+{kernel}" if kernel else target),
        ),
        where=f"{target} ({kernel})" if kernel else target,
        progress=store.progress,
    )


def row_seconds(graph: Signature, target: str) -> float | None:
    """A row's seconds in `target` as the IR's cost predicts them; None without an IR or a measured rate."""
    return budget.row_seconds(graph, target) if isinstance(graph, ir.Graph) else None


def record_of(
    request: ExportRequest, prepared: Checked[Model], version: int, report: parity.ParityReport, source: str
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
    store: Versions[Model], request: ExportRequest, prepared: Checked[Model], target: str
) -> tuple[parity.ParityReport, str]:
    """The staged version's `predict` against Keras on the sample rows the parity budget allows
    (export/publish/budget.py), then the answers of every function the kind offers against a Keras user's
    (export/publish/parity.py) on rows spread over those (`answer_rows`: each function runs the network
    again). The two halves share the parity budget: each gets half of it when the kind has answers to
    check. Keras's reference is computed for those rows only (Gate). Returns the report and the sample
    source. A store whose answers are read from the scores it returns (`answers_from_scores`: ONNX's
    scorer answers from the first output) gives every scored row's answers at no further cost: then
    scoring has the whole budget and the answers are checked on every scored row."""
    graph, inputs, gate = prepared.graph, prepared.samples.inputs, prepared.gate
    several = bool(graph.outputs)
    functions = parity.questions(graph.kind, several_outputs=several)
    free = bool(getattr(store, "answers_from_scores", False))
    share = request.parity_seconds / 2 if functions and not free else request.parity_seconds
    actual, scored = score_samples(store, request, prepared, target, share)
    checked = np.arange(scored.rows)
    allowed = gate.allowed(checked)
    report = parity.compare(
        gate.expected(checked),
        actual,
        request.tolerance,
        allowed,
        masked=gate.masked[checked],
        outputs=reported_columns(graph),
    )
    if (allowed[np.isfinite(allowed)] > request.tolerance).any():  # the tolerance printed is the one applied
        report = replace(report, rule=f"{parity.RULE}; {parity.AT_SCALE}")
    source = scored.describe(prepared.samples.source)
    if not functions:
        return report, source
    count = scored.rows if free else answer_rows(scored, share, len(functions))
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


def reported_columns(graph: Signature) -> tuple[tuple[str, int, int], ...]:
    """The outputs the parity report gives figures for: the IR's (`output_columns`); a model the IR does
    not read is reported as one output, all of its joined row."""
    return output_columns(graph) if isinstance(graph, ir.Graph) else ()


def output_columns(graph: Signature) -> tuple[tuple[str, int, int], ...]:
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
