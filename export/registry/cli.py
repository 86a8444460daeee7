"""`nnsql models`: the versions of a published model, listed, activated (rolled back or forward) and
removed, in a DuckDB file (--db), a PostgreSQL database (--dsn and the PG* variables), an ONNX
repository (--repo), a Spark catalog (--warehouse or --remote) or an Oracle schema (--oracle-dsn)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from nnsql.text import printable

from .. import cli, connection
from ..errors import ExportError
from ..names import check_model_name
from . import repository

DESCRIPTION = """\
List the versions of a model, activate one (roll back or forward) or remove one that is not active.

Activation checks the version's answers again on the sample rows its export kept, in the target itself,
before it switches: a version that no longer answers as Keras did is not activated and the active one
keeps scoring. The stores, with the options their export took, and what comes next:
  --db FILE               DuckDB: the version's kept macros installed again, checked, switched;
                          then SELECT NAME.score(...) in that file
  --dsn / DATABASE_URL    PostgreSQL: CALL nnsql.activate('mnist', 1) in SQL does the same;
                          then SELECT NAME.score(...)
  --repo DIR              ONNX: REPO/NAME/active names the version; a running `nnsql serve` serves it
                          alone from its next scan, with no restart
  --warehouse DIR         Spark (--master M, or --remote sc://HOST:PORT): the version's own functions
                          checked in Spark, then NAME.predict, NAME.score... switch to them
  --oracle-dsn U@H:P/S    Oracle (password from ORACLE_PASSWORD or a prompt): the schema's
                          nnsql_admin.activate runs the check in the database, as EXEC does in SQL*Plus;
                          --dsn-env NAME or --dsn-file PATH holding user[/password]@host:port/service
                          name an Oracle schema too, as `nnsql export oracle` takes them (never shown)"""
EXAMPLE = "nnsql models activate --db scores.duckdb --name mnist --version 1"
NEXT_STEP = "nnsql models list --db scores.duckdb   (the active version is marked *; any store above)"


def parser() -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(
        prog="nnsql models",
        description=DESCRIPTION,
        epilog=f"example:\n  {EXAMPLE}\nnext step:\n  {NEXT_STEP}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    result.add_argument("action", choices=("list", "activate", "remove"))
    result.add_argument("--name", help="the model (list: every model when left out)")
    result.add_argument("--version", type=int, help="the version to activate or remove")
    where = result.add_argument_group("the store (one of)")
    where.add_argument("--db", type=Path, metavar="FILE", help="a DuckDB database file")
    where.add_argument("--repo", type=Path, metavar="DIR", help="an ONNX model repository")
    where.add_argument(
        "--warehouse",
        type=Path,
        metavar="DIR",
        help="Spark: the local catalog folder `nnsql export spark` wrote",
    )
    where.add_argument("--remote", metavar="sc://HOST:PORT", help="Spark: a Spark Connect server")
    where.add_argument(
        "--oracle-dsn",
        metavar="USER@HOST:PORT/SERVICE",
        help="Oracle: as `nnsql export oracle --dsn` takes it, no password in it "
        "(ORACLE_PASSWORD or a prompt)",
    )
    result.add_argument(
        "--master", default="local[*]", help="Spark master with --warehouse (default local[*])"
    )
    connection.add_options(
        where,
        "PostgreSQL: a libpq connection string, no password in it ('' for the PG* variables; "
        "default: DATABASE_URL when set)",
    )
    return result


def checked(args: argparse.Namespace) -> connection.Dsn | None:
    """The PostgreSQL connection (None for --db or --repo), once the options are consistent."""
    options = ("db", "repo", "warehouse", "remote", "oracle_dsn", "dsn", "dsn_env", "dsn_file")
    stores = [o for o in options if getattr(args, o) is not None]
    if len(stores) > 1:
        raise ExportError("give one store: " + " or ".join("--" + o.replace("_", "-") for o in stores))
    if args.name is not None:
        check_model_name(args.name)
    if args.action != "list" and (args.name is None or args.version is None):
        raise ExportError(f"nnsql models {args.action} needs --name and --version")
    if stores and stores[0] in ("db", "repo", "warehouse", "remote", "oracle_dsn"):
        return None
    dsn = connection.resolve(args)
    if not dsn.origin:
        raise ExportError(
            "name the store: --db FILE, --repo DIR, Spark's --warehouse DIR or --remote sc://HOST:PORT, "
            "Oracle's --oracle-dsn, or PostgreSQL's --dsn, --dsn-env or --dsn-file "
            "(or set DATABASE_URL)"
        )
    return dsn


def shown_classes(value: object) -> str:
    """A version's class labels as one cell: a list, or the JSON text of one (DuckDB's registry). What a
    file's author put there instead (a number, a string, an object) is shown as it is, never raised on."""
    if isinstance(value, str):
        text = value
        try:
            value = json.loads(text or "[]")
        except ValueError:
            return text
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


def shown_parity(rows: object, difference: object) -> str:
    """'N rows, 1.2e-06', or '?' where the largest difference is not a number."""
    if isinstance(difference, int | float) and not isinstance(difference, bool):
        return f"{rows} rows, {difference:.1e}"
    return "?"


def table(rows: list[dict[str, Any]]) -> str:
    """The versions as aligned columns; the active one marked *. Each cell is shown printable: the
    registry and metadata.json hold text whoever exported (or prepared the file) chose."""
    header = ("", "NAME", "VERSION", "KIND", "CLASSES", "PARITY", "ACTIVATABLE", "SOURCE")
    lines: list[tuple[str, ...]] = [header]
    for row in rows:
        cells = (
            "*" if row["active"] else "",
            str(row["name"]),
            str(row["version"]),
            str(row["output_kind"] or "probabilities"),
            shown_classes(row["classes"])[:40],
            shown_parity(row["parity_rows"], row["parity_max_abs_diff"]),
            "yes" if row["activatable"] else "no (export again)",
            str(row["source"] or ""),
        )
        lines.append(tuple(map(printable, cells)))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def in_repository(args: argparse.Namespace) -> int:
    if not args.repo.is_dir():
        raise ExportError(f"--repo {args.repo} is not a directory")
    if args.action == "list":
        print(table(repository.listing(args.repo, args.name)))
    elif args.action == "activate":
        repository.activate(args.repo, args.name, args.version)
        print(f"activated {args.name} version {args.version} in {args.repo} (served from the next scan)")
    else:
        repository.remove(args.repo, args.name, args.version)
        print(f"removed {args.name} version {args.version} from {args.repo}")
    return 0


def in_database(args: argparse.Namespace, opened: Callable[[], Any]) -> int:
    from .activation import activate

    store = opened()
    try:
        session: AbstractContextManager[None] = store.session()
        with session:
            if args.action == "list":
                print(table(store.versions(args.name)))
            elif args.action == "activate":
                activate(store, args.name, args.version)
            else:
                store.remove(args.name, args.version)
    finally:
        store.close()
    done = {"activate": "activated", "remove": "removed"}.get(args.action)
    if done:
        print(f"{done} {args.name} version {args.version} in {getattr(store, 'where', args.db)}")
    return 0


def spark_store(args: argparse.Namespace) -> Any:
    """The Spark catalog's versions, in the session this process runs or a new one (stopped on close)."""
    from ..spark import session
    from .spark import SparkVersions

    if args.warehouse is not None and not (args.warehouse / "metastore_db").is_dir():
        raise ExportError(
            f"--warehouse {args.warehouse}: no Spark catalog there (nnsql export spark writes one)"
        )
    where = session.Where(args.warehouse or session.DEFAULT_WAREHOUSE, args.master, args.remote)
    owned = not session.running()  # a session the caller started stays theirs
    store = SparkVersions(session.start(where), progress=False, owned=owned)
    store.where = where.describe()
    return store


def oracle_connection(args: argparse.Namespace, given: connection.Dsn | None) -> connection.Dsn | None:
    """The Oracle schema's connection string: --oracle-dsn (no password in it), or --dsn, --dsn-env or
    --dsn-file in Oracle's form, as `nnsql export oracle` takes them (DATABASE_URL stays PostgreSQL's:
    the Oracle export does not read it). None: not Oracle."""
    from ..oracle.store import is_oracle_form

    if args.oracle_dsn is not None:
        return connection.Dsn(args.oracle_dsn, "--oracle-dsn")
    default = f"${connection.DEFAULT_ENVIRONMENT}"
    if given is not None and given.origin != default and is_oracle_form(given.text):
        return given
    return None


def oracle_store(given: connection.Dsn) -> Any:
    """The Oracle schema's versions; the password from the string where it may hold one (the
    environment, a file), else from ORACLE_PASSWORD or a prompt, as the export asks."""
    from ..oracle.store import connection_of, password
    from .oracle import OracleVersions

    if given.origin != "--oracle-dsn":
        dsn, secret = connection_of(given)
    else:  # on the command line, like the export's --dsn: no password in it
        try:
            dsn, secret = connection_of(connection.Dsn(given.text, "--dsn"))
        except ExportError as error:
            raise ExportError(str(error).replace("--dsn", "--oracle-dsn", 1)) from None
    return OracleVersions(dsn, secret or password(), progress=False)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)

    def body() -> int:
        dsn = checked(args)
        if args.repo is not None:
            return in_repository(args)
        if args.db is not None:
            from ..duckdb.store import DuckDBStore

            if not args.db.is_file():
                raise ExportError(f"--db {args.db}: no such DuckDB file")
            return in_database(args, lambda: DuckDBStore(args.db, progress=False))
        if args.warehouse is not None or args.remote is not None:
            return in_database(args, lambda: spark_store(args))
        oracle = oracle_connection(args, dsn)
        if oracle is not None:
            return in_database(args, lambda: oracle_store(oracle))
        from ..postgres.store import PostgresStore

        assert dsn is not None
        return in_database(args, lambda: PostgresStore(dsn.text, progress=False, origin=dsn.origin))

    return cli.run(body)
