"""A Triton model repository written by hand (config.pbtxt, labels.txt, version directories holding
model.onnx), served by `nnsql serve` as it is; Triton's own clients ask for the top classes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
import requests
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from onnx import TensorProto, helper

from nnsql.serve import tritonrepo
from nnsql.serve.validation import InvalidVersion
from tests.fixtures import free_port
from tests.serve.conftest import ServeProcess

IRIS_CONFIG = """
name: "iris"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "x"  data_type: TYPE_FP32  dims: [ 4 ] } ]
output [ { name: "probs"  data_type: TYPE_FP32  dims: [ 3 ]  label_filename: "labels.txt" } ]
instance_group [ { count: 1  kind: KIND_CPU } ]
"""
IRIS_LABELS = ["setosa", "versicolor", "virginica"]
SPAM_CONFIG = 'platform: "onnxruntime_onnx"\nmax_batch_size: 4\nversion_policy: { all: {} }\n'
SPAM_CLASSES = ["ham", "spam"]


def softmax_model(path: Path, seed: int, classes: int) -> None:
    """x (rows × 4) → softmax(x·W + b) as `probs`, weights from `seed`."""
    rng = np.random.default_rng(seed)
    weights = helper.make_tensor("W", TensorProto.FLOAT, [4, classes], rng.normal(size=4 * classes).tolist())
    bias = helper.make_tensor("b", TensorProto.FLOAT, [classes], rng.normal(size=classes).tolist())
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["xw"]),
            helper.make_node("Add", ["xw", "b"], ["logits"]),
            helper.make_node("Softmax", ["logits"], ["probs"], axis=1),
        ],
        "softmax",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", 4])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["rows", classes])],
        initializer=[weights, bias],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, path)


@pytest.fixture(scope="module")
def triton_repo(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("triton_repository")
    (repo / "iris").mkdir()
    (repo / "iris" / "config.pbtxt").write_text(IRIS_CONFIG)
    (repo / "iris" / "labels.txt").write_text("\n".join(IRIS_LABELS) + "\n")
    softmax_model(repo / "iris" / "1" / "model.onnx", 1, 3)
    softmax_model(repo / "iris" / "2" / "model.onnx", 2, 3)  # the latest: the only one served by default
    (repo / "spam").mkdir()
    (repo / "spam" / "config.pbtxt").write_text(SPAM_CONFIG)  # tensors left to the graph
    softmax_model(repo / "spam" / "1" / "model.onnx", 3, 2)
    (repo / "spam" / "1" / "metadata.json").write_text('{"classes": ["ham", "spam"]}')
    (repo / "broken").mkdir()
    (repo / "broken" / "config.pbtxt").write_text('name: "broken"\ninput [ { name: "x" \n')
    softmax_model(repo / "broken" / "1" / "model.onnx", 4, 2)
    return repo


@pytest.fixture(scope="module")
def served(triton_repo):
    server = ServeProcess(triton_repo, "--workers", "1", "--grpc-port", str(grpc_port := free_port()))
    server.grpc_url = f"127.0.0.1:{grpc_port}"  # type: ignore[attr-defined]
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def expected_top(
    model: Path, rows: np.ndarray, k: int, labels: list[str]
) -> list[list[tuple[float, int, str]]]:
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    (probs,) = session.run(["probs"], {"x": rows})
    order = np.argsort(-probs, axis=1, kind="stable")[:, :k]
    return [
        [(float(p[i]), int(i), labels[i]) for i in chosen] for p, chosen in zip(probs, order, strict=True)
    ]


def parsed(answer: np.ndarray) -> list[list[tuple[float, int, str]]]:
    """Triton's `score:index:label` strings as tuples."""
    rows = []
    for row in answer:
        items = [(item.decode() if isinstance(item, bytes) else item).split(":", 2) for item in row]
        rows.append([(float(score), int(index), label) for score, index, label in items])
    return rows


def assert_same_top(got: list, expected: list) -> None:
    """Same classes in the same order; scores within float32 parity (1e-5: a batch of other rows may
    take another matrix kernel)."""
    assert [[(i, label) for _, i, label in row] for row in got] == [
        [(i, label) for _, i, label in row] for row in expected
    ]
    assert (
        max(abs(a[0] - b[0]) for r, s in zip(got, expected, strict=True) for a, b in zip(r, s, strict=True))
        <= 1e-5
    )


def test_tritonclient_gets_top_labels_over_http_and_grpc(served, triton_repo):
    rows = np.random.default_rng(7).normal(size=(5, 4)).astype(np.float32)
    expected = expected_top(triton_repo / "iris" / "2" / "model.onnx", rows, 2, IRIS_LABELS)
    for module, client in (
        (triton_http, triton_http.InferenceServerClient(served.url.removeprefix("http://"))),
        (triton_grpc, triton_grpc.InferenceServerClient(served.grpc_url)),
    ):
        for binary in (True, False) if module is triton_http else (True,):
            given = module.InferInput("x", list(rows.shape), "FP32")
            given.set_data_from_numpy(rows) if module is triton_grpc else given.set_data_from_numpy(
                rows, binary
            )
            options = {"binary_data": binary} if module is triton_http else {}
            asked = module.InferRequestedOutput("probs", class_count=2, **options)
            answer = client.infer("iris", [given], outputs=[asked]).as_numpy("probs")
            assert answer.shape == (5, 2)
            assert_same_top(parsed(answer), expected)
        client.close()


def test_labels_come_from_metadata_classes_and_max_batch_size_holds(served, triton_repo):
    rows = np.random.default_rng(8).normal(size=(3, 4)).astype(np.float32)
    body = {
        "inputs": [{"name": "x", "shape": [3, 4], "datatype": "FP32", "data": rows.ravel().tolist()}],
        "outputs": [{"name": "probs", "parameters": {"classification": 1}}],
    }
    answer = requests.post(f"{served.url}/v2/models/spam/infer", json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    (tensor,) = answer.json()["outputs"]
    assert tensor["datatype"] == "BYTES" and tensor["shape"] == [3, 1]
    got = parsed(np.array(tensor["data"], dtype=object).reshape(3, 1))
    assert_same_top(got, expected_top(triton_repo / "spam" / "1" / "model.onnx", rows, 1, SPAM_CLASSES))
    body["inputs"][0] |= {"shape": [5, 4], "data": [0.5] * 20}
    refused = requests.post(f"{served.url}/v2/models/spam/infer", json=body, timeout=30)
    assert refused.status_code == 400 and "max_batch_size of 4" in refused.json()["error"]


def test_version_policy_is_triton_s_and_skipped_fields_are_said_once(served):
    client = triton_http.InferenceServerClient(served.url.removeprefix("http://"))
    assert client.is_model_ready("iris", "2") and not client.is_model_ready("iris", "1")
    assert client.get_model_metadata("iris")["versions"] == ["2"]
    client.close()
    warnings = [line for line in served.log().splitlines() if "config.pbtxt: ignoring" in line]
    assert len(warnings) == 1 and "instance_group" in warnings[0] and "iris/config.pbtxt" in warnings[0]


def test_a_malformed_config_gets_one_line_and_the_others_load(served):
    index = requests.post(f"{served.url}/v2/repository/index", json={}, timeout=30).json()
    states = {(entry["name"], entry["state"]) for entry in index}
    assert {("iris", "READY"), ("spam", "READY"), ("broken", "UNAVAILABLE")} <= states
    said = [line for line in served.log().splitlines() if "broken" in line]
    assert len(said) == 1 and "config.pbtxt" in said[0] and "Traceback" not in served.log()
    (reason,) = [entry["reason"] for entry in index if entry["name"] == "broken"]
    assert "config.pbtxt" in reason and str(served.url) not in reason


@pytest.mark.parametrize(
    ("config", "files", "said"),
    [
        ('output [ { name: "p" label_filename: "../../etc/passwd" } ]', {}, "must be a file name"),
        ('default_model_filename: "/etc/passwd"', {}, "must be a file name"),
        ('platform: "tensorflow_savedmodel"', {}, "is not served"),
        ('name: "other"', {}, "names the model 'other'"),
        ("max_batch_size: 1" + " " * tritonrepo.MAX_CONFIG_BYTES, {}, "larger than"),
        ("max_batch_size: 1", {"config.pbtxt": b"\xff\xfe"}, "not UTF-8"),
    ],
)
def test_hostile_configs_are_refused_in_one_line(tmp_path, config, files, said):
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    (model_dir / "config.pbtxt").write_text(config)
    for name, data in files.items():
        (model_dir / name).write_bytes(data)
    with pytest.raises(InvalidVersion) as refused:
        tritonrepo.read_config(model_dir)
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_fields_triton_does_not_know_are_skipped_with_one_warning():
    config, warning = tritonrepo.parse_config(
        "max_batch_size: 2\nbatch_sise: 4\ninstance_group [ { count: 1 } ]"
    )
    assert config.max_batch_size == 2
    assert warning is not None and "\n" not in warning
    assert "instance_group (not used by nnsql serve)" in warning and "batch_sise" in warning
