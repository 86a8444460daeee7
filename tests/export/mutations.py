"""Faults injected into what an export generates, the small models that expose them, and Oracle's
verify scripts run offline.

Each model is built with seeded weights (no training). The faults are what a plausible code generator
bug does to the generated artefact: a weight off by 1e-4, one class logit shifted by 0.5 beside a large
regression head, a ReLU that saturates at 50, a time-step loop one step short, a mask read one step late.
A weight fault is generated from a copy of the model with that weight changed; a code fault rewrites the
generated text (SQL, PL/pgSQL, PL/Python, PL/SQL) or the converted ONNX graph, and must match once.
Oracle's PL/SQL scripts run in the PL/SQL interpreter of tests/export/plsql, their check as generated.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import keras
import numpy as np

from tests import models

STEPS, CHANNELS = 6, 3  # the recurrent model's sequence


def dense() -> keras.Model:
    """features (8) → Dense(16, relu) → Dense(4, softmax)."""
    features = keras.Input((8,), name="features")
    hidden = keras.layers.Dense(16, activation="relu", name="hidden")(features)
    outputs = keras.layers.Dense(4, activation="softmax", name="classes")(hidden)
    return models._seeded(keras.Model(features, outputs), 41)


def two_heads() -> keras.Model:
    """A softmax class head beside an energy regression head spanning 2e4 to 6e4 on uniform rows."""
    features = keras.Input((8,), name="features")
    trunk = keras.layers.Dense(16, activation="relu", name="trunk")(features)
    classes = keras.layers.Dense(3, activation="softmax", name="classes")(trunk)
    energy = keras.layers.Dense(1, name="energy")(trunk)
    model = models._seeded(keras.Model(features, [classes, energy]), 42)
    rows = np.random.default_rng(0).random((200, 8), dtype=np.float32)
    hidden = keras.Model(features, trunk).predict(rows, verbose=0)
    direction = np.random.default_rng(43).uniform(0.5, 1.5, (16, 1))
    reach = hidden @ direction
    scale = 4e4 / (reach.max() - reach.min())  # the span of the energy on these rows
    kernel, bias = direction * scale, 2e4 - reach.min() * scale
    model.get_layer("energy").set_weights([kernel.astype(np.float32), np.array([bias], dtype=np.float32)])
    return model


def recurrent() -> keras.Model:
    """Masked, zero-padded sequences (6 steps × 3) → SimpleRNN(8) → Dense(3, softmax)."""
    sequence = keras.Input((STEPS, CHANNELS), name="sequence")
    masked = keras.layers.Masking(0.0, name="masking")(sequence)  # the faults name its variables
    state = keras.layers.SimpleRNN(8, name="rnn")(masked)
    outputs = keras.layers.Dense(3, activation="softmax", name="classes")(state)
    return models._seeded(keras.Model(sequence, outputs), 44)


BUILDERS = {"dense": dense, "two_heads": two_heads, "recurrent": recurrent}


def saved(name: str, directory: Path) -> Path:
    return models.save(BUILDERS[name](), directory)


# -- the faults -----------------------------------------------------------------------------------------
# A weight fault changes one weight of the Keras model the artefact is generated from (kernel or bias,
# Keras's layout); the gate still compares with the true model. A code fault rewrites the generated code.
WEIGHT_FAULTS = {
    # (model, layer, 0 kernel or 1 bias, index, by how much)
    # the output layer's weight from hidden unit 12 to class 3: its 1e-4 moves Keras's probabilities by
    # up to 3.9e-5 on uniform rows (test_mutations checks it is more than twice the tolerance)
    "weight_1e-4": ("dense", "classes", 0, (12, 3), 1e-4),
    # one class logit of the two-head model, beside the energy head of 2e4..6e4
    "logit_0.5": ("two_heads", "classes", 1, (0,), 0.5),
}
CODE_FAULTS = {
    "relu_capped_at_50": "dense",
    "loop_one_step_short": "recurrent",
    "mask_one_step_late": "recurrent",
}
FAULTS = {**{name: fault[0] for name, fault in WEIGHT_FAULTS.items()}, **CODE_FAULTS}


def faulty_weights(model: keras.Model, fault: str) -> list[np.ndarray]:
    """The model's weights with the weight fault applied (the model itself unchanged)."""
    _, layer_name, which, index, delta = WEIGHT_FAULTS[fault]
    layer = model.get_layer(layer_name)
    weights = [w.copy() for w in layer.get_weights()]
    weights[which][index] += np.float32(delta)
    changed: list[np.ndarray] = []
    for candidate in model.layers:
        changed.extend(weights if candidate is layer else candidate.get_weights())
    return changed


def with_faulty_weights(source: Path, fault: str, directory: Path) -> Path:
    """The saved model with the weight fault, saved beside its metadata (same classes)."""
    model = keras.saving.load_model(source)
    model.set_weights(faulty_weights(model, fault))
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "model.keras"
    model.save(path)
    (directory / "metadata.json").write_text((source.parent / "metadata.json").read_text())
    return path


def rewrite(text: str, pattern: str, replacement: str, what: str) -> str:
    """`text` with the one match of `pattern` replaced; the generated code must hold exactly one."""
    changed, count = re.subn(pattern, replacement, text, flags=re.MULTILINE)
    if count != 1:
        raise AssertionError(f"{what}: {count} matches of {pattern!r} in the generated code, not one")
    return changed


# The rewrites of each code fault per kind of generated code: (pattern, replacement) pairs, each matching
# once. The loop fault stops the time-step loop one step early; the late mask makes step t read the mask
# of step t - 1 (the first step its own); the capped ReLU saturates at 50, which only rows at scale reach.
LAST = STEPS - 1
RELU50 = """
    PROCEDURE activate_relu50(v IN OUT NOCOPY UTL_NLA_ARRAY_FLT) IS
        z BINARY_DOUBLE;
    BEGIN
        FOR i IN 1 .. v.COUNT LOOP
            z := TO_BINARY_DOUBLE(v(i));
            v(i) := TO_BINARY_FLOAT(LEAST(GREATEST(z, 0.0d), 50.0d));
        END LOOP;
    END activate_relu50;"""
Rewrites = tuple[tuple[str, str], ...]
TEXT_FAULTS: dict[str, dict[str, Rewrites]] = {
    "duckdb": {
        "relu_capped_at_50": (
            (
                r"(greatest\(list_dot_product\(_nn_u\.w, _nn_v_features\) \+ _nn_u\.b, 0\.0\))",
                r"least(\1, 50.0)",
            ),
        ),
        "loop_one_step_short": (
            (r"(lambda _nn_t: _nn_v_masking_steps\[_nn_t \+ 1\] > 0)", rf"\1 AND _nn_t < {LAST}"),
        ),
        "mask_one_step_late": (
            (r"_nn_v_masking_steps\[_nn_t \+ 1\] > 0", "_nn_v_masking_steps[greatest(_nn_t, 1)] > 0"),
        ),
    },
    "plpgsql": {
        "relu_capped_at_50": (
            (
                r"^(\s*)(v_hidden := nnsql\.\w+\([^;]*'relu'\);)$",
                r"\1\2\n\1v_hidden := ARRAY(SELECT least(e, 50) FROM unnest(v_hidden) AS e);",
            ),
        ),
        "loop_one_step_short": ((rf"FOR nn_t IN 0\.\.{LAST} LOOP", f"FOR nn_t IN 0..{LAST - 1} LOOP"),),
        "mask_one_step_late": (
            (r"IF v_masking_steps\[nn_t \+ 1\] = 0", "IF v_masking_steps[greatest(nn_t, 1)] = 0"),
        ),
    },
    "plpython": {
        "relu_capped_at_50": (
            (r"^(v_hidden = np\.maximum\(.*)$", r"\1\nv_hidden = np.minimum(v_hidden, 50.0)"),
        ),
        "loop_one_step_short": ((rf"for nn_t in range\({STEPS}\):", f"for nn_t in range({LAST}):"),),
        "mask_one_step_late": (
            (r"if not v_masking_steps\[nn_t\]:", "if not v_masking_steps[max(nn_t - 1, 0)]:"),
        ),
    },
    "oracle": {
        "relu_capped_at_50": (
            (r"^(\s*)activate_relu\(v_hidden\);$", r"\1activate_relu50(v_hidden);"),
            (r"^(\s*END activate_relu;)$", "\\1\n" + RELU50.replace("\\", "\\\\")),
        ),
        "loop_one_step_short": ((rf"FOR nn_t IN 0 \.\. {LAST} LOOP", f"FOR nn_t IN 0 .. {LAST - 1} LOOP"),),
        "mask_one_step_late": (
            (r"^(\s*)(v_masking_steps UTL_NLA_ARRAY_FLT;)$", r"\1\2\n\1nn_late UTL_NLA_ARRAY_FLT;"),
            (
                r"^(\s*)(v_masking_steps) := (step_mask\(\w+, \d+\));$",
                r"\1\2 := \3;\n\1nn_late := UTL_NLA_ARRAY_FLT();\n\1append_first(nn_late, \2, 1);\n"
                rf"\1append_first(nn_late, \2, {LAST});\n\1\2 := nn_late;",
            ),
        ),
    },
}
# The cube kernel applies ReLU inside each unit's expression, in the one statement of the layer's units,
# which spans lines.
TEXT_FAULTS["cube"] = {
    **TEXT_FAULTS["plpgsql"],
    "relu_capped_at_50": (
        (
            r"^(\s*)(v_hidden := ARRAY\[\s*greatest\([\s\S]*?\];)$",
            r"\1\2\n\1v_hidden := ARRAY(SELECT least(e, 50) FROM unnest(v_hidden) AS e);",
        ),
    ),
}


# The control: the same injection with no fault (the generated code rewritten as it was generated).
CONTROL = "none"


def faulty_code(kind: str, fault: str, text: str) -> str:
    """The generated code of `kind` with the code fault's rewrites (as it was for CONTROL)."""
    if fault == CONTROL:
        return text
    for pattern, replacement in TEXT_FAULTS[kind][fault]:
        text = rewrite(text, pattern, replacement, f"{fault} on {kind}")
    return text


# -- the same code faults in an ONNX graph ----------------------------------------------------------------
def onnx_constant(model, name: str, values: object, dtype: type) -> str:
    import onnx

    model.graph.initializer.append(onnx.numpy_helper.from_array(np.asarray(values, dtype=dtype), name))
    return name


def insert_before(model, anchor, nodes: list) -> None:
    """Nodes inserted just before `anchor` (the graph stays topologically sorted)."""
    position = list(model.graph.node).index(anchor)
    for offset, node in enumerate(nodes):
        model.graph.node.insert(position + offset, node)


def only(nodes: list, what: str):
    if len(nodes) != 1:
        raise AssertionError(f"{len(nodes)} {what} in the converted graph, not one")
    return nodes[0]


def capped_relu(model) -> None:
    """The ReLU becomes Clip(0, 50)."""
    relu = only([n for n in model.graph.node if n.op_type == "Relu"], "Relu nodes")
    low = onnx_constant(model, "nn_fault_low", 0.0, np.float32)
    high = onnx_constant(model, "nn_fault_high", 50.0, np.float32)
    relu.op_type = "Clip"
    relu.input[:] = [relu.input[0], low, high]


def loop_one_step_short(model) -> None:
    """The recurrent Loop's trip count, one less."""
    import onnx

    loop = only([n for n in model.graph.node if n.op_type == "Loop"], "Loop nodes")
    one = onnx_constant(model, "nn_fault_one", 1, np.int64)
    shorter = onnx.helper.make_node("Sub", [loop.input[0], one], ["nn_fault_trips"], name="nn_fault_trips")
    insert_before(model, loop, [shorter])
    loop.input[0] = "nn_fault_trips"


def mask_one_step_late(model) -> None:
    """The step mask (batch × steps × 1) shifted one step later along the steps, the first step's kept."""
    import onnx

    producers = {output: node for node in model.graph.node for output in node.output}
    masks = [  # the Loop's body reads the mask through this Transpose (steps first)
        node
        for node in model.graph.node
        if node.op_type == "Transpose" and getattr(producers.get(node.input[0]), "op_type", "") == "Unsqueeze"
    ]
    transpose = only(masks, "step masks")
    mask = transpose.input[0]
    axis = onnx_constant(model, "nn_fault_axis", [1], np.int64)
    zero = onnx_constant(model, "nn_fault_zero", [0], np.int64)
    first = onnx_constant(model, "nn_fault_first", [1], np.int64)
    before_last = onnx_constant(model, "nn_fault_before_last", [LAST], np.int64)
    helper = onnx.helper
    insert_before(
        model,
        transpose,
        [
            helper.make_node("Slice", [mask, zero, first, axis], ["nn_fault_m0"], name="nn_fault_m0"),
            helper.make_node("Slice", [mask, zero, before_last, axis], ["nn_fault_mt"], name="nn_fault_mt"),
            helper.make_node("Concat", ["nn_fault_m0", "nn_fault_mt"], ["nn_fault_late"], axis=1),
        ],
    )
    transpose.input[0] = "nn_fault_late"


ONNX_FAULTS = {
    "relu_capped_at_50": capped_relu,
    "loop_one_step_short": loop_one_step_short,
    "mask_one_step_late": mask_one_step_late,
    CONTROL: lambda model: None,
}


def faulty_onnx_file(path: Path, fault: str) -> None:
    import onnx

    model = onnx.load(str(path))
    ONNX_FAULTS[fault](model)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


# -- Oracle's scripts, run offline -------------------------------------------------------------------------
VERSION_NOT_PUBLISHED = -20010  # what a verify script raises before its switch


class Refused(Exception):
    """What a verify script raises (ORA-20010): the version is not switched to."""


def verify_offline(directory: Path) -> dict[str, object]:
    """The directory's install.sql run by the PL/SQL interpreter, 04_verify_and_switch_vN.sql included as
    text: Refused where its check raises; else the registry row it inserted (column → value)."""
    from tests.export.plsql_interpreter import PlsqlError, load_scripts

    try:
        installed = load_scripts(directory)
    except PlsqlError as error:
        if error.code != VERSION_NOT_PUBLISHED:
            raise
        raise Refused(error.message) from None
    (row,) = installed.session.store.table("NNSQL_MODELS").rows
    return row


# install_onnx_vN.sql calls DBMS_VECTOR and PREDICTION_SET, which the interpreter has not: its checks are
# read from the script and done here as check_row.sql.j2 does them, onnxruntime 1.15.1 scoring the rows.
ROW_LINE = re.compile(
    r"^\s*check_row\((\d+), (\w+)\.(\w+)\(([\w, ]+)\), UTL_NLA_ARRAY_DBL\((.*)\), (\S+), (\S+)\);$"
)


def double(text: str) -> float:
    return float("nan") if text == "BINARY_DOUBLE_NAN" else float(text.rstrip("d"))


@dataclass
class Check:
    """One check_row of a script: the row's arguments, what it is compared with, its tolerance (each
    value's bound is that times max(1, |value|)) and its tie margin."""

    inputs: list[np.ndarray]
    expected: np.ndarray
    allowed: float
    tie: float


def script_checks(text: str) -> list[Check]:
    """The checks of an install script (rows_block's lines), in order."""
    arrays: dict[str, list[float]] = {}
    checks: list[Check] = []
    for line in text.splitlines():
        if match := re.fullmatch(r"\s*(x\d+) := UTL_NLA_ARRAY_FLT\(\);", line):
            arrays[match[1]] = []
        elif match := re.fullmatch(r"\s*append\((x\d+), UTL_NLA_ARRAY_FLT\((.*)\)\);", line):
            arrays[match[1]].extend(float(v.strip().rstrip("f")) for v in match[2].split(","))
        elif match := ROW_LINE.fullmatch(line):
            inputs = [np.asarray(arrays[x.strip()], dtype=np.float32) for x in match[4].split(",")]
            expected = np.array([double(item.strip()) for item in match[5].split(",")])
            checks.append(Check(inputs, expected, double(match[6]), double(match[7])))
    return checks


def within(actual: np.ndarray, check: Check) -> bool:
    """check_row: each value within its bound, NaN only where expected, and the class agreeing."""
    actual = np.asarray(actual, dtype=np.float64)
    if len(actual) != len(check.expected) or (np.isnan(actual) != np.isnan(check.expected)).any():
        return False
    known = ~np.isnan(check.expected)
    bound = check.allowed * np.maximum(1.0, np.abs(check.expected[known]))
    if (np.abs(actual[known] - check.expected[known]) > bound).any():
        return False
    best = int(np.argmax(actual))
    return bool(check.expected.max() - check.expected[best] <= check.tie)


def verify_onnx_offline(directory: Path, name: str, version: int) -> int:
    """install_onnx_vN.sql's checks, the file scored by onnxruntime 1.15.1 (Oracle's) on the flat rows;
    predict_proba is the first output (PREDICTION_SET's probabilities). Refused where one fails."""
    from tests import onnxruntime115

    checks = script_checks((directory / f"install_onnx_v{version}.sql").read_text())
    (feature,) = json.loads((directory / f"{name}_metadata.json").read_text())["input"]
    flat = np.array([np.concatenate([x.ravel() for x in check.inputs]) for check in checks], dtype=np.float32)
    _, outputs = onnxruntime115.run(directory / f"{name}.onnx", {feature: flat})
    failed = [row for row, check in enumerate(checks) if not within(outputs[0][row], check)]
    if failed:
        raise Refused(f"{len(failed)} row(s) disagree with TensorFlow, first row {failed[0] + 1}")
    return len(checks)


def faulty_initializer(path: Path, model: keras.Model, fault: str) -> None:
    """The weight fault written into the ONNX file: the one initializer value equal to the weight."""
    import onnx

    _, layer_name, which, index, delta = WEIGHT_FAULTS[fault]
    value = model.get_layer(layer_name).get_weights()[which][index]
    graph = onnx.load(str(path))
    found = [
        (tensor, array)
        for tensor in graph.graph.initializer
        for array in [onnx.numpy_helper.to_array(tensor)]
        if np.count_nonzero(array == value) == 1
    ]
    tensor, array = only(found, f"initializers holding {value}")
    changed = array.copy()
    changed[changed == value] += np.float32(delta)
    tensor.CopyFrom(onnx.numpy_helper.from_array(changed, tensor.name))
    onnx.save(graph, str(path))


# (target, fault) → why the gate lets it through today; each is marked xfail(strict) in the matrix
SURVIVORS: dict[tuple[str, str], str] = {}
