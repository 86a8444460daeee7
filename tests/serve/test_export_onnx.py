"""nnsql export onnx: versions, parity gate, atomic publication."""

import json

import numpy as np
import onnxruntime
import pytest

from nnsql.export.errors import ExportError
from nnsql.export.onnx.__main__ import export, main
from tests import models


def test_publishes_numbered_versions_with_metadata(tmp_path, cern_mlp_path):
    assert export(cern_mlp_path, tmp_path, "mnist", 100, 1e-5)[0] == 1
    assert export(cern_mlp_path, tmp_path, "mnist", 100, 1e-5)[0] == 2
    metadata = json.loads((tmp_path / "mnist" / "2" / "metadata.json").read_text())
    assert metadata["version"] == 2 and len(metadata["sha256"]) == 64
    assert metadata["parity"]["max_abs_diff"] <= 1e-5 and metadata["parity"]["rows"] == 100
    assert metadata["classes"][0] == "class_0"
    session = onnxruntime.InferenceSession(str(tmp_path / "mnist" / "2" / "model.onnx"))
    assert [o.name for o in session.get_outputs()] == ["probabilities"]
    x = np.random.default_rng(0).random((4, 784), dtype=np.float32)
    expected = models.cern_mlp().predict(x, verbose=0)
    assert np.abs(session.run(None, {"features": x})[0] - expected).max() <= 1e-5


def test_failed_parity_publishes_nothing(tmp_path, cern_mlp_path, capsys, monkeypatch):
    """A conversion that gets the weights wrong (another network's, here) is refused. (--tolerance 0 no
    longer forces a failure: a float32 target is allowed float32 rounding, see export/publish/pipeline.py.)"""
    import nnsql.export.onnx.emit as onnx_export

    convert, other = onnx_export.convert, models.cern_mlp(seed=99)
    other.predict(np.zeros((1, 784), np.float32), verbose=0)  # the converter needs a called model
    monkeypatch.setattr(
        onnx_export, "convert", lambda model, path, **options: convert(other, path, **options)
    )
    args = ["--model", str(cern_mlp_path), "--repo", str(tmp_path), "--name", "mnist"]
    assert main([*args, "--sample-rows", "100"]) == 2
    assert "version not published" in capsys.readouterr().err
    assert not (tmp_path / "mnist").exists()  # no version, no staging leftovers, no empty model


@pytest.mark.parametrize(
    ("name", "message"), [("bad name", "invalid model name"), ("mnist", "model file not found")]
)
def test_bad_input(tmp_path, name, message):
    with pytest.raises(ExportError, match=message):
        export(tmp_path / "missing.keras" if name == "mnist" else tmp_path, tmp_path, name, 10, 1e-5)


def test_a_numbered_directory_without_metadata_is_skipped_not_looped_on(tmp_path, cern_mlp_path):
    (tmp_path / "mnist" / "1").mkdir(parents=True)  # half-written by someone else: no metadata.json
    (tmp_path / "mnist" / "1" / "model.onnx").write_bytes(b"partial")
    (tmp_path / "mnist" / "²").mkdir()
    assert export(cern_mlp_path, tmp_path, "mnist", 50, 1e-5)[0] == 2
    assert sorted(p.name for p in (tmp_path / "mnist").iterdir()) == ["1", "2", "²"]


def test_staging_left_by_a_killed_export_is_removed(tmp_path, cern_mlp_path):
    import subprocess

    finished = subprocess.Popen(["true"])  # a process that has ended: its pid names no live export
    finished.wait()
    abandoned = tmp_path / "mnist" / f".staging-{finished.pid}-abc"
    abandoned.mkdir(parents=True)
    assert export(cern_mlp_path, tmp_path, "mnist", 50, 1e-5)[0] == 1
    assert sorted(p.name for p in (tmp_path / "mnist").iterdir()) == ["1"]


def test_a_repository_path_that_is_a_file_is_one_line(tmp_path, cern_mlp_path, capsys):
    target = tmp_path / "passwd"
    target.write_text("root:x:0:0\n")
    args = ["--model", str(cern_mlp_path), "--repo", str(target), "--name", "mnist", "--sample-rows", "10"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "is not a directory" in err and len(err.splitlines()) == 1 and target.read_text() == "root:x:0:0\n"


def variable_length_gru():
    """A GRU over a masked sequence of any length (`None` time steps), as users declare it."""
    import keras

    sequence = keras.Input((None, 4), name="sequence")
    state = keras.layers.GRU(5, name="gru")(keras.layers.Masking(0.0, name="mask")(sequence))
    model = keras.Model(sequence, keras.layers.Dense(3, activation="softmax", name="out")(state))
    return models._seeded(model, 4)


def test_variable_length_sequences_export_and_serve(tmp_path, serve_app, capsys):
    """ONNX keeps the length open (parity at two lengths, -1 in the document); the HTTP scorer takes any
    length; the SQL targets, which need fixed shapes, refuse in one line without --sequence-length."""
    import requests

    from nnsql.export.duckdb.__main__ import main as export_duckdb

    model = variable_length_gru()
    path = models.save(model, tmp_path / "gru_any_length")
    assert export(path, tmp_path / "repo", "gru", 50, 1e-5)[0] == 1
    metadata = json.loads((tmp_path / "repo" / "gru" / "1" / "metadata.json").read_text())
    assert metadata["inputs"][0]["shape"] == [-1, -1, 4] and "5 steps" in metadata["parity"]["sample_source"]
    live = serve_app(REPO=str(tmp_path / "repo"))
    x = np.random.default_rng(2).random((3, 9, 4), dtype=np.float32)
    x[1, 6:] = 0.0  # zero padding, masked
    body = {
        "inputs": [{"name": "sequence", "shape": [3, 9, 4], "datatype": "FP32", "data": x.ravel().tolist()}]
    }
    answer = requests.post(f"{live.url}/v2/models/gru/infer", json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    scores = np.array(answer.json()["outputs"][0]["data"]).reshape(3, 3)
    assert np.abs(scores - model.predict(x, verbose=0)).max() <= 1e-5
    wrong = {"inputs": [{**body["inputs"][0], "shape": [3, 9, 5]}]}
    assert requests.post(f"{live.url}/v2/models/gru/infer", json=wrong, timeout=30).status_code == 400
    db = ["--model", str(path), "--db", str(tmp_path / "m.duckdb"), "--name", "gru", "--quiet"]
    capsys.readouterr()  # the live server's access log
    assert export_duckdb(db) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "variable length" in error and "--sequence-length N" in error


def test_every_output_reaches_http_clients(tmp_path, serve_app):
    """A model with two heads: the repository lists both, V2 returns both, TF Serving returns a dict."""
    import requests

    from tests import zoo

    model = zoo.trained(models.two_heads(), 3)
    path = models.save(model, tmp_path / "heads")
    assert export(path, tmp_path / "repo", "heads", 50, 1e-5)[0] == 1
    metadata = json.loads((tmp_path / "repo" / "heads" / "1" / "metadata.json").read_text())
    assert [o["name"] for o in metadata["outputs"]] == ["probabilities", "energy"]
    live = serve_app(REPO=str(tmp_path / "repo"))
    x = np.random.default_rng(3).random((4, 6), dtype=np.float32)
    kind, energy = model.predict(x, verbose=0)
    body = {"inputs": [{"name": "features", "shape": [4, 6], "datatype": "FP32", "data": x.ravel().tolist()}]}
    outputs = requests.post(f"{live.url}/v2/models/heads/infer", json=body, timeout=30).json()["outputs"]
    got = {o["name"]: np.array(o["data"]).reshape(o["shape"]) for o in outputs}
    assert np.abs(got["probabilities"] - kind).max() <= 1e-5 and np.abs(got["energy"] - energy).max() <= 1e-5
    url = f"{live.url}/v1/models/heads:predict"
    rows = requests.post(url, json={"instances": x.tolist()}, timeout=30).json()["predictions"]
    assert len(rows) == 4 and set(rows[0]) == {"probabilities", "energy"}  # TF Serving: an object per row
    assert np.abs(np.array([row["energy"] for row in rows]) - energy).max() <= 1e-5
    columns = requests.post(url, json={"inputs": {"features": x.tolist()}}, timeout=30).json()["outputs"]
    assert np.abs(np.array(columns["probabilities"]) - kind).max() <= 1e-5
