"""The GRPCInferenceService's methods: each turns its message into the arguments of the function the HTTP
route calls (serve/v2.py, serve/extensions/service.py), and that function's document back into a message.
Models, versions, batching, limits and error messages are therefore the REST API's."""

from __future__ import annotations

from typing import Any

import numpy as np
from flask import current_app
from google.protobuf import json_format

from .. import v2
from ..errors import ScoringError, bad_request, echoed
from ..extensions import service as extensions
from ..handling import repository, request_limit, too_large
from ..repository import LoadedModel
from ..tensors import refuse_shared_memory, tensor_name
from ..validation import V2_DATATYPES
from .messages import message

# The InferTensorContents field that carries each datatype (FP16 travels only in raw_input_contents).
CONTENTS_FIELD = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
}


def to_message(name: str, document: dict[str, Any]) -> Any:
    """A document as the message `inference.<name>` (fields the message lacks are left out)."""
    return json_format.ParseDict(document, message(name)(), ignore_unknown_fields=True)


def parameter_value(parameter: Any) -> Any:
    """The value an InferParameter or ModelRepositoryParameter holds, whichever its kind."""
    kind = parameter.WhichOneof("parameter_choice")
    return getattr(parameter, kind) if kind else None


def input_document(tensor: Any, raw: bytes | None, declared: list[str]) -> dict[str, Any]:
    """One input of a ModelInferRequest in the V2 JSON form: typed contents as `data`, raw bytes as
    binary data of the announced size (the binary tensor extension's form). `declared`: the model's
    input names (a name beyond them is checked before any message shows it)."""
    tensor_name(tensor.name, "an input", declared)
    refuse_shared_memory(tensor.parameters, f"input {tensor.name!r}")
    item: dict[str, Any] = {"name": tensor.name, "datatype": tensor.datatype, "shape": list(tensor.shape)}
    given = [descriptor.name for descriptor, _ in tensor.contents.ListFields()]
    if raw is not None:
        if given:
            raise bad_request(
                f"input {tensor.name!r}: its values are in both contents and raw_input_contents"
            )
        item["parameters"] = {"binary_data_size": len(raw)}
        return item
    field = CONTENTS_FIELD.get(tensor.datatype)
    if field is not None and any(name != field for name in given):
        wrong = ", ".join(name for name in given if name != field)
        raise bad_request(
            f"input {tensor.name!r}: {tensor.datatype} values travel in contents.{field}, not {wrong}"
        )
    if field is None and tensor.datatype in V2_DATATYPES:
        raise bad_request(f"input {tensor.name!r}: {tensor.datatype} values travel in raw_input_contents")
    dtype = V2_DATATYPES.get(tensor.datatype, np.dtype("<f4"))
    item["data"] = np.array(getattr(tensor.contents, field) if field else [], dtype=dtype)
    return item


def output_document(output: Any) -> dict[str, Any]:
    """A requested output in the V2 JSON form, with the parameters the REST route reads or refuses."""
    document: dict[str, Any] = {"name": output.name}
    refuse_shared_memory(output.parameters, f"output {echoed(output.name)}")
    if "classification" in output.parameters:
        document["parameters"] = {"classification": parameter_value(output.parameters["classification"])}
    return document


def infer_document(request: Any, model: LoadedModel) -> tuple[dict[str, Any], bytes]:
    """A ModelInferRequest as the V2 JSON document and binary part the REST route decodes. Every output
    is asked for as binary: gRPC answers in raw_output_contents, as Triton does."""
    raw = list(request.raw_input_contents)
    if raw and len(raw) != len(request.inputs):
        raise bad_request(f"raw_input_contents holds {len(raw)} tensors for {len(request.inputs)} inputs")
    declared = [spec["name"] for spec in model.inputs]
    inputs = [input_document(t, raw[i] if raw else None, declared) for i, t in enumerate(request.inputs)]
    document: dict[str, Any] = {
        "inputs": inputs,
        "outputs": [output_document(output) for output in request.outputs],
        "parameters": {"binary_data_output": True},
    }
    if request.id:
        document["id"] = request.id
    return document, b"".join(raw)


def infer_response(document: dict[str, Any], raw: bytes) -> Any:
    """The REST route's response document and binary outputs as a ModelInferResponse."""
    response = message("ModelInferResponse")(
        model_name=document["model_name"], model_version=document["model_version"], id=document.get("id", "")
    )
    offset = 0
    for tensor in document["outputs"]:
        response.outputs.add(name=tensor["name"], datatype=tensor["datatype"], shape=tensor["shape"])
        size = tensor["parameters"]["binary_data_size"]
        response.raw_output_contents.append(raw[offset : offset + size])
        offset += size
    return response


def check_rows(request: Any) -> None:
    """The row limit on the declared shapes, before any tensor is copied out of the message."""
    rows = max((tensor.shape[0] for tensor in request.inputs if tensor.shape), default=0)
    limit = int(current_app.config["MAX_REQUEST_ROWS"])
    if rows > limit:
        raise ScoringError(f"{rows} rows exceed the limit of {limit} rows per request", 413)


def version_or_latest(version: str) -> str | None:
    return version or None  # proto3: an unset string is "", meaning the latest version


class InferenceService:
    """The methods by RPC name (the protocol's CamelCase); serve/rpc/server.py runs each in the app's
    context."""

    def ServerLive(self, request: Any) -> Any:
        return message("ServerLiveResponse")(live=True)

    def ServerReady(self, request: Any) -> Any:
        return message("ServerReadyResponse")(ready=repository().ready)

    def ModelReady(self, request: Any) -> Any:
        try:
            repository().get(request.name, version_or_latest(request.version))
        except ScoringError:
            return message("ModelReadyResponse")(ready=False)
        return message("ModelReadyResponse")(ready=True)

    def ServerMetadata(self, request: Any) -> Any:
        return to_message("ServerMetadataResponse", v2.SERVER)

    def ModelMetadata(self, request: Any) -> Any:
        model = repository().get(request.name, version_or_latest(request.version))
        return to_message("ModelMetadataResponse", v2.model_metadata(model))

    def ModelInfer(self, request: Any) -> Any:
        model = v2.ready_model(request.model_name, version_or_latest(request.model_version))
        if request.ByteSize() > request_limit(model):
            raise too_large(model)
        check_rows(request)
        document, binary = infer_document(request, model)
        return infer_response(*v2.run_v2(model, document, binary, "grpc"))

    def ModelConfig(self, request: Any) -> Any:
        config = extensions.config_document(request.name, version_or_latest(request.version))
        return to_message("ModelConfigResponse", {"config": config})

    def ModelStatistics(self, request: Any) -> Any:
        document = extensions.statistics_document(request.name, version_or_latest(request.version))
        return to_message("ModelStatisticsResponse", document)

    def RepositoryIndex(self, request: Any) -> Any:
        return to_message("RepositoryIndexResponse", {"models": extensions.index_document(request.ready)})

    def RepositoryModelLoad(self, request: Any) -> Any:
        parameters = {key: parameter_value(value) for key, value in request.parameters.items()}
        extensions.load_model(request.model_name, parameters)
        return message("RepositoryModelLoadResponse")()

    def RepositoryModelUnload(self, request: Any) -> Any:
        extensions.unload_model(request.model_name)
        return message("RepositoryModelUnloadResponse")()
