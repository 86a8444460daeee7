"""Models with several outputs: predict_proba joins them, predict_proba_<output> gives each, score and
label read the first; ONNX keeps every output (the HTTP scorer returns them: tests/serve)."""

from __future__ import annotations

import numpy as np
import pytest

from nnsql.export.publish.pipeline import joined
from tests import models, zoo
from tests.export.executors import OnnxExecutor, OracleScriptExecutor


@pytest.fixture(scope="module")
def two_heads_model(tmp_path_factory):
    model = zoo.trained(models.two_heads(), 3)
    return model, models.save(model, tmp_path_factory.mktemp("two_heads"), classes=["a", "b", "c"])


def test_every_output_scores_like_keras(any_target, two_heads_model):
    model, path = two_heads_model
    assert any_target.export(path, "heads") == 0
    x = np.random.default_rng(7).random((40, 6), dtype=np.float32)
    kind, energy = model.predict(x, verbose=0)
    actual = any_target.predict_inputs("heads", [x])
    assert actual.shape == (40, 5) and np.abs(actual - joined([kind, energy])).max() <= 1e-5
    if isinstance(any_target, OracleScriptExecutor):  # the packages, accessors included, parse as PL/SQL
        import parseora

        scripts = {path.name: path.read_text() for path in any_target.directory.glob("*.sql")}
        for name, text in scripts.items():
            assert all(not unit["errors"] for unit in parseora.parse(text, version="19c")), name
        switch = scripts["04_verify_and_switch_v1.sql"]
        assert "FUNCTION predict_proba_energy(features IN UTL_NLA_ARRAY_FLT)" in switch
    if isinstance(any_target, OnnxExecutor | OracleScriptExecutor):
        return
    rows = [row.tolist() for row in x[:8]]
    each = [
        any_target.query("SELECT heads.predict_proba_energy(?), heads.score(?), heads.label(?)", [r, r, r])[0]
        for r in rows
    ]
    assert np.abs(np.array([e[0] for e in each]) - energy[:8]).max() <= 1e-5
    assert [e[1] for e in each] == kind[:8].argmax(1).tolist()
    assert [e[2] for e in each] == [["a", "b", "c"][i] for i in kind[:8].argmax(1)]
