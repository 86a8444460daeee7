"""`EXEC nnsql_admin.activate('mnist', 1)`: a DBA rolls an Oracle model back or forward from SQL*Plus with
no nnsql installed. Two versions exported as scripts run in one session of the PL/SQL interpreter
(tests/export/plsql); the procedure runs the version's kept answer check in the database, refuses what
fails it (tampered answers, a changed or invalid package, a name or version that is not there) with the
active version still scoring, and switches the entry package and the registry otherwise."""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import pytest

from nnsql.export.oracle.__main__ import main as export_oracle
from tests import models
from tests.export.plsql.session import Session
from tests.export.plsql.values import PlsqlError
from tests.export.test_oracle_plsql import RELU_LOOP, relu_model

pytestmark = pytest.mark.oracle

ADMIN = Path(__file__).parents[2] / "sql" / "oracle" / "admin.sql"


@pytest.fixture(scope="module")
def versions(tmp_path_factory) -> tuple[Path, dict[int, keras.Model]]:
    """mnist version 1 (the relu model) and version 2 (the same layers, other weights), as scripts."""
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
    return directory, kept


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
    """What the DBA types in SQL*Plus (EXEC is BEGIN ... END;), the name as a SQL literal."""
    quoted = "'" + model.replace("'", "''") + "'"
    run(session, f"BEGIN nnsql_admin.activate({quoted}, {version}); END;")


def flags(session: Session) -> list[tuple[int, str]]:
    return [(row["VERSION"], row["ACTIVE"]) for row in session.store.tables["NNSQL_MODELS"].rows]


def scores_like(session: Session, model: keras.Model) -> bool:
    x = np.random.default_rng(8).random((6, 8), dtype=np.float32)
    actual = np.array([session.call("mnist", "predict", row) for row in x])
    return bool(np.abs(actual - model.predict(x, verbose=0)).max() <= 1e-5)  # float32 parity


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
