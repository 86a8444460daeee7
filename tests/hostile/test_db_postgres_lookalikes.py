"""Look-alikes of PostgreSQL's built-ins, planted by another role, are never called by an export or by
scoring (export/postgres/store.py pins every session's search_path; generated functions pin theirs).

Mallory, who holds only CREATE on the database as exporters do, creates the schema named after the
exporting role (the `"$user"` entry of the default search_path) and fills it, the scorer's and `public`
with functions and operators of the names the exporter and the generated code call, with argument types
that match a call exactly where PostgreSQL's own would need an implicit cast (`pg_advisory_xact_lock
(integer)` against pg_catalog's `(bigint)`, `public.^(integer, float8)`, ...): resolution would prefer
them. The names are read from what an export really runs (the exporter's statements and templates, and
the bodies of the functions it created), so a call added later is covered without editing this test.
Each look-alike counts its call in a sequence (not rolled back with the export) and raises.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import psycopg
import pytest

from tests.export.test_postgres import export

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
EXPORTER_SOURCES = [*ROOT.glob("export/postgres/*.py"), ROOT / "export/publish/store.py"]
EXPORTER_SOURCES += ROOT.glob("sql/postgres/*")
ALICE, MALLORY, SCORER = "hostile_alice", "hostile_mallory", "hostile_scorer"
PINNED = "options='-c search_path=pg_catalog,pg_temp'"  # the test's own checks see no look-alike

# Argument types a call may carry; arrays are written with a leading underscore, as pg_type names them.
TYPES = ("int2", "int4", "int8", "float4", "float8", "numeric", "text", "bool", "jsonb")
TYPES += ("_int4", "_float4", "_float8", "_numeric", "_text")
OPERATORS = ("+", "-", "*", "/", "^", "%", "<", ">", "<=", ">=", "=", "<>", "||")
ANY = {"any", "anyelement", "anycompatible"}
SCALAR = {"anynonarray", "anycompatiblenonarray"}
ARRAY = {"anyarray", "anycompatiblearray"}

RECORDER = """
CREATE SCHEMA lair;
CREATE SEQUENCE lair.calls;
GRANT USAGE ON SCHEMA lair TO PUBLIC;
GRANT USAGE, UPDATE ON SEQUENCE lair.calls TO PUBLIC;
"""
BODY = (
    "BEGIN PERFORM pg_catalog.nextval('lair.calls'); "
    "RAISE EXCEPTION USING MESSAGE = 'look-alike %s called'; END"
)


class Catalog:
    """pg_catalog's overloads of some names, and which argument types reach each by an implicit cast."""

    def __init__(self, con: psycopg.Connection) -> None:
        casts = con.execute(
            "SELECT s.typname::text, t.typname::text FROM pg_cast c JOIN pg_type s ON s.oid = c.castsource"
            " JOIN pg_type t ON t.oid = c.casttarget WHERE c.castcontext = 'i'"
        ).fetchall()
        self.implicit = set(casts) | {(t, t) for t in TYPES}

    def accepts(self, declared: str, given: str) -> bool:
        if declared in ANY:
            return True
        if declared in SCALAR or declared in ARRAY:
            return given.startswith("_") == (declared in ARRAY)
        if declared.startswith("_") and given.startswith("_"):  # arrays coerce element-wise
            return (given[1:], declared[1:]) in self.implicit
        return (given, declared) in self.implicit


def overloads(con: psycopg.Connection, names: set[str]) -> dict[str, list[tuple[tuple[str, ...], str]]]:
    """name -> [(argument types, return type)] of pg_catalog's functions and aggregates."""
    rows = con.execute(
        "SELECT p.proname::text, ARRAY(SELECT t.typname::text FROM unnest(p.proargtypes::oid[])"
        " WITH ORDINALITY AS a(oid, i) JOIN pg_type t ON t.oid = a.oid ORDER BY a.i),"
        " CASE WHEN r.typtype = 'b' OR r.typname = 'void' THEN r.oid::regtype::text ELSE 'text' END,"
        " p.proretset FROM pg_proc p JOIN pg_type r ON r.oid = p.prorettype"
        " WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.proname = ANY(%s) AND p.pronargs <= 3",
        [sorted(names)],
    ).fetchall()
    found: dict[str, list[tuple[tuple[str, ...], str]]] = {}
    for name, arguments, returns, returns_set in rows:
        found.setdefault(name, []).append((tuple(arguments), f"SETOF {returns}" if returns_set else returns))
    return found


def hijacking_signatures(catalog: Catalog, declared: list[tuple[tuple[str, ...], str]]):
    """(argument types, return type) that PostgreSQL would resolve to a look-alike: some overload takes
    them by implicit casts or as polymorphic arguments, none takes them exactly."""
    exact = {arguments for arguments, _ in declared}
    for arity in sorted({len(arguments) for arguments, _ in declared}):
        for given in itertools.product(TYPES, repeat=arity):
            if given in exact:
                continue
            for arguments, returns in declared:
                if len(arguments) == arity and all(map(catalog.accepts, arguments, given)):
                    yield given, returns
                    break


def sql_type(name: str) -> str:
    return f"{name[1:]}[]" if name.startswith("_") else name


def called_names(con: psycopg.Connection) -> set[str]:
    """Every word followed by '(' in the exporter's code and in the functions an export created."""
    text = "\n".join(path.read_text() for path in EXPORTER_SOURCES)
    bodies = con.execute(
        "SELECT prosrc FROM pg_proc WHERE pronamespace IN ('nnsql'::regnamespace, 'mnist'::regnamespace)"
    ).fetchall()
    text += "\n".join(body for (body,) in bodies)
    return {word.lower() for word in re.findall(r"\b([A-Za-z_]\w*)\s*\(", text)}


def lookalikes(con: psycopg.Connection, schemas: list[str]) -> list[str]:
    """The statements that plant them, as Mallory."""
    catalog = Catalog(con)
    statements, count = [], itertools.count()
    for name, declared in overloads(con, called_names(con)).items():
        for given, returns in hijacking_signatures(catalog, declared):
            arguments = ", ".join(map(sql_type, given))
            for schema in schemas:
                label = f"{schema}.{name}({arguments})"
                statements.append(
                    f"CREATE FUNCTION {schema}.{name}({arguments}) RETURNS {returns} "
                    f"LANGUAGE plpgsql AS $${BODY % label}$$"
                )
    pairs = con.execute(
        "SELECT o.oprname::text, l.typname::text, r.typname::text FROM pg_operator o"
        " LEFT JOIN pg_type l ON l.oid = o.oprleft JOIN pg_type r ON r.oid = o.oprright"
        " WHERE o.oprnamespace = 'pg_catalog'::regnamespace AND o.oprname = ANY(%s)",
        [list(OPERATORS)],
    ).fetchall()
    by_operator: dict[str, list[tuple[tuple[str, ...], str]]] = {}
    for operator, left, right in pairs:
        by_operator.setdefault(operator, []).append(((left, right) if left else (right,), "text"))
    for operator, declared in by_operator.items():
        for given, _ in hijacking_signatures(catalog, declared):
            function = f"lair.op_{next(count)}"
            arguments = ", ".join(map(sql_type, given))
            statements.append(
                f"CREATE FUNCTION {function}({arguments}) RETURNS float8 LANGUAGE plpgsql AS "
                f"$${BODY % f'operator {operator}({arguments})'}$$"
            )
            sides = f"LEFTARG = {sql_type(given[0])}, " if len(given) == 2 else ""
            for schema in schemas:
                statements.append(
                    f"CREATE OPERATOR {schema}.{operator} ({sides}RIGHTARG = {sql_type(given[-1])}, "
                    f"FUNCTION = {function})"
                )
    return statements


class Database:
    def __init__(self, server, dsn: str) -> None:
        self.server = server
        self.admin_dsn = dsn
        self.dbname = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
        with self.admin() as con:
            for role in (ALICE, MALLORY, SCORER):
                if not con.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone():
                    con.execute(f"CREATE ROLE {role} LOGIN")
            con.execute(f"GRANT CREATE ON DATABASE {self.dbname} TO {ALICE}, {MALLORY}")
            con.execute(f"GRANT CREATE ON SCHEMA public TO {MALLORY}")  # as before PostgreSQL 15

    def admin(self) -> psycopg.Connection:
        return psycopg.connect(f"{self.admin_dsn} {PINNED}", autocommit=True)

    def dsn(self, role: str) -> str:
        return self.server.dsn(self.dbname, user=role)

    def calls(self) -> int:
        with self.admin() as con:
            row = con.execute("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM lair.calls")
            return int(row.fetchone()[0])


def plant_lookalikes(con: psycopg.Connection) -> list[str]:
    """As Mallory: the call recorder, then a look-alike of every called function in the exporter's
    `"$user"` schema, the scorer's and `public`. Returns the statements run."""
    con.execute(RECORDER)
    con.execute(f"CREATE SCHEMA {ALICE}; CREATE SCHEMA {SCORER}")
    con.execute(f"GRANT USAGE ON SCHEMA {ALICE}, {SCORER} TO PUBLIC")
    planted = lookalikes(con, [ALICE, SCORER, "public"])
    for statement in planted:
        con.execute(statement)
    return planted


@pytest.fixture
def database(postgres_server, postgres_dsn) -> Database:
    return Database(postgres_server, postgres_dsn)


def expected_class(model: Path, row: list[float]) -> int:
    import keras
    import numpy as np

    return int(keras.saving.load_model(model).predict(np.array([row]), verbose=0).argmax())


@pytest.mark.parametrize("kernel", ["plpgsql", "cube"])
def test_no_lookalike_is_ever_called_by_an_export_or_by_scoring(database, cern_mlp_path, kernel, capsys):
    options = ("--kernel", kernel, "--grant-to", SCORER)
    assert export(database.dsn(ALICE), cern_mlp_path, "mnist", *options) == 0, capsys.readouterr().err
    with psycopg.connect(database.dsn(MALLORY), autocommit=True) as con:
        planted = plant_lookalikes(con)
    assert len(planted) > 500  # pg_advisory_xact_lock(integer), exp(real), ^(integer, float8), ...

    assert export(database.dsn(ALICE), cern_mlp_path, "mnist", *options) == 0, capsys.readouterr().err
    row = [0.5] * 784
    with psycopg.connect(database.dsn(SCORER), autocommit=True) as con:
        answer = con.execute("SELECT mnist.score(%s::float8[])", [row]).fetchone()[0]
    assert answer == expected_class(cern_mlp_path, row)
    assert database.calls() == 0


PLANNER_SETTINGS = {"min_parallel_table_scan_size", "parallel_setup_cost"}


def test_every_function_of_every_kernel_pins_its_search_path(database, cern_mlp_path, capsys):
    """A caller's search_path cannot redirect what any of them calls, the cube runtime's included."""
    for kernel in ("plpgsql", "cube"):
        options = ("--kernel", kernel, "--grant-to", SCORER)
        assert export(database.dsn(ALICE), cern_mlp_path, "mnist", *options) == 0, capsys.readouterr().err
    with database.admin() as con:
        rows = con.execute(
            "SELECT p.oid::regprocedure::text, p.proconfig FROM pg_proc p WHERE p.pronamespace IN "
            "('nnsql'::regnamespace, 'mnist'::regnamespace) AND p.oid NOT IN "
            "(SELECT objid FROM pg_depend WHERE deptype = 'e')"  # the cube extension's own C functions
        ).fetchall()
    assert len(rows) > 15
    # score_table also sets two planner costs (its parallel plan): only search_path decides what runs
    pinned = "search_path=pg_catalog, pg_temp"
    assert [name for name, config in rows if not config or config[0] != pinned] == []
    assert {entry.split("=")[0] for _, config in rows for entry in config[1:]} <= PLANNER_SETTINGS


# Exact look-alikes: operators and types of the very signatures pg_catalog's take (`float8 = float8`,
# `float8 * float8`, the type `float8` itself), in a schema Mallory owns that the roles' default path
# names before pg_catalog. Where that path is in force they win (the earliest schema holding an exact
# match does); every session nnsql opens and every function it creates searches pg_catalog and pg_temp
# only, and pg_temp is never searched for operators or functions, so none of them is ever reached.
EXACT_TYPES = ("float8", "int4", "int8")
EXACT_OPERATORS = {"=": "boolean", "<>": "boolean", "<": "boolean", ">": "boolean", "<=": "boolean"}
EXACT_OPERATORS |= {">=": "boolean", "+": None, "-": None, "*": None, "/": None}
SEEN = (
    "CREATE FUNCTION lair.seen() RETURNS boolean LANGUAGE plpgsql AS "
    "$$BEGIN PERFORM pg_catalog.nextval('lair.calls'); RETURN true; END$$"
)


def exact_lookalikes() -> list[str]:
    statements, count = [SEEN], itertools.count()
    for name in (*EXACT_TYPES, "text", "jsonb", "bool"):  # `x::float8` would make one
        statements.append(f"CREATE DOMAIN lair.{name} AS pg_catalog.{name} CHECK (lair.seen())")
    for type_name, (operator, returns) in itertools.product(EXACT_TYPES, EXACT_OPERATORS.items()):
        function, given = f"lair.exact_{next(count)}", f"pg_catalog.{type_name}"
        statements.append(
            f"CREATE FUNCTION {function}({given}, {given}) RETURNS {returns or given} LANGUAGE plpgsql "
            f"AS $${BODY % f'operator {operator}({type_name}, {type_name})'}$$"
        )
        statements.append(
            f"CREATE OPERATOR lair.{operator} (LEFTARG = {given}, RIGHTARG = {given}, FUNCTION = {function})"
        )
    return statements


def test_exact_lookalikes_first_on_the_roles_path_are_never_called(database, cern_mlp_path, capsys):
    with psycopg.connect(database.dsn(MALLORY), autocommit=True) as con:
        con.execute(RECORDER)
        for statement in exact_lookalikes():
            con.execute(statement)
    with database.admin() as con:
        for role in (ALICE, SCORER):  # what a DBA, or a "$user" schema, could do to a role's sessions
            con.execute(f"ALTER ROLE {role} IN DATABASE {database.dbname} SET search_path = lair, pg_catalog")
    with psycopg.connect(database.dsn(SCORER), autocommit=True) as con:  # the trap works where in force
        with pytest.raises(psycopg.errors.RaiseException, match="look-alike operator"):
            con.execute("SELECT 2::pg_catalog.float8 * 3::pg_catalog.float8")
        typed = "SELECT pg_catalog.pg_typeof(1::float8) = 'lair.float8'::pg_catalog.regtype"
        assert con.execute(typed).fetchone()[0]
    assert database.calls() == 2  # the operator's call, and the domain's check
    with database.admin() as con:
        con.execute("SELECT pg_catalog.setval('lair.calls', 1, false)")

    for kernel in ("plpgsql", "cube"):
        options = ("--kernel", kernel, "--grant-to", SCORER)
        assert export(database.dsn(ALICE), cern_mlp_path, "mnist", *options) == 0, capsys.readouterr().err
    with psycopg.connect(database.dsn(ALICE), autocommit=True) as con:
        con.execute("CALL nnsql.activate('mnist', 1)")  # the plpgsql version again: its check runs
    row = [0.5] * 784
    with psycopg.connect(database.dsn(SCORER), autocommit=True) as con:
        answer = con.execute("SELECT mnist.score(%s::pg_catalog.float8[])", [row]).fetchone()[0]
        label = con.execute("SELECT mnist.label(%s::pg_catalog.float8[])", [row]).fetchone()[0]
    assert answer == expected_class(cern_mlp_path, row)
    assert label is not None
    assert database.calls() == 0
