"""`nnsql export postgres`: compile a Keras model into a PostgreSQL database."""

from __future__ import annotations

import argparse
import sys

from nnsql import quiet
from nnsql.export import cli, connection
from nnsql.export.compile import compile_model
from nnsql.export.postgres.generator import CAPABILITIES
from nnsql.export.postgres.kernels import CHOICES

DESCRIPTION = """\
Compile a trained Keras model into a PostgreSQL database. Weights go into nnsql.tensors (float8[]);
scoring runs as functions in the schema NAME, with no superuser (managed PostgreSQL works):

  SELECT NAME.score(features) FROM images;          -- predicted class index (one sigmoid unit: p > 0.5)
  SELECT NAME.predict_proba(features) FROM images;  -- class probabilities (float8[])
  SELECT NAME.label(features) FROM images;          -- predicted class label
  SELECT NAME.predict(features) FROM images;        -- what model.predict returns (a regression's values)
  SELECT * FROM NAME.score_table('images', 'id', 'features');  -- (id, score, probabilities) per row

What the output means (probabilities, binary, multilabel, logits, values) is read from the model and
printed; --output chooses it instead (docs/output-kinds.md).

--kernel chooses how products are computed (default auto: the fastest this role may use):
  plpython  numpy in the server: fastest; plpython3u needs a superuser and numpy on the server
  cube      the trusted contrib extension cube (C distances): any role with CREATE on the database
  plpgsql   plain PL/pgSQL loops: needs nothing
The kernel used is printed and stored in nnsql.models.kernel.

The connection comes from --dsn (a libpq URI or key=value string, no password: the process list shows
it), else from DATABASE_URL, --dsn-env NAME or --dsn-file PATH (a password there is used and never
shown), and the standard PG* variables (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD, ~/.pgpass,
PGSERVICE).
Each export adds a version (see nnsql.models), checks parity with TensorFlow on sample rows and switches
in one transaction; a failed export leaves the previous version scoring."""


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser(
        "postgres",
        DESCRIPTION,
        "PGPASSWORD=... nnsql export postgres --dsn postgresql://me@db:5432/science "
        "--model models/mnist/model.keras --name mnist",
        'psql "$DATABASE_URL" -c "SELECT mnist.label(features) FROM your_table"   (docs/postgres.md)',
    )
    connection.add_options(
        parser, "libpq connection string, no password in it (default: DATABASE_URL, else PG* variables)"
    )
    parser.add_argument(
        "--grant-to", metavar="ROLE", help="grant EXECUTE on the scoring functions to ROLE (nothing else)"
    )
    parser.add_argument(
        "--grant-script", action="store_true", help="print the least-privilege grant script and exit"
    )
    parser.add_argument(
        "--registry-owner",
        action="append",
        default=[],
        metavar="ROLE",
        help="also trust schemas nnsql and NAME (and what is in them) owned by ROLE; by default only the "
        "exporting role's and superusers' are used (see --grant-script); repeat for several roles",
    )
    parser.add_argument(
        "--kernel",
        choices=CHOICES,
        default="auto",
        help="how products are computed: auto (default: the fastest usable), plpython, cube or plpgsql",
    )
    # The option of earlier releases, kept working: `--fast-path plpython` is `--kernel plpython`.
    parser.add_argument("--fast-path", choices=["plpython"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    kernel = args.fast_path or args.kernel

    def body() -> int:
        from nnsql.export.names import check_model_name
        from nnsql.export.postgres.generator import grant_script
        from nnsql.export.postgres.store import PostgresStore

        if args.grant_script:
            role = check_model_name(args.grant_to or "scoring_role", what="role name")
            print(grant_script(check_model_name(args.name), role), end="")
            return 0
        request = cli.request_from(args)
        for role in [args.grant_to or "", *args.registry_owner]:
            if role:
                check_model_name(role, what="role name")
        from nnsql.export.postgres.cube import CAPABILITIES as CUBE
        from nnsql.export.postgres.plpython import CAPABILITIES as PLPYTHON

        capabilities = {"plpython": PLPYTHON, "cube": CUBE}.get(kernel, CAPABILITIES)
        options = {
            "progress": not args.quiet,
            "grant_to": args.grant_to,
            "kernel": kernel,
            "registry_owners": args.registry_owner,
        }
        dsn = connection.resolve(args)
        store = compile_model(
            lambda: PostgresStore(dsn.text, origin=dsn.origin, **options),
            request,
            capabilities,
            lambda s: s.where,
        )
        if store.kernel_note:
            print(f"note: {store.kernel_note}", file=sys.stderr)
        print(f"  kernel: {store.kernel}" + (" (chosen by --kernel auto)" if kernel == "auto" else ""))
        return 0

    return cli.run(body)


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
