"""`nnsql models`: versions listed, activated (their answers checked again in the target) and removed, on
DuckDB, PostgreSQL (the command and `CALL nnsql.activate`) and an ONNX repository under a running scorer;
class names carried from one version to the next."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from nnsql import cli
from nnsql.export.onnx.__main__ import main as export_onnx
from tests.export.executors import DuckDBExecutor, PostgresExecutor

CLASSES = ["stays", "leaves", "unsure"]
ROWS = np.random.default_rng(11).normal(0.0, 1.0, (6, 4)).astype(np.float32)


def churn_model(seed: int, classes: int = 3):
    """A small classifier of four features; another seed is a retrained version of it."""
    import keras

    from tests.models import _seeded

    inputs = keras.Input((4,), name="features")
    hidden = keras.layers.Dense(6, activation="relu", name="hidden")(inputs)
    outputs = keras.layers.Dense(classes, activation="softmax", name="out")(hidden)
    return _seeded(keras.Model(inputs, outputs), seed)


@pytest.fixture(scope="module")
def churn(tmp_path_factory):
    """Versions 1 and 2 (retrained: same shape), and a model with a fourth class: {name: (path, model)},
    saved without metadata.json, so that only --classes names the classes."""
    directory = tmp_path_factory.mktemp("churn")
    built = {}
    for name, model in (("v1", churn_model(1)), ("v2", churn_model(2)), ("wider", churn_model(3, 4))):
        path = directory / name / "model.keras"
        path.parent.mkdir()
        model.save(path)
        built[name] = (path, model)
    return built


def keras_scores(churn, version: str) -> np.ndarray:
    return churn[version][1].predict(ROWS, verbose=0)


def models(*argv: str) -> int:
    return cli.main(["models", *argv])


def one_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def exported_twice(target, churn, capsys) -> None:
    """v1 with --classes, v2 without: v2 keeps v1's names and says so."""
    assert target.export(churn["v1"][0], "churn", "--classes", *CLASSES) == 0
    capsys.readouterr()
    assert target.export(churn["v2"][0], "churn") == 0
    assert f"classes kept from version 1: {', '.join(CLASSES)}" in capsys.readouterr().out


def labels(target) -> list[str]:
    query = "SELECT churn.label(?::DOUBLE[])" if target.target == "duckdb" else "SELECT churn.label(?)"
    return [target.query(query, [row.tolist()])[0][0] for row in ROWS.astype(np.float64)]


def answers_of(target, churn, version: str) -> None:
    """The database answers as Keras's model of `version` does: values within float32 parity (1e-5),
    and label() names the class of the highest probability."""
    expected = keras_scores(churn, version)
    assert np.abs(target.predict("churn", ROWS) - expected).max() <= 1e-5
    assert labels(target) == [CLASSES[i] for i in expected.argmax(axis=1)]


def active_versions(target) -> list[int]:
    return [row[0] for row in target.query("SELECT version FROM nnsql.models WHERE active ORDER BY version")]


def the_full_cycle(target, churn, where: list[str], capsys, activate=None) -> None:
    exported_twice(target, churn, capsys)
    answers_of(target, churn, "v2")
    assert models("list", *where) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[1:3] for line in listed if line.startswith("*")] == [["churn", "2"]]
    assert len(listed) == 3  # the header and two versions
    if activate is None:
        assert models("activate", *where, "--name", "churn", "--version", "1") == 0
        assert "activated churn version 1" in capsys.readouterr().out
    else:
        activate()
    assert active_versions(target) == [1]
    answers_of(target, churn, "v1")
    assert models("remove", *where, "--name", "churn", "--version", "1") == 2
    assert "is the active one" in one_error(capsys)
    assert models("remove", *where, "--name", "churn", "--version", "2") == 0
    capsys.readouterr()
    assert [row[0] for row in target.query("SELECT version FROM nnsql.models")] == [1]
    assert target.query("SELECT count(*) FROM nnsql.tensors WHERE version = 2")[0][0] == 0
    answers_of(target, churn, "v1")


@pytest.mark.duckdb
def test_duckdb_versions_roll_back_and_are_removed(churn, tmp_path, capsys):
    target = DuckDBExecutor(tmp_path)
    the_full_cycle(target, churn, ["--db", str(target.db)], capsys)
    tables = (
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'nnsql' AND table_name LIKE 'weights%'"
    )
    assert target.query(tables) == [("weights_churn_v1",)]  # version 2's went with it


@pytest.mark.postgres
def test_postgres_versions_roll_back_and_are_removed(churn, postgres_dsn, capsys):
    target = PostgresExecutor(postgres_dsn)
    the_full_cycle(target, churn, ["--dsn", postgres_dsn], capsys)


@pytest.mark.postgres
def test_postgres_activation_is_sql_a_dba_calls(churn, postgres_dsn, capsys):
    import psycopg

    def call() -> None:
        with psycopg.connect(postgres_dsn) as con:
            con.execute("CALL nnsql.activate('churn', 1)")

    target = PostgresExecutor(postgres_dsn)
    the_full_cycle(target, churn, ["--dsn", postgres_dsn], capsys, activate=call)


def tampered(target, version: int) -> None:
    """The version's weights changed behind the registry's back (a bad restore, a hand edit). DuckDB's
    macros read the weights as the export shaped them into a table of the version's: that table is
    restored from the other version's (same shapes, other values), the tensors doubled."""
    import duckdb
    import psycopg

    if target.target == "duckdb":
        with duckdb.connect(str(target.db)) as con:
            con.execute(
                "UPDATE nnsql.tensors SET value = list_transform(value, x -> x * 2) WHERE version = ?",
                [version],
            )
            con.execute(
                f"CREATE OR REPLACE TABLE nnsql.weights_churn_v{version} AS "
                f"SELECT p FROM nnsql.weights_churn_v{3 - version}"
            )
        return
    with psycopg.connect(target.dsn) as con:
        con.execute(
            "UPDATE nnsql.tensors SET value = array(SELECT x * 2 FROM unnest(value) x) WHERE version = %s",
            [version],
        )


@pytest.mark.parametrize(
    "kind",
    [pytest.param("duckdb", marks=pytest.mark.duckdb), pytest.param("postgres", marks=pytest.mark.postgres)],
)
def test_a_version_that_no_longer_answers_as_keras_did_is_not_activated(
    kind, churn, tmp_path, request, capsys
):
    target = (
        DuckDBExecutor(tmp_path)
        if kind == "duckdb"
        else PostgresExecutor(request.getfixturevalue("postgres_dsn"))
    )
    where = ["--db", str(target.db)] if kind == "duckdb" else ["--dsn", target.dsn]
    exported_twice(target, churn, capsys)
    tampered(target, 1)
    assert models("activate", *where, "--name", "churn", "--version", "1") == 2
    assert "fails the answer check it was published with" in one_error(capsys)
    assert active_versions(target) == [2]
    answers_of(target, churn, "v2")


@pytest.mark.duckdb
def test_a_new_shape_without_classes_names_the_flag(churn, tmp_path, capsys):
    target = DuckDBExecutor(tmp_path)
    assert target.export(churn["v1"][0], "churn", "--classes", *CLASSES) == 0
    capsys.readouterr()
    assert target.export(churn["wider"][0], "churn") == 2
    err = one_error(capsys)
    assert "--classes" in err and "stays, leaves, unsure" in err
    assert active_versions(target) == [1]


def infer(url: str) -> tuple[int, str, np.ndarray | None]:
    """A V2 request without a version, as clients send them: (status, version that answered, scores)."""
    import requests

    body = {
        "inputs": [{"name": "features", "shape": [6, 4], "datatype": "FP32", "data": ROWS.ravel().tolist()}]
    }
    answer = requests.post(f"{url}/v2/models/churn/infer", json=body, timeout=30)
    if answer.status_code != 200:
        return answer.status_code, "", None
    document = answer.json()
    return 200, document["model_version"], np.array(document["outputs"][0]["data"]).reshape(6, -1)


class Client(threading.Thread):
    """Requests one after the other until stopped, every answer recorded."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.answers, self.stopped = url, [], threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            self.answers.append(infer(self.url)[:2])

    def until(self, version: str, seconds: float = 60) -> None:
        """Until the server answers from `version` (or the deadline: the assertion that follows fails)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not any(v == version for _, v in self.answers[-3:]):
            time.sleep(0.1)

    def stop(self) -> list[tuple[int, str]]:
        self.stopped.set()
        self.join(timeout=60)
        return self.answers


def test_a_running_scorer_switches_to_the_activated_version_without_a_failed_request(churn, tmp_path, capsys):
    from tests.serve.conftest import ServeProcess

    repo = tmp_path / "repo"
    onnx = ["--repo", str(repo), "--name", "churn", "--quiet", "--sample-rows", "100"]
    assert export_onnx(["--model", str(churn["v1"][0]), *onnx, "--classes", *CLASSES]) == 0
    capsys.readouterr()
    assert export_onnx(["--model", str(churn["v2"][0]), *onnx]) == 0
    assert f"classes kept from version 1: {', '.join(CLASSES)}" in capsys.readouterr().out
    assert json.loads((repo / "churn" / "2" / "metadata.json").read_text())["classes"] == CLASSES
    server = ServeProcess(repo, "--poll-seconds", "0.2")
    client = Client(server.url)
    try:
        server.wait_ready()
        client.start()
        client.until("2")
        assert models("activate", "--repo", str(repo), "--name", "churn", "--version", "1") == 0
        client.until("1")
        answers = client.stop()
        status, version, scores = infer(server.url)
        assert status == 200 and version == "1"
        assert np.abs(scores - keras_scores(churn, "v1")).max() <= 1e-5
        assert models("remove", "--repo", str(repo), "--name", "churn", "--version", "1") == 2
        assert "is the active one" in one_error(capsys)
        assert models("remove", "--repo", str(repo), "--name", "churn", "--version", "2") == 0
        assert sorted(p.name for p in (repo / "churn").iterdir()) == ["1", "active"]
        assert infer(server.url)[:2] == (200, "1")
    finally:
        client.stop()
        server.stop()
    assert {status for status, _ in answers} == {200}
    # Each worker of the scorer swaps at the commit, within milliseconds of the others: around it, two
    # requests in a row may be answered by either version, every one of them answered.
    versions = [version for _, version in answers]
    assert versions[0] == "2" and versions[-1] == "1" and set(versions) == {"1", "2"}, versions


@pytest.mark.oracle
def test_oracle_scripts_hold_the_activation_of_their_version(churn, tmp_path):
    """A DBA who ran version 2's scripts rolls back with version 1's activate_v1.sql: the same check on
    the same sample rows against churn_v1, then the switch, then the registry (no new row); checked by an
    independent parser of Oracle's grammar, and never run by install.sql."""
    import parseora

    from nnsql.export.oracle.__main__ import main as export_oracle

    args = ["--name", "churn", "--quiet", "--sample-rows", "50", "--classes", *CLASSES]
    assert export_oracle(["--model", str(churn["v1"][0]), "--script-only", str(tmp_path / "v1"), *args]) == 0
    script = (tmp_path / "v1" / "activate_v1.sql").read_text()
    errors = [(unit["line"], e) for unit in parseora.parse(script, version="19c") for e in unit["errors"]]
    assert errors == []
    verify = script.index("churn_v1.predict(")
    refuse = script.index("version not published")
    switch = script.index("CREATE OR REPLACE PACKAGE BODY churn AS")
    registry = script.index("UPDATE nnsql_models SET active = CASE WHEN version = 1 THEN 'Y' ELSE 'N' END")
    assert verify < refuse < switch < registry and "INSERT INTO nnsql_models" not in script
    assert "RETURN churn_v1.predict(" in script[switch:registry]
    published = (tmp_path / "v1" / "04_verify_and_switch_v1.sql").read_text()
    assert script[:switch] == published[:switch]  # the export's own check, row for row
    assert "activate_v1.sql" not in (tmp_path / "v1" / "install.sql").read_text()


@pytest.mark.duckdb
def test_bad_requests_are_one_line_and_change_nothing(churn, tmp_path, capsys):
    import duckdb

    target = DuckDBExecutor(tmp_path)
    exported_twice(target, churn, capsys)
    where = ["--db", str(target.db), "--name", "churn"]
    with duckdb.connect(str(target.db)) as con:  # as a registry of a release before kept versions
        con.execute("DELETE FROM nnsql.installs WHERE version = 1")
    for argv, message in (
        (["activate", *where], "needs --name and --version"),
        (["activate", *where, "--version", "7"], "churn has no version 7 (versions: 1, 2)"),
        (["activate", *where, "--version", "1"], "export it again to activate it"),
        (["remove", *where, "--version", "2"], "is the active one"),
        (["list", "--db", str(tmp_path / "none.duckdb")], "no such DuckDB file"),
        (["list", *where, "--repo", str(tmp_path)], "give one store: --db or --repo"),
    ):
        assert models(*argv) == 2
        assert message in one_error(capsys), argv
    assert active_versions(target) == [2]
    answers_of(target, churn, "v2")


def tagger(seed: int, kind: str):
    """A model whose answers are not argmax: one sigmoid unit (score, label) or three independent
    sigmoids (labels), compiled with the loss that says so."""
    import keras

    from tests.models import _seeded

    inputs = keras.Input((4,), name="features")
    hidden = keras.layers.Dense(6, activation="relu", name="hidden")(inputs)
    units = 1 if kind == "binary" else 3
    model = keras.Model(inputs, keras.layers.Dense(units, activation="sigmoid", name="out")(hidden))
    model.compile(loss="binary_crossentropy")
    return _seeded(model, seed)


@pytest.mark.parametrize("kind", ["binary", "multilabel"])
@pytest.mark.parametrize(
    "store",
    [pytest.param("duckdb", marks=pytest.mark.duckdb), pytest.param("postgres", marks=pytest.mark.postgres)],
)
def test_answers_of_every_kind_are_checked_again(kind, store, tmp_path, request, capsys):
    """score and label of one sigmoid, labels of several: each is compared with the stored answers, in
    SQL by nnsql.activate in PostgreSQL."""
    paths = []
    for seed in (1, 2):
        path = tmp_path / f"{kind}{seed}" / "model.keras"
        path.parent.mkdir()
        tagger(seed, kind).save(path)
        paths.append(path)
    if store == "duckdb":
        target, where = DuckDBExecutor(tmp_path), ["--db", str(tmp_path / "models.duckdb")]
    else:
        dsn = request.getfixturevalue("postgres_dsn")
        target, where = PostgresExecutor(dsn), ["--dsn", dsn]
    labels = ["noise", "signal"] if kind == "binary" else ["muon", "jet", "photon"]
    assert target.export(paths[0], "tags", "--classes", *labels) == 0
    assert target.export(paths[1], "tags") == 0
    assert f"classes kept from version 1: {', '.join(labels)}" in capsys.readouterr().out
    kept = target.query("SELECT gate_check FROM nnsql.installs WHERE version = 1")[0][0]
    document = kept if isinstance(kept, dict) else json.loads(kept)
    assert set(document["rows"][0]["answers"]) >= ({"label"} if kind == "binary" else {"labels"})
    assert models("activate", *where, "--name", "tags", "--version", "1") == 0
    assert active_versions(target) == [1]
    assert np.abs(target.predict("tags", ROWS) - tagger(1, kind).predict(ROWS, verbose=0)).max() <= 1e-5


def test_an_export_after_a_roll_back_is_the_active_version(churn, tmp_path, capsys):
    """In a repository as in a database, every export activates its version: `active` moves to it."""
    repo = tmp_path / "repo"
    onnx = ["--repo", str(repo), "--name", "churn", "--quiet", "--sample-rows", "100"]
    assert export_onnx(["--model", str(churn["v1"][0]), *onnx, "--classes", *CLASSES]) == 0
    assert export_onnx(["--model", str(churn["v2"][0]), *onnx, "--classes", "a", "b", "c"]) == 0
    assert models("activate", "--repo", str(repo), "--name", "churn", "--version", "1") == 0
    capsys.readouterr()
    assert export_onnx(["--model", str(churn["v2"][0]), *onnx]) == 0
    assert f"classes kept from version 1: {', '.join(CLASSES)}" in capsys.readouterr().out
    assert (repo / "churn" / "active").read_text().strip() == "3"
    assert models("list", "--repo", str(repo), "--name", "churn") == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[1:3] for line in listed if line.startswith("*")] == [["churn", "3"]]


def test_the_kept_check_of_large_inputs_keeps_fewer_rows():
    """32 rows of 224 x 224 x 3 images would be 4.8 million values of JSON in the registry."""
    from nnsql.export.registry.checks import STORED_ROWS, STORED_VALUES, stored_check

    meaning = ("probabilities", ("a", "b", "c"), 3, False)
    expected, allowed = np.tile([0.2, 0.3, 0.5], (100, 1)), np.full(100, 1e-5)
    images = stored_check({"image": np.zeros((100, 224, 224, 3))}, expected, allowed, 100, meaning)
    rows = stored_check({"features": np.zeros((100, 4))}, expected, allowed, 100, meaning)
    assert images.rows * 224 * 224 * 3 <= STORED_VALUES and images.rows >= 1
    assert rows.rows == STORED_ROWS and rows.answers["label"] == ["c"] * STORED_ROWS


@pytest.mark.duckdb
def test_activation_runs_only_the_statements_the_exporter_writes(churn, tmp_path, capsys):
    """The kept scoring code lives in the DuckDB file: a statement written into it by whoever can write the
    file (a COPY that writes a file where the activating user may write) ran as it stood."""
    import duckdb

    target = DuckDBExecutor(tmp_path)
    exported_twice(target, churn, capsys)
    planted = tmp_path / "planted.txt"
    with duckdb.connect(str(target.db)) as con:
        con.execute(
            "UPDATE nnsql.installs SET script = ? || script WHERE name = 'churn' AND version = 1",
            [f"COPY (SELECT 'planted') TO '{planted}';\n"],
        )
    assert models("activate", "--db", str(target.db), "--name", "churn", "--version", "1") == 2
    assert "a statement the exporter never writes (COPY" in one_error(capsys)
    assert not planted.exists() and active_versions(target) == [2]
    with duckdb.connect(str(target.db)) as con:
        con.execute(
            "UPDATE nnsql.installs SET gate_check = ? WHERE name = 'churn' AND version = 1",
            ['{"shapes": {}, "rows": []}'],
        )
        con.execute(
            "UPDATE nnsql.installs SET script = substr(script, strpos(script, ';') + 2) WHERE name = 'churn'"
            " AND version = 1"
        )
    assert models("activate", "--db", str(target.db), "--name", "churn", "--version", "1") == 2
    assert "holds no rows" in one_error(capsys)
    assert active_versions(target) == [2]
