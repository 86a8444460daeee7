"""`EXEC nnsql_admin.activate('mnist', 1)`: a DBA rolls an Oracle model back or forward from SQL*Plus with
no nnsql installed. Two versions exported as scripts run in one session of the PL/SQL interpreter
(tests/export/plsql); the procedure runs the version's kept answer check in the database, refuses what
fails it (tampered answers, a changed or invalid package, a name or version that is not there) with the
active version still scoring, and switches the entry package and the registry otherwise."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import keras
import numpy as np
import pytest

from nnsql.export.errors import ExportError
from nnsql.export.oracle.__main__ import main as export_oracle
from nnsql.export.oracle.literals import entry_literal
from nnsql.export.oracle.store import parse_dsn
from nnsql.export.registry.activation import activate as activate_version
from nnsql.export.registry.cli import table as versions_table
from nnsql.export.registry.oracle import OracleVersions
from tests import models
from tests.export.plsql.lexer import tokenize
from tests.export.plsql.session import Session
from tests.export.plsql.values import PlsqlError
from tests.export.test_oracle_plsql import RELU_LOOP, relu_model

# Keras warns that Flatten drops the recurrent layer's mask (the helpers model), which nothing after it reads.
pytestmark = [
    pytest.mark.oracle,
    pytest.mark.filterwarnings("ignore:Layer .* was passed an input with a mask"),
]

ADMIN = Path(__file__).parents[2] / "sql" / "oracle" / "admin.sql"


ROWS = np.random.default_rng(8).random((6, 8), dtype=np.float32)  # what the tests score


@pytest.fixture(scope="module")
def versions(tmp_path_factory) -> tuple[Path, dict[int, np.ndarray]]:
    """mnist version 1 (the relu model) and version 2 (the same layers, other weights), as scripts; what
    each version's Keras model predicts for ROWS."""
    directory = tmp_path_factory.mktemp("activate")
    retrained = relu_model()
    generator = np.random.default_rng(21)
    for weight in retrained.weights:
        weight.assign(generator.normal(0, 0.5, size=tuple(weight.shape)).astype(np.float32))
    kept = {1: relu_model(), 2: retrained}
    for version, model in kept.items():
        path = models.save(model, directory / f"model_v{version}")
        args = ["--model", str(path), "--name", "mnist", "--script-only", str(directory / f"v{version}")]
        assert export_oracle([*args, "--quiet", "--sample-rows", "50", "--script-version", str(version)]) == 0
    return directory, {version: model.predict(ROWS, verbose=0) for version, model in kept.items()}


@pytest.fixture
def session(versions) -> Session:
    """Both versions installed in order: version 2 is the active one."""
    directory, _ = versions
    database = Session()
    database.run_script(directory / "v1" / "install.sql")
    database.run_script(directory / "v2" / "install.sql")
    return database


def run(session: Session, text: str) -> None:
    session.run_script(Path("dba.sql"), text + "\n/\n")


def activate(session: Session, model: str, version: object) -> None:
    """What the DBA types in SQL*Plus, the name as a SQL literal."""
    quoted = "'" + model.replace("'", "''") + "'"
    session.run_script(Path("dba.sql"), f"EXEC nnsql_admin.activate({quoted}, {version})\n")


def flags(session: Session) -> list[tuple[int, str]]:
    return [(row["VERSION"], row["ACTIVE"]) for row in session.store.tables["NNSQL_MODELS"].rows]


def scores_like(session: Session, predicted: np.ndarray) -> bool:
    """The entry package mnist answers ROWS as the Keras model that `predicted` them."""
    actual = np.array([session.call("mnist", "predict", row) for row in ROWS])
    return bool(np.abs(actual - predicted).max() <= 1e-5)  # float32 parity


def refused(session: Session, model: str, version: object) -> PlsqlError:
    with pytest.raises(PlsqlError) as error:
        activate(session, model, version)
    return error.value


def test_activate_rolls_back_to_version_1_and_forward_again(session, versions):
    _, kept = versions
    assert session.call("mnist", "version") == 2 and scores_like(session, kept[2])
    activate(session, "mnist", 1)
    assert session.call("mnist", "version") == 1 and scores_like(session, kept[1])
    assert flags(session) == [(1, "Y"), (2, "N")]
    activate(session, "mnist", 2)
    assert session.call("mnist", "version") == 2 and scores_like(session, kept[2])
    assert flags(session) == [(1, "N"), (2, "Y")]


TAMPERED_ANSWER = (
    "UPDATE nnsql_check_rows SET expected = UTL_NLA_ARRAY_DBL(0.25d, 0.25d, 0.25d, 0.25d) "
    "WHERE model = 'mnist' AND version = 1 AND row_no = 3;"
)


def test_tampered_answers_are_refused_and_version_2_keeps_scoring(session, versions):
    _, kept = versions
    run(session, f"BEGIN {TAMPERED_ANSWER} END;")
    error = refused(session, "mnist", 1)
    assert error.code == -20010 and "mnist version 1 fails the answer check" in error.message
    assert "1 of 20 row(s) over tolerance" in error.message and "not activated" in error.message
    assert session.call("mnist", "version") == 2 and scores_like(session, kept[2])
    assert flags(session) == [(1, "N"), (2, "Y")]


def test_without_the_check_the_tampered_answers_would_activate(versions):
    """The refusal above is the check's: nnsql_admin with its call to check_version taken out activates
    the version whose kept answers were changed."""
    directory, _ = versions
    text = ADMIN.read_text()
    call = "        check_version(identifier(unit), unit);\n"
    assert text.count(call) == 1
    session = Session()
    session.run_script(directory / "v1" / "install.sql")
    session.run_script(directory / "v2" / "install.sql")
    session.run_script(Path("admin.sql"), text.replace(call, ""))
    run(session, f"BEGIN {TAMPERED_ANSWER} END;")
    activate(session, "mnist", 1)
    assert session.call("mnist", "version") == 1


def test_a_changed_package_is_refused(session, versions):
    """mnist_v1 replaced by a body whose relu skips its first value (it compiles, and answers wrong)."""
    directory, kept = versions
    package = (directory / "v1" / "03_package_v1.sql").read_text()
    assert package.count(RELU_LOOP) == 1
    session.run_script(
        Path("changed.sql"), package.replace(RELU_LOOP, RELU_LOOP.replace("IN 1 ..", "IN 2 .."))
    )
    error = refused(session, "mnist", 1)
    assert error.code == -20010 and "fails the answer check" in error.message
    assert session.call("mnist", "version") == 2 and scores_like(session, kept[2])


def test_an_invalid_package_is_refused(session, versions):
    """mnist_v1's body no longer compiles (a call of a function it does not declare)."""
    directory, kept = versions
    package = (directory / "v1" / "03_package_v1.sql").read_text()
    broken = package.replace("activate_relu(v_hidden);", "activate_relu(v_hidden); undeclared_helper;", 1)
    assert broken != package
    session.run_script(Path("broken.sql"), broken.split("-- Stop here")[0])
    error = refused(session, "mnist", 1)
    assert error.code == -20032 and "package mnist_v1 is invalid" in error.message
    assert session.call("mnist", "version") == 2 and scores_like(session, kept[2])


@pytest.mark.parametrize(
    ("model", "version", "code"),
    [
        ("mnist", 3, -20031),  # no such version
        ("mnist", 1.5, -20031),
        ("churn", 1, -20031),  # no such model
        ("mnist; DROP TABLE nnsql_models", 1, -20030),
        ("mnist_v1.check_stored; END; BEGIN NULL", 1, -20030),
        ('mnist" AS x', 1, -20030),
        ("1mnist", 1, -20030),
        ("", 1, -20030),
    ],
)
def test_what_is_not_there_or_not_a_name_is_refused_in_one_line(session, versions, model, version, code):
    _, kept = versions
    error = refused(session, model, version)
    assert error.code == code and error.message.startswith("nnsql_admin.activate: ")
    assert "\n" not in error.message and "nothing changed" in error.message
    assert session.call("mnist", "version") == 2 and scores_like(session, kept[2])
    assert flags(session) == [(1, "N"), (2, "Y")]


def test_a_version_that_kept_no_answer_check_is_refused(session, versions):
    """Rows deleted (or a version published before they were kept): nothing proves it, nothing changes."""
    _, kept = versions
    run(session, "BEGIN DELETE FROM nnsql_check_rows WHERE model = 'mnist' AND version = 1; END;")
    error = refused(session, "mnist", 1)
    assert error.code == -20013 and "keeps no answer check" in error.message
    assert session.call("mnist", "version") == 2 and scores_like(session, kept[2])


def multilabel_model() -> keras.Model:
    inputs = keras.Input((5,), name="features")
    outputs = keras.layers.Dense(3, activation="sigmoid", name="tags")(inputs)
    model = keras.Model(inputs, outputs)
    generator = np.random.default_rng(13)
    for weight in model.weights:
        weight.assign(generator.normal(0, 1.5, size=tuple(weight.shape)).astype(np.float32))
    return model


@pytest.mark.parametrize(
    ("build", "options"),
    [
        ("helpers", []),  # three inputs (an image, tokens, a sequence) kept one after the other per row
        ("multilabel", ["--output", "multilabel", "--classes", "red", "green", "blue"]),  # labels()
    ],
)
def test_each_input_and_answer_is_read_back_from_the_kept_rows(tmp_path, build, options):
    """A version activated again passes its own check only if check_stored splits the kept inputs as
    predict takes them and compares each answer its kind offers; a changed answer is named."""
    from tests.export.test_oracle_plsql import helpers_model

    model = helpers_model() if build == "helpers" else multilabel_model()
    path = models.save(model, tmp_path / "model")
    args = ["--model", str(path), "--name", "tagged", "--script-only", str(tmp_path / "scripts")]
    assert export_oracle([*args, "--quiet", "--sample-rows", "50", *options]) == 0
    session = Session()
    session.run_script(tmp_path / "scripts" / "install.sql")
    activate(session, "tagged", 1)
    assert [(row["VERSION"], row["ACTIVE"]) for row in session.store.tables["NNSQL_MODELS"].rows] == [
        (1, "Y")
    ]
    rows = session.store.tables["NNSQL_CHECK_ROWS"].rows
    column, function = ("LABELS", "labels") if build == "multilabel" else ("SCORE", "score")
    row = next(row for row in rows if row[column] is not None)
    wrong = "'[none]'" if build == "multilabel" else str((int(row["SCORE"]) + 1) % 3)
    run(
        session,
        f"BEGIN UPDATE nnsql_check_rows SET {column.lower()} = {wrong} WHERE row_no = {row['ROW_NO']}; END;",
    )
    error = refused(session, "tagged", 1)
    assert error.code == -20010 and f"({function} on row {row['ROW_NO']})" in error.message


def run_function(text: str) -> object:
    session = Session()
    session.run_script(Path("assert.sql"), f"VARIABLE r VARCHAR2(100)\nBEGIN :r := {text}; END;\n/\n")
    return session.binds["R"]


@pytest.mark.parametrize(
    ("call", "answer"),
    [
        ("DBMS_ASSERT.SIMPLE_SQL_NAME('mnist_v1')", "mnist_v1"),
        ("DBMS_ASSERT.SIMPLE_SQL_NAME('  a$b#1  ')", "  a$b#1  "),  # white space around it is allowed
        ('DBMS_ASSERT.SIMPLE_SQL_NAME(\'"a name with "" inside"\')', '"a name with "" inside"'),
        ("DBMS_ASSERT.ENQUOTE_NAME('mnist_v1')", '"MNIST_V1"'),
        ("DBMS_ASSERT.ENQUOTE_NAME('mnist_v1', FALSE)", '"mnist_v1"'),
        ("DBMS_ASSERT.ENQUOTE_NAME('\"Mixed\"')", '"Mixed"'),  # quoted already: as it is
    ],
)
def test_dbms_assert_answers_as_oracle_documents(call, answer):
    assert run_function(call) == answer


@pytest.mark.parametrize(
    "call",
    [
        "DBMS_ASSERT.SIMPLE_SQL_NAME('1mnist')",
        "DBMS_ASSERT.SIMPLE_SQL_NAME('mnist; DROP TABLE t')",
        "DBMS_ASSERT.SIMPLE_SQL_NAME('a.b')",
        'DBMS_ASSERT.SIMPLE_SQL_NAME(\'"a"b"\')',
        "DBMS_ASSERT.SIMPLE_SQL_NAME('')",
        "DBMS_ASSERT.ENQUOTE_NAME('a\"b')",
    ],
)
def test_dbms_assert_refuses_what_is_not_a_simple_name(call):
    with pytest.raises(PlsqlError) as error:
        run_function(call)
    assert error.value.code == -44003


def test_a_version_whose_entry_text_names_another_package_is_refused(session, versions):
    """mnist_v1 changed to hand out a body for another package: neither statement runs."""
    directory, kept = versions
    package = (directory / "v1" / "03_package_v1.sql").read_text()
    header = "RETURN TO_CLOB('CREATE OR REPLACE PACKAGE BODY mnist AS"
    assert package.count(header) == 1
    session.run_script(Path("other.sql"), package.replace(header, header.replace("mnist AS", "other AS")))
    error = refused(session, "mnist", 1)
    assert error.code == -20034 and "does not replace the entry package" in error.message
    assert "OTHER" not in session.packages
    assert session.call("mnist", "version") == 2 and scores_like(session, kept[2])
    assert flags(session) == [(1, "N"), (2, "Y")]


def test_the_entry_text_comes_back_whole_from_literals_of_bounded_size():
    """A model of many outputs has an entry package longer than one PL/SQL string literal may be: the
    pieces joined give the statement back, quotes and line breaks included."""
    statement = "\n".join(f"    -- output {i}: it''s 'quoted'" for i in range(600))
    script = f"-- a leading comment\nCREATE OR REPLACE PACKAGE BODY m AS\n{statement}\nEND m;\n/\n"
    expression = entry_literal(script)
    assert expression.count(" ||") >= 2  # three literals at least
    assert run_function(expression) == f"CREATE OR REPLACE PACKAGE BODY m AS\n{statement}\nEND m;"


class ProxyCursor:
    """The DB-API cursor calls of `nnsql models --oracle-dsn` that change a schema, run by the interpreter:
    a PL/SQL block with named binds, bound in the order the block first names them (as EXECUTE IMMEDIATE
    ... USING takes them)."""

    warning = None

    def __init__(self, session: Session) -> None:
        self.session = session

    def __enter__(self) -> ProxyCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, statement: str, params: dict[str, object]) -> None:
        named = {key.upper(): value for key, value in params.items()}
        order = dict.fromkeys(t.text for t in tokenize(statement) if t.kind == "bind")
        self.session.execute_immediate(statement, [("IN", lambda v=named[b]: v, None) for b in order])


class ProxyConnection:
    def __init__(self, session: Session) -> None:
        self.session = session

    def cursor(self) -> ProxyCursor:
        return ProxyCursor(self.session)


def versions_store(session: Session) -> OracleVersions:
    """The store `nnsql models --oracle-dsn` opens, its connection the interpreter's session."""
    store = OracleVersions.__new__(OracleVersions)
    store.con, store.dsn = ProxyConnection(session), parse_dsn("scott@db:1521/FREEPDB1")
    store.oracledb = SimpleNamespace(DatabaseError=PlsqlError, Error=PlsqlError)
    return store


def test_models_command_rolls_back_and_removes_the_inactive_version(session, versions):
    _, kept = versions
    store = versions_store(session)
    activate_version(store, "mnist", 1)
    assert session.call("mnist", "version") == 1 and scores_like(session, kept[1])
    with pytest.raises(ExportError, match="mnist version 1 is the active one: activate another"):
        store.remove("mnist", 1)
    store.remove("mnist", 2)
    assert flags(session) == [(1, "Y")] and "MNIST_V2" not in session.packages
    for table in ("NNSQL_TENSORS", "NNSQL_CHECK_ROWS"):
        assert {row["VERSION"] for row in session.store.tables[table].rows} == {1}
    with pytest.raises(ExportError, match="mnist has no version 2"):
        store.remove("mnist", 2)
    assert scores_like(session, kept[1])


def test_models_command_refuses_tampered_answers_in_one_line(session, versions):
    _, kept = versions
    run(session, f"BEGIN {TAMPERED_ANSWER} END;")
    with pytest.raises(ExportError) as error:
        activate_version(versions_store(session), "mnist", 1)
    message = str(error.value)
    assert message.startswith("mnist version 1 fails the answer check") and "\n" not in message
    assert session.call("mnist", "version") == 2 and scores_like(session, kept[2])
    assert flags(session) == [(1, "N"), (2, "Y")]


def sqlite_copy(session: Session, tables: tuple[str, ...]) -> sqlite3.Connection:
    """The registry tables as the scripts left them in the interpreter, copied into SQLite: the columns
    01_schema.sql creates, the rows the install wrote (collections as text, numbers as floats)."""
    con = sqlite3.connect(":memory:")
    for name in tables:
        table = session.store.tables[name]
        con.execute(f"CREATE TABLE {name} ({', '.join(table.columns)})")
        marks = ", ".join("?" for _ in table.columns)
        for row in table.rows:
            values = [sqlite_value(row[column]) for column in table.columns]
            con.execute(f"INSERT INTO {name} VALUES ({marks})", values)
    return con


def sqlite_value(value: object) -> object:
    if value is None or isinstance(value, str | int):
        return value
    if isinstance(value, np.floating | float):
        return float(value)
    return str(value)  # a collection or a timestamp: not read by the listing but for presence


def test_the_models_listing_runs_on_the_registry_the_scripts_write(session, versions, capsys):
    """`nnsql models list --oracle-dsn`'s query, executed by a real SQL engine (SQLite takes its named
    binds and correlated COUNT as Oracle does) over the registry that installing both versions wrote:
    every column it names exists in the schema, and each version lists with its kept check rows."""
    store = versions_store(session)
    database = sqlite_copy(session, ("NNSQL_MODELS", "NNSQL_CHECK_ROWS"))
    store.con = SimpleNamespace(cursor=lambda: contextlib.closing(database.cursor()))
    listed = store.versions("mnist")
    assert [(row["name"], row["version"], row["active"]) for row in listed] == [
        ("mnist", 1, False),
        ("mnist", 2, True),
    ]
    kept = [
        sum(1 for row in session.store.tables["NNSQL_CHECK_ROWS"].rows if row["VERSION"] == v) for v in (1, 2)
    ]
    assert min(kept) > 0 and all(row["activatable"] for row in listed)
    assert [row["parity_rows"] for row in listed] == [
        row["PARITY_ROWS"] for row in session.store.tables["NNSQL_MODELS"].rows
    ]
    assert store.versions() == listed and store.versions("churn") == []
    print(versions_table(listed))
    assert "*  mnist  2" in capsys.readouterr().out
