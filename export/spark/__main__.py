"""`nnsql export spark`: compile a Keras model into SQL functions of a Spark catalog."""

from __future__ import annotations

import sys
from pathlib import Path

from nnsql import quiet
from nnsql.export import cli
from nnsql.export.compile import compile_model
from nnsql.export.spark.generator import CAPABILITIES
from nnsql.export.spark.session import DEFAULT_WAREHOUSE, Where

DESCRIPTION = """\
Compile a trained Keras model into SQL functions of a Spark catalog, in the database NAME. Scoring is
pure Spark SQL (no Python UDF, no jar), callable from spark-sql, PySpark, Scala or Spark Connect:

  SELECT NAME.score(features) FROM t;          -- predicted class index
  SELECT NAME.predict_proba(features) FROM t;  -- class probabilities
  SELECT NAME.label(features) FROM t;          -- predicted class label
  SELECT NAME.predict(features) FROM t;        -- what model.predict returns

A sequence input ((steps, features)) is an ARRAY<ARRAY<DOUBLE>>, one array per step; any other input a
flat ARRAY<DOUBLE> in row-major order. Each export adds a version, scores sample rows in Spark and
compares them with Keras; only then do the public functions switch to it (docs/spark.md)."""


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser(
        "spark",
        DESCRIPTION,
        "nnsql export spark --model models/higgs/model.keras --name higgs --warehouse ./spark-warehouse",
        "SELECT higgs.label(gru_input, hlf_input) FROM events   (a Spark session with the settings the "
        "export prints; docs/spark.md)",
    )
    parser.add_argument(
        "--warehouse",
        type=Path,
        default=DEFAULT_WAREHOUSE,
        help="local catalog folder: tables and the metastore (default ./spark-warehouse)",
    )
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument(
        "--remote", metavar="sc://HOST:PORT", help="a Spark Connect server instead of a master"
    )
    args = parser.parse_args(argv)

    def body() -> int:
        from nnsql.export.spark import session
        from nnsql.export.spark.store import SparkStore

        where = Where(args.warehouse, args.master, args.remote)
        request = cli.request_from(args)

        def open_store() -> SparkStore:
            owned = not session.running()  # a session the caller started stays theirs
            return SparkStore(session.start(where), progress=not args.quiet, owned=owned)

        # Spark starts once the model has compiled: a refused layer starts no JVM and writes no warehouse.
        compile_model(open_store, request, CAPABILITIES, lambda _: where.describe(), connect_first=False)
        print("a fresh session calls the functions with:")
        for line in where.command_lines(args.name):
            print(f"  {line}")
        return 0

    return cli.run(body)


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
