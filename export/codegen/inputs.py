"""The forms an input takes in SQL: flat row-major, nested one list per step (or row), and shorter.

A sequence or an image arrives as users hold it: a flat row-major list of its values, or nested lists
(one per step of a sequence, per row of an image, down to the channels). A model that masks an input
(a `Masking` layer or a `mask_zero` Embedding reading it directly) also takes fewer steps: the missing
ones are padded at the end with the value the mask tests for, which is how Keras users pad their
batches. Every target reads the same `InputForm`, so that all of them accept and refuse the same rows
with the same messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from ..ir import graph as ir


def padding_value(graph: ir.Graph, name: str) -> float | None:
    """The value the model's mask tests the steps of input `name` for, or None when nothing masks it.

    A `StepMask` of the input itself tests for 0 (Masking(0), a mask_zero Embedding); a StepMask of
    `input - v` (an Affine of ones shifted by the constant -v) is Masking(v)."""
    for node in graph.nodes:
        if not isinstance(node, ir.StepMask):
            continue
        if node.inputs[0] == name:
            return 0.0
        source = next((n for n in graph.nodes if n.name == node.inputs[0]), None)
        if isinstance(source, ir.Affine) and source.inputs[0] == name and source.shift is not None:
            scale, shift = source.scale.array, source.shift.array
            if np.all(scale == 1.0) and np.all(shift == shift.flat[0]):
                return float(-shift.flat[0])
    return None


@dataclass(frozen=True)
class InputForm:
    """What one input accepts: its shape (without the batch), and the padding value if it pads."""

    model: str
    name: str
    shape: tuple[int, ...]
    pad: float | None = None

    @classmethod
    def of(cls, graph: ir.Graph, model: str, spec: ir.TensorSpec) -> InputForm:
        pad = padding_value(graph, spec.name) if len(spec.shape) >= 1 else None
        return cls(model, spec.name, tuple(spec.shape) or (1,), pad)

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def steps(self) -> int:
        return self.shape[0]

    @property
    def step(self) -> int:
        """The values of one step (or row): everything after the first axis."""
        return self.size // self.steps

    @property
    def depth(self) -> int:
        """How deep the nested form may go: one list per axis."""
        return len(self.shape)

    def extent(self, depth: int, level: int) -> int:
        """How many elements a list at `level` (1: the outermost) holds in the form `depth` deep: the
        axis's length, or for the innermost lists every value of the remaining axes."""
        if level < depth:
            return self.shape[level - 1]
        return prod(self.shape[depth - 1 :])

    @property
    def where(self) -> str:
        return f"{self.model}: {self.name}"

    @property
    def padded_note(self) -> str:
        return f"shorter ones are padded with {self.pad:g}"

    def flat_length(self) -> str:
        """The message of a flat list of the wrong length, followed by the length received."""
        if self.pad is None:
            return f"{self.where} must have {self.size} values, got "
        if self.step == 1:
            return f"{self.where} must have at most {self.size} values ({self.padded_note}), got "
        return (
            f"{self.where} must have at most {self.steps} steps of {self.step} values, {self.size} values "
            f"flat ({self.padded_note}), got "
        )

    def outer_length(self) -> str:
        """The message of a nested list with the wrong number of lists, followed by the number."""
        if self.pad is None:
            return f"{self.where} must have {self.steps} lists, got "
        return f"{self.where} must have at most {self.steps} steps ({self.padded_note}), got "

    def inner_length(self, depth: int, level: int) -> str:
        """The message of a list at `level` of the wrong length in the form `depth` deep, followed by the
        length of the first such list."""
        extent = self.extent(depth, level)
        return f"{self.where}: every list at depth {level} must have {extent} elements, got one of "

    def too_deep(self) -> str:
        return f"{self.where} must be a list of numbers, flat or nested at most {self.depth} deep, got "

    def too_deep_levels(self) -> str:
        """An array nested deeper than the input's axes, followed by its number of dimensions."""
        return f"{self.where} must be flat or nested at most {self.depth} deep, got dimensions: "


HELD_EVERY = 2  # every other sample row of the parity check is scored in the form users hold it


def forms_held(graph: ir.Graph, model: str) -> dict[str, InputForm]:
    """The inputs that take another form than their flat values: nested, or shorter where they pad."""
    forms = {spec.name: InputForm.of(graph, model, spec) for spec in graph.inputs}
    return {name: form for name, form in forms.items() if form.depth > 1 or form.pad is not None}


def held_rows(rows: int) -> np.ndarray:
    """Which sample rows the parity check scores as users hold them."""
    return np.arange(1, rows, HELD_EVERY)


def as_held(form: InputForm, row: np.ndarray) -> np.ndarray:
    """A flat sample row as users hold it: one entry per step (nested to the last axis), without the
    steps of padding at its end where the input pads (the target pads them back)."""
    steps = np.asarray(row).reshape(form.steps, -1)
    kept = form.steps
    if form.pad is not None:
        set_steps = np.flatnonzero(~np.all(steps == form.pad, axis=1))
        kept = int(set_steps[-1]) + 1 if set_steps.size else 0
    return np.asarray(row).reshape(form.shape)[:kept]
