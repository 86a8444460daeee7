"""A DuckDB macro's input checks over the forms of export/codegen/inputs.py: flat, nested and shorter.

A macro's arguments are untyped, and DuckDB binds every branch of an expression for the argument's
type, so the nesting is read from the type: `typeof(x)` of a bound argument is a constant, which the
optimiser folds with every condition on it. The branch for the depth received is the only one left
in the plan; the others still bind, through TRY_CAST, which binds between lists of any depth (its
values would be NULL, but no row reaches a branch of another depth). A flat list costs what it did.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..codegen.generator import Check, Dialect
from ..codegen.inputs import InputForm
from ..ir import graph as ir


def depth_of(x: str) -> str:
    """How deep list `x` nests: the brackets of its type (`DOUBLE[][]`, `FLOAT[19][100]`: 2)."""
    return f"(len(typeof({x})) - len(replace(typeof({x}), '[', '')))"


def as_depth(x: str, depth: int) -> str:
    return f"TRY_CAST({x} AS DOUBLE{'[]' * depth})"


def flatten_times(x: str, times: int) -> str:
    for _ in range(times):
        x = f"flatten({x})"
    return x


def flat(form: InputForm, x: str) -> str:
    """The values of `x` in row-major order as DOUBLE[], whatever its depth (not padded)."""
    if form.depth == 1:
        return f"{x}::DOUBLE[]"
    branches = " ".join(
        f"WHEN {depth_of(x)} = {d} THEN {flatten_times(as_depth(x, d), d - 1)}"
        for d in range(1, form.depth + 1)
    )
    return f"(CASE {branches} END)"


def padded(form: InputForm, x: str) -> str:
    """What the network reads: the flat values, with the missing steps padded when the model masks."""
    values = flat(form, x)
    if form.pad is None:
        return values
    return f"list_resize({values}, {form.size}, {form.pad!r}::DOUBLE)"


def nested_checks(form: InputForm, x: str) -> Iterator[Check]:
    """For each nested depth: the number of outer lists, then every list's length level by level."""
    for d in range(2, form.depth + 1):
        is_d, lists = f"{depth_of(x)} = {d}", as_depth(x, d)
        outer = f"len({lists}) > {form.steps}" if form.pad is not None else f"len({lists}) <> {form.steps}"
        yield Check(f"{is_d} AND {outer}", "length", f"len({lists})", form.outer_length())
        for level in range(2, d + 1):
            inner = flatten_times(lists, level - 2)
            extent = form.extent(d, level)
            lengths = f"list_transform({inner}, lambda _nn_l: len(_nn_l))"
            wrong = f"list_filter({lengths}, lambda _nn_n: _nn_n IS DISTINCT FROM {extent})"
            yield Check(
                f"{is_d} AND len({wrong}) > 0",
                "length",
                f"coalesce({wrong}[1]::VARCHAR, 'NULL')",
                form.inner_length(d, level),
            )


def length_check(form: InputForm, values: str) -> Check:
    """A flat list's length: the model's, or (when it pads) at most that and whole steps."""
    if form.pad is None:
        condition = f"len({values}) <> {form.size}"
    else:
        condition = f"(len({values}) > {form.size} OR len({values}) % {form.step} <> 0)"
    return Check(condition, "length", f"len({values})", form.flat_length())


def input_checks(d: Dialect, form: InputForm, spec: ir.TensorSpec) -> Iterator[Check]:
    """Every check of one input, in the order the macro's CASE tries them."""
    x = spec.name
    yield Check(d.is_null.format(x=x))
    assert d.wrong_type is not None
    condition, received = d.wrong_type
    if form.depth == 1:
        yield Check(condition.format(x=x), "type", received.format(x=x))
    else:
        deeper = condition.replace(r"\[\d*\]", rf"(\[\d*\]){{{{1,{form.depth}}}}}")
        yield Check(deeper.format(x=x), "type", received.format(x=x), form.too_deep())
    yield from nested_checks(form, x)
    values = x if form.depth == 1 else flat(form, x)  # a flat list's length needs no cast
    yield length_check(form, values)
    yield Check(f"list_count({values}) <> len({values})", "nulls")
    condition, index = d.nonfinite
    yield Check(condition.format(x=values), "nonfinite", index.format(x=values))
    if spec.dtype == "int32":
        condition, index = d.outside
        bound = spec.bound
        yield Check(condition.format(x=values, bound=bound), "index", index.format(x=values, bound=bound))
