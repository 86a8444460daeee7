"""Command-line plumbing shared by `python -m export.<target>`: common options and error handling."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from nnsql.export.errors import ExportError
from nnsql.export.frontend.model import check_labels
from nnsql.export.frontend.model_limits import DEFAULT_MAX_ACTIVATIONS, DEFAULT_MAX_PARAMETERS, Limits
from nnsql.export.ir import graph as ir
from nnsql.export.publish import budget, parity
from nnsql.export.publish.pipeline import (
    ExportRequest,
    Prepared,
    Store,
    VersionRecord,
    describe_kind,
    prepare,
    publish,
)
from nnsql.export.target import Capabilities

AnyStore = TypeVar("AnyStore", bound=Store)


def parser(target: str, description: str, example: str, next_step: str) -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(
        prog=f"nnsql export {target}",
        description=description,
        epilog=f"example:\n  {example}\nnext step:\n  {next_step}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    result.add_argument(
        "--model", required=True, type=Path, help="trained Keras model: .keras, .h5 or SavedModel directory"
    )
    result.add_argument(
        "--name", required=True, help="model name: database schema or package, repository folder"
    )
    result.add_argument(
        "--load-test-data",
        action="store_true",
        help="also write the test images and labels of the model's data set into <name>.testdata",
    )
    result.add_argument(
        "--sample-rows",
        type=int,
        default=1000,
        help="sample rows to verify parity on (default 1000); fewer where scoring them would take longer "
        f"than --parity-seconds, never fewer than {budget.MINIMUM_ROWS}",
    )
    result.add_argument(
        "--parity-seconds",
        type=float,
        default=budget.DEFAULT_SECONDS,
        help="time budget of the parity check (default %(default)g): a first batch of rows is timed and the "
        "rest sized to it",
    )
    result.add_argument(
        "--samples",
        type=Path,
        metavar="FILE",
        help="your own sample rows for the parity check: FILE.npy (rows x input shape) or FILE.npz "
        "(an array per input name), at the scale your data arrives (docs/numerics.md)",
    )
    result.add_argument(
        "--tolerance",
        type=float,
        default=parity.DEFAULT_TOLERANCE,
        help="each value's bound against Keras: this where |value| <= 1, this x |value| beyond "
        "(default 1e-5); an upper bound on every target, float32 ones included (docs/numerics.md)",
    )
    result.add_argument(
        "--output",
        choices=ir.OUTPUT_KINDS,
        help="what the (first) output means, instead of what the model says (its last activation and "
        "loss): probabilities (softmax), binary (one sigmoid unit), multilabel (independent sigmoids), "
        "logits, values (regression); see docs/output-kinds.md",
    )
    result.add_argument(
        "--classes",
        nargs="+",
        metavar="LABEL",
        help="class labels, in output order (binary: the labels of 0 and 1); default: metadata.json's",
    )
    result.add_argument("--quiet", action="store_true", help="no progress bars")
    model_file = result.add_argument_group("model files from others (see docs/security.md)")
    model_file.add_argument(
        "--trust-model-code",
        action="store_true",
        help="load a model whose file holds code (a Lambda layer, a custom object); without it, such a "
        "file is refused before anything in it runs",
    )
    model_file.add_argument(
        "--max-parameters",
        type=int,
        default=DEFAULT_MAX_PARAMETERS,
        metavar="N",
        help=f"refuse a model that declares or stores more weights (default {DEFAULT_MAX_PARAMETERS:,})",
    )
    model_file.add_argument(
        "--max-activations",
        type=int,
        default=DEFAULT_MAX_ACTIVATIONS,
        metavar="N",
        help="refuse a model with a layer that outputs more values per row "
        f"(default {DEFAULT_MAX_ACTIVATIONS:,})",
    )
    return result


def limits_from(args: argparse.Namespace) -> Limits:
    if args.max_parameters < 1 or args.max_activations < 1:
        raise ExportError("--max-parameters and --max-activations must be at least 1")
    return Limits(max_parameters=args.max_parameters, max_activations=args.max_activations)


def request_from(args: argparse.Namespace) -> ExportRequest:
    if args.sample_rows < 1:
        raise ExportError("--sample-rows must be at least 1")
    if not args.parity_seconds > 0:
        raise ExportError("--parity-seconds must be more than 0")
    classes = tuple(check_labels(args.classes)) if args.classes else ()
    return ExportRequest(
        model_path=args.model,
        name=args.name,
        sample_rows=args.sample_rows,
        tolerance=args.tolerance,
        load_test_data=args.load_test_data,
        samples_file=args.samples,
        parity_seconds=args.parity_seconds,
        trust_model_code=args.trust_model_code,
        quiet=args.quiet,
        limits=limits_from(args),
        output=args.output,
        classes=classes,
    )


def say_kind(prepared: Prepared) -> None:
    """The kind the export compiles for, and the one-line note when --output overrode the model's."""
    if prepared.kinds.note:
        print(f"note: {prepared.kinds.note}", file=sys.stderr)
    print(describe_kind(prepared.graph.kind, prepared.kinds.evidence))


def report(record: VersionRecord, where: str) -> None:
    print(
        f"published {record.name} version {record.version} to {where}\n"
        f"  {record.parity.summary()}\n"
        f"  sha256 {record.sha256[:16]}…  samples: {record.sample_source}"
    )


def export_to(
    open_store: Callable[[], AnyStore],
    request: ExportRequest,
    capabilities: Capabilities,
    where: Callable[[AnyStore], str],
    check: Callable[[ir.Graph], None] | None = None,
    *,
    connect_first: bool = True,
) -> AnyStore:
    """The flow every database target shares: connect (a wrong password or host is reported in a second,
    before TensorFlow starts), compile and check (nothing written), publish in the store's transaction,
    close, and report. `connect_first=False` opens the store only once the model has compiled (a DuckDB
    file, which opening would create). Returns the (closed) store for what it chose."""
    store = open_store() if connect_first else None
    try:
        if store is not None and not request.quiet:
            print(f"connected to {where(store)}", flush=True)
        prepared = prepare(request, capabilities)
        say_kind(prepared)
        if check is not None:
            check(prepared.graph)
        if store is None:
            store = open_store()
        record = publish(store, request, prepared, capabilities.target)
    finally:
        if store is not None:
            store.close()
    report(record, where(store))
    return store


def run(main: Callable[[], int]) -> int:
    """Run a CLI body: user errors become one line on stderr and exit status 2."""
    try:
        return main()
    except ExportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: nothing was published", file=sys.stderr)
        return 130
