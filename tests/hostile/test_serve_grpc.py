"""gRPC under hostile clients, through `nnsql serve` on loopback: calls whose message never comes and
reflection streams that never send must not keep an authorised client from being answered."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import grpc
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc

from nnsql.serve.rpc.messages import SERVICE
from tests.serve.conftest import ServeProcess, free_port, onnx_repo  # noqa: F401  (the fixture, used below)

pytestmark = pytest.mark.slow
KEY = "probe-key-0123456789"
STALLED = 100  # ModelInfer calls kept open without their message, reopened as soon as one ends
SILENT = 100  # reflection streams kept open without a request
PROBES = 20
PROBE_SECONDS = 30  # the bound on each answer: the first probes may wait a turn per attacking connection
CONNECTIONS = 20  # of each kind


class Hold:
    """`count` calls of `method` whose requests never come, each reopened when the server ends it."""

    def __init__(self, port: int, method: str, count: int, metadata: tuple = ()) -> None:
        self.stop = threading.Event()
        self.ended: list[grpc.StatusCode] = []
        options = [("grpc.use_local_subchannel_pool", 1)]  # a connection of its own
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=options)
        self.callable = self.channel.stream_stream(method)
        self.metadata = metadata
        self.calls: list[grpc.Future] = []
        self.calls += [self.open() for _ in range(count)]

    def nothing(self) -> Iterator[bytes]:
        self.stop.wait()
        yield from ()

    def open(self) -> grpc.Future:
        call = self.callable(self.nothing(), metadata=self.metadata)
        threading.Thread(target=self.drain, args=(call,), daemon=True).start()
        return call

    def drain(self, call) -> None:
        try:
            for _ in call:
                pass
        except grpc.RpcError as error:
            self.ended.append(error.code())
        if not self.stop.is_set():
            with contextlib.suppress(ValueError):  # the channel was closed meanwhile: the test is over
                self.calls.append(self.open())

    def close(self) -> None:
        self.stop.set()
        for call in list(self.calls):
            call.cancel()
        self.channel.close()


def test_stalled_calls_and_silent_reflection_streams_starve_no_authorised_client(onnx_repo, tmp_path):  # noqa: F811
    keys = tmp_path / "keys"
    keys.write_text(KEY + "\n")
    port = free_port()
    server = ServeProcess(onnx_repo, "--workers", "1", "--grpc-port", str(port), "--api-key-file", str(keys))
    holds: list[Hold] = []
    try:
        server.wait_ready()
        server.wait_for_workers(1)
        key = (("authorization", f"Bearer {KEY}"),)
        infer = f"/{SERVICE.full_name}/ModelInfer"
        reflection = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
        for _ in range(CONNECTIONS):  # the server lets a connection have 8 calls open
            holds.append(Hold(port, reflection, SILENT // CONNECTIONS // 2))  # keyless
            holds.append(Hold(port, reflection, SILENT // CONNECTIONS // 2, key))  # and with the key
            holds.append(Hold(port, infer, STALLED // CONNECTIONS, key))  # a key holder's stalled calls
        client = triton_grpc.InferenceServerClient(url=f"127.0.0.1:{port}")
        row = np.random.default_rng(1).random((1, 784), dtype=np.float32)
        tensor = triton_grpc.InferInput("features", [1, 784], "FP32")
        tensor.set_data_from_numpy(row)
        answered = 0
        for _ in range(PROBES):
            try:
                result = client.infer(
                    "mnist", [tensor], headers={"x-api-key": KEY}, client_timeout=PROBE_SECONDS
                )
                answered += result.as_numpy("probabilities").shape == (1, 10)
            except triton_grpc.InferenceServerException as error:
                print("probe failed:", error.status(), error.message())
                break  # one unanswered probe is the failure: no need to wait for the others
        client.close()
    finally:
        for hold in holds:
            hold.close()
        log = server.stop()
    assert answered == PROBES, log[-2000:]
    keyless = [code for hold in holds[::3] for code in hold.ended]
    assert set(keyless) <= {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.CANCELLED}
    assert grpc.StatusCode.UNAUTHENTICATED in keyless  # keyless reflection: refused from its metadata
