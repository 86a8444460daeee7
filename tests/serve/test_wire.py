"""serve/rpc/wire.py: a gRPC message's fields counted on the wire, at every depth, before it is parsed.
The attack it stops is tests/hostile/test_serve_grpc_message_fields.py's."""

from __future__ import annotations

import pytest

from nnsql.serve.rpc import wire
from nnsql.serve.rpc.messages import message


def test_a_request_as_clients_send_it_is_a_few_dozen_fields():
    """tritonclient's message for two rows, an input parameter and a classification: every value packed."""
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest(model_name="mnist", id="row-1")
    tensor = request.inputs.add(name="features", datatype="FP32", shape=[2, 784])
    tensor.contents.fp32_contents.extend([0.5] * 1568)
    tensor.parameters["tag"].string_param = "x"
    request.outputs.add(name="probabilities").parameters["classification"].int64_param = 3
    data = request.SerializeToString()
    assert wire.check_fields(data, message("ModelInferRequest").DESCRIPTOR) == 18


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"\x0a\xff", "a varint runs past its message"),
        (b"\x0b", "wire type 3 in a proto3 message"),
        (b"\x0a\x05ab", "a field runs past its message"),
        (b"\x2a\x04\x22\x00\x22\x00" + b"\x32\x00" * 4, "the message holds more than 6 fields"),
    ],
)
def test_malformed_or_too_many_fields_at_any_depth(data, reason):
    expected = wire.TooManyFields if "more than" in reason else wire.Malformed
    with pytest.raises(expected, match=reason):
        wire.check_fields(data, message("ModelInferRequest").DESCRIPTOR, limit=6)
