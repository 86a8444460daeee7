"""`nnsql export oracle`: compile a Keras model into Oracle PL/SQL (live, or as reviewable scripts)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nnsql import quiet
from nnsql.export import cli, connection
from nnsql.export.compile import compile_model, prepare, say_kind
from nnsql.export.errors import ExportError
from nnsql.export.oracle.generator import CAPABILITIES, check_oracle_name, check_weights_finite
from nnsql.export.publish.pipeline import ExportRequest, load_test_split

DESCRIPTION = """\
Compile a trained Keras model into Oracle (19c to 23ai). Weights go into nnsql_tensors as
UTL_NLA_ARRAY_FLT varrays (chunked above 1,000,000 values); each version is a generated package
NAME_vN that runs the layers with UTL_NLA.BLAS_GEMV; the package NAME delegates to the active version:

  SELECT NAME.score(features) FROM NAME_testdata;            -- predicted class index
  SELECT NAME.predict_proba(features) FROM NAME_testdata;    -- probabilities (UTL_NLA_ARRAY_FLT)
  SELECT NAME.predict(features) FROM NAME_testdata;          -- what model.predict returns
  SELECT * FROM TABLE(NAME.score_table(CURSOR(SELECT id, features FROM NAME_testdata)));  -- batch

Live: python-oracledb thin mode (no Instant Client); the password comes from ORACLE_PASSWORD or a prompt,
never the command line. --script-only DIR writes the same as SQL*Plus/SQLcl scripts (no database needed):
DIR/install.sql installs, verifies in the database and switches; DIR/00_privileges.sql is for the DBA.

Oracle 23ai/26ai: --engine onnx --script-only DIR writes the model as an ONNX file for the in-database
ONNX Runtime (DBMS_VECTOR.LOAD_ONNX_MODEL, scored with PREDICTION) and DIR/install_onnx_v1.sql, which
loads it, verifies it in the database and switches NAME_onnx to it (docs/oracle.md)."""


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser(
        "oracle",
        DESCRIPTION,
        "ORACLE_PASSWORD=... nnsql export oracle --dsn scott@db:1521/FREEPDB1 "
        "--model models/mnist/model.keras --name mnist",
        "SELECT mnist.score(features), mnist.label(features) FROM your_table   (docs/oracle.md)",
    )
    where = parser.add_argument_group("where (one of)")
    connection.add_options(where, "user@host:port/service, no password in it (ORACLE_PASSWORD or a prompt)")
    where.add_argument(
        "--script-only", type=Path, metavar="DIR", help="write SQL*Plus scripts to DIR instead"
    )
    parser.add_argument(
        "--script-version",
        type=cli.whole_number(1),
        default=1,
        help="version number for --script-only (default 1)",
    )
    parser.add_argument(
        "--engine",
        choices=["plsql", "onnx"],
        default="plsql",
        help="plsql (default): generated PL/SQL on UTL_NLA, Oracle 19c and later; onnx: an ONNX file for "
        "Oracle 23ai/26ai's in-database ONNX Runtime (DBMS_VECTOR.LOAD_ONNX_MODEL, scored with "
        "PREDICTION), with --script-only",
    )
    parser.add_argument(
        "--onnx-directory",
        default="DATA_PUMP_DIR",
        help="--engine onnx: the Oracle directory object the model file is copied into (default %(default)s)",
    )
    args = parser.parse_args(argv)

    def body() -> int:
        check_oracle_name(args.name)
        if args.script_only and any(v is not None for v in (args.dsn, args.dsn_env, args.dsn_file)):
            raise ExportError("--script-only writes scripts: it takes no --dsn, --dsn-env or --dsn-file")
        request = cli.request_from(args)
        if args.engine == "onnx":
            return onnx_scripts(args, request)
        if args.script_only:
            return script_only(args, request)
        from nnsql.export.oracle.store import OracleStore, connection_of, password

        given = connection.resolve(args, default_environment=None)
        if not given.origin:
            raise ExportError("give --dsn, --dsn-env, --dsn-file or --script-only")
        dsn, secret = connection_of(given)

        def open_store() -> OracleStore:  # asked for and checked first: the user is still at the terminal
            return OracleStore(dsn, secret or password(), progress=not args.quiet)

        compile_model(
            open_store, request, CAPABILITIES, lambda _: f"Oracle {dsn}", target_check=check_weights_finite
        )
        return 0

    return cli.run(body)


def script_only(args: argparse.Namespace, request: ExportRequest) -> int:
    from nnsql.export.oracle.script import write_scripts

    prepared = prepare(request, CAPABILITIES)
    say_kind(prepared)
    check_weights_finite(prepared.graph)
    data = load_test_split(prepared.metadata) if request.load_test_data else None
    written = write_scripts(
        args.script_only, request, prepared, args.script_version, data, progress=not args.quiet
    )
    print(f"wrote {len(written) + 1} scripts to {args.script_only}: run install.sql as the owning user")
    for path in written:
        print(f"  {path.name}")
    return 0


def onnx_scripts(args: argparse.Namespace, request: ExportRequest) -> int:
    from nnsql.export.oracle.onnx_script import oracle_directory_name, write

    if not args.script_only:
        raise ExportError(
            "--engine onnx writes the model file and the SQL*Plus scripts that load it: "
            "give --script-only DIR"
        )
    directory = oracle_directory_name(args.onnx_directory)
    written, verified = write(args.script_only, request, args.script_version, directory, not args.quiet)
    print(f"wrote {len(written)} files to {args.script_only}")
    for path in written:
        print(f"  {path.name}")
    print(f"  {verified.report.summary()} in onnxruntime; samples: {verified.sample_source}")
    print(
        f"next: copy {written[1].name} into the directory of {directory} on the database server, then run "
        f"{written[0].name} as the owning user (00_privileges_onnx.sql is for the DBA)"
    )
    return 0


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
