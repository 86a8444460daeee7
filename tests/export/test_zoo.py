"""The recurrent zoo (tests/zoo.py) × every target, ONNX included: probabilities within float32 parity of
Keras (max |Δp| ≤ 1e-5, see export/publish/parity.py) on 200 rows (64 for Oracle's), zero-padded after
varied lengths, same classes."""

from __future__ import annotations

import numpy as np
import pytest

from tests import zoo
from tests.export.executors import OracleScriptExecutor

# Every target exports at default settings: a float32 target (onnxruntime, Oracle's BINARY_FLOAT) is held
# to its float32 bound on the gate's rows at raw scale (docs/numerics.md), while this test holds every
# target to 1e-5 on its own rows.
# The PL/SQL test interpreter runs Oracle's package row by row in Python, some 0.1 s a row for a recurrent
# model: it scores 64 rows, each padded length (0 to 7 steps) eight times, as its gate scores 50.
ROWS = {"oracle": 64}


@pytest.mark.parametrize("name", list(zoo.ZOO))
def test_zoo_scores_like_keras_on_every_target(any_target, zoo_model, name):
    scorer = any_target
    model, path = zoo_model(name)
    assert scorer.export(path, "zoo") == 0
    if isinstance(scorer, OracleScriptExecutor):  # the package parses as PL/SQL, loops and all
        import parseora

        package = (scorer.directory / "03_package_v1.sql").read_text()
        assert all(not unit["errors"] for unit in parseora.parse(package, version="19c"))
    x = zoo.rows(model, ROWS.get(scorer.target, 200))
    actual = scorer.predict_inputs("zoo", x)
    assert_scores_match(actual, keras_scores(name, model, x))


# Keras's scores of a model's rows, computed once for the six targets that compare with them.
KERAS_SCORES: dict[tuple[str, int], np.ndarray] = {}


def keras_scores(name: str, model, x: list[np.ndarray]) -> np.ndarray:
    key = (name, len(x[0]))
    if key not in KERAS_SCORES:
        KERAS_SCORES[key] = model.predict(x if len(x) > 1 else x[0], verbose=0)
    return KERAS_SCORES[key]


def assert_scores_match(actual: np.ndarray, expected: np.ndarray) -> None:
    """Within 1e-5 and the same classes; NaN exactly where Keras gives NaN (a masked average over a row
    whose every step is masked: 0/0 in Keras)."""
    missing = np.isnan(expected)
    assert (np.isnan(actual) == missing).all()
    assert np.abs(np.where(missing, 0.0, actual - expected)).max() <= 1e-5
    assert (actual.argmax(1) == expected.argmax(1)).all()


def test_token_indices_outside_the_vocabulary_are_refused_in_one_line(target, zoo_model):
    """An integer input holds whole numbers below the embedding's row count; anything else is an error
    naming the input and the first bad position, in every database."""
    _, path = zoo_model("embedding")
    assert target.export(path, "zoo") == 0
    tags = [1, 2, 3, 4]
    for tokens in ([1, 2, 11, 0, 0, 0, 0], [1, 2, 3.5, 0, 0, 0, 0], [1, -1, 0, 0, 0, 0, 0]):
        bad = next(i for i, token in enumerate(tokens) if token not in range(11))
        message = rf"zoo: tokens must hold whole numbers from 0 to 10; not at 0-based index {bad}"
        with pytest.raises(target.error, match=message):
            target.query("SELECT zoo.score(?, ?)", [[float(token) for token in tokens], tags])
