"""The compile pipeline: the one place that says in which order a model is compiled and published.

    load       a Keras file → the built model and its metadata      export/passes/load.py
    front end  the model → the IR, its output kinds read once       export/passes/frontend.py
    lower      composite nodes → primitives                         export/passes/lower.py
    optimise   linear chains folded                                 export/passes/optimise.py
    check      what the target compiles, what parity would cost     export/passes/check.py
    reference  sample rows and what their scores must match         export/passes/reference.py
    emit       the target's generator writes its code               the store's `stage` (export/<target>/)
    publish    stage, verify (the gate), activate or discard        export/publish/pipeline.py

Nothing is written before `publish`. A target's command parses its options, opens its store and calls
`compile_model`; `prepare` is the passes before the store, for what writes files instead (Oracle's
scripts) and for tests and benchmarks; `to_ir` the passes from a built model to the lowered IR.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

from .frontend.model import to_graph, trace
from .frontend.outputs import output_kinds
from .ir import graph as ir
from .passes.check import check
from .passes.frontend import front_end
from .passes.load import load
from .passes.lower import lower
from .passes.optimise import optimise
from .passes.reference import reference
from .publish.pipeline import (
    ExportRequest,
    Prepared,
    Store,
    VersionRecord,
    describe_kind,
    publish,
)
from .target import Capabilities

AnyStore = TypeVar("AnyStore", bound=Store)


def prepare(request: ExportRequest, capabilities: Capabilities) -> Prepared:
    """Every pass before the store: load, front end, lower, optimise, check, reference. Writes nothing."""
    loaded = load(request)
    compiled = front_end(loaded, request, capabilities.target)
    graph = optimise(lower(compiled.graph))
    check(graph, capabilities, request.parity_seconds)
    return reference(loaded, graph, compiled.kinds, request, capabilities)


def compile_model(
    open_store: Callable[[], AnyStore],
    request: ExportRequest,
    capabilities: Capabilities,
    where: Callable[[AnyStore], str],
    target_check: Callable[[ir.Graph], None] | None = None,
    *,
    connect_first: bool = True,
) -> AnyStore:
    """Compile and publish for one database target: connect (a wrong password or host is reported in a
    second, before TensorFlow starts), `prepare` (nothing written), the target's own `target_check`, then
    publish in the store's session (its generator emits the code as the version is staged), close, and
    report. `connect_first=False` opens the store only once the model has compiled (a DuckDB file, which
    opening would create). Returns the (closed) store for what it chose."""
    store = open_store() if connect_first else None
    try:
        if store is not None and not request.quiet:
            print(f"connected to {where(store)}", flush=True)
        prepared = prepare(request, capabilities)
        say_kind(prepared)
        if target_check is not None:
            target_check(prepared.graph)
        if store is None:
            store = open_store()
        record = publish(store, request, prepared, capabilities.target)
    finally:
        if store is not None:
            store.close()
    report(record, where(store))
    return store


def to_ir(
    model: Any,
    *,
    target: str,
    classes: tuple[str, ...] = (),
    kinds: tuple[str, ...] | None = None,
    loss: Any = None,
    requested: str | None = None,
    strict: bool = False,
) -> ir.Graph:
    """A built Keras model's lowered, optimised IR (the front end, lower and optimise passes). `kinds`
    says what each output means; when not given it is read once every layer has converted: from the
    model's layers and the `loss` its file saved, or --output's `requested` kind. `strict`
    refuses an output that fits no kind; otherwise (a graph for tests and tools) it is values."""
    traced = trace(model, target=target)
    if kinds is None:
        kinds = output_kinds(model, loss, requested, strict=strict).kinds
    return optimise(lower(to_graph(traced, model, kinds, classes)))


def say_kind(prepared: Prepared) -> None:
    """The kind the export compiles for, and the one-line note when --output overrode the model's."""
    if prepared.kinds.note:
        print(f"note: {prepared.kinds.note}", file=sys.stderr)
    print(describe_kind(prepared.graph.kind, prepared.kinds.evidence))


def report(record: VersionRecord, where: str) -> None:
    """What was published where, with its parity figures."""
    print(
        f"published {record.name} version {record.version} to {where}\n"
        f"  {record.parity.summary()}\n"
        f"  sha256 {record.sha256[:16]}…  samples: {record.sample_source}"
    )
