"""python -m export.onnx: versions, parity gate, atomic publication."""

import json

import numpy as np
import onnxruntime
import pytest

from export.errors import ExportError
from export.onnx.__main__ import export, main
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


def test_failed_parity_publishes_nothing(tmp_path, cern_mlp_path, capsys):
    args = ["--model", str(cern_mlp_path), "--repo", str(tmp_path), "--name", "mnist", "--tolerance", "0"]
    assert main([*args, "--sample-rows", "100"]) == 2
    assert "version not published" in capsys.readouterr().err
    assert list((tmp_path / "mnist").iterdir()) == []  # no version, no staging leftovers


@pytest.mark.parametrize(
    ("name", "message"), [("bad name", "invalid model name"), ("mnist", "model file not found")]
)
def test_bad_input(tmp_path, name, message):
    with pytest.raises(ExportError, match=message):
        export(tmp_path / "missing.keras" if name == "mnist" else tmp_path, tmp_path, name, 10, 1e-5)
