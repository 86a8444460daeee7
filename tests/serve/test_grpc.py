"""The gRPC service (KServe V2 / Open Inference Protocol) with Triton's own client, unchanged: the same
models, answers, limits, errors and API keys as over REST, and the protocol's wire format."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from pathlib import Path

import grpc
import keras
import numpy as np
import pytest
import requests
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from google.protobuf import descriptor_pool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from nnsql.serve.rpc.messages import POOL, SERVICE
from tests.serve.conftest import ServeProcess


def grpc_client(live) -> triton_grpc.InferenceServerClient:
    return triton_grpc.InferenceServerClient(url=live.grpc_url)


def refusal(call) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as refused:
        call()
    return refused.value


def each_message(descriptor):
    yield descriptor
    for nested in descriptor.nested_types:
        yield from each_message(nested)


def test_every_declared_message_and_method_is_tritons_on_the_wire():
    """Names, numbers and types of every field we declare equal those of Triton's grpc_service.proto and
    model_config.proto (as shipped in tritonclient), a superset of KServe's grpc_predict_v2.proto."""
    theirs = service_pb2.DESCRIPTOR.pool
    files = [POOL.FindFileByName("inference.proto")]
    ours = [m for f in files for top in f.message_types_by_name.values() for m in each_message(top)]
    assert len(ours) > 40
    for message in ours:
        triton = theirs.FindMessageTypeByName(message.full_name)
        for field in message.fields:
            twin = triton.fields_by_name[field.name]
            assert (field.number, field.type, field.is_repeated) == (twin.number, twin.type, twin.is_repeated)
            for kind in ("message_type", "enum_type"):
                ours_type, their_type = getattr(field, kind), getattr(twin, kind)
                assert (ours_type and ours_type.full_name) == (their_type and their_type.full_name)
    for enum in files[0].enum_types_by_name.values():
        triton_enum = theirs.FindEnumTypeByName(enum.full_name)
        assert {(v.name, v.number) for v in enum.values} <= {(v.name, v.number) for v in triton_enum.values}
    triton_service = service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    for method in SERVICE.methods:
        twin = triton_service.methods_by_name[method.name]
        assert (method.input_type.full_name, method.output_type.full_name) == (
            twin.input_type.full_name,
            twin.output_type.full_name,
        )


def test_health_metadata_and_inference_match_rest(live, cern_mlp_path):
    client = grpc_client(live)
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("mnist") and client.is_model_ready("mnist", "1")
    assert not client.is_model_ready("no-such-model") and not client.is_model_ready("mnist", "7")
    rest = requests.get(f"{live.url}/v2").json()
    assert client.get_server_metadata(as_json=True) == rest
    metadata = client.get_model_metadata("mnist", as_json=True)
    assert metadata["inputs"] == [{"name": "features", "datatype": "FP32", "shape": ["-1", "784"]}]
    assert metadata["versions"] == ["1"] and metadata["platform"] == "onnxruntime_onnx"

    x = np.random.default_rng(7).random((16, 784), dtype=np.float32)
    tensor = triton_grpc.InferInput("features", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)  # raw_input_contents: the binary form
    result = client.infer("mnist", [tensor], model_version="1", request_id="r-7")
    expected = keras.saving.load_model(cern_mlp_path).predict(x, verbose=0)
    assert np.abs(result.as_numpy("probabilities") - expected).max() <= 1e-5  # float32 parity
    response = result.get_response()
    assert (response.model_name, response.model_version, response.id) == ("mnist", "1", "r-7")
    over_rest = requests.post(
        f"{live.url}/v2/models/mnist/infer",
        json={"inputs": [{"name": "features", "shape": [16, 784], "datatype": "FP32", "data": x.tolist()}]},
    ).json()
    rest_values = np.array(over_rest["outputs"][0]["data"], dtype=np.float32).reshape(16, 10)
    assert np.array_equal(result.as_numpy("probabilities"), rest_values)  # one inference path
    client.close()


def test_typed_contents_and_a_chosen_output_through_the_generated_stub(live, mixed_layers_path, caplog):
    """InferTensorContents (not raw bytes), as KServe's own clients send, with the protocol's stub."""
    caplog.set_level(logging.INFO, logger="serve.access")
    x = np.random.default_rng(8).random((3, 8, 8), dtype=np.float32)
    with grpc.insecure_channel(live.grpc_url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        request = service_pb2.ModelInferRequest(model_name="mixed")
        tensor = request.inputs.add(name="image", datatype="FP32", shape=[3, 8, 8])
        tensor.contents.fp32_contents.extend(x.ravel().tolist())
        output_name = requests.get(f"{live.url}/v2/models/mixed").json()["outputs"][0]["name"]
        request.outputs.add(name=output_name)
        response = stub.ModelInfer(request)
    (output,) = response.outputs
    assert (output.name, output.datatype, list(output.shape)) == (output_name, "FP32", [3, 5])
    values = np.frombuffer(response.raw_output_contents[0], dtype="<f4").reshape(3, 5)
    expected = keras.saving.load_model(mixed_layers_path).predict(x, verbose=0)
    assert np.abs(values - expected).max() <= 1e-5
    entries = [json.loads(r.getMessage()) for r in caplog.records if r.name == "serve.access"]
    logged = next(e for e in entries if e["path"] == "ModelInfer")
    assert (logged["method"], logged["status"], logged["model"]) == ("gRPC", "OK", "mixed")
    assert logged["bytes_in"] == request.ByteSize()


def test_errors_carry_the_rest_message_with_the_matching_status(live):
    client = grpc_client(live)
    unknown = refusal(lambda: client.get_model_metadata("no-such-model"))
    rest = requests.get(f"{live.url}/v2/models/no-such-model")
    assert unknown.status() == "StatusCode.NOT_FOUND" and rest.status_code == 404
    assert unknown.message() == rest.json()["error"]

    wrong = triton_grpc.InferInput("features", [2, 783], "FP32")
    wrong.set_data_from_numpy(np.zeros((2, 783), dtype=np.float32))
    shape = refusal(lambda: client.infer("mnist", [wrong]))
    assert shape.status() == "StatusCode.INVALID_ARGUMENT" and "expected shape" in shape.message()

    nan = triton_grpc.InferInput("features", [1, 784], "FP32")
    nan.set_data_from_numpy(np.full((1, 784), np.nan, dtype=np.float32))
    assert "NaN" in refusal(lambda: client.infer("mnist", [nan])).message()

    with grpc.insecure_channel(live.grpc_url) as channel:  # raw bytes that lie about the shape
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        request = service_pb2.ModelInferRequest(model_name="mnist", raw_input_contents=[b"\0" * 12])
        request.inputs.add(name="features", datatype="FP32", shape=[1, 784])
        with pytest.raises(grpc.RpcError) as lie:
            stub.ModelInfer(request)
    assert lie.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "784" in lie.value.details()
    client.close()


def test_values_given_twice_or_in_another_types_field_are_refused(live):
    """Triton refuses an input with both typed contents and raw bytes; the server used the raw bytes and
    ignored the contents. Values in another type's field (int_contents for FP32) were ignored too, and
    the error said 'received 0'."""
    ones = np.ones((1, 784), dtype=np.float32)
    with grpc.insecure_channel(live.grpc_url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        both = service_pb2.ModelInferRequest(model_name="mnist", raw_input_contents=[ones.tobytes()])
        both.inputs.add(name="features", datatype="FP32", shape=[1, 784]).contents.fp32_contents.extend(
            [0.0] * 784
        )
        other = service_pb2.ModelInferRequest(model_name="mnist")
        other.inputs.add(name="features", datatype="FP32", shape=[1, 784]).contents.int_contents.extend(
            [1] * 784
        )
        details = []
        for request in (both, other):
            with pytest.raises(grpc.RpcError) as refused:
                stub.ModelInfer(request)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            details.append(refused.value.details())
    assert details == [
        "input 'features': its values are in both contents and raw_input_contents",
        "input 'features': FP32 values travel in contents.fp32_contents, not int_contents",
    ]


def test_a_class_count_gets_triton_s_top_k_strings_over_both_transports(live):
    """tritonclient's InferRequestedOutput(..., class_count=k) asks for Triton's classification extension:
    each row's k largest values as "score:index[:label]" strings, largest first. It was refused."""
    rows = np.random.default_rng(3).random((2, 784), dtype=np.float32)
    answers = []
    for module, client in (
        (triton_http, triton_http.InferenceServerClient(live.url.removeprefix("http://"))),
        (triton_grpc, grpc_client(live)),
    ):
        given = module.InferInput("features", [2, 784], "FP32")
        given.set_data_from_numpy(rows)
        asked = [module.InferRequestedOutput("probabilities", class_count=3)]
        answers.append(client.infer("mnist", [given], outputs=asked).as_numpy("probabilities"))
        probabilities = client.infer("mnist", [given]).as_numpy("probabilities")
        client.close()
    labels = triton_http.InferenceServerClient(live.url.removeprefix("http://")).get_model_metadata("mnist")
    classes = labels["parameters"]["classes"]
    for answer in answers:
        assert answer.shape == (2, 3)
        for row, strings in zip(probabilities, answer, strict=True):
            top = np.argsort(-row, kind="stable")[:3]
            fields = [item.decode().split(":") for item in strings]
            assert [int(f[1]) for f in fields] == top.tolist()
            assert all(abs(float(f[0]) - row[int(f[1])]) <= 1e-5 for f in fields)
            assert [":".join(f[2:]) for f in fields] == [classes[i] if i < len(classes) else "" for i in top]


def test_row_and_size_limits_are_the_rest_limits(serve_app):
    server = serve_app(MAX_REQUEST_ROWS=8)
    client = grpc_client(server)
    x = np.zeros((9, 784), dtype=np.float32)
    tensor = triton_grpc.InferInput("features", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    rows = refusal(lambda: client.infer("mnist", [tensor]))
    rest = requests.post(
        f"{server.url}/v2/models/mnist/infer",
        json={"inputs": [{"name": "features", "shape": [9, 784], "datatype": "FP32", "data": x.tolist()}]},
    )
    assert rows.status() == "StatusCode.RESOURCE_EXHAUSTED" and rest.status_code == 413
    assert rows.message() == rest.json()["error"] == "9 rows exceed the limit of 8 rows per request"

    big = np.zeros((600, 784), dtype=np.float32)  # 1.9 MB: beyond 8 rows' worth of bytes
    tensor = triton_grpc.InferInput("features", list(big.shape), "FP32")
    tensor.set_data_from_numpy(big)
    size = refusal(lambda: client.infer("mnist", [tensor]))
    assert size.status() == "StatusCode.RESOURCE_EXHAUSTED" and "exceeds the limit" in size.message()
    client.close()


def test_api_key_in_metadata_guards_all_but_health(serve_app, tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("s3cret-key\n")
    server = serve_app(API_KEY_FILE=str(keys))
    client = grpc_client(server)
    assert client.is_server_live() and client.is_server_ready()  # open, as /v2/health/* over HTTP
    x = np.zeros((1, 784), dtype=np.float32)
    tensor = triton_grpc.InferInput("features", [1, 784], "FP32")
    tensor.set_data_from_numpy(x)
    for headers in (None, {"authorization": "Bearer wrong"}, {"x-api-key": "s3cret-ke"}):
        denied = refusal(lambda h=headers: client.infer("mnist", [tensor], headers=h))
        assert denied.status() == "StatusCode.UNAUTHENTICATED" and "API key" in denied.message()
    assert refusal(lambda: client.get_model_metadata("mnist")).status() == "StatusCode.UNAUTHENTICATED"
    for headers in ({"authorization": "Bearer s3cret-key"}, {"x-api-key": "s3cret-key"}):
        assert client.infer("mnist", [tensor], headers=headers).as_numpy("probabilities").shape == (1, 10)
        assert client.get_model_metadata("mnist", headers=headers).name == "mnist"
    client.close()


def test_reflection_describes_the_service(live):
    with grpc.insecure_channel(live.grpc_url) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        assert "inference.GRPCInferenceService" in database.get_services()
        described = descriptor_pool.DescriptorPool(database).FindServiceByName(
            "inference.GRPCInferenceService"
        )
        assert {"ModelInfer", "ModelConfig", "RepositoryIndex"} <= set(described.methods_by_name)


@pytest.mark.slow
def test_many_large_calls_at_once_hold_a_bounded_amount_of_memory(serve_process):
    """gRPC calls waiting for a pool thread had their whole messages read: 80 calls of 18 MB at once
    (refused at the row limit) took a worker from 90 MB to 1.4 GB, without an API key; grpc allows
    --max-connections of them. The flow-control window now stays small until a thread reads the call."""
    import threading

    from tests.fixtures import free_port

    port = free_port()
    server = serve_process("--workers", "1", "--grpc-port", str(port))
    server.wait_for_workers(1)
    (worker,) = server.worker_pids()
    before = resident_mib(worker)
    rows = 6_000  # 18.8 MB of FP32, over the 1,024-row limit: each call is refused once read
    request = service_pb2.ModelInferRequest(
        model_name="mnist", raw_input_contents=[np.zeros((rows, 784), np.float32).tobytes()]
    )
    request.inputs.add(name="features", datatype="FP32", shape=[rows, 784])
    data = request.SerializeToString()
    codes: list[grpc.StatusCode] = []
    with grpc.insecure_channel(
        f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", 1 << 26)]
    ) as channel:
        call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")

        def send() -> None:
            try:
                call(data, timeout=120)
            except grpc.RpcError as error:
                codes.append(error.code())

        senders = [threading.Thread(target=send) for _ in range(60)]
        for sender in senders:
            sender.start()
        peak = before
        while any(sender.is_alive() for sender in senders):
            peak = max(peak, resident_mib(worker))
            time.sleep(0.05)
    # refused once read (the row limit), or made room for newer calls while still being received
    assert len(codes) == 60 and set(codes) <= {
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.UNAVAILABLE,
    }
    print(f"worker resident memory: {before:.0f} MiB, at most {peak:.0f} MiB during the calls")
    assert peak - before < 500  # 60 × 18.8 MB read at once would be 1,130 MB


@pytest.mark.slow
def test_idle_grpc_connections_cannot_take_the_workers_file_descriptors(serve_process):
    """grpc accepted every connection: 20,000 idle ones (no key needed, nothing sent) used up a worker's
    file descriptors, and its HTTP server stopped answering too. They are capped at --max-connections,
    like HTTP's, and closed after --client-timeout when they never start."""
    from tests.fixtures import free_port

    port = free_port()
    server = serve_process("--workers", "1", "--grpc-port", str(port), "--max-connections", "100")
    server.wait_for_workers(1)
    (worker,) = server.worker_pids()
    idle = []
    try:
        for _ in range(400):
            connection = socket.create_connection(("127.0.0.1", port), timeout=5)
            idle.append(connection)
        time.sleep(1.0)  # the worker accepts them
        descriptors = len(list(Path(f"/proc/{worker}/fd").iterdir()))
        assert requests.get(f"{server.url}/v2/health/ready", timeout=5).ok
    finally:
        for connection in idle:
            connection.close()
    assert descriptors < 100 + 150, descriptors  # the cap, plus the worker's own files and sockets


def resident_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS"))) / 1024


@pytest.mark.slow
def test_python_m_serve_grpc_port_and_a_port_in_use(onnx_repo):
    from tests.fixtures import free_port

    port = free_port()
    server = ServeProcess(onnx_repo, "--workers", "2", "--grpc-port", str(port))
    try:
        server.wait_ready()
        server.wait_for_workers(2)
        for _ in range(6):  # new connections, spread over the workers' listeners
            client = triton_grpc.InferenceServerClient(url=f"127.0.0.1:{port}")
            assert client.is_model_ready("mnist")
            client.close()
        # every worker serves gRPC on the shared port: none died binding it
        assert "ended with exit code" not in server.log()
        assert len(server.worker_pids()) == 2
        client = triton_grpc.InferenceServerClient(url=f"127.0.0.1:{port}")
        assert triton_http.InferenceServerClient(server.url.removeprefix("http://")).is_model_ready("mnist")
        client.close()
        second = ServeProcess(onnx_repo, "--grpc-port", str(port))  # the same gRPC port, another HTTP port
        second.process.wait(timeout=60)
        lines = second.stop().strip().splitlines()
        assert second.process.returncode == 2
        assert (
            lines[-1]
            == f"error: cannot listen for gRPC on 127.0.0.1:{port}: the port is in use or not allowed"
        )
    finally:
        server.stop()
    with socket.socket() as probe:  # the first server released the port
        probe.bind(("127.0.0.1", port))


@pytest.mark.slow
def test_calls_that_never_send_their_message_hold_the_workers_threads_for_a_bounded_time(serve_process):
    """A unary call whose message never comes waits for it in one of the worker's gRPC threads, with
    no deadline of grpcio's own: as many such calls as threads (2; no key needed) stopped the worker's
    gRPC service for as long as the client liked, and held their connections open under the cap.
    Connections now live at most --request-timeout, then get --request-timeout to finish their calls."""
    from tests.fixtures import free_port

    port = free_port()
    server = serve_process("--workers", "1", "--grpc-port", str(port), "--request-timeout", "2")
    server.wait_for_workers(1)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    never = threading.Event()

    def no_message():
        never.wait()
        yield from ()

    # ModelInfer called as a stream: the headers go out, the message never does
    hanging = channel.stream_unary(f"/{SERVICE.full_name}/ModelInfer")
    held = [hanging.future(no_message()) for _ in range(4)]
    try:
        time.sleep(1.0)  # both threads now wait for a message
        client = triton_grpc.InferenceServerClient(url=f"127.0.0.1:{port}")
        assert client.is_server_live(client_timeout=30)
        client.close()
    finally:
        never.set()
        for call in held:
            call.cancel()
        channel.close()


def test_a_malformed_message_is_invalid_argument_in_one_log_line(live, caplog):
    """grpcio's own parsing of a message that is not protobuf logged a multi-line traceback per call."""
    caplog.set_level(logging.DEBUG)
    with grpc.insecure_channel(live.grpc_url) as channel:
        call = channel.unary_unary(f"/{SERVICE.full_name}/ModelInfer")
        with pytest.raises(grpc.RpcError) as refused:
            call(b"\xff\xff\xff\xff not protobuf", timeout=10)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details() == "the message is not an inference.ModelInferRequest"
    assert not [record for record in caplog.records if record.exc_info or "Traceback" in record.getMessage()]
