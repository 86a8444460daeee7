"""The shared generators (export/codegen/generator.py, export/codegen/procedural.py): what a target writes
itself is only what its language computes its own way; everything else comes from its Dialect table."""

from __future__ import annotations

import pytest

from nnsql.export.codegen.generator import Dialect
from nnsql.export.codegen.procedural import ProceduralGenerator
from nnsql.export.duckdb.generator import DuckDBGenerator
from nnsql.export.oracle.generator import PLSQL, OracleGenerator
from nnsql.export.postgres.cube import CubeGenerator
from nnsql.export.postgres.generator import PLPGSQL, PostgresGenerator
from nnsql.export.postgres.plpython import PLPYTHON, PlPythonGenerator
from tests.golden.graphs import tiny_recurrent_graph

# The products with stored tensors are each target's own (nnsql.dense, numpy's @, UTL_NLA); Oracle's
# activations work in place and its vectors are filled by `place`.
OWN_WAY = {
    PostgresGenerator: {"emit_Dense", "emit_PatchDense", "emit_ActivationNode"},
    CubeGenerator: {"emit_Dense"},
    PlPythonGenerator: {"emit_Dense", "emit_PatchDense", "emit_ActivationNode"},
    OracleGenerator: {
        "emit_Dense",
        "emit_PatchDense",
        "emit_ActivationNode",
        "emit_Concatenate",
        "emit_Affine",
    },
}


@pytest.mark.parametrize("generator", list(OWN_WAY), ids=lambda cls: cls.__name__)
def test_procedural_targets_write_only_what_they_compute_their_own_way(generator):
    own = {name for name in vars(generator) if name.startswith("emit_")}
    assert own == OWN_WAY[generator]
    assert issubclass(generator, ProceduralGenerator)


def test_duckdb_shares_the_checks_but_not_the_statements():
    """DuckDB's macro is one expression: its checks are the shared ones, as CASE branches."""
    assert not issubclass(DuckDBGenerator, ProceduralGenerator)
    checks = list(DuckDBGenerator(tiny_recurrent_graph(), "tiny", 1).checks())
    assert checks[0] == "WHEN sequence IS NULL THEN NULL"
    assert checks[1].startswith("WHEN NOT regexp_full_match(typeof(sequence), ")  # untyped arguments
    # the sequence masks: nested at most 3 steps, each of 2 values, or flat whole steps up to 6 values
    assert checks[2].startswith("WHEN (len(typeof(sequence))") and "at most 3 steps" in checks[2]
    assert "every list at depth 2 must have 2 elements" in checks[3]
    assert "> 6 OR" in checks[4] and "at most 3 steps of 2 values, 6 values flat" in checks[4]


@pytest.mark.parametrize(
    ("dialect", "subscript", "head"),
    [(PLPGSQL, "nn_t + 1", "x[1:2]"), (PLSQL, "nn_t + 1", "slice(x, 1, 2)"), (PLPYTHON, "nn_t", "x[0:2]")],
    ids=lambda value: value.target if isinstance(value, Dialect) else None,
)
def test_index_base_shapes_subscripts_and_slices(dialect, subscript, head):
    assert dialect.subscript("nn_t") == subscript
    assert dialect.slice_of("x", 0, 2) == head


@pytest.mark.parametrize("generator", [PostgresGenerator, PlPythonGenerator, OracleGenerator])
def test_every_check_raises_the_targets_error_form(generator):
    """Each input gets the same checks in the same order on every procedural target."""
    checks = list(generator(tiny_recurrent_graph(), "tiny", 1).checks())
    errors = [check for check in checks if "must have" in check or "NULL values" in check]
    # length and nulls for each of the two inputs; where the target takes nested arrays, the sequence's
    # number of steps and each step's length too
    assert len(errors) == (4 if generator.dialect.depth is None else 6)
    assert all("tiny: " in check for check in errors)
    form = {
        PostgresGenerator: "RAISE EXCEPTION",
        PlPythonGenerator: "plpy.error(",
        OracleGenerator: "RAISE_APP",
    }
    assert all(form[generator] in check for check in errors)
