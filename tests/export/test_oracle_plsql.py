"""The Oracle scripts executed as text by tests/export/plsql: a one-character change in a helper body of
the generated package, or in what the verify-and-switch script expects, makes the in-database gate
refuse the version, and the interpreter keeps Oracle's semantics (VARRAY subscripts from 1, BINARY_FLOAT
rounding, NUMBER overflow, NaN ordering, exception handlers)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import keras
import numpy as np
import pytest

from nnsql.export.oracle.__main__ import main as export_oracle
from nnsql.export.publish import parity
from tests import models
from tests.export import mutations
from tests.export.plsql.session import Session
from tests.export.plsql.values import PlsqlError
from tests.export.plsql_interpreter import load_scripts

# Keras warns that Flatten drops the recurrent layer's mask, which nothing after it reads.
pytestmark = [
    pytest.mark.oracle,
    pytest.mark.filterwarnings("ignore:Layer .* was passed an input with a mask"),
]

RELU_LOOP = "FOR i IN 1 .. v.COUNT LOOP IF v(i) < 0 THEN v(i) := 0; END IF; END LOOP;"
SLICE_LOOP = "FOR i IN 1 .. p_count LOOP v(i) := p_source(p_start + i - 1); END LOOP;"
DECIDE_TEST = "FOR i IN 2 .. q.COUNT LOOP IF q(i) > q(best) THEN best := i;"
GROUP_MAX_LOOP = "FOR i IN 2 .. p_size LOOP v(k + 1) := GREATEST("


def relu_model() -> keras.Model:
    """Dense(relu) → Dense(softmax), the first hidden unit always negative before relu (bias -5), so
    relu must set v(1) to 0 on every row."""
    inputs = keras.Input((8,), name="features")
    hidden = keras.layers.Dense(12, activation="relu", name="hidden")(inputs)
    outputs = keras.layers.Dense(4, activation="softmax", name="classes")(hidden)
    model = keras.Model(inputs, outputs)
    generator = np.random.default_rng(5)
    for weight in model.weights:
        weight.assign(generator.normal(0, 0.5, size=tuple(weight.shape)).astype(np.float32))
    bias = model.get_layer("hidden").bias.numpy()
    bias[0] = -5.0
    model.get_layer("hidden").bias.assign(bias)
    kernel = model.get_layer("classes").kernel.numpy()
    kernel[0] = [3.0, -3.0, 1.0, -1.0]  # the first hidden unit moves the classes apart
    model.get_layer("classes").kernel.assign(kernel)
    return model


@pytest.fixture(scope="module")
def relu_scripts(tmp_path_factory) -> tuple[Path, keras.Model]:
    directory = tmp_path_factory.mktemp("relu")
    model = relu_model()
    path = models.save(model, directory / "model")
    args = ["--model", str(path), "--name", "mnist", "--script-only", str(directory / "scripts"), "--quiet"]
    assert export_oracle([*args, "--sample-rows", "50"]) == 0
    return directory / "scripts", model


def mutated(scripts: Path, tmp_path: Path, script: str, original: str, replacement: str) -> Path:
    """A copy of the scripts with one occurrence of `original` in `script` replaced."""
    copy = tmp_path / "mutated"
    shutil.copytree(scripts, copy)
    text = (copy / script).read_text()
    assert text.count(original) == 1, (script, original)
    (copy / script).write_text(text.replace(original, replacement))
    return copy


def test_the_unchanged_scripts_install_and_agree_with_keras(relu_scripts):
    scripts, model = relu_scripts
    installed = load_scripts(scripts)
    registry = installed.session.store.tables["NNSQL_MODELS"].rows
    assert [(row["NAME"], row["VERSION"], row["ACTIVE"]) for row in registry] == [("mnist", 1, "Y")]
    x = np.random.default_rng(8).random((10, 8), dtype=np.float32)
    actual = np.array([installed.run({"features": row}) for row in x])
    assert np.abs(actual - model.predict(x, verbose=0)).max() <= 1e-5  # float32 parity


@pytest.mark.parametrize(
    ("original", "replacement"),
    [
        (RELU_LOOP, RELU_LOOP.replace("IN 1 ..", "IN 2 ..")),  # relu skips the first value
        (DECIDE_TEST, DECIDE_TEST.replace("q(i) > q(best)", "q(i) < q(best)")),  # argmin
    ],
    ids=["relu-loop-bound", "decide-comparison"],
)
def test_a_one_character_change_in_a_helper_body_is_refused_by_the_gate(
    relu_scripts, tmp_path, original, replacement
):
    """The verify-and-switch script, run as text, refuses the mutated package before the switch: no
    registry row, no entry package."""
    scripts, _ = relu_scripts
    copy = mutated(scripts, tmp_path, "03_package_v1.sql", original, replacement)
    session = Session()
    with pytest.raises(PlsqlError) as refused:
        session.run_script(copy / "install.sql")
    assert refused.value.code == -20010 and "disagrees with TensorFlow" in refused.value.message
    assert "version not published" in refused.value.message
    assert session.store.tables["NNSQL_MODELS"].rows == [] and "MNIST" not in session.packages


def test_the_relu_loop_bound_changes_what_predict_returns(relu_scripts, tmp_path):
    """Without the gate: the mutated package's predict is off Keras by far more than 1e-5."""
    scripts, model = relu_scripts
    copy = mutated(scripts, tmp_path, "03_package_v1.sql", RELU_LOOP, RELU_LOOP.replace("IN 1 ..", "IN 2 .."))
    session = Session()
    for script in ("01_schema.sql", "02_tensors_v1.sql", "03_package_v1.sql"):
        session.run_script(copy / script)
    x = np.random.default_rng(9).random((5, 8), dtype=np.float32)
    actual = np.array([session.call("mnist_v1", "predict", row) for row in x])
    assert np.abs(actual - model.predict(x, verbose=0)).max() > 1e-3


def test_a_slice_that_skips_its_first_value_stops_the_install(relu_scripts, tmp_path):
    """slice leaves v(1) NULL: UTL_NLA refuses a NULL element, so the install stops before the switch."""
    scripts, _ = relu_scripts
    copy = mutated(
        scripts, tmp_path, "03_package_v1.sql", SLICE_LOOP, SLICE_LOOP.replace("IN 1 ..", "IN 2 ..")
    )
    with pytest.raises(PlsqlError) as stopped:
        Session().run_script(copy / "install.sql")
    assert stopped.value.code == -6502


def test_a_wrong_expected_answer_is_refused_by_check_answer(relu_scripts, tmp_path):
    """check_answer runs: the score the script expects on row 1, changed, fails the gate naming it."""
    scripts, _ = relu_scripts
    text = (scripts / "04_verify_and_switch_v1.sql").read_text()
    found = re.search(r"check_answer\(1, 'score', mnist_v1\.score\(x0\) = (\d)\);", text)
    assert found is not None
    wrong = found[0].replace(f"= {found[1]})", f"= {(int(found[1]) + 1) % 4})")
    copy = mutated(scripts, tmp_path, "04_verify_and_switch_v1.sql", found[0], wrong)
    with pytest.raises(PlsqlError) as refused:
        Session().run_script(copy / "install.sql")
    assert refused.value.code == -20010 and "(score on row 1)" in refused.value.message


@pytest.fixture(scope="module")
def two_heads_scripts(tmp_path_factory) -> Path:
    """The scripts of a softmax class head beside an energy head of 2e4..6e4 (tests/export/mutations.py)."""
    directory = tmp_path_factory.mktemp("two_heads")
    path = mutations.saved("two_heads", directory / "model")
    args = ["--model", str(path), "--name", "m", "--script-only", str(directory / "scripts"), "--quiet"]
    assert export_oracle([*args, "--sample-rows", "50"]) == 0
    return directory / "scripts"


def test_a_class_value_off_by_more_than_its_own_bound_is_refused_beside_a_large_head(
    two_heads_scripts, tmp_path
):
    """Each value is bounded by its own size: a probability the script expects 1e-4 off what the package
    gives (10 times the tolerance, far within the energy's bound of 0.2 or more) stops the install."""
    script = "04_verify_and_switch_v1.sql"
    line = next(
        line for line in (two_heads_scripts / script).read_text().splitlines() if "check_row(1," in line
    )
    found = re.search(r"UTL_NLA_ARRAY_DBL\(([^)]*)\)", line)
    assert found is not None
    values = [float(value.rstrip("d")) for value in found[1].split(", ")]
    assert values[3] > 2e4  # the energy, beside the three probabilities
    shifted = line.replace(found[1], ", ".join(f"{v!r}d" for v in [values[0] + 1e-4, *values[1:]]))
    copy = mutated(two_heads_scripts, tmp_path, script, line, shifted)
    with pytest.raises(PlsqlError) as refused:
        Session().run_script(copy / "install.sql")
    assert refused.value.code == -20010 and "1 row(s) over tolerance" in refused.value.message


def test_the_registry_row_records_each_output_s_bounds(two_heads_scripts):
    """The registry row's metadata holds `parity_bounds` as the other stores write it: per output, the
    largest |d| the script measured and the largest bound it applied, each value's bound its row's
    tolerance times max(1, |value|) (export/publish/parity.py `bounds`) on the rows the script embeds."""
    text = (two_heads_scripts / "04_verify_and_switch_v1.sql").read_text()
    checks = mutations.script_checks(text)
    expected = np.array([check.expected for check in checks])
    bounds = parity.bounds(expected, np.array([check.allowed for check in checks]))
    (row,) = load_scripts(two_heads_scripts).session.store.tables["NNSQL_MODELS"].rows
    recorded = json.loads(row["METADATA"])["parity_bounds"]
    assert (recorded["tolerance"], recorded["rule"]) == (1e-5, parity.RULE)
    assert [output["name"] for output in recorded["outputs"]] == ["classes", "energy"]
    for output, columns in zip(recorded["outputs"], (slice(0, 3), slice(3, 4)), strict=True):
        assert output["max_bound"] == pytest.approx(bounds[:, columns].max(), rel=1e-12)
        assert output["max_abs_diff"] <= output["max_bound"]
    assert recorded["outputs"][1]["max_bound"] > 1e4 * recorded["outputs"][0]["max_bound"]


def test_the_recorded_bounds_are_json_in_a_session_with_a_decimal_comma(two_heads_scripts):
    """A DBA whose session writes numbers with a decimal comma (NLS_NUMERIC_CHARACTERS = ',.', as a German
    locale sets it) installs the same registry row: the bounds are written with a '.' whatever the session's
    numeric characters, so the metadata stays JSON that the other tools read."""
    session = Session()
    session.run_script(Path("nls.sql"), "ALTER SESSION SET NLS_NUMERIC_CHARACTERS = ',.';\n")
    assert run_in(session, "BEGIN :r := TO_CHAR(1.5d); END;")["R"] == "1,5E+000"
    session.run_script(two_heads_scripts / "install.sql")
    (row,) = session.store.tables["NNSQL_MODELS"].rows
    recorded = json.loads(row["METADATA"])["parity_bounds"]
    (expected,) = load_scripts(two_heads_scripts).session.store.tables["NNSQL_MODELS"].rows
    assert recorded == json.loads(expected["METADATA"])["parity_bounds"]


def run_in(session: Session, text: str) -> dict:
    """An anonymous block run in the session given; the bind variables it set."""
    with np.errstate(all="ignore"):
        session.run_script(Path("block.sql"), "VARIABLE r VARCHAR2(100)\n" + text + "\n/\n")
    return session.binds


def run_block(text: str) -> dict:
    """An anonymous block run in a fresh session; the bind variables it set."""
    session = Session()
    path = Path("block.sql")
    with np.errstate(all="ignore"):
        session.run_script(path, "VARIABLE r NUMBER\n" + text + "\n/\n")
    return session.binds


@pytest.mark.parametrize(
    ("block", "code"),
    [
        ("DECLARE v UTL_NLA_ARRAY_FLT := UTL_NLA_ARRAY_FLT(1f, 2f); BEGIN :r := v(3); END;", -6533),
        ("DECLARE v UTL_NLA_ARRAY_FLT := UTL_NLA_ARRAY_FLT(1f, 2f); BEGIN :r := v(0); END;", -6532),
        ("DECLARE v UTL_NLA_ARRAY_FLT; BEGIN :r := v.COUNT; END;", -6531),
        ("DECLARE n NUMBER := 300; BEGIN :r := EXP(n); END;", -1426),
        ("DECLARE n NUMBER := 0; BEGIN :r := 1 / n; END;", -1476),
        ("BEGIN RAISE_APPLICATION_ERROR(-20042, 'told ' || 7); END;", -20042),
    ],
)
def test_oracle_errors_are_raised_as_oracle_raises_them(block, code):
    with pytest.raises(PlsqlError) as error:
        run_block(block)
    assert error.value.code == code


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        # BINARY_FLOAT: every operation rounds to float32 (2^24 + 1 is not a float32)
        ("DECLARE x BINARY_FLOAT := 16777216f; BEGIN x := x + 1f; :r := x - 16777216f; END;", 0.0),
        ("DECLARE x BINARY_DOUBLE := 16777216d; BEGIN x := x + 1; :r := x - 16777216; END;", 1.0),
        # BINARY_DOUBLE overflows to infinity where NUMBER raises
        (
            "DECLARE z BINARY_DOUBLE := 800; "
            "BEGIN :r := CASE WHEN EXP(z) IS INFINITE THEN 1 ELSE 0 END; END;",
            1,
        ),
        # Oracle orders NaN above everything, equal to itself
        (
            "BEGIN :r := CASE WHEN BINARY_DOUBLE_NAN > BINARY_DOUBLE_INFINITY "
            "AND BINARY_DOUBLE_NAN = BINARY_DOUBLE_NAN THEN 1 ELSE 0 END; END;",
            1,
        ),
        ("BEGIN :r := GREATEST(1, 2.5d, 2); END;", 2.5),
        # GREATEST returns its arguments' highest numeric precedence: a BINARY_DOUBLE, whose EXP overflows
        # to infinity, though its first argument is a NUMBER
        (
            "DECLARE n NUMBER := 750; "
            "BEGIN :r := CASE WHEN EXP(GREATEST(n, 0d)) IS INFINITE THEN 1 ELSE 0 END; END;",
            1,
        ),
        # a handler sees SQLCODE of the subscript beyond the count
        (
            "DECLARE v UTL_NLA_ARRAY_FLT := UTL_NLA_ARRAY_FLT(); BEGIN v.EXTEND(2); v(2) := 5; :r := v(3); "
            "EXCEPTION WHEN OTHERS THEN :r := SQLCODE + v(2) * 0; END;",
            -6533,
        ),
        (
            "DECLARE t PLS_INTEGER := 0; BEGIN FOR i IN REVERSE 1 .. 4 LOOP IF i = 2 THEN EXIT; END IF; "
            "t := t * 10 + i; END LOOP; :r := t; END;",
            43,
        ),
    ],
)
def test_values_follow_oracle_semantics(block, expected):
    assert float(run_block(block)["R"]) == expected


def helpers_model() -> keras.Model:
    """Three inputs whose package calls every helper: convolution windows (gather, tile, BLAS_GEMM,
    relu), max pooling (group_max), an embedding (lookup), a masked recurrent layer (step_mask, step_of,
    zeros, place, append_first, tanh), a sum (elementwise), sigmoid and softmax."""
    layers = keras.layers
    image = keras.Input((6, 6, 1), name="image")
    tokens = keras.Input((4,), name="tokens", dtype="int32")
    sequence = keras.Input((5, 3), name="sequence")
    a = layers.Conv2D(2, (3, 3), activation="relu", name="conv")(image)
    a = layers.Flatten()(layers.MaxPooling2D(2, name="pool")(a))
    b = layers.Flatten()(layers.Embedding(7, 2, name="embed")(tokens))
    c = layers.SimpleRNN(3, return_sequences=True, name="rnn")(layers.Masking(0.0, name="mask")(sequence))
    x = layers.Concatenate(name="joined")([a, b, layers.Flatten()(c)])
    x = layers.Add(name="sum")([layers.Dense(6, name="left")(x), layers.Dense(6, name="right")(x)])
    x = layers.Activation("sigmoid", name="squash")(x)
    outputs = layers.Dense(3, activation="softmax", name="classes")(x)
    model = keras.Model([image, tokens, sequence], outputs)
    generator = np.random.default_rng(4)
    for weight in model.weights:
        weight.assign(generator.normal(0, 0.5, size=tuple(weight.shape)).astype(np.float32))
    return model


@pytest.fixture(scope="module")
def helpers_scripts(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("helpers")
    path = models.save(helpers_model(), directory / "model")
    args = ["--model", str(path), "--name", "helpers", "--script-only", str(directory / "scripts"), "--quiet"]
    assert export_oracle([*args, "--sample-rows", "50"]) == 0
    return directory / "scripts"


# One loop of each helper body, started one step late: text that occurs once in the package. (relu is
# the relu model's: here it feeds max pooling, which cannot tell a negative first value from 0.)
LATE_LOOPS = {
    "zeros": "FOR i IN 1 .. p_count LOOP v(i) := 0;",
    "slice": SLICE_LOOP,
    "place": "FOR i IN 1 .. p_source.COUNT LOOP p_target(p_offset + i)",
    "tile": "FOR i IN 1 .. p_source.COUNT LOOP v(c * p_source.COUNT + i)",
    "gather": "FOR k IN 1 .. p_indices.COUNT LOOP",
    "group_max": "FOR i IN 2 .. p_size LOOP",
    "elementwise": "FOR i IN 1 .. v.COUNT LOOP\n            IF p_op = 'add'",
    "lookup": "FOR i IN 1 .. p_x.COUNT LOOP\n            FOR j IN 1 .. p_width",
    "step_mask": "FOR t IN 0 .. p_steps - 1 LOOP",
    "append_first": "FOR i IN 1 .. p_count LOOP p_target(base + i)",
    "activate_sigmoid": "FOR i IN 1 .. v.COUNT LOOP\n            z := LEAST",
    "activate_tanh": "FOR i IN 1 .. v.COUNT LOOP v(i) := TO_BINARY_FLOAT(TANH",
    "activate_softmax": "FOR i IN 1 .. v.COUNT LOOP\n            e(i) :=",
}


def test_the_helpers_model_installs_and_agrees_with_keras(helpers_scripts):
    installed = load_scripts(helpers_scripts)
    assert installed.session.store.tables["NNSQL_MODELS"].rows[0]["ACTIVE"] == "Y"
    package = (helpers_scripts / "03_package_v1.sql").read_text()
    network = package.split("-- begin network", 1)[1].split("-- end network", 1)[0]
    assert all(f"{helper}(" in network for helper in [*LATE_LOOPS, "activate_relu"])


@pytest.mark.parametrize("helper", list(LATE_LOOPS))
def test_every_helper_body_runs_a_loop_started_late_stops_the_install(helpers_scripts, tmp_path, helper):
    """Each helper's loop from one step later (1 → 2, 0 → 1): the gate refuses the version, or the
    install stops on the error Oracle would raise (a NULL element reaching UTL_NLA, a subscript)."""
    loop = LATE_LOOPS[helper]
    first = re.search(r"IN (\d+) \.\.", loop)
    assert first is not None
    late = loop.replace(first[0], f"IN {int(first[1]) + 1} ..", 1)
    copy = mutated(helpers_scripts, tmp_path, "03_package_v1.sql", loop, late)
    session = Session()
    with pytest.raises(PlsqlError) as stopped:
        session.run_script(copy / "install.sql")
    assert stopped.value.code in (-20010, -6502, -6531, -6533), stopped.value
    assert session.store.tables["NNSQL_MODELS"].rows == []
