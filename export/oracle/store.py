"""A live Oracle database as an export target, through python-oracledb in thin mode (no Instant Client).

Oracle commits before and after every DDL statement, so one transaction cannot hold the whole export.
Instead a version is built beside the active one (tensors, then package <name>_v<N>), verified, recorded,
and the switch is a single DDL statement: replacing the body of the stateless entry package <name>.
Anything failing before the switch removes the new version's rows and package; the old one keeps scoring.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm import tqdm

from ..connection import Dsn
from ..errors import ExportError, ScoringFailure, first_line
from ..ir import graph as ir
from ..publish.pipeline import VersionRecord
from ..publish.store import RegistryStore
from ..registry.checks import StoredCheck
from .generator import OracleGenerator, stored_chunks
from .kept_check import check_rows
from .script import schema_script

DSN_FORM = re.compile(
    r"(?P<user>[A-Za-z][\w$#]*)@(?P<host>[\w.-]+)(?::(?P<port>\d+))?/(?P<service>[\w.$#-]+)"
)


@dataclass(frozen=True)
class OracleDsn:
    user: str
    host: str
    port: int
    service: str

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}/{self.service}"

    def __str__(self) -> str:
        return f"{self.user}@{self.address}"


# user[/password]@host[:port]/service, Oracle's Easy Connect as --dsn, --dsn-env and --dsn-file take it;
# never a PostgreSQL string (those hold "://" or "key=value").
ORACLE_FORM = re.compile(r"[A-Za-z][\w$#]*(/[^@]*)?@[\w.-]+(:\d+)?/[\w.$#-]+")


def is_oracle_form(text: str) -> bool:
    return ORACLE_FORM.fullmatch(text.strip()) is not None


def connection_of(given: Dsn) -> tuple[OracleDsn, str | None]:
    """The address and the password (None: ORACLE_PASSWORD or a prompt) of a connection string from
    export/connection.py: a password is allowed where the string came from the environment or a file,
    refused on the command line. A refusal names where the string came from, never the string."""
    try:
        return with_password(given.text) if given.may_hold_password else (parse_dsn(given.text), None)
    except ExportError as error:
        raise ExportError(str(error).replace("--dsn", given.origin or "--dsn", 1)) from None


def with_password(text: str) -> tuple[OracleDsn, str | None]:
    """A DSN that came from the environment or a file (export/connection.py), where `user/password@...`
    is allowed: the address and the password, which no message shows."""
    if "@" in text and "/" in text.split("@")[0]:
        credentials, _, address = text.partition("@")
        user, _, secret = credentials.partition("/")
        return parse_dsn(f"{user}@{address}"), secret
    return parse_dsn(text), None


def parse_dsn(text: str) -> OracleDsn:
    if "@" in (text or "") and "/" in text.split("@")[0]:
        raise ExportError(
            "--dsn holds a password (user/password@...), which the process list shows to everyone: "
            "give user@host:port/service and set ORACLE_PASSWORD or answer the prompt"
        )
    match = DSN_FORM.fullmatch(text or "")
    if not match:
        raise ExportError(
            "invalid --dsn (not shown: it may hold a password): expected user@host:port/service, "
            "e.g. scott@db.example.org:1521/FREEPDB1"
        )
    return OracleDsn(match["user"], match["host"], int(match["port"] or 1521), match["service"])


def password() -> str:
    """From ORACLE_PASSWORD, else a prompt on the terminal; never from the command line."""
    if os.environ.get("ORACLE_PASSWORD"):
        return os.environ["ORACLE_PASSWORD"]
    if not sys.stdin.isatty():
        raise ExportError("set ORACLE_PASSWORD: there is no terminal to prompt for the password")
    return getpass.getpass("Oracle password: ")


def explain(error: Exception, dsn: OracleDsn) -> ExportError:
    """Turn an Oracle/driver error into one line that says the fix."""
    message = " ".join(str(error).split())
    if "ORA-01017" in message:
        return ExportError(f"Oracle rejected user or password for {dsn}: check ORACLE_PASSWORD")
    if "ORA-01031" in message or "ORA-01950" in message:
        return ExportError(
            f"missing privilege for {dsn.user}: needs CREATE TABLE, CREATE PROCEDURE, CREATE TYPE and "
            f"tablespace quota (00_privileges.sql from --script-only has the grants) ({message[:120]})"
        )
    if "UTL_NLA" in message.upper() and ("PLS-00201" in message or "ORA-06550" in message):
        return ExportError(
            f"UTL_NLA is not available to {dsn.user}: ask the DBA to GRANT EXECUTE ON SYS.UTL_NLA"
        )
    if message.startswith("DPY-6") or "ORA-125" in message or "ORA-12154" in message:
        return ExportError(f"cannot reach Oracle at {dsn.address}: {message[:200]}")
    return ExportError(f"Oracle error on {dsn}: {message[:300]}")


def sql_statements(script: str) -> Iterator[str]:
    """Split a script of PL/SQL units ended by a line '/' (as SQL*Plus does) into statements."""
    for block in re.split(r"^/\s*$", script, flags=re.MULTILINE):
        text = "\n".join(line for line in block.splitlines() if not line.startswith("--")).strip()
        if text:
            yield text


class OracleStore(RegistryStore):
    target = "oracle"
    models_table = "nnsql_models"
    tensors_table = "nnsql_tensors"
    active = ("Y", "N")
    installs_table = None  # versions are packages of their own: none is installed again

    def __init__(self, dsn: OracleDsn, secret: str, *, progress: bool = True) -> None:
        import oracledb

        self.dsn = dsn
        self.progress = progress
        self.oracledb = oracledb
        try:
            self.con = oracledb.connect(
                user=dsn.user, password=secret, dsn=dsn.address, tcp_connect_timeout=10
            )
        except oracledb.Error as error:
            raise explain(error, dsn) from error
        except OSError as error:  # the host's name does not resolve: the driver lets the socket's error out
            raise ExportError(f"cannot reach Oracle at {dsn.address}: {error.strerror or error}") from None
        self.array_type = self.con.gettype("UTL_NLA_ARRAY_FLT")
        self.generator: OracleGenerator | None = None
        self.switched = False

    def close(self) -> None:
        self.con.close()

    def execute(self, statement: str, params: Sequence[object] | dict[str, object] = ()) -> None:
        with self.con.cursor() as cursor:
            cursor.execute(statement, params if isinstance(params, dict) else list(params))
            if cursor.warning:  # compilation errors come back as a warning
                raise ExportError(f"generated PL/SQL did not compile: {cursor.warning}; see USER_ERRORS")

    @contextmanager
    def session(self) -> Iterator[None]:
        try:
            for statement in sql_statements(schema_script()):
                self.execute(statement)
            yield
            self.con.commit()
        except BaseException as error:
            self.con.rollback()
            self.discard()
            if isinstance(error, self.oracledb.Error):
                raise explain(error, self.dsn) from error
            raise

    def discard(self) -> None:
        """Oracle's DDL commits, so a failed export drops the staged version's rows and package."""
        if self.generator is None or self.switched:
            return
        name, version = self.generator.name, self.generator.version
        with self.con.cursor() as cursor:
            cursor.execute("DELETE FROM nnsql_tensors WHERE model = :1 AND version = :2", [name, version])
            cursor.execute("DELETE FROM nnsql_models WHERE name = :1 AND version = :2", [name, version])
            self.con.commit()
            with contextlib.suppress(self.oracledb.Error):  # it may never have been created
                cursor.execute(f"DROP PACKAGE {self.generator.package}")

    def fetch_one(self, statement: str, params: Sequence[object] = ()) -> Sequence[Any] | None:
        with self.con.cursor() as cursor:
            cursor.execute(statement, list(params))
            row: Sequence[Any] | None = cursor.fetchone()
            return row

    def placeholders(self, count: int) -> list[str]:
        return [f":{index + 1}" for index in range(count)]

    def tensor_rows(self, name: str, version: int, graph: ir.Graph) -> Iterator[dict[str, object]]:
        """Kernels over a VARRAY's 1,000,000 values are stored in chunks of whole units."""
        for chunk in stored_chunks(graph):
            yield {
                "model": name,
                "version": version,
                "tensor": chunk.tensor,
                "chunk": chunk.chunk,
                "shape": chunk.shape,
                "layout": chunk.layout,
                "value": chunk.values,
            }

    def insert_tensor(self, row: dict[str, object]) -> None:
        value = row["value"]
        assert isinstance(value, np.ndarray)
        self.insert(self.tensors_table, {**row, "value": self.array_type.newobject(value.tolist())})

    def stage(self, name: str, version: int, graph: ir.Graph) -> None:
        self.generator = OracleGenerator(graph, name, version)  # from here on, discard() cleans up
        super().stage(name, version, graph)

    def install(self, name: str, version: int, graph: ir.Graph) -> None:
        self.con.commit()
        assert self.generator is not None
        for statement in sql_statements(self.generator.version_package()):
            self.execute(statement)

    def scores(self, name: str, inputs: dict[str, np.ndarray]) -> np.ndarray:
        rows = self.query_samples(inputs, ("predict",))
        return np.array([row[0] for row in rows], dtype=np.float64)

    def answers(
        self, name: str, inputs: dict[str, np.ndarray], functions: tuple[str, ...]
    ) -> dict[str, list[Any]]:
        rows = self.query_samples(inputs, functions)
        return {function: [row[i] for row in rows] for i, function in enumerate(functions)}

    def query_samples(self, inputs: dict[str, np.ndarray], functions: tuple[str, ...]) -> list[list[Any]]:
        """The staged package's `functions` on every sample row, one SELECT per row; collections
        (probabilities, labels) as lists."""
        assert self.generator is not None
        names = list(inputs)
        placeholders = ", ".join(f":{i + 1}" for i in range(len(names)))
        calls = ", ".join(f"{self.generator.package}.{function}({placeholders})" for function in functions)
        rows = []
        with self.con.cursor() as cursor:
            for row in range(len(inputs[names[0]])):
                values = [
                    self.array_type.newobject([float(v) for v in inputs[n][row].ravel()]) for n in names
                ]
                try:
                    cursor.execute(f"SELECT {calls} FROM dual", values)
                except self.oracledb.DatabaseError as error:
                    raise ScoringFailure(row, calls.split("(")[0], first_line(error)) from None
                fetched = cursor.fetchone()
                rows.append([v.aslist() if hasattr(v, "aslist") else v for v in fetched])
        return rows

    def activate(self, record: VersionRecord) -> None:
        assert self.generator is not None
        self.update_row(record, active=False)  # the verified figures, before the switch
        self.con.commit()
        for statement in sql_statements(self.generator.dispatch_spec() + self.generator.dispatch_body()):
            self.execute(statement)  # the switch
        self.switched = True
        self.execute(
            "UPDATE nnsql_models SET active = CASE WHEN version = :1 THEN 'Y' ELSE 'N' END WHERE name = :2",
            [record.version, record.name],
        )

    def keep(self, record: VersionRecord, check: StoredCheck) -> None:
        """The rows the gate checked, kept in nnsql_check_rows for `EXEC nnsql_admin.activate(name, N)`:
        the same blocks the scripts of --script-only run."""
        assert self.generator is not None
        inputs = [check.inputs[spec.name] for spec in self.generator.graph.inputs]
        graph = self.generator.graph
        for block in check_rows(record.name, record.version, graph, inputs, check.expected, check.allowed):
            self.execute(block)

    def load_test_data(self, name: str, features: np.ndarray, labels: np.ndarray) -> None:
        table = f"{name}_testdata"
        with self.con.cursor() as cursor:
            with suppress(self.oracledb.Error):
                cursor.execute(f"DROP TABLE {table} PURGE")
            cursor.execute(
                f"CREATE TABLE {table} (id NUMBER PRIMARY KEY, "
                "features UTL_NLA_ARRAY_FLT NOT NULL, label NUMBER)"
            )
            flat = features.reshape(len(features), -1)
            batch = []
            for row in tqdm(range(len(flat)), desc="test data", unit="row", disable=not self.progress):
                batch.append(
                    [row, self.array_type.newobject([float(v) for v in flat[row]]), int(labels[row])]
                )
                if len(batch) == 500 or row == len(flat) - 1:
                    cursor.executemany(
                        f"INSERT INTO {table} (id, features, label) VALUES (:1, :2, :3)", batch
                    )
                    batch = []
