"""Golden text and direct execution of the DuckDB generator on a hand-made IR (no Keras)."""

import numpy as np
import pytest

from nnsql.export.duckdb.generator import CAPABILITIES, DuckDBGenerator
from nnsql.export.duckdb.store import DuckDBStore
from nnsql.export.errors import UnsupportedLayer
from nnsql.export.ir import reference
from tests.golden.graphs import check_golden, tiny_graph


def test_generated_sql_matches_golden_text():
    check_golden(DuckDBGenerator(tiny_graph(), "tiny", 3).render(), "duckdb_tiny.sql")


def test_weights_statement_matches_golden_text():
    check_golden(DuckDBGenerator(tiny_graph(), "tiny", 3).render_weights(), "duckdb_tiny_weights.sql")


def test_weights_are_shaped_once_when_published(tmp_path):
    """A scoring query reads the version's weights table as the export built it, not nnsql.tensors:
    shaping the weights from there in every query cost more than scoring a few CNN images. The tensors
    stay the record (`nnsql models remove` deletes both)."""
    store = DuckDBStore(tmp_path / "w.duckdb", progress=False)
    with store.session():
        store.stage("tiny", 1, tiny_graph())
    x = {"features": np.array([[1.0, 2.0, 3.0], [-1.0, 0.0, 0.5]])}
    before = store.scores("tiny", x)
    store.con.execute("DELETE FROM nnsql.tensors WHERE model = 'tiny'")
    np.testing.assert_array_equal(store.scores("tiny", x), before)
    plan = store.con.sql("EXPLAIN SELECT tiny.predict([1.0, 2.0, 3.0])").fetchall()[0][1]
    assert "weights_tiny_v1" in plan and "tensors" not in plan
    store.close()


def test_binary_macros_match_golden_text():
    """One sigmoid unit: predict_proba is [1 - p, p], score is p > 0.5, labels refuses."""
    from tests.golden.graphs import tiny_binary_graph

    check_golden(DuckDBGenerator(tiny_binary_graph(), "sig", 1).render(), "duckdb_tiny_binary.sql")


def test_generated_macros_compute_the_reference(tmp_path):
    graph = tiny_graph()
    store = DuckDBStore(tmp_path / "t.duckdb", progress=False)
    with store.session():
        store.stage("tiny", 1, graph)
    x = np.array([[1.0, 2.0, 3.0], [-1.0, 0.0, 0.5], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(store.scores("tiny", {"features": x}), reference.run(graph, x), atol=1e-12)
    assert store.con.sql("SELECT tiny.score([1.0, 2.0, 3.0])").fetchone() == (1,)  # labels: see test_targets
    store.close()


def test_node_kind_without_emitter_is_unsupported():
    from nnsql.export.ir import graph as ir

    class Conv(ir.Node):
        pass

    graph = tiny_graph()
    odd = ir.Graph(graph.inputs, (Conv(name="c", inputs=("features",), source="'c' (Conv2D)"),), "c")
    with pytest.raises(UnsupportedLayer, match=r"'c' \(Conv2D\).*'duckdb'"):
        CAPABILITIES.check(odd)
    with pytest.raises(UnsupportedLayer):
        DuckDBGenerator(odd, "m", 1).body()


def test_rendered_script_is_idempotent(tmp_path):
    """Running a version's script again (as a retried export does) changes nothing and still scores."""
    store = DuckDBStore(tmp_path / "x.duckdb", progress=False)
    with store.session():
        store.stage("tiny", 1, tiny_graph())
    x = {"features": np.array([[1.0, 2.0, 3.0], [-1.0, 0.0, 0.5]])}
    macros = "SELECT function_name FROM duckdb_functions() WHERE schema_name = 'tiny' ORDER BY 1"
    before = (store.scores("tiny", x), store.con.sql(macros).fetchall())
    store.con.execute(DuckDBGenerator(tiny_graph(), "tiny", 1).render())  # again: CREATE OR REPLACE
    np.testing.assert_array_equal(store.scores("tiny", x), before[0])
    assert store.con.sql(macros).fetchall() == before[1]
    assert len(before[1]) == 9 and store.con.sql("SELECT tiny.version()").fetchone() == (1,)
    store.close()


def test_recurrent_graph_golden_text_and_execution(tmp_path):
    from tests.golden.graphs import tiny_recurrent_graph

    graph = tiny_recurrent_graph()
    check_golden(DuckDBGenerator(graph, "rnn", 1).render(), "duckdb_tiny_recurrent.sql")
    store = DuckDBStore(tmp_path / "r.duckdb", progress=False)
    with store.session():
        store.stage("rnn", 1, graph)
    sequence = np.random.default_rng(0).normal(size=(4, 3, 2))
    sequence[1, 1, :] = 0.0  # a masked step in the middle
    sequence[2, 2, :] = 0.0  # and at the end
    extra = np.random.default_rng(1).normal(size=(4, 1))
    inputs = {"sequence": sequence, "extra": extra}
    np.testing.assert_allclose(store.scores("rnn", inputs), reference.run(graph, inputs), atol=1e-12)
    store.close()


@pytest.mark.parametrize("width", [1, 3])
def test_step_mask_flags_every_step_up_to_the_last_value_set(tmp_path, width):
    """The mask is computed over the steps before the last value that is not 0, then padded with masked
    steps: rows that end on any feature of any step, hold nothing, or hold -0.0 get Keras's mask
    (scaled by the step number, so that a flag on the wrong step shows)."""
    from nnsql.export.ir import graph as ir

    steps = 5
    mask = ir.StepMask(name="mask", inputs=("sequence",), steps=steps)
    scaled = ir.Affine(
        name="scaled", inputs=("mask",), scale=ir.Weights(np.arange(1, steps + 1, dtype=np.float32))
    )
    graph = ir.Graph((ir.TensorSpec("sequence", (steps, width)),), (mask, scaled), "scaled")
    rows = np.zeros((6, steps, width))
    rows[1, -1, -1] = 2.0  # only the last feature of the last step
    rows[2, 1, 0] = 0.5  # only the first feature of the second step
    rows[3] = 1.0  # every step
    rows[4, 0, 0], rows[4, 3, -1] = -1.0, 3.0  # a gap of masked steps in between
    rows[5, 2, :] = -0.0  # negative zeros are masked, as in Keras
    store = DuckDBStore(tmp_path / "m.duckdb", progress=False)
    with store.session():
        store.stage("steps", 1, graph)
    expected = reference.run(graph, rows)
    assert expected.any(axis=1).sum() == 4  # the rows above do reach both outcomes
    np.testing.assert_array_equal(store.scores("steps", {"sequence": rows}), expected)
    store.close()


def test_scan_reads_steps_by_index_not_by_slices_of_the_row():
    """A slice of a list copies values at every call (a strided one over a row of 801 × 19 values cost
    more than the GRU's loop): the step mask and the scan read each step's features by index."""
    from nnsql.export.compile import to_ir
    from tests import models

    graph = to_ir(models.inclusive_classifier(), target="duckdb")
    body = DuckDBGenerator(graph, "ic", 1).body()
    assert ":-1:19]" not in body  # no strided slice of the row, nor of the kept steps
    assert "list_select(" not in body  # the kept steps are not gathered into a copy of the row
    assert "_nn_v_gru_input[_nn_t * 19 + 19]" in body  # the last feature of step _nn_t


def test_gru_step_runs_unit_by_unit():
    """Unit k of a GRU's new state reads the Dense over [x, h] only at k, k + 50, k + 100 and k + 150:
    the loop computes those four dot products per unit, from rows grouped by unit when the version is
    published, instead of binding all 200 outputs and reading them back by index."""
    from nnsql.export.compile import to_ir
    from tests import models

    generator = DuckDBGenerator(to_ir(models.inclusive_classifier(), target="duckdb"), "ic", 1)
    body, weights = generator.body(), generator.render_weights()
    assert "lambda _nn_u: {v1: list_dot_product(_nn_u.w1, _nn_v_gru_xh) + _nn_u.b1" in body
    assert "_nn_u.w4" in body and "_nn_u.w5" not in body  # z, r and the candidate's two halves
    assert "_nn_v_gru_zrh" not in body  # the Dense's whole output is never bound
    grouped = "".join(weights.split())  # as formatted, without its line breaks and indents
    assert "gru:(SELECTlist_transform(range(50),lambda_nn_j:{i:_nn_j+1," in grouped
    assert "gru_zrh:" not in weights  # the rows are stored once, grouped by unit


@pytest.mark.parametrize(
    ("layer", "per_unit"),
    [
        ({"kind": "GRU", "reset_after": True}, True),
        ({"kind": "GRU", "reset_after": False}, False),  # h·U_h reads r·h, all of the reset gate
        ({"kind": "LSTM"}, False),  # the state [h, c] is a Concatenate
        ({"kind": "SimpleRNN"}, False),  # the Dense is the new state itself
    ],
)
def test_only_steps_of_one_dense_and_elementwise_nodes_run_unit_by_unit(layer, per_unit):
    import keras

    from nnsql.export.compile import to_ir
    from nnsql.export.duckdb import units
    from nnsql.export.ir import graph as ir

    options = dict(layer)
    kind = options.pop("kind")
    inputs = keras.Input((5, 3))
    model = keras.Model(inputs, getattr(keras.layers, kind)(4, name="rnn", **options)(inputs))
    scan = next(node for node in to_ir(model, target="duckdb").nodes if isinstance(node, ir.Scan))
    plan = units.plan(scan)
    assert (plan is not None) == per_unit
    if plan is not None:
        assert plan.offsets == [8, 4, 12, 0]  # candidate from x, reset gate, candidate from h, update gate
