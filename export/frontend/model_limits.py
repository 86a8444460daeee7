"""Check the sizes a model file declares before anything of that size is allocated.

One number changed in a configuration (Dense units 100 → 524,288) declares 411 million parameters; Keras
would allocate and initialise them all before noticing that the stored weights do not match, and a
compressed HDF5 dataset can expand to any size when read. So before loading:
- the declared model is built from its configuration without weights (Keras 3: variables created in a
  `StatelessScope` are left uninitialised; tf.keras: built in a TensorFlow graph, where variables are
  symbolic), and its parameters and the values each layer outputs per row are counted;
- the stored weights are counted from the file's metadata (HDF5 dataset shapes, the SavedModel
  checkpoint's index), without reading them.
Either beyond its limit is refused with one line naming the option that raises it.
"""

from __future__ import annotations

import json
import math
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsql.text import printable

from ..errors import ExportError
from .model_code import legacy_tf_activations, quantized_refusal
from .model_file import ModelFile, first_line
from .model_snapshot import MAX_ENTRIES, max_bytes

DEFAULT_MAX_PARAMETERS = 100_000_000  # 400 MB of float32 weights; the reference MLP has 79,510
DEFAULT_MAX_ACTIVATIONS = 10_000_000  # values one layer outputs per row (40 MB of float32)


@dataclass(frozen=True)
class Limits:
    max_parameters: int = DEFAULT_MAX_PARAMETERS
    max_activations: int = DEFAULT_MAX_ACTIVATIONS


DEFAULT_LIMITS = Limits()


def check_sizes(model: ModelFile, limits: Limits, *, trust_code: bool) -> None:
    """Refuse a model that declares or stores more than the limits allow; allocates no weight."""
    if model.config is not None:
        with classes_kept(model):
            check_declared(model, build_without_weights(model, safe_mode=not trust_code), limits)
    if model.format == "keras":
        check_archive(model, max_bytes(limits.max_parameters))
    stored = stored_values(model)
    if stored > limits.max_parameters:
        raise ExportError(
            f"{model.shown} stores {stored:,} weight values, more than --max-parameters "
            f"{limits.max_parameters:,}; raise it if the model is really that large"
        )


def check_archive(model: ModelFile, most: int) -> None:
    """Refuse a `.keras` archive whose members declare more bytes in all than a model file may hold
    (model_snapshot.max_bytes), or more members than a SavedModel may: Keras 3 extracts every member to
    a temporary directory when the archive holds more than its three files, and bounds each member's
    expansion only (beyond 256 MiB), so five members of 250 MiB of zeros in a 1.3 MB file wrote 1.2 GB
    to the exporting user's temporary directory, and a file of the size the copy allows, terabytes."""
    try:
        with zipfile.ZipFile(model.path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError) as error:
        raise ExportError(f"cannot read {model.shown}: {first_line(error)}") from None
    declared = sum(member.file_size for member in members)
    if len(members) > MAX_ENTRIES or declared > most:
        raise ExportError(
            f"{model.shown}: its {len(members):,} members declare {declared:,} bytes in all; a model file "
            f"may hold {most:,} bytes in at most {MAX_ENTRIES:,} members (raise --max-parameters if the "
            "model is that large); refusing to extract them"
        )


def check_declared(model: ModelFile, skeleton: Any, limits: Limits) -> None:
    parameters = int(skeleton.count_params())
    if parameters > limits.max_parameters:
        raise ExportError(
            f"{model.shown} declares {parameters:,} parameters, more than --max-parameters "
            f"{limits.max_parameters:,}; raise it if the model is really that large"
        )
    for layer, values in activation_sizes(skeleton):
        if values > limits.max_activations:
            raise ExportError(
                f"{model.shown}: layer '{layer.name}' ({type(layer).__name__}) outputs {values:,} values "
                f"per row, more than --max-activations {limits.max_activations:,}; raise it if that is right"
            )


def build_without_weights(model: ModelFile, *, safe_mode: bool) -> Any:
    """The model as its configuration declares it, built with variables that hold no values."""
    assert model.config is not None
    try:
        if model.library == "keras":
            return keras_skeleton(model.config, safe_mode=safe_mode)
        return tf_keras_skeleton(tf_keras_config(model))
    except ExportError:
        raise
    except Exception as error:  # Keras raises many types for a configuration it cannot build
        raise ExportError(f"cannot load {model.kind} {model.shown}: {first_line(error)}") from None


def keras_skeleton(config: dict[str, Any], *, safe_mode: bool) -> Any:
    import keras
    from keras.src.backend.common import global_state

    config = {key: value for key, value in config.items() if key != "compile_config"}
    try:
        with keras.StatelessScope(initialize_variables=False):
            if "module" in config:  # the .keras format
                return keras.saving.deserialize_keras_object(config, safe_mode=safe_mode)
            from keras.src.legacy.saving import saving_utils  # the .h5 format, as Keras 3 reads it

            return saving_utils.model_from_config(config)
    finally:  # Keras would initialise the skeleton's variables at its next stateless scope: forget them
        global_state.set_global_attribute("uninitialized_variables", [])


def tf_keras_config(model: ModelFile) -> dict[str, Any]:
    """The configuration as tf.keras reads it: keras_metadata.pb's JSON encodes tuples as objects
    ({"class_name": "__tuple__", ...}), which tf.keras decodes first."""
    assert model.config is not None
    if model.format != "savedmodel":
        return model.config
    from tf_keras.src.saving.legacy.saved_model import json_utils

    return dict(json_utils.decode(json.dumps(model.config)))


@contextmanager
def classes_kept(model: ModelFile) -> Iterator[None]:
    """tf.keras swaps the base classes of its Model and Layer classes to their TF1 versions when a model is
    built in a graph (tf_keras_skeleton), which breaks every tf.keras model the process already holds (its
    `predict` then raises): their bases are put back once the skeleton has been measured."""
    if model.library != "tf_keras":
        yield
        return
    import tf_keras

    classes, stack = set(), [tf_keras.layers.Layer, tf_keras.Model]
    while stack:
        cls = stack.pop()
        if cls not in classes:
            classes.add(cls)
            stack.extend(cls.__subclasses__())
    bases = {cls: cls.__bases__ for cls in classes}
    try:
        yield
    finally:
        for cls, kept in bases.items():
            if cls.__bases__ != kept:
                cls.__bases__ = kept


def tf_keras_skeleton(config: dict[str, Any]) -> Any:
    import tensorflow as tf
    import tf_keras

    with tf.Graph().as_default():
        return tf_keras.models.model_from_config(config, custom_objects=legacy_tf_activations())


def activation_sizes(model: Any) -> Iterator[tuple[Any, int]]:
    """(layer, values per row) of every output of every layer, nested models' layers included; a
    dimension of variable size counts as 1."""
    for layer in model._flatten_layers(include_self=False, recursive=True):
        for node in getattr(layer, "_inbound_nodes", []):
            outputs = node.output_tensors
            for tensor in outputs if isinstance(outputs, list | tuple) else [outputs]:
                shape = getattr(tensor, "shape", None)
                if shape is not None and len(shape) > 0:
                    yield layer, math.prod(int(d) if d is not None else 1 for d in list(shape)[1:])


def stored_values(model: ModelFile) -> int:
    """How many weight values the file stores, read from metadata only."""
    if model.format == "h5":
        import h5py

        with h5py.File(model.path, "r") as file:
            refuse_data_outside(file, model.name)
            weights = file.get("model_weights", file)
            return max(dataset_values(weights, model.name), loaded_values(weights))
    if model.format == "keras":
        return keras_archive_values(model)
    import tensorflow as tf

    prefix = str(model.path / "variables" / "variables")
    try:
        shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    except Exception as error:  # TensorFlow raises its own types
        raise ExportError(f"cannot read the weights of {model.shown}: {first_line(error)}") from None
    return sum(math.prod(shape) for key, shape in shapes.items() if not key.startswith("optimizer/"))


def keras_archive_values(model: ModelFile) -> int:
    """The values the archive's weights file stores; one line for a member that is not what it says (its
    CRC or size wrong, not HDF5): Python's zipfile and h5py raise their own types. An archive whose
    weights are not in `model.weights.h5` is refused (`refuse_other_weights`)."""
    import h5py

    try:
        with zipfile.ZipFile(model.path) as archive:
            if "model.weights.h5" not in archive.namelist():
                refuse_other_weights(model, archive.namelist())
                return 0
            with archive.open("model.weights.h5") as member, h5py.File(member, "r") as file:
                refuse_data_outside(file, f"{model.name}'s model.weights.h5")
                return dataset_values(file, f"{model.name}'s model.weights.h5")
    except ExportError:
        raise
    except (zipfile.BadZipFile, OSError, ValueError, RuntimeError, KeyError) as error:
        raise ExportError(f"cannot read the weights of {model.shown}: {first_line(error)}") from None


def refuse_other_weights(model: ModelFile, names: list[str]) -> None:
    """ExportError for an archive holding `model.weights.npz` instead of `model.weights.h5`: Keras 3 then
    reads each array whole, at the shape its header declares, and makes a Python list of it before it
    checks anything (a 99 KB file took the export to 2.8 GB), bounding only members beyond 4 GiB; its own
    npz files hold pickled objects, which it cannot load. Only the HDF5 file is counted and read."""
    if "model.weights.npz" in names:
        raise ExportError(
            f"{model.shown}: its weights are in model.weights.npz, not model.weights.h5 (what Keras 3 "
            "saves); refusing to read them"
        )


def refuse_data_outside(file: Any, shown: str) -> None:
    """ExportError (one line) for an HDF5 file that keeps data outside itself: a dataset stored in an
    external raw file or mapped from other files (virtual), or an external or soft link. tf.keras reads
    such a dataset from whatever it names, any file the exporting user can read (~/.pgpass), and the
    export would publish its bytes as weights; Keras 3 refuses them, tf.keras does not. Nothing nnsql
    or either Keras writes holds one."""
    import h5py

    # h5py stops a visit at the first callback that returns something (raising inside it is unsafe)
    link = file.visititems_links(
        lambda name, link: (name, link) if isinstance(link, h5py.ExternalLink | h5py.SoftLink) else None
    )
    if link is not None:
        name, link = link
        raise ExportError(
            f"{shown}: {printable(name)} is an {type(link).__name__} (to {link_target(link)}), data "
            "outside the model file; refusing to read it"
        )
    dataset = file.visititems(
        lambda name, item: (
            (name, item) if isinstance(item, h5py.Dataset) and (item.external or item.is_virtual) else None
        )
    )
    if dataset is not None:
        name, item = dataset
        raise ExportError(
            f"{shown}: dataset {printable(name)} is {outside_storage(item)}, data outside the model file; "
            "refusing to read it"
        )


def link_target(link: Any) -> str:
    """Where an HDF5 link points, printable: `file:path` for an external link, the path for a soft one."""
    filename = getattr(link, "filename", None)
    return printable(f"{filename}:{link.path}" if filename is not None else str(link.path))


def outside_storage(dataset: Any) -> str:
    """Where a dataset's values are kept, printable: the first raw file or the first mapped dataset, and
    how many more there are."""
    if dataset.is_virtual:
        sources = [f"{source.file_name}:{source.dset_name}" for source in dataset.virtual_sources()]
        where = "a virtual dataset mapping"
    else:
        sources = [str(entry[0]) for entry in dataset.external]
        where = "stored in"
    more = f" and {len(sources) - 1} more" if len(sources) > 1 else ""
    return f"{where} {printable(sources[0]) if sources else 'nothing'}{more}"


def dataset_values(group: Any, shown: str) -> int:
    """The values the datasets under `group` store, each counted once; ExportError (one line) for a
    dataset whose values are not plain numbers (a string, compound, array, reference or opaque type):
    Keras writes none, and a count of values says nothing of their size (one fixed-length string may
    hold gigabytes)."""
    import h5py

    total = 0

    def add(name: str, item: Any) -> Any:
        nonlocal total
        if not isinstance(item, h5py.Dataset):
            return None
        if not plain_numbers(item.dtype):
            return name, item.dtype
        total += read_values(item)
        return None

    found = group.visititems(add)  # h5py stops at the first callback that returns something
    if found is not None:
        name, dtype = found
        raise ExportError(
            f"{shown}: dataset {printable(name)} holds {printable(str(dtype))}, not numbers; Keras "
            "writes weights as numbers only; refusing to read it"
        )
    return total


def read_values(dataset: Any) -> int:
    """The values reading `dataset` makes HDF5 hold: its own, or, stored in chunks, at least one whole
    chunk, which HDF5 decompresses whole to read any part of it. A chunk may exceed the dataset's shape
    (up to 4 GiB, of an extendable dataset): a 3 × 4 kernel in one gzip-compressed chunk of 8192 × 8192
    zeros, a file of 276 KB, took the export from 0.83 to 1.05 GB."""
    values = math.prod(dataset.shape) if dataset.shape is not None else 0
    return max(values, math.prod(dataset.chunks)) if dataset.chunks else values


def plain_numbers(dtype: np.dtype[Any]) -> bool:
    """A dtype of one number a value, of at most 8 bytes: what Keras stores weights as (a bfloat16 as
    HDF5 opaque values of 2 bytes)."""
    single = dtype.subdtype is None and dtype.names is None
    return dtype.kind in "biufcV" and single and dtype.itemsize <= 8


def loaded_values(group: Any) -> int:
    """The values Keras's `.h5` loader (tf.keras's and Keras 3's legacy one) reads: for every layer the
    group's `layer_names` lists, every dataset its `weight_names` names, repeats included. Each name is
    read into an array of its own, all of a layer's before their count is checked, so a list naming one
    compressed dataset of some million values a hundred times is read a hundred times over, while the
    file stores, and `dataset_values` counts, it once."""
    import h5py

    total = 0
    for layer_name in names_attribute(group, "layer_names"):
        layer = group.get(layer_name)
        if not isinstance(layer, h5py.Group):
            continue
        for weight_name in names_attribute(layer, "weight_names"):
            weight = layer.get(weight_name)
            if isinstance(weight, h5py.Dataset):
                total += read_values(weight)
    return total


def names_attribute(group: Any, name: str) -> list[str]:
    """A list of names kept in an attribute as Keras keeps it: whole, or in chunks `name0`, `name1`, ...
    (read as Keras reads it; its size is bounded with the file's, export/frontend/model_file.py)."""
    attributes = group.attrs
    chunks = [name] if name in attributes else []
    while name not in attributes and f"{name}{len(chunks)}" in attributes:
        chunks.append(f"{name}{len(chunks)}")
    names = []
    for chunk in chunks:
        values = attributes[chunk]
        for value in np.atleast_1d(np.asarray(values, dtype=object)).ravel():
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            if isinstance(text, str):
                names.append(text)
    return names


def check_finite_weights(model: Any) -> None:
    """Refuse a model holding a NaN or infinite weight (a diverged training run), naming the tensor: its
    scores are NaN on every row, and NaN compared with NaN would look like agreement."""
    for variable in model.weights:
        values = np.asarray(variable)
        if values.dtype.kind == "f" and not np.isfinite(values).all():
            name = getattr(variable, "path", None) or variable.name
            raise ExportError(
                f"tensor {name} holds NaN or infinite values (a diverged training run?); refusing to export"
            )


# Floating-point types narrower than float32: a model computing in them rounds every value to 11
# (float16) or 8 (bfloat16) bits, which no target reproduces.
NARROW_FLOATS = {"float16": 11, "bfloat16": 8}


def check_compute_precision(model: Any, shown: str) -> None:
    """Refuse a model that computes in float16 or bfloat16 (a layer's dtype policy, `mixed_float16`
    included), naming the layer. The SQL targets compute in float64 and match
    Keras rebuilt in float64 (the gate's judge at that precision), while a Keras user's `model.predict`
    rounds every value to a few digits: a bfloat16 MLP published with every sample row within 1e-5 of the
    judge and 250/250 labels agreeing, yet 2.2e-3 from `model.predict` and 25 of 5,000 labels another."""
    for layer in model._flatten_layers(include_self=True, recursive=True):
        policy = getattr(layer, "dtype_policy", None)
        where = f"layer '{printable(layer.name)}' ({type(layer).__name__})"
        mode = getattr(policy, "quantization_mode", None)
        if mode:  # its compute dtype is float32, its weights int8 or float8 and their scales
            raise ExportError(quantized_refusal(shown, where, str(mode)))
        compute = dtype_name(getattr(policy, "compute_dtype", None))
        if compute in NARROW_FLOATS:
            refuse_narrow(shown, where, compute)


def dtype_name(dtype: Any) -> str:
    """A dtype's name, whether Keras 3 gives a string or tf.keras a TensorFlow DType."""
    return str(getattr(dtype, "name", dtype))


def refuse_narrow(shown: str, where: str, dtype: str) -> None:
    raise ExportError(
        f"{shown}: {where} computes in {dtype}: model.predict rounds every value to {NARROW_FLOATS[dtype]} "
        "bits, which no target reproduces, so their answers would differ from a Keras user's; "
        "--as-float32 exports the same network computing in float32 (docs/limits.md)"
    )
