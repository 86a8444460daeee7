"""`nnsql export duckdb`: compile a Keras model into a DuckDB file."""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

from nnsql import quiet
from nnsql.export import cli
from nnsql.export.compile import compile_model
from nnsql.export.duckdb.generator import CAPABILITIES

DESCRIPTION = """\
Compile a trained Keras model into a DuckDB database file. Weights go into nnsql.tensors; scoring
runs inside DuckDB as macros in the schema NAME, usable from any DuckDB client with no Python loaded:

  SELECT NAME.score(features) FROM t;          -- predicted class index (one sigmoid unit: p > 0.5)
  SELECT NAME.predict_proba(features) FROM t;  -- class probabilities
  SELECT NAME.label(features) FROM t;          -- predicted class label
  SELECT NAME.predict(features) FROM t;        -- what model.predict returns (a regression's values)

What the output means (probabilities, binary, multilabel, logits, values) is read from the model and
printed; --output chooses it instead (docs/output-kinds.md).

Each export adds a version (see nnsql.models), checks parity against TensorFlow on sample rows, and
switches to it in one transaction; a failed export leaves the previous version scoring."""


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser(
        "duckdb",
        DESCRIPTION,
        "nnsql export duckdb --model models/mnist/model.keras --db mnist.duckdb --name mnist",
        "SELECT mnist.score(features), mnist.label(features) FROM your_table   "
        "(any DuckDB client on mnist.duckdb; docs/duckdb.md)",
    )
    parser.add_argument("--db", required=True, type=Path, help="DuckDB file (created if missing)")
    args = parser.parse_args(argv)

    def body() -> int:
        from nnsql.export.duckdb.store import DuckDBStore, check_file_name
        from nnsql.export.duckdb.trust import exposure_warning
        from nnsql.text import printable

        request = cli.request_from(args)
        check_file_name(args.db, args.name)
        warning = exposure_warning(args.db)
        if warning is not None:
            print(printable(warning), file=sys.stderr)
        open_store = partial(DuckDBStore, args.db, progress=not args.quiet)
        compile_model(open_store, request, CAPABILITIES, lambda _: str(args.db), connect_first=False)
        return 0

    return cli.run(body)


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
