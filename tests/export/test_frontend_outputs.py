"""Reading what an output means: the last activation, the units and the loss saved in the file; --output
overrides it, refused in one line where it cannot apply; an output that fits no kind names --output."""

from __future__ import annotations

import re

import duckdb
import keras
import numpy as np
import pytest

from nnsql.export.compile import to_ir
from nnsql.export.errors import ExportError
from nnsql.export.frontend.outputs import output_kinds
from tests import user_models as cases


@pytest.mark.parametrize("fmt", ["keras", "h5"])
@pytest.mark.parametrize("case", list(cases.CASES))
def test_the_kind_is_read_from_the_saved_loss_and_activation(user_models, case, fmt):
    from nnsql.export.frontend.model import open_model

    opened = open_model(user_models[case, fmt])
    read = output_kinds(opened.model, opened.loss)
    assert read.kinds == (cases.CASES[case].kind,) and read.note == ""
    assert (
        "loss " in read.evidence
    )  # the loss came from the file (.keras compile_config, .h5 training_config)


def saved_loss(path):
    """The loss a saved file holds, as the exporter reads it."""
    from nnsql.export.frontend.model import open_model

    return open_model(path).loss


def dense_model(units: int, activation: str | None, *, dropout: bool = False) -> keras.Model:
    layers = [keras.Input((4,), name="features"), keras.layers.Dense(units, activation, name="out")]
    return keras.Sequential(layers + ([keras.layers.Dropout(0.2)] if dropout else []))


@pytest.mark.parametrize(
    ("units", "activation", "kind"),
    [
        (3, "softmax", "probabilities"),
        (1, "sigmoid", "binary"),
        (4, "sigmoid", "multilabel"),
        (3, None, "logits"),
    ],
)
def test_without_a_loss_the_activation_decides(units, activation, kind):
    assert output_kinds(dense_model(units, activation)).kinds == (kind,)
    assert output_kinds(dense_model(units, activation, dropout=True)).kinds == (kind,)  # looked through


def test_a_regression_loss_makes_values_of_any_activation(tmp_path):
    model = dense_model(1, "relu")  # counts: a relu output trained with mse
    model.compile(loss="mse")
    model.save(tmp_path / "counts.keras")
    assert output_kinds(model, saved_loss(tmp_path / "counts.keras")).kinds == ("values",)


@pytest.mark.parametrize(
    ("units", "activation", "message"),
    [(2, "relu", "2 units, relu"), (1, "softmax", "1 unit, softmax"), (3, "tanh", "3 units, tanh")],
)
def test_an_output_fitting_no_kind_is_one_line_naming_output(units, activation, message):
    with pytest.raises(ExportError) as error:
        to_ir(dense_model(units, activation), target="duckdb", strict=True)
    text = str(error.value)
    assert "\n" not in text and message in text and "--output {probabilities,binary,multilabel" in text


def test_outside_an_export_an_unfit_output_compiles_as_values():
    """A graph for tests and tools (not an export): a tanh output is values, predict only."""
    assert to_ir(dense_model(2, "tanh"), target="duckdb").kind == "values"


def test_independent_logits_are_refused_with_the_fix(tmp_path):
    model = dense_model(3, None)
    model.compile(loss=keras.losses.BinaryCrossentropy(from_logits=True))
    model.save(tmp_path / "tags.keras")
    with pytest.raises(ExportError, match="add a sigmoid to the last layer"):
        output_kinds(model, saved_loss(tmp_path / "tags.keras"))


def test_an_override_the_model_contradicts_is_said_in_one_line():
    read = output_kinds(dense_model(1, "sigmoid"), requested="values")
    assert read.kinds == ("values",)
    assert read.note.count("\n") == 0 and "overrides what the model says (binary" in read.note
    assert output_kinds(dense_model(2, "relu"), requested="values").note == ""  # nothing read to contradict


@pytest.mark.parametrize(
    ("units", "requested", "message"),
    [
        (3, "binary", "--output binary needs one output unit; 'out' has 3"),
        (1, "probabilities", "argmax is always 0 (--output binary reads it as p > 0.5)"),
    ],
)
def test_an_override_that_cannot_apply_is_refused(units, requested, message):
    with pytest.raises(ExportError, match=re.escape(message)):
        output_kinds(dense_model(units, "sigmoid"), requested=requested)


@pytest.mark.parametrize(
    ("units", "activation", "classes", "message"),
    [
        (
            1,
            "sigmoid",
            ("a", "b", "c"),
            "3 class labels for a binary model with one unit (labels for 0 and 1)",
        ),
        (1, None, ("a",), "1 class labels for a logits model with one unit"),
        (2, "relu", ("a", "b", "c"), "3 labels for a values (regression) output of 2: name each value"),
    ],
)
def test_class_labels_must_fit_the_kind(units, activation, classes, message):
    kinds = ("values",) if activation == "relu" else None
    with pytest.raises(ExportError, match=re.escape(message)):
        to_ir(dense_model(units, activation), target="duckdb", classes=classes, kinds=kinds)


def test_a_binary_model_labels_its_two_classes_by_default():
    graph = to_ir(dense_model(1, "sigmoid"), target="duckdb")
    assert graph.kind == "binary" and graph.classes == ("0", "1")
    assert to_ir(dense_model(2, None), target="duckdb", kinds=("values",)).classes == ()
    named = to_ir(dense_model(2, None), target="duckdb", kinds=("values",), classes=("mass", "energy"))
    assert named.classes == ("mass", "energy")  # a regression may name its values


@pytest.mark.duckdb
def test_an_export_refuses_an_unfit_output_until_output_names_its_kind(tmp_path, capsys):
    """`nnsql export duckdb` on a relu output: one line naming --output, nothing written; with
    --output values it publishes, and predict is the only function that answers."""
    from tests import models
    from tests.export.executors import DuckDBExecutor

    model = models._seeded(dense_model(2, "relu"), 4)
    path = tmp_path / "counts" / "model.keras"
    path.parent.mkdir()
    model.save(path)
    executor = DuckDBExecutor(tmp_path)
    assert executor.export(path, "counts") == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "--output {probabilities" in error and not executor.db.exists()
    assert executor.export(path, "counts", "--output", "values") == 0
    x = cases.rows(4)
    got = np.array([executor.query("SELECT counts.predict(?)", [row.tolist()])[0][0] for row in x])
    assert np.abs(got - model.predict(x, verbose=0)).max() <= 1e-5
    with pytest.raises(duckdb.Error, match=r"counts outputs values \(regression\): score has no meaning"):
        executor.query("SELECT counts.score(?)", [x[0].tolist()])
