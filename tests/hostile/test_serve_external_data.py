"""A model in the repository whose tensor keeps its values in another file ("external data", a
`location` the model names): the scorer served what onnxruntime read from that file, outside the
repository and outside the sha256 it checks. Loaded from bytes, onnxruntime resolves the name against
the worker's working directory: a model naming `pyproject.toml` answered every client with its bytes."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
import requests
from onnx import TensorProto, helper

from nnsql.export.onnx.external_data import external_data_problem
from nnsql.files import import_root
from tests.hostile.test_serve_triton import iris_model, wait_until_listed
from tests.serve.conftest import ServeProcess

pytestmark = pytest.mark.slow
LEAKED = 16  # bytes of the file the model names
TARGET = "pyproject.toml"  # in the folder that holds nnsql: the worker's working directory
CONFIG = f"""
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ {{ name: "x" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "y" data_type: TYPE_UINT8 dims: [ {LEAKED} ] }} ]
"""
ROW = {"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [0.0]}


def external(name: str, location: str) -> TensorProto:
    tensor = TensorProto(name=name, data_type=TensorProto.UINT8, dims=[1, LEAKED])
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(LEAKED))):
        tensor.external_data.add(key=key, value=value)
    return tensor


def leaking_model(location: str, nested: bool = False) -> onnx.ModelProto:
    """y = the first bytes of `location`, as an initializer or (nested) a constant inside an If's branch."""
    y = helper.make_tensor_value_info("y", TensorProto.UINT8, ["rows", LEAKED])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", 1])
    if not nested:
        graph = helper.make_graph(
            [helper.make_node("Identity", ["W"], ["y"])], "leak", [x], [y], [external("W", location)]
        )
    else:
        constant = helper.make_node("Constant", [], ["c"], value=external("c", location))
        branch = helper.make_graph(
            [constant, helper.make_node("Identity", ["c"], ["out"])],
            "b",
            [],
            [helper.make_tensor_value_info("out", TensorProto.UINT8, [1, LEAKED])],
        )
        nodes = [
            helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
            helper.make_node("Greater", ["s", "zero"], ["cond"]),
            helper.make_node("If", ["cond"], ["y"], then_branch=branch, else_branch=branch),
        ]
        zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [-1.0])
        graph = helper.make_graph(nodes, "leak", [x], [y], [zero])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("external_data") / "repository"
    iris_model(repo, "iris")
    for name, nested in (("leak", False), ("nested", True)):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(CONFIG)
        (repo / name / "1" / "model.onnx").write_bytes(leaking_model(TARGET, nested).SerializeToString())
    with ServeProcess.running(repo) as served:
        yield served


@pytest.mark.parametrize("model", ["leak", "nested"])
def test_a_model_naming_another_file_is_refused_and_never_answers_with_it(server, model):
    leaked = list((import_root() / TARGET).read_bytes()[:LEAKED])
    answer = requests.post(f"{server.url}/v2/models/{model}/infer", json={"inputs": [ROW]}, timeout=10)
    assert answer.status_code == 404, answer.text
    assert str(leaked)[1:-1] not in answer.text
    entry = wait_until_listed(server, model, "UNAVAILABLE")
    assert "external data" in entry["reason"], entry
    ok = requests.post(
        f"{server.url}/v2/models/iris/infer",
        json={"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [0.5, -1.0, 2.0, 0.25]}]},
        timeout=10,
    )
    assert ok.status_code == 200


@pytest.mark.parametrize("nested", [False, True])
def test_the_check_finds_external_data_wherever_onnxruntime_would_read_it(tmp_path, nested, monkeypatch):
    """The same model, checked, and run by onnxruntime from its bytes: the tensor onnxruntime reads
    from the file is the one the check finds."""
    (tmp_path / "weights.bin").write_bytes(bytes(range(LEAKED)))
    monkeypatch.chdir(tmp_path)
    model = leaking_model("weights.bin", nested).SerializeToString()
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    assert session.run(None, {"x": np.zeros((1, 1), np.float32)})[0].tolist() == [list(range(LEAKED))]
    assert "external data" in (external_data_problem(model, "model.onnx") or "")


def test_a_model_holding_its_tensors_passes_and_garbage_is_refused(tmp_path):
    iris = iris_model(tmp_path, "iris") / "1" / "model.onnx"
    assert external_data_problem(iris.read_bytes(), "model.onnx") is None
    assert "not an ONNX model" in (external_data_problem(b"\x0f" * 64, "model.onnx") or "")
