"""Triton model repositories served as they are: a model directory holding `config.pbtxt` and
numbered version directories holding `model.onnx` (or the config's `default_model_filename`).

`config.pbtxt` is parsed by protobuf's text-format parser into Triton's own ModelConfig message
(model_config.proto, as compiled in tritonclient). Fields this server does not use (instance_group,
optimization, ...) and fields Triton does not know are skipped with one warning. Names, data types,
dims, max_batch_size, version_policy, default_model_filename and the outputs' label_filename are
honoured; a config that names another platform, a string tensor or a
file outside the model directory is refused in one line, and the model's other versions and the
repository's other models keep serving.

The config and label files are hostile input: read up to a size limit, parsed as data only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from google.protobuf import text_format

from .repofiles import read_regular
from .validation import InvalidVersion

CONFIG_FILE = "config.pbtxt"
DEFAULT_MODEL_FILE = "model.onnx"
MAX_CONFIG_BYTES = 1 << 20  # Triton's own configurations are a few kilobytes
MAX_LABEL_BYTES = 4 << 20  # a label per line: enough for hundreds of thousands of classes
MAX_METADATA_BYTES = 4 << 20
ONNX_PLATFORMS = {"platform": ("", "onnxruntime_onnx"), "backend": ("", "onnxruntime")}
UNKNOWN_FIELD = "has no field named"
# ModelConfig fields this server honours; any other field given is named in one warning
READ_FIELDS = {
    "name",
    "platform",
    "backend",
    "max_batch_size",
    "input",
    "output",
    "version_policy",
    "default_model_filename",
}
# onnxruntime's tensor types as V2 datatypes, for a config that leaves the tensors to the graph
ONNX_DATATYPES = {
    f"tensor({onnx})": v2
    for onnx, v2 in (
        ("bool", "BOOL"),
        ("uint8", "UINT8"),
        ("uint16", "UINT16"),
        ("uint32", "UINT32"),
        ("uint64", "UINT64"),
        ("int8", "INT8"),
        ("int16", "INT16"),
        ("int32", "INT32"),
        ("int64", "INT64"),
        ("float16", "FP16"),
        ("float", "FP32"),
        ("double", "FP64"),
    )
}


def is_triton(model_dir: Path) -> bool:
    return (model_dir / CONFIG_FILE).is_file()


def read_bounded(path: Path, limit: int) -> str:
    """The file's text, refused in one line when larger than `limit` bytes, not UTF-8, or not a regular
    file inside its directory (serve.repofiles)."""
    raw = read_regular(path, limit, within=path.parent)
    try:
        return raw.decode()
    except UnicodeDecodeError as error:
        raise InvalidVersion(f"{path.name}: not UTF-8 ({error.reason} at byte {error.start})") from None


def parse_config(text: str) -> tuple[Any, str | None]:
    """The ModelConfig message of a config.pbtxt text, and a warning naming the fields skipped (None
    when this server reads every field given); InvalidVersion, in one line, for anything else."""
    from tritonclient.grpc import model_config_pb2  # Triton's own model_config.proto, compiled

    config = model_config_pb2.ModelConfig()
    unknown = None
    try:
        text_format.Parse(text, config)
    except RecursionError:  # fields nested thousands deep: the parser recurses once per level
        raise InvalidVersion(f"{CONFIG_FILE}: nested too deeply") from None
    except text_format.ParseError as error:
        if UNKNOWN_FIELD not in str(error):
            raise InvalidVersion(f"{CONFIG_FILE}: {one_line(error)}") from None
        unknown = one_line(error)
        config = model_config_pb2.ModelConfig()
        try:
            text_format.Parse(text, config, allow_unknown_field=True)
        except RecursionError:
            raise InvalidVersion(f"{CONFIG_FILE}: nested too deeply") from None
        except text_format.ParseError as again:
            raise InvalidVersion(f"{CONFIG_FILE}: {one_line(again)}") from None
    unused = sorted(field.name for field, _ in config.ListFields() if field.name not in READ_FIELDS)
    if not unused and unknown is None:
        return config, None
    parts = ([f"{', '.join(unused)} (not used by nnsql serve)"] if unused else []) + (
        [f"a field Triton does not know ({unknown})"] if unknown else []
    )
    return config, f"{CONFIG_FILE}: ignoring {'; '.join(parts)}"


def one_line(error: Exception) -> str:
    return " ".join(str(error).split())[:300]


def read_config(model_dir: Path) -> tuple[Any, str | None]:
    """The model's configuration, checked (see `check_config`), and the warning about skipped fields."""
    config, warning = parse_config(read_bounded(model_dir / CONFIG_FILE, MAX_CONFIG_BYTES))
    check_config(config, model_dir.name)
    return config, warning


def check_config(config: Any, name: str) -> None:
    if config.name and config.name != name:
        raise InvalidVersion(f"{CONFIG_FILE} names the model {config.name!r}, its directory {name!r}")
    for key, accepted in ONNX_PLATFORMS.items():
        if getattr(config, key) not in accepted:
            raise InvalidVersion(
                f"{CONFIG_FILE}: {key} {getattr(config, key)!r} is not served; nnsql serve serves ONNX "
                f"models ({key}: {accepted[1]!r})"
            )
    if config.max_batch_size < 0:
        raise InvalidVersion(f"{CONFIG_FILE}: max_batch_size must not be negative")
    plain_name(config.default_model_filename or DEFAULT_MODEL_FILE, "default_model_filename")
    for output in config.output:
        if output.label_filename:
            plain_name(output.label_filename, f"label_filename of output {output.name!r}")


def plain_name(filename: str, what: str) -> str:
    """A file name inside the model directory: no separator, no parent, no hidden file."""
    if not filename or "/" in filename or "\\" in filename or filename.startswith(".") or "\0" in filename:
        raise InvalidVersion(f"{CONFIG_FILE}: {what} must be a file name in the model's directory")
    return filename


def model_file(config: Any) -> str:
    return config.default_model_filename or DEFAULT_MODEL_FILE


def served_versions(config: Any, numbers: set[int]) -> set[int]:
    """The versions the config's version_policy serves among those present; Triton's default is the
    latest one."""
    policy = config.version_policy
    choice = policy.WhichOneof("policy_choice")
    if choice == "all":
        return set(numbers)
    if choice == "specific":
        return numbers & set(policy.specific.versions)
    count = max(1, policy.latest.num_versions) if choice == "latest" else 1
    return set(sorted(numbers)[-count:])


def policy_text(config: Any) -> str:
    """The version policy as config.pbtxt spells it, for a reason given to a client."""
    policy = config.version_policy
    choice = policy.WhichOneof("policy_choice")
    if choice == "specific":
        shown = ", ".join(str(v) for v in list(policy.specific.versions)[:20])
        more = " ..." if len(policy.specific.versions) > 20 else ""
        return f"specific: versions [{shown}{more}]"
    if choice == "latest":
        return f"latest: {max(1, policy.latest.num_versions)}"
    return "all" if choice == "all" else "latest: 1"


def tensor_specs(tensors: Any, batched: bool, role: str) -> list[dict]:
    """config inputs or outputs as the repository's tensor specs: dims behind a batch dimension when
    max_batch_size > 0; with 0, the dims themselves, whose first one must be variable (-1)."""
    specs = []
    for tensor in tensors:
        datatype = tensor.DESCRIPTOR.fields_by_name["data_type"].enum_type.values_by_number[tensor.data_type]
        datatype = datatype.name.removeprefix("TYPE_")
        if datatype in ("", "INVALID", "STRING", "BF16"):
            raise InvalidVersion(
                f"{CONFIG_FILE}: {role} {tensor.name!r}: data_type {datatype or 'unset'} is not served"
            )
        dims = [int(d) for d in tensor.dims]
        if not batched and (not dims or dims[0] != -1):
            raise InvalidVersion(
                f"{CONFIG_FILE}: {role} {tensor.name!r}: with max_batch_size 0 the first of dims must be -1 "
                "(nnsql serve batches requests along it)"
            )
        specs.append({"name": tensor.name, "datatype": datatype, "shape": [-1, *dims] if batched else dims})
    return specs


def graph_specs(arguments: list[Any]) -> list[dict]:
    """Specs from the ONNX graph, for a config that declares no inputs or outputs (Triton completes an
    ONNX model's configuration from the graph the same way)."""
    from .validation import onnx_shape

    specs = []
    for argument in arguments:
        datatype = ONNX_DATATYPES.get(argument.type)
        if datatype is None:
            raise InvalidVersion(f"tensor {argument.name!r} of type {argument.type} is not served")
        specs.append({"name": argument.name, "datatype": datatype, "shape": [-1, *onnx_shape(argument)[1:]]})
    return specs


def read_labels(model_dir: Path, filename: str) -> list[str]:
    """One label per line, as Triton reads them (the line as it is, without its line ending)."""
    lines = read_bounded(model_dir / filename, MAX_LABEL_BYTES).split("\n")
    if lines[-1] == "":  # the last line's ending starts no label
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def version_classes(directory: Path) -> list[str]:
    """The `classes` of a metadata.json beside the version's model, when there is one."""
    path = directory / "metadata.json"
    if not path.is_file():
        return []
    try:
        document = json.loads(read_bounded(path, MAX_METADATA_BYTES))
    except ValueError:
        raise InvalidVersion("metadata.json: not JSON") from None
    classes = document.get("classes", []) if isinstance(document, dict) else []
    if not isinstance(classes, list) or not all(isinstance(label, str) for label in classes):
        raise InvalidVersion("metadata 'classes' must be a list of strings")
    return classes


def metadata(directory: Path, config: Any, session: Any) -> dict:
    """The repository metadata of a Triton version: tensors from the config (or the graph when the
    config lists none), the labels of each output that names a label file, classes from the first
    output's labels or a metadata.json, and the rows a request may hold."""
    batched = config.max_batch_size > 0
    inputs = tensor_specs(config.input, batched, "input") or graph_specs(session.get_inputs())
    outputs = tensor_specs(config.output, batched, "output") or graph_specs(session.get_outputs())
    labels = {
        output.name: read_labels(directory.parent, output.label_filename)
        for output in config.output
        if output.label_filename
    }
    first = outputs[0]["name"]
    classes = labels.get(first) or version_classes(directory)
    return {
        "inputs": inputs,
        "outputs": outputs,
        "classes": classes,
        "output_labels": labels | ({first: classes} if classes else {}),
        "max_batch_size": config.max_batch_size,
        "source": "triton",
    }
