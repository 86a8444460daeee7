"""A PostgreSQL database as an export target, through psycopg 3.

Everything an export does runs in one transaction (PostgreSQL's DDL is transactional): registry and
runtime, tensors, functions, in-database scoring of the samples, registry row. A failure rolls it all back.
"""

from __future__ import annotations

import getpass
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from tqdm import tqdm

from ..codegen.generator import render_template
from ..codegen.inputs import InputForm, as_held, forms_held, held_rows
from ..errors import ExportError, ScoringFailure, first_line
from ..ir import graph as ir
from ..publish.pipeline import VersionRecord
from ..publish.store import RegistryStore
from . import kernels
from .cube import CubeGenerator
from .generator import TEMPLATES, PostgresGenerator, grant_script
from .ownership import check_extension, check_schemas, check_widened

PASSWORD_ADVICE = "use DATABASE_URL, --dsn-env NAME, --dsn-file PATH, PGPASSWORD or ~/.pgpass"
SEARCH_PATH = "SET search_path = pg_catalog, pg_temp"
SEARCH_PATH_IN_TRANSACTION = "SET LOCAL search_path = pg_catalog, pg_temp"
# One export or activation at a time per database (nnsql.activate takes the same lock): the registry, the
# shared library functions and the schemas are created or replaced by every export. A lock on the
# registry table, which only roles with privileges on it can take (a mode that conflicts with itself and
# with writes, not with reads): an advisory lock has no owner or privilege, so any role that could
# connect held every export and activation of the database for as long as its session lasted.
EXPORT_LOCK = "LOCK TABLE nnsql.models IN SHARE ROW EXCLUSIVE MODE"
# Every other wait for a lock is bounded: a transaction of another role kept open (Mallory's uncommitted
# `CREATE SCHEMA mnist2`, a reader's open transaction behind the registry's upgrade) made the export wait
# for ever while it held the registry's lock, and every export and activation of the database behind it.
# Only the turn on the registry (the lock above, and the schema `nnsql` that a first export creates) waits
# as long as the session's own `lock_timeout` says: whoever holds it writes the registry, as exporters do.
LOCK_WAIT_SECONDS = 10
LOCK_WAIT = "SELECT pg_catalog.set_config('lock_timeout', %s, true)"


def raised_in(error: psycopg.Error) -> str:
    """The innermost PL/pgSQL function (and line) of an error's context: 'nnsql.binary line 9'."""
    context = (error.diag.context or "") if hasattr(error, "diag") else ""
    found = re.search(r"function ([\w.\"]+)\([^)]*\) line (\d+)", context)
    if found is None:
        return "the scoring query"
    return f"{found[1].replace(chr(34), '')} line {found[2]}"  # nnsql."binary": PostgreSQL quotes it


def describe(dsn: str, *, origin: str = "--dsn") -> str:
    """user@host:port/dbname as libpq will resolve them: the DSN's values, then the PG* variables, then
    libpq's defaults (the login name, the local socket, 5432, a database named after the user). A DSN
    holding a password is refused when it came from the command line (`origin` --dsn), which every user
    of the machine can read; a malformed one is never echoed, nor its password (export/connection.py)."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        raise ExportError(
            f"invalid {origin or '--dsn'}: not a libpq URI or key=value string (not shown: it may hold "
            "a password)"
        ) from None
    if info.get("password") and origin == "--dsn":
        raise ExportError(
            f"--dsn holds a password, which the process list shows to everyone: {PASSWORD_ADVICE}"
        )
    defaults = {
        option.keyword.decode(): (option.val or option.compiled or b"").decode()
        for option in psycopg.pq.Conninfo.get_defaults()
    }

    def value(key: str) -> str:
        return str(info.get(key) or defaults.get(key) or "")

    user = value("user") or getpass.getuser()
    host = value("host") or value("hostaddr") or "local socket"
    return f"{user}@{host}:{value('port') or 5432}/{value('dbname') or user}"


def redacted(message: str, dsn: str) -> str:
    """The message without the DSN's password, should a driver ever quote it."""
    try:
        secret = psycopg.conninfo.conninfo_to_dict(dsn).get("password")
    except psycopg.ProgrammingError:
        return message
    return message.replace(str(secret), "***") if secret else message


def connected_to(connection: psycopg.Connection) -> str:
    """user@host:port/dbname of an open connection, as the server was reached."""
    info = connection.info
    return f"{info.user}@{info.host}:{info.port}/{info.dbname}"


def connect(dsn: str, *, origin: str = "--dsn") -> psycopg.Connection:
    """Connect with one-line errors that say what to fix and where libpq tried (never the password)."""
    where = describe(dsn, origin=origin)
    try:
        connection = psycopg.connect(dsn, connect_timeout=10)
    except psycopg.OperationalError as error:
        message = redacted(" ".join(str(error).split()), dsn)
        if "authentication failed" in message or "no password supplied" in message:
            raise ExportError(f"PostgreSQL authentication failed for {where}: {PASSWORD_ADVICE}") from None
        raise ExportError(f"cannot connect to PostgreSQL at {where}: {message}") from error
    pin_search_path(connection)
    cancel_on_disconnect(connection)
    return connection


def pin_search_path(connection: psycopg.Connection) -> None:
    """Before any other statement: only pg_catalog (and this session's temporary tables, last) on the
    path. The default path starts with the schema named after the role and `public`, where any role with
    CREATE may put a function or operator whose argument types match a call more exactly than
    pg_catalog's, after an implicit cast: `pg_advisory_xact_lock(integer)` would win over pg_catalog's
    `(bigint)` and run as the exporting role. pg_temp is never searched for functions or operators."""
    connection.execute(SEARCH_PATH)
    connection.commit()


def cancel_on_disconnect(connection: psycopg.Connection) -> None:
    """If the exporter dies (kill -9), the server stops its running query within a second instead of
    finishing it while holding the export lock (client_connection_check_interval, PostgreSQL 14+)."""
    try:
        connection.execute("SET client_connection_check_interval = 1000")
        connection.commit()
    except psycopg.Error:  # an older server: it notices at its next write to the socket
        connection.rollback()


# Below float32's smallest subnormal (2^-149) a weight is stored as 0, as float32 would round it: the
# library's kernels skip only inputs below 1e-250 in magnitude, so a product with a weight of 1.4e-45 or
# more cannot round to 0, which PostgreSQL raises on. A derived float64 weight (W1·W2) may be smaller.
SMALLEST_WEIGHT = 2.0**-149


def stored_tensors(graph: ir.Graph) -> Iterator[tuple[str, np.ndarray]]:
    """(tensor name, float64 array) for every constant, in Keras's own layout (Dense kernel: inputs x
    units): a Keras weight's float32 value, or the float64 digits of a derived one (ir.Weights)."""
    for node in graph.all_nodes():
        for role, weights in node.weights():
            values = weights.float64
            yield f"{node.name}.{role}", np.where(np.abs(values) < SMALLEST_WEIGHT, 0.0 * values, values)


def bounded_wait(session: str) -> str:
    """The lock_timeout of every wait but the turn on the registry: the session's own where it sets one
    (a DSN's `options='-c lock_timeout=...'`, the role's or the database's setting), else the bound."""
    return session if session not in ("0", "") else f"{LOCK_WAIT_SECONDS}s"


class PostgresStore(RegistryStore):
    target = "postgres"

    def __init__(
        self,
        dsn: str,
        *,
        progress: bool = True,
        grant_to: str | None = None,
        kernel: str = "auto",
        registry_owners: Sequence[str] = (),
        origin: str = "--dsn",
    ) -> None:
        self.registry_owners = tuple(registry_owners)
        self.requested_kernel = kernel
        self.kernel = ""  # the one installed, chosen inside the export's transaction
        self.kernel_note = ""  # why --kernel auto did not take the kernel it found, for the CLI to say
        self.forms: dict[str, InputForm] = {}  # the inputs sample rows are also scored nested for
        self.progress = progress
        self.grant_to = grant_to
        self.bounded = f"{LOCK_WAIT_SECONDS}s"  # what a wait is bounded by, set at each session's start
        self.con = connect(dsn, origin=origin)
        self.where = f"PostgreSQL {connected_to(self.con)}"

    def close(self) -> None:
        self.con.close()

    @contextmanager
    def session(self) -> Iterator[None]:
        try:
            with self.con.transaction():
                # Pinned again for the transaction: a transaction-pooling proxy may run it on another
                # server session than the one pinned on connecting.
                self.con.execute(SEARCH_PATH_IN_TRANSACTION)
                setting = self.con.execute("SELECT pg_catalog.current_setting('lock_timeout')").fetchone()
                patience = str(setting[0] if setting else "0")  # the session's own lock_timeout
                self.bounded = bounded_wait(patience)
                self.use_schema("nnsql")  # the session's own patience: another first export may create it
                self.con.execute(LOCK_WAIT, [self.bounded])
                self.con.execute((TEMPLATES / "registry.sql").read_text())
                check_widened(self.con)
                self.take_turn(patience)
                self.con.execute((TEMPLATES / "library.sql").read_text())
                self.con.execute((TEMPLATES / "activate.sql").read_text())
                yield
        except psycopg.errors.LockNotAvailable as error:
            raise ExportError(
                f"gave up on {self.where} after waiting {self.bounded} for a lock that another session "
                f"holds in a transaction it keeps open ({first_line(error)}): nothing was changed; "
                "find it in pg_stat_activity (pg_blocking_pids) and try again"
            ) from error
        except psycopg.errors.InsufficientPrivilege as error:
            raise ExportError(
                f"missing privilege on {self.where}: {str(error).splitlines()[0]}; the exporting "
                "user needs CREATE on the database (schemas nnsql and the model's) or ownership of them"
            ) from error
        except psycopg.Error as error:
            raise ExportError(f"PostgreSQL error on {self.where}: {str(error).splitlines()[0]}") from error

    def take_turn(self, patience: str) -> None:
        """The registry's lock, waited for as long as the session's own lock_timeout says (0: for ever), as
        another export or activation may hold it for minutes; every wait after it is bounded again."""
        self.con.execute(LOCK_WAIT, [patience])
        self.con.execute(EXPORT_LOCK)
        self.con.execute(LOCK_WAIT, [self.bounded])

    def execute(self, statement: str, params: Sequence[object] = ()) -> None:
        self.con.execute(statement, list(params))

    def fetch_one(self, statement: str, params: Sequence[object] = ()) -> Sequence[Any] | None:
        return self.con.execute(statement, list(params)).fetchone()

    def placeholders(self, count: int) -> list[str]:
        return ["%s"] * count

    def fetch_all(self, statement: str, params: Sequence[object] = ()) -> Sequence[Sequence[Any]]:
        return self.con.execute(statement, list(params)).fetchall()

    def tensor_rows(self, name: str, version: int, graph: ir.Graph) -> Iterator[dict[str, object]]:
        for tensor, array in stored_tensors(graph):
            yield {
                "model": name,
                "version": version,
                "tensor": tensor,
                "shape": list(array.shape),
                "layout": "as in Keras, row-major",
                "value": array.ravel(),
            }

    def insert_tensor(self, row: dict[str, object]) -> None:
        value = row["value"]
        assert isinstance(value, np.ndarray)
        self.insert(self.tensors_table, {**row, "value": value.tolist()})

    def use_schema(self, schema: str) -> None:
        """Create the schema unless it exists, then check who owns it and everything in it (ownership.py):
        created first, in this transaction, no other role can create it between the check and its use."""
        create = sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
        try:
            with self.con.transaction():  # a savepoint
                self.con.execute(create)
        except psycopg.errors.UniqueViolation:
            # The first exports into a database run at once until the registry exists (the lock is on its
            # table): this one waited for another's new schema, which is there now that it committed.
            self.con.execute(create)
        except psycopg.errors.LockNotAvailable:
            raise ExportError(
                f"gave up on {self.where} after waiting {self.bounded} (lock_timeout) for schema {schema}, "
                "which another session is creating or changing in a transaction it keeps open: nothing was "
                "changed; find it in pg_stat_activity (pg_blocking_pids) and try again"
            ) from None
        check_schemas(self.con, [schema], self.registry_owners)

    def install(self, name: str, version: int, graph: ir.Graph) -> None:
        """The kernel (chosen inside the export's transaction), the functions, and the grant."""
        self.use_schema(name)
        self.kernel = kernels.choose(self.con, self.requested_kernel)
        self.forms = forms_held(graph, name)
        self.installed = self.generator(name, version, graph).render()
        if self.grant_to:
            self.installed += "\n" + grant_script(name, sql.Identifier(self.grant_to).as_string(self.con))
        self.con.execute(self.installed)

    def generator(self, name: str, version: int, graph: ir.Graph) -> PostgresGenerator:
        """The chosen kernel's generator; the cube kernel first installs its runtime. Where the cube
        extension found is refused (ownership.py), `--kernel auto` falls back to plpgsql, keeping why in
        one line (`kernel_note`, which the command prints); `--kernel cube` stops with that line."""
        if self.kernel == "cube":
            try:
                with self.con.transaction():  # a savepoint: a refused runtime leaves nothing behind
                    return CubeGenerator(graph, name, version, cube_schema=self.cube_runtime())
            except ExportError as refusal:
                if self.requested_kernel != "auto":
                    raise
                self.kernel = "plpgsql"
                found = kernels.cube_found(self.con)
                self.kernel_note = f"--kernel auto scores with plpgsql: {found} is refused: {refusal}"
        return PostgresGenerator(graph, name, version, plpython=self.kernel == "plpython")

    def cube_runtime(self) -> str:
        """The cube extension's schema (quoted), once it and the extension pass the ownership checks, with
        the cube kernel's runtime functions installed."""
        schema_name = kernels.cube_schema(self.con)
        check_extension(self.con, "cube", self.registry_owners)
        check_schemas(self.con, [schema_name], self.registry_owners, whole=schema_name == "nnsql")
        schema = sql.Identifier(schema_name).as_string(self.con)
        self.con.execute(render_template(TEMPLATES, "library_cube.sql.j2", {"cube_schema": schema}))
        return schema

    def scores(self, name: str, inputs: dict[str, np.ndarray]) -> np.ndarray:
        rows = self.query_samples(name, inputs, ("predict",))
        return np.array([row[0] for row in rows], dtype=np.float64)

    def answers(
        self, name: str, inputs: dict[str, np.ndarray], functions: tuple[str, ...]
    ) -> dict[str, list[Any]]:
        rows = self.query_samples(name, inputs, functions)
        return {function: [row[i] for row in rows] for i, function in enumerate(functions)}

    def query_samples(
        self, name: str, inputs: dict[str, np.ndarray], functions: tuple[str, ...]
    ) -> list[tuple[Any, ...]]:
        """`functions` of the model called on every sample row, in row order (COPY into a temporary
        table, one SELECT)."""
        n_rows = len(next(iter(inputs.values())))
        columns = sql.SQL(", ").join(sql.SQL("{} float8[]").format(sql.Identifier(c)) for c in inputs)
        self.con.execute(
            sql.SQL("CREATE TEMP TABLE _nn_samples (_nn_row integer, {}) ON COMMIT DROP").format(columns)
        )
        flat = {
            key: np.asarray(values, dtype=np.float64).reshape(n_rows, -1) for key, values in inputs.items()
        }
        held = set(held_rows(n_rows).tolist()) if self.forms else set()
        with self.con.cursor().copy(sql.SQL("COPY _nn_samples FROM STDIN (FORMAT BINARY)")) as copy:
            copy.set_types(["int4"] + ["float8[]"] * len(flat))
            for i in range(n_rows):
                copy.write_row([i, *(self.argument(key, flat[key][i], i in held) for key in flat)])
        arguments = sql.SQL(", ").join(sql.Identifier(c) for c in inputs)
        calls = sql.SQL(", ").join(
            sql.SQL("{}.{}({})").format(sql.Identifier(name), sql.Identifier(function), arguments)
            for function in functions
        )
        query = sql.SQL("SELECT {} FROM _nn_samples").format(calls)
        try:
            with self.con.transaction():  # a savepoint: a row that raises is then found alone
                rows = self.con.execute(query + sql.SQL(" ORDER BY _nn_row")).fetchall()
        except psycopg.Error:
            raise self.failure(query, n_rows) from None
        self.con.execute("DROP TABLE _nn_samples")
        return rows

    def argument(self, key: str, row: np.ndarray, held: bool) -> Any:
        """A sample row's values: flat, or where the input nests or pads, on the rows scored as users hold
        them, a multidimensional array of its steps without the padding at its end."""
        form = self.forms.get(key)
        if not held or form is None:
            return row.tolist()
        return as_held(form, row).tolist()

    def failure(self, query: sql.Composed, n_rows: int) -> ScoringFailure:
        """The first sample row that raises, each tried in a savepoint, with where it raised."""
        for row in range(n_rows):
            try:
                with self.con.transaction():
                    self.con.execute(query + sql.SQL(" WHERE _nn_row = %s"), [row]).fetchall()
            except psycopg.Error as error:
                return ScoringFailure(row, raised_in(error), first_line(error))
        return ScoringFailure(0, "the scoring query", "an error no single row repeats")

    def remove(self, name: str, version: int) -> None:
        """The registry's rows of an inactive version, its cube points included."""
        super().remove(name, version)
        if self.fetch_one("SELECT pg_catalog.to_regclass('nnsql.cube_tensors')") != (None,):
            self.execute("DELETE FROM nnsql.cube_tensors WHERE model = %s AND version = %s", [name, version])

    def registry_row(self, record: VersionRecord, *, active: bool = True) -> dict[str, object]:
        return {**super().registry_row(record, active=active), "kernel": self.kernel}

    def load_test_data(self, name: str, features: np.ndarray, labels: np.ndarray) -> None:
        table = sql.Identifier(name, "testdata")
        self.con.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
        self.con.execute(
            sql.SQL(
                "CREATE TABLE {} (id integer PRIMARY KEY, features real[] NOT NULL, label integer)"
            ).format(table)
        )
        flat = np.asarray(features, dtype=np.float32).reshape(len(features), -1)
        with self.con.cursor().copy(sql.SQL("COPY {} FROM STDIN (FORMAT BINARY)").format(table)) as copy:
            copy.set_types(["int4", "float4[]", "int4"])
            for i in tqdm(range(len(flat)), desc="test data", unit="row", disable=not self.progress):
                copy.write_row([i, flat[i].tolist(), int(labels[i])])
