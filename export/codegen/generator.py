"""What every generator shares: the input checks, the template rendering and the common template context.

A target describes its language in a `Dialect`: a table of forms (`str.format` templates), in the way
sqlglot's dialects set a few flags over one generator. The checks are written once here from that
table; the procedural targets also share the statements and the scan (export/codegen/procedural.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from ..ir import graph as ir
from ..ir import kinds
from .inputs import InputForm
from .sqltext import literal


@dataclass(frozen=True)
class Dialect:
    """How one target writes what the shared generators emit. The defaults are PL/pgSQL's and PL/SQL's.

    Check forms receive `x` (the parameter, or the prepared value after `prepare`), `size` and `bound`;
    `nonfinite` holds for NaN, infinity and values beyond ir.FLOAT32_MAX.
    Procedural forms (export/codegen/procedural.py) receive the names documented beside them.
    """

    target: str
    array_type: str  # the type of every value
    index_base: int = 1  # the subscript of an array's first element
    literal: Callable[[str], str] = literal
    # -- input checks: `check` around a condition and what happens when it holds ---------------------
    check: str = "IF {condition} THEN {outcome} END IF;"
    outcome_separator: str = " "  # between the statements of one outcome
    return_null: str = "RETURN NULL;"
    error: str = ""  # "{message}", "{code}"
    error_with_argument: str = ""  # also "{argument}", which the message is followed by
    message_placeholder: str = ""  # appended to a message where `error_with_argument` puts its argument
    error_codes: Mapping[str, str] = field(default_factory=dict)  # per ir.InputErrors field
    is_null: str = "{x} IS NULL"
    length: str = ""  # the number of values of {x}
    wrong_length: str = ""
    wrong_dimensions: str | None = None  # a condition, where an array may have several dimensions
    # -- nested and shorter inputs (export/codegen/inputs.py); without `depth`, flat arrays only ---------
    depth: str | None = None  # how deep {x} nests (1: flat)
    extent: str = ""  # the length of {x} along its axis {axis} (1: the outermost)
    flatten: str = ""  # a statement making {value} the values of {x} in row-major order ({depth})
    pad: str = ""  # a statement padding {x} with {pad} up to {size} values; empty: no padding
    both: str = "{a} AND {b}"  # conditions joined
    either: str = "{a} OR {b}"
    equals: str = "{a} = {b}"
    remainder: str = "{a} % {b}"
    differs: str = "{a} <> {b}"
    has_nulls: str = ""
    prepare: str | None = None  # a statement between the NULL check and the value checks
    nonfinite: tuple[str, str] = ("", "")  # a condition, and the first such value's 0-based index
    wrong_type: tuple[str, str] | None = None  # untyped arguments: a condition, and the type received
    outside: tuple[str, str] = ("", "")  # the same for an int32 input: a value outside [0, bound)
    # -- statements (export/codegen/procedural.py) ---------------------------------------------------------
    assign: str = "{y} := {value};"
    call: str = "{function}({arguments})"  # a function of the target's runtime library
    weight: str = ""  # a stored tensor: {node}, {role}
    null: str = "NULL"
    slice: str = ""  # {x}, {first} and {last} (subscripts, inclusive), {end} (last + 1), {count}
    concat: tuple[str, str] | None = None  # a form around {parts} and their separator
    binary: Mapping[str, str] = field(default_factory=dict)  # per operation, a form of {a} and {b}
    zeros: str = ""  # {n} zeros
    # -- scans --------------------------------------------------------------------------------------
    loop: str = ""  # over nn_t from 0 to {last} ({steps} steps)
    loop_reverse: str = ""  # from {last} down to 0
    end_loop: str | None = "END LOOP;"  # None: the loop's body is its indented lines
    element: str = "{x}[{index}]"
    masked: str = "{value} = 0"
    skip: str = "CONTINUE;"
    step: str = ""  # the {features} values of step nn_t of {x}
    empty: str = ""  # an empty sequence, the start of a scan's outputs
    append: str = ""  # {part} ({source}'s first {size} values) after the outputs {y}
    finish_sequences: str | None = None  # a statement after the loop, on the outputs {y}

    def subscript(self, index: str) -> str:
        """A 0-based index expression as this dialect's subscript."""
        return index if self.index_base == 0 else f"{index} + {self.index_base}"

    def slice_of(self, x: str, start: int, stop: int) -> str:
        """Values start..stop-1 (0-based, like Python) of x."""
        first, last = start + self.index_base, stop - 1 + self.index_base
        return self.slice.format(x=x, first=first, last=last, end=last + 1, count=stop - start)


@dataclass(frozen=True)
class Answering:
    """How the functions users query answer for one graph (export/ir/kinds.py), whatever the target.

    `predict` is the network. The first output's probabilities (what score, label and labels read, and
    predict_proba for a model with one output) are its first `first_size` values after `steps`: 'sigmoid'
    and 'softmax' over them, 'complement' making [1 - p, p] of one value. `refusals` holds the one line
    each function that does not answer for the kind raises (it exists, so that calling it says why).
    """

    kind: str
    several: bool  # several outputs: predict_proba returns them all joined, as predict does
    first_size: int
    steps: tuple[str, ...]
    refusals: dict[str, str]

    @property
    def two_columns(self) -> bool:
        return "complement" in self.steps

    def answers(self, function: str) -> bool:
        return function not in self.refusals

    def comment(self, function: str) -> str:
        """What the function returns, in a sentence for the generated code's readers."""
        first = " of the first output" if self.several else ""
        if function in self.refusals:
            return f"Not for a {self.kind} model: calling it raises the line below."
        if function == "predict_proba":
            if self.several:
                return "The model's outputs joined, as predict returns them (an earlier release's name)."
            return {
                "binary": "[1 - p, p]: the probabilities of classes 0 and 1 from the one sigmoid unit p.",
                "multilabel": "The independent probability of each label.",
                "logits": "The logits' "
                + ("sigmoid, as [1 - p, p]." if self.two_columns else "softmax: class probabilities."),
            }.get(self.kind, "Class probabilities (what predict returns).")
        if function == "predict_logits":
            return "The logits (what predict returns)."
        if function == "score" and self.two_columns:
            return (
                f"Predicted class{first}: 1 when p > {kinds.THRESHOLD}, else 0 (Keras's binary_accuracy: "
                f"p = {kinds.THRESHOLD} exactly gives 0)."
            )
        if function == "score":
            return f"Predicted class index (0-based){first}, the first on ties, like numpy's argmax."
        if function == "label":
            return "Predicted class label: the class of score()."
        return (
            f"The labels{first} whose probability is above threshold (default {kinds.THRESHOLD}), in "
            "class order."
        )


def answering(graph: ir.Graph, name: str) -> Answering:
    kind, size, several = graph.kind, graph.first_size, bool(graph.outputs)
    steps: list[str] = []
    if kind == "logits":
        steps.append("sigmoid" if size == 1 else "softmax")
    if kinds.two_columns(kind, size):
        steps.append("complement")
    refusals = {
        function: kinds.refusal(name, kind, function)
        for function in kinds.FUNCTIONS
        if not kinds.offers(kind, function, several_outputs=several)
    }
    return Answering(kind, several, size, tuple(steps), refusals)


@dataclass(frozen=True)
class Check:
    """One input check: when `condition` holds, raise the error `kind` of ir.InputErrors (with
    `argument` appended to its message), or return NULL when `kind` is None. `message` words the
    error instead of ir.InputErrors (the forms of export/codegen/inputs.py), with kind's error code."""

    condition: str
    kind: str | None = None
    argument: str | None = None
    message: str | None = None


class Generator:
    """A target's generator over one graph: input checks and the common template context."""

    dialect: Dialect

    def __init__(self, graph: ir.Graph, name: str, version: int) -> None:
        self.graph = graph
        self.name = name
        self.version = version
        self.answering = answering(graph, name)

    def var(self, name: str) -> str:
        """The variable of an IR value; inputs keep their names (they are the function's parameters)."""
        return name if any(spec.name == name for spec in self.graph.inputs) else f"v_{name}"

    def input_form(self, spec: ir.TensorSpec) -> InputForm:
        """The forms the input takes here: shorter ones only where the dialect can pad."""
        form = InputForm.of(self.graph, self.name, spec)
        return form if self.dialect.pad else InputForm(form.model, form.name, form.shape)

    def input_checks(self, spec: ir.TensorSpec) -> Iterator[Check | str]:
        """The checks of one input in order; a str is a statement (flattening, `prepare`, padding)."""
        d, x, form = self.dialect, spec.name, self.input_form(spec)
        yield Check(d.is_null.format(x=x))
        if d.wrong_type is not None:
            condition, received = d.wrong_type
            yield Check(condition.format(x=x), "type", received.format(x=x))
        if d.depth is not None and form.depth > 1:
            yield from self.nested_checks(form, x)
            x = self.var(x)  # the flat values
        elif d.wrong_dimensions is not None:
            yield Check(d.wrong_dimensions.format(x=x), "dimensions")
        yield self.length_check(form, x)
        yield Check(d.has_nulls.format(x=x, size=d.length.format(x=x)), "nulls")
        if d.prepare is not None:
            yield d.prepare.format(x=x, value=self.var(spec.name))
            x = self.var(spec.name)
        condition, index = d.nonfinite
        yield Check(condition.format(x=x), "nonfinite", index.format(x=x))
        if spec.dtype == "int32":
            condition, index = d.outside
            yield Check(condition.format(x=x, bound=spec.bound), "index", index.format(x=x, bound=spec.bound))
        if form.pad is not None:
            yield d.pad.format(x=x, value=self.var(spec.name), pad=repr(form.pad), size=form.size)

    def nested_checks(self, form: InputForm, x: str) -> Iterator[Check | str]:
        """Nested at most as deep as the input's axes, each axis as long as the model's (the first at
        most, when the input pads), then flattened."""
        d = self.dialect
        depth = d.depth.format(x=x) if d.depth is not None else "1"
        yield Check(f"{depth} > {form.depth}", "dimensions", depth, form.too_deep_levels())
        for nesting in range(2, form.depth + 1):
            steps = d.extent.format(x=x, axis=1)
            wrong = (
                f"{steps} > {form.steps}" if form.pad is not None else d.differs.format(a=steps, b=form.steps)
            )
            at_depth = d.equals.format(a=depth, b=nesting)
            yield Check(d.both.format(a=at_depth, b=wrong), "length", steps, form.outer_length())
            for level in range(2, nesting + 1):
                extent = d.extent.format(x=x, axis=level)
                wrong = d.differs.format(a=extent, b=form.extent(nesting, level))
                yield Check(
                    d.both.format(a=at_depth, b=wrong), "length", extent, form.inner_length(nesting, level)
                )
        yield d.flatten.format(x=x, value=self.var(x), depth=depth)

    def length_check(self, form: InputForm, x: str) -> Check:
        """A flat array's length: the model's, or (when the input pads) at most that, in whole steps."""
        d, length = self.dialect, self.dialect.length.format(x=x)
        if form.pad is None:
            return Check(d.wrong_length.format(x=x, size=form.size), "length", length)
        partial = d.differs.format(a=d.remainder.format(a=length, b=form.step), b=0)
        condition = d.either.format(a=f"{length} > {form.size}", b=partial)
        return Check(condition, "length", length, form.flat_length())

    def checks(self) -> Iterator[str]:
        """Every input's checks in the dialect's forms."""
        for spec in self.graph.inputs:
            errors = ir.InputErrors.of(self.name, spec)
            for check in self.input_checks(spec):
                yield (
                    check
                    if isinstance(check, str)
                    else self.if_then(check.condition, [self.outcome(check, errors)])
                )

    def outcome(self, check: Check, errors: ir.InputErrors) -> str:
        d = self.dialect
        if check.kind is None:
            return d.return_null
        message, code = check.message or getattr(errors, check.kind), d.error_codes[check.kind]
        if check.argument is None:
            return d.error.format(message=d.literal(message), code=code)
        message = d.literal(message + d.message_placeholder)
        return d.error_with_argument.format(message=message, code=code, argument=check.argument)

    def if_then(self, condition: str, statements: list[str]) -> str:
        separator = self.dialect.outcome_separator
        return self.dialect.check.format(condition=condition, outcome=separator.join(statements))

    def context(self) -> dict[str, Any]:
        """What every target's templates read."""
        return {
            "name": self.name,
            "name_literal": literal(self.name),
            "version": self.version,
            "sha256": self.graph.sha256(),
            "arguments": ", ".join(spec.name for spec in self.graph.inputs),
            "outputs": self.graph.outputs,
            "checks": list(self.checks()),
            "kind": self.graph.kind,
            "answering": self.answering,
            "threshold": kinds.THRESHOLD,
        }


def render_template(directory: Path, template: str, context: Mapping[str, object]) -> str:
    environment = Environment(
        loader=FileSystemLoader(directory), undefined=StrictUndefined, keep_trailing_newline=True
    )
    return environment.get_template(template).render(**context)
