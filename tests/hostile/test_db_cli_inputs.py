"""Bad input to `nnsql export` and `nnsql spawn` is one line, never a traceback, and never echoes a
secret: numeric options are checked when parsed (range, finiteness), a model configuration naming a
Keras module that does not exist is the file's problem (not a missing Keras), and an env-file line that
does not parse is named by its variable, without its value."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import duckdb
import pytest

from nnsql import cli as nnsql_cli
from nnsql.export.duckdb.__main__ import main as export_duckdb
from nnsql.train.spawn import __main__ as spawn
from tests.conftest import REPO

SECRET = "hunter2-do-not-print"


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--sample-rows", "0", "must be at least 1, got 0"),
        ("--sample-rows", "1e3", "expected a whole number, got '1e3'"),
        ("--parity-seconds", "nan", "must be a finite number, got 'nan'"),
        ("--parity-seconds", "inf", "must be a finite number, got 'inf'"),
        ("--parity-seconds", "0", "must be more than 0, got 0"),
        ("--tolerance", "nan", "must be a finite number, got 'nan'"),
        ("--tolerance", "inf", "must be a finite number, got 'inf'"),
        ("--tolerance", "-1e-5", "must be at least 0, got -1e-05"),
        ("--max-parameters", "0", "must be at least 1, got 0"),
        ("--max-activations", "-5", "must be at least 1, got -5"),
    ],
)
def test_numeric_export_options_are_checked_when_parsed(tmp_path, capsys, option, value, message):
    db = tmp_path / "models.duckdb"
    argv = ["--model", str(tmp_path / "absent.keras"), "--db", str(db), "--name", "m", f"{option}={value}"]
    with pytest.raises(SystemExit) as exit_:
        export_duckdb(argv)
    assert exit_.value.code == 2
    err = one_line(capsys)
    assert err.startswith("error: nnsql export duckdb: argument") and option in err and message in err
    assert not db.exists()


def with_unknown_ops_module(source: Path, target: Path) -> Path:
    """A copy of a .keras archive whose Dense kernel initializer names an ops module Keras lacks."""
    with zipfile.ZipFile(source) as archive, zipfile.ZipFile(target, "w") as out:
        for info in archive.infolist():
            data = archive.read(info)
            if info.filename == "config.json":
                config = json.loads(data)
                layer = next(x for x in config["config"]["layers"] if x["config"]["name"] == "hidden")
                initializer = {"module": "keras.src.ops.nonexistent", "class_name": "Gelu", "config": {}}
                layer["config"]["kernel_initializer"] = initializer
                data = json.dumps(config).encode()
            out.writestr(info, data)
    return target


@pytest.mark.parametrize("entry", ["nnsql export duckdb", "python -m nnsql.export.duckdb"])
def test_a_missing_keras_ops_module_is_the_files_problem(cern_mlp_path, tmp_path, capsys, entry):
    model = with_unknown_ops_module(cern_mlp_path, tmp_path / "odd.keras")
    argv = ["--model", str(model), "--db", str(tmp_path / "models.duckdb"), "--name", "m", "--quiet"]
    code = nnsql_cli.main(["export", "duckdb", *argv]) if entry.startswith("nnsql") else export_duckdb(argv)
    assert code == 2
    err = one_line(capsys)
    assert "layer 'hidden' (Dense): class 'Gelu' names module 'keras.src.ops.nonexistent'" in err
    assert "install" not in err


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        (f'AWS_SECRET_ACCESS_KEY="{SECRET}\n', "in the line that sets AWS_SECRET_ACCESS_KEY"),
        (f"export TOKEN='{SECRET}\n", "in the line that sets TOKEN"),
        (f"= {SECRET}\n", "the line is not shown"),
        (f"A B={SECRET}\n", "the line is not shown"),
        (f"{SECRET}\n", "it is not shown"),  # a value wrapped onto a line of its own
    ],
)
def test_an_env_file_line_that_does_not_parse_never_shows_its_value(
    tmp_path, capsys, monkeypatch, line, shown
):
    monkeypatch.setattr(spawn, "RUNS", tmp_path / "runs")
    path = tmp_path / "s3.env"
    path.write_text("OK=1\n" + line)
    assert spawn.main(["-w", "1", "--env-file", str(path), str(REPO / "train" / "mnist.py")]) == 2
    err = capsys.readouterr().err
    assert SECRET not in err and "hunter2" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"error: {path}:2: expected NAME=value") and shown in last
    assert not (tmp_path / "runs").exists()


def with_layer_named(source: Path, target: Path, name: str) -> Path:
    """A copy of a .keras archive whose layer 'hidden' is named `name` (which Keras's own checks let by)."""
    with zipfile.ZipFile(source) as archive, zipfile.ZipFile(target, "w") as out:
        for info in archive.infolist():
            data = archive.read(info)
            if info.filename == "config.json":
                data = data.replace(b'"hidden"', json.dumps(name).encode())
            out.writestr(info, data)
    return target


@pytest.mark.parametrize("name", ['out"; DROP TABLE y; --', "out\u202e\x00x"])
def test_a_layer_name_tensorflow_refuses_is_data_to_the_sql_targets(cern_mlp_path, tmp_path, name):
    """Names are data: the SQL targets make their own identifiers of them. A name TensorFlow refuses as
    a scope name (Keras's traced predict raised on it) neither reaches the SQL nor stops the export."""
    model = with_layer_named(cern_mlp_path, tmp_path / "named.keras", name)
    db = tmp_path / "models.duckdb"
    argv = ["export", "duckdb", "--model", str(model), "--name", "m", "--quiet", "--db", str(db)]
    assert nnsql_cli.main(argv) == 0
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'y'").fetchone() == (0,)
        assert (
            len(
                con.execute(
                    "SELECT m.predict_proba(list_value(" + ", ".join(["0.5"] * 784) + "))"
                ).fetchone()[0]
            )
            == 10
        )


def test_a_layer_name_the_onnx_converter_refuses_is_one_line(cern_mlp_path, tmp_path, capsys):
    """A name the converter cannot make a node of ended the export in a traceback; now one printable
    line, and nothing is published."""
    model = with_layer_named(cern_mlp_path, tmp_path / "named.keras", "o-u.t>x\\y")
    argv = [
        "export",
        "onnx",
        "--model",
        str(model),
        "--name",
        "m",
        "--quiet",
        "--repo",
        str(tmp_path / "repo"),
    ]
    assert nnsql_cli.main(argv) == 2
    err = one_line(capsys)
    assert err.startswith("error: ") and "Node name contains invalid characters" in err, err
    assert err.isprintable()
    assert not (tmp_path / "repo" / "m").exists()
