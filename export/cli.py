"""Command-line plumbing shared by `python -m export.<target>`: common options, the request they make, and
error handling. Compiling is export/compile.py's."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from .errors import ExportError
from .frontend.model import check_labels
from .frontend.model_file import first_line
from .frontend.model_limits import DEFAULT_MAX_ACTIVATIONS, DEFAULT_MAX_PARAMETERS, Limits
from .ir import graph as ir
from .publish import budget, parity
from .publish.pipeline import ExportRequest


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (the usage is in --help), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {self.prog}: {message} (see --help)\n")


def whole_number(minimum: int) -> Callable[[str], int]:
    """An option's type: an integer of at least `minimum`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def finite_number(*, above: float | None = None, minimum: float | None = None) -> Callable[[str], float]:
    """An option's type: a finite float, more than `above` or at least `minimum`."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        if above is not None and not value > above:
            raise argparse.ArgumentTypeError(f"must be more than {above:g}, got {value:g}")
        if minimum is not None and not value >= minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum:g}, got {value:g}")
        return value

    return parse


def parser(target: str, description: str, example: str, next_step: str) -> argparse.ArgumentParser:
    result = OneLineParser(
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
        type=whole_number(1),
        default=1000,
        help="sample rows to verify parity on (default 1000); fewer where scoring them would take longer "
        f"than --parity-seconds, never fewer than {budget.MINIMUM_ROWS}",
    )
    result.add_argument(
        "--parity-seconds",
        type=finite_number(above=0),
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
        type=finite_number(minimum=0),
        help="each value's bound against Keras: this where |value| <= 1, this x |value| beyond "
        "(default 1e-5, float32 targets' rows at scale within their float32 bound); when given, an "
        "upper bound on every row of every target, float32 ones included (docs/numerics.md)",
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
    if target != "onnx":  # ONNX keeps a variable length variable
        result.add_argument(
            "--sequence-length",
            type=int,
            metavar="N",
            help="the steps an input of variable length ((None,) token ids, (None, features)) is compiled "
            "at (default: the longest sequence in --samples); longer inputs are refused (docs/limits.md)",
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
        "--as-float32",
        action="store_true",
        help="export a model trained in mixed precision (layers computing in float16 or bfloat16) as "
        "the same network computing in float32, checked against Keras so; its answers then differ from its "
        "own model.predict by that rounding (docs/limits.md); without it, such a model is refused",
    )
    model_file.add_argument(
        "--max-parameters",
        type=whole_number(1),
        default=DEFAULT_MAX_PARAMETERS,
        metavar="N",
        help=f"refuse a model that declares or stores more weights (default {DEFAULT_MAX_PARAMETERS:,})",
    )
    model_file.add_argument(
        "--max-activations",
        type=whole_number(1),
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
        tolerance=parity.DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance,
        tolerance_asked=args.tolerance is not None,
        load_test_data=args.load_test_data,
        samples_file=args.samples,
        parity_seconds=args.parity_seconds,
        trust_model_code=args.trust_model_code,
        as_float32=args.as_float32,
        quiet=args.quiet,
        limits=limits_from(args),
        output=args.output,
        classes=classes,
        sequence_length=getattr(args, "sequence_length", None),
    )


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
    except Exception as error:
        if not interrupted_query(error):
            raise
        stopped = f"interrupted: the database stopped the query ({first_line(error)})"
        print(f"{stopped}; nothing was published", file=sys.stderr)
        return 130


def interrupted_query(error: Exception) -> bool:
    """A database driver's error for a query stopped by an interrupt (Ctrl-C reaches DuckDB as its
    InterruptException, PostgreSQL as QueryCanceled), which is no bug of the exporter's."""
    import duckdb
    import psycopg

    return isinstance(error, duckdb.InterruptException | psycopg.errors.QueryCanceled) or (
        isinstance(error, RuntimeError) and "interrupted" in str(error).lower()
    )
