"""What a model file declares, read as data before Keras deserialises anything in it.

A Keras model file is a program as much as data: a tf.keras `Lambda` layer is stored as marshalled Python
bytecode, and a custom class or function is named by its module, which loading imports. So the exporter
first reads each format's configuration with a plain reader: the `.keras` archive's `config.json`
(zipfile), the `.h5` file's `model_config` attribute (h5py), a SavedModel's `keras_metadata.pb`
(protobuf). export/frontend/model_code.py then refuses code in it, and export/frontend/model_limits.py checks
the sizes it declares, before any layer is built or any weight read.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnsql.text import printable

from ..errors import ExportError

FORMATS = "a .keras file (Keras 3), a .h5/.hdf5 file (Keras 2, tf.keras) or a SavedModel directory"
MAX_CONFIG_DEPTH = 200  # levels of lists and objects; a deep functional model's configuration has ~10
MAX_CONFIG_BYTES = 64 << 20  # a model's configuration is kilobytes; a bigger one is not read
# What a .h5 may hold besides its datasets' values: its three configuration attributes (MAX_CONFIG_BYTES
# each), and HDF5's own structures (object headers, indexes: kilobytes a layer) within this.
HDF5_STRUCTURES_BYTES = 32 << 20


@dataclass(frozen=True)
class ModelFile:
    """A model file and its configuration, as JSON data.

    `path` is the private copy every reader reads (export/frontend/model_snapshot.py), `shown` the path
    the user named, printable, for messages. `library` is the Keras that wrote it and will read it:
    "keras" (Keras 3) or "tf_keras" (TensorFlow's legacy Keras 2). `config` is `{"class_name": ...,
    "config": ...}`, or None for a SavedModel without Keras metadata (nothing can be checked before
    loading it). `loss` is the loss the model was compiled with, as saved, or None."""

    path: Path
    format: str  # "keras", "h5" or "savedmodel"
    library: str
    config: dict[str, Any] | None
    shown: str = ""
    loss: Any = None

    @property
    def name(self) -> str:
        """The file's name as the user named it, printable."""
        return Path(self.shown).name or self.shown

    @property
    def kind(self) -> str:
        return {"keras": "a .keras file", "h5": "an HDF5 file", "savedmodel": "a SavedModel directory"}[
            self.format
        ]


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def read_model_file(path: str | Path, shown: str | None = None) -> ModelFile:
    """The file's format, writer, configuration and saved loss; one clear line when it is none of the
    three. `path` is what is read (the private copy), `shown` the path named in messages."""
    path = Path(path)
    return read_format(path, Path(printable(str(path)) if shown is None else shown))


def read_format(path: Path, shown: Path) -> ModelFile:
    if not path.exists():
        raise ExportError(f"model file not found: {shown}")
    if path.is_dir():
        if (path / "saved_model.pb").is_file():
            return read_saved_model(path, shown)
        raise ExportError(f"{shown} is a directory without saved_model.pb; expected {FORMATS}")
    if path.suffix in (".h5", ".hdf5"):
        return read_h5(path, shown)
    if path.suffix != ".keras":
        raise ExportError(f"{shown} is not a Keras model: expected {FORMATS}")
    return read_keras(path, shown)


def read_keras(path: Path, shown: Path) -> ModelFile:
    if not zipfile.is_zipfile(path):
        raise ExportError(f"{shown} is not a valid .keras file (not a zip archive)")
    try:
        with zipfile.ZipFile(path) as archive:
            info = archive.getinfo("config.json")
            if info.file_size > MAX_CONFIG_BYTES:
                raise ExportError(f"{shown}: config.json holds {info.file_size:,} bytes; refusing to read it")
            config = parse_json(archive.read(info), shown)
    except (KeyError, zipfile.BadZipFile, OSError) as error:
        raise ExportError(f"cannot load Keras model {shown}: {first_line(error)}") from None
    compiled = config.get("compile_config")
    loss = compiled.get("loss") if isinstance(compiled, dict) else None
    return ModelFile(path, "keras", "keras", config, str(shown), loss)


def read_h5(path: Path, shown: Path) -> ModelFile:
    """The `model_config` attribute; `keras_version` says which Keras wrote it (Keras 3 writes .h5 too);
    `training_config` the loss."""
    import h5py

    try:
        with h5py.File(path, "r") as file:
            check_besides_weights(file, path, shown)
            raw = text_attribute(file, "model_config", shown)
            version = text_attribute(file, "keras_version", shown) or ""
            training = text_attribute(file, "training_config", shown)
    except OSError as error:
        raise ExportError(f"cannot load an HDF5 file {shown}: {first_line(error)}") from None
    if raw is None:
        raise ExportError(
            f"{shown} holds no model configuration (a weights-only file?); save the whole model"
        )
    library = "keras" if version.startswith("3") else "tf_keras"
    config = parse_json(raw, shown)
    return ModelFile(path, "h5", library, config, str(shown), saved_h5_loss(training))


def check_besides_weights(file: Any, path: Path, shown: Path) -> None:
    """ExportError when the file holds more bytes besides its datasets' values than its configurations
    and HDF5's structures may: a variable-length string attribute tells its size only once it is read
    whole (a 256 MiB one took 1.4 GB to read and parse), so the file's other bytes bound it first."""
    import h5py

    stored = 0

    def count(_name: str, item: Any) -> None:
        nonlocal stored
        if isinstance(item, h5py.Dataset):
            stored += item.id.get_storage_size()

    file.visititems(count)
    besides = path.stat().st_size - stored
    if besides > 3 * MAX_CONFIG_BYTES + HDF5_STRUCTURES_BYTES:
        raise ExportError(
            f"{shown} holds {besides >> 20} MiB besides its weights, more than its configuration "
            f"({MAX_CONFIG_BYTES >> 20} MiB at most) needs; refusing to read it"
        )


def text_attribute(file: Any, name: str, shown: Path) -> str | None:
    """An attribute of the file's root as text (Keras writes its configurations as strings), None when
    absent; ExportError in one line when it is larger than a configuration may be, or not text."""
    if name not in file.attrs:
        return None
    if file.attrs.get_id(name).get_storage_size() > MAX_CONFIG_BYTES:
        raise ExportError(f"{shown}: the attribute {name} is larger than {MAX_CONFIG_BYTES >> 20} MiB")
    value = file.attrs[name]
    if isinstance(value, (bytes, str)) and len(value) > MAX_CONFIG_BYTES:  # variable-length: known now
        raise ExportError(f"{shown}: the attribute {name} is larger than {MAX_CONFIG_BYTES >> 20} MiB")
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError as error:
            raise ExportError(
                f"{shown}: the attribute {name} is not UTF-8 text: {first_line(error)}"
            ) from None
    if isinstance(value, str):
        return value
    raise ExportError(f"{shown}: the attribute {name} is not text (Keras writes it as a JSON string)")


def saved_h5_loss(training: Any) -> Any:
    """The loss of an HDF5 file's `training_config`, or None (not compiled, or not readable: the
    activation then decides)."""
    if training is None:
        return None
    try:
        parsed = json.loads(training.decode() if isinstance(training, bytes) else training)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return parsed.get("loss") if isinstance(parsed, dict) else None


def read_saved_model(path: Path, shown: Path) -> ModelFile:
    """The root object's class and configuration in keras_metadata.pb, which tf.keras writes beside the
    TensorFlow graph. The JSON is read as plain data (tf.keras decodes some of it into objects).

    A SavedModel without that file (Keras 3's `model.export()`, `tf.saved_model.save`) holds TensorFlow
    functions but no layers: no Keras can rebuild a model from it, trusted or not, so it is refused here
    with what to save instead."""
    metadata_file = path / "keras_metadata.pb"
    if not metadata_file.is_file():
        raise ExportError(
            f"{shown} is a SavedModel without Keras layers (what Keras 3's model.export() and "
            'tf.saved_model.save write): save the model itself with model.save("m.keras") and export that'
        )
    from tf_keras.protobuf import saved_metadata_pb2  # deferred: imports TensorFlow

    metadata = saved_metadata_pb2.SavedMetadata()
    try:
        metadata.ParseFromString(metadata_file.read_bytes())
    except Exception as error:  # protobuf's DecodeError, or OSError
        raise ExportError(f"cannot read {shown / metadata_file.name}: {first_line(error)}") from None
    roots = [node for node in metadata.nodes if node.node_path == "root"]
    if not roots:
        raise ExportError(f"{shown / metadata_file.name} describes no model (no root object)")
    root = parse_json(roots[0].metadata, shown)
    if not isinstance(root.get("config"), dict) or "layers" not in root["config"]:
        raise ExportError(
            f"{shown} holds a subclassed model ({root.get('class_name')!r}) without a configuration: only "
            "its TensorFlow graph could rebuild it; save it as a Sequential or functional model"
        )
    config = {"class_name": root["class_name"], "config": root["config"]}
    return ModelFile(path, "savedmodel", "tf_keras", config, str(shown))


def nesting_depth(value: Any) -> int:
    """How deep lists and objects nest in a parsed JSON value, counted without recursion."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if not isinstance(item, dict | list):
            continue
        deepest = max(deepest, depth)
        if depth <= MAX_CONFIG_DEPTH:  # deeper is refused anyway: no need to look further
            pending.extend(
                (child, depth + 1) for child in (item.values() if isinstance(item, dict) else item)
            )
    return deepest


def parse_json(raw: str | bytes, path: Path) -> dict[str, Any]:
    try:
        config = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ExportError(f"{path}: the model configuration is not JSON: {first_line(error)}") from None
    except RecursionError:  # a few hundred KB of brackets: Python's parser recurses per level
        config = None
    if config is None or nesting_depth(config) > MAX_CONFIG_DEPTH:
        raise ExportError(
            f"{path}: the model configuration is nested more than {MAX_CONFIG_DEPTH} levels deep; "
            "no Keras model is (refusing to read it)"
        )
    if not isinstance(config, dict) or not isinstance(config.get("class_name"), str):
        raise ExportError(f"{path}: the model configuration names no class")
    return config
