"""Keras recurrent layers and masks → IR: `Recurrent` nodes (lowered to scans by export/ir/lowering.py),
`StepMask` values and the merges of `Bidirectional`.

Masks follow Keras: `Masking` makes a step mask that flows with the value it masks; a recurrent layer fed
from that value consumes it, and passes it on when it returns sequences. A layer fed from anything else
is unmasked, even when another branch of the same input is masked.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import graph as ir
from ..ir.layout import step_permutation
from .base import Context, Outputs, activation_name, converts, describe, input_tensor

CELLS = {"GRU": "gru", "LSTM": "lstm", "SimpleRNN": "simple"}
RNN_OPTIONS = "return_state, stateful, time_major, sequences of variable length"
MERGES = {"concat": "", "sum": "add", "mul": "mul", "ave": "add"}  # the Binary op of each merge


@converts("Masking", produces="StepMask+Reshape+Affine+Gather+Binary")
def _masking(layer: Any, inputs: tuple[str, ...], ctx: Context) -> tuple[ir.Node, ...]:
    """mask[t] = any(x[t, :] ≠ mask_value); y = x · mask[t] (Keras zeroes the masked steps). The mask flows
    with a value of its own to the layers fed from it. With mask_value 0 the product is the identity, an
    identity Reshape; otherwise the mask is the StepMask of x − mask_value (which is 0 exactly where x
    equals it) and the product a Gather of each step's flag for its features and a Binary."""
    value = float(layer.get_config().get("mask_value", 0.0))
    shape = tuple(int(d) for d in layer.input.shape[1:])
    if len(shape) != 2:
        raise ctx.unsupported(layer, f"masking an input of shape {shape} (only (steps, features))")
    if not np.isfinite(value):
        raise ctx.unsupported(layer, f"mask_value {value} (a finite number)")
    name, source = ctx.node_name(layer), describe(layer)
    steps, features = shape
    nodes: list[ir.Node] = []
    compared = inputs[0]
    if value != 0.0:
        shifted = ir.Affine(
            name=ctx.name_for(f"{name}_shifted"),
            inputs=inputs,
            scale=ir.Weights(np.ones(steps * features)),
            shift=ir.Weights(np.full(steps * features, -value)),
            source=source,
        )
        nodes.append(shifted)
        compared = shifted.name
    mask = ir.StepMask(name=ctx.name_for(f"{name}_steps"), inputs=(compared,), steps=steps, source=source)
    nodes.append(mask)
    if value == 0.0:
        nodes.append(ir.Reshape(name=name, inputs=inputs, shape=shape, source=source))
    else:
        each = ir.Weights(np.repeat(np.arange(steps), features).astype(np.float32))
        spread = ir.Gather(
            name=ctx.name_for(f"{name}_each"), inputs=(mask.name,), indices=each, source=source
        )
        nodes += [spread, ir.Binary(name=name, inputs=(inputs[0], spread.name), op="mul", source=source)]
    ctx.masks[name] = mask.name
    return tuple(nodes)


def cell_of(layer: Any, ctx: Context) -> str:
    kind = type(layer).__name__
    if kind not in CELLS:
        raise ctx.unsupported(layer, f"a {kind} inside Bidirectional")
    if kind == "GRU" and not layer.get_config().get("reset_after", True):
        return "gru_v1"
    return CELLS[kind]


def check_options(layer: Any, ctx: Context) -> None:
    config = layer.get_config()
    for option in ("return_state", "stateful", "time_major"):
        if config.get(option, False):
            raise ctx.unsupported(layer, f"{option}=True")


def recurrent(layer: Any, name: str, sequence: str, steps: int, ctx: Context, owner: Any) -> ir.Recurrent:
    """The `Recurrent` node of one Keras RNN layer (or one direction of a Bidirectional `owner`)."""
    check_options(layer, ctx)
    cell = layer.cell
    mask = ctx.masks.get(sequence)
    use_bias = layer.get_config().get("use_bias", True)
    recurrent_activation = "sigmoid"
    if "recurrent_activation" in layer.get_config():
        recurrent_activation = activation_name(layer, ctx, "recurrent_activation")
    return ir.Recurrent(
        name=name,
        inputs=(sequence,) if mask is None else (sequence, mask),
        cell=cell_of(layer, ctx),
        kernel=ir.Weights(np.asarray(cell.kernel.numpy())),
        recurrent_kernel=ir.Weights(np.asarray(cell.recurrent_kernel.numpy())),
        bias=ir.Weights(np.asarray(cell.bias.numpy())) if use_bias else None,
        activation=activation_name(layer, ctx),
        recurrent_activation=recurrent_activation,
        steps=steps,
        go_backwards=bool(layer.get_config().get("go_backwards", False)),
        return_sequences=bool(layer.get_config().get("return_sequences", False)),
        zero_masked=bool(getattr(layer, "zero_output_for_mask", False)),
        source=describe(owner),
    )


def sequence_steps(layer: Any, ctx: Context) -> int:
    tensor = input_tensor(layer)
    if len(tensor.shape) != 3:
        raise ctx.unsupported(layer, f"input of rank {len(tensor.shape)} (only (steps, features))")
    if tensor.shape[1] is None:
        raise ctx.unsupported(layer, "a sequence of variable length")
    return int(tensor.shape[1])


@converts("GRU", "LSTM", "SimpleRNN", produces="Scan", refuses=RNN_OPTIONS)
def _rnn(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node:
    node = recurrent(layer, ctx.node_name(layer), inputs[0], sequence_steps(layer, ctx), ctx, layer)
    if node.return_sequences and node.inputs[1:]:
        ctx.masks[node.name] = node.inputs[1]  # the mask flows on with the sequence
    return node


@converts("Bidirectional", produces="Scan+Gather+Concatenate+Binary", refuses=RNN_OPTIONS)
def _bidirectional(layer: Any, inputs: tuple[str, ...], ctx: Context) -> tuple[ir.Node, ...] | Outputs:
    """Two scans, the backward one's sequence put back in time order, merged as `merge_mode` says; with
    merge_mode=None they are the layer's two outputs [forward, backward], each keeping the mask."""
    mode = layer.merge_mode
    if mode not in MERGES and mode is not None:
        raise ctx.unsupported(layer, f"merge_mode={mode!r} (supported: {', '.join(MERGES)}, None)")
    name, steps = ctx.node_name(layer), sequence_steps(layer, ctx)
    forward = recurrent(layer.forward_layer, ctx.name_for(f"{name}_fw"), inputs[0], steps, ctx, layer)
    backward = recurrent(layer.backward_layer, ctx.name_for(f"{name}_bw"), inputs[0], steps, ctx, layer)
    nodes: list[ir.Node] = [forward, backward]
    units, sequences = forward.units, forward.return_sequences
    if sequences:
        indices = ir.Weights(step_permutation(steps, backward.units))
        nodes.append(
            ir.Gather(name=ctx.name_for(f"{name}_bw_in_order"), inputs=(backward.name,), indices=indices)
        )
        if forward.inputs[1:]:
            ctx.masks[name] = forward.inputs[1]
    parts = (forward.name, nodes[-1].name)
    if mode is None:
        if sequences and forward.inputs[1:]:
            ctx.masks.update(dict.fromkeys(parts, forward.inputs[1]))
        return Outputs(nodes=tuple(nodes), values=parts)
    nodes.extend(merge(mode, name, parts, steps if sequences else 1, units, backward.units, ctx, layer))
    return tuple(nodes)


def merge(
    mode: str, name: str, parts: tuple[str, str], steps: int, units: int, back: int, ctx: Context, layer: Any
) -> list[ir.Node]:
    source = describe(layer)
    if mode == "concat":
        if steps == 1:
            return [ir.Concatenate(name=name, inputs=parts, source=source)]
        joined = ir.Concatenate(name=ctx.name_for(f"{name}_joined"), inputs=parts, source=source)
        order = ir.Weights(step_permutation(steps, 0, (units, back)))
        return [joined, ir.Gather(name=name, inputs=(joined.name,), indices=order, source=source)]
    if mode != "ave":
        return [ir.Binary(name=name, inputs=parts, op=MERGES[mode], source=source)]
    if steps != 1:
        raise ctx.unsupported(layer, "merge_mode='ave' with return_sequences=True")
    total = ir.Binary(name=ctx.name_for(f"{name}_sum"), inputs=parts, op="add", source=source)
    half = ir.Weights(np.eye(units) * 0.5)
    return [total, ir.Dense(name=name, inputs=(total.name,), kernel=half, source=source)]
