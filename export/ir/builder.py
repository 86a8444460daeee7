"""A helper that writes a lowering as a short program of IR primitives, and the index arithmetic such
lowerings share (moving axes, products of two values, norms). Knows neither Keras nor SQL.

Each method appends one primitive named `<layer>_<role>` (made unique by `name_for`) and returns that name;
the role "" names the layer's own value, which must be the last node appended.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import graph as ir
from .lowering import grouped_softmax


def moved_last(shape: tuple[int, ...], axes: tuple[int, ...]) -> np.ndarray:
    """Gather indices that move `axes` (of a row-major value of `shape`) last, in the order given."""
    order = [*(a for a in range(len(shape)) if a not in axes), *axes]
    return np.arange(int(np.prod(shape))).reshape(shape).transpose(order).ravel()


def arranged(shape: tuple[int, ...], batch: int | None, axis: int) -> tuple[np.ndarray, tuple[int, ...]]:
    """The flat indices of a value of `shape` as (batch, other positions, axis) — a batch of one without
    a batch axis — and the other axes' lengths."""
    others = tuple(a for a in range(len(shape)) if a not in (batch, axis))
    first = () if batch is None else (batch,)
    order = np.arange(int(np.prod(shape))).reshape(shape).transpose((*first, *others, axis))
    return order.reshape(-1, int(np.prod([shape[a] for a in others])), shape[axis]), tuple(
        shape[a] for a in others
    )


class Builder:
    def __init__(self, name_for: Callable[[str], str], name: str, source: str) -> None:
        self.name_for = name_for
        self.name = name
        self.source = source
        self.nodes: list[ir.Node] = []

    def node_name(self, role: str) -> str:
        return self.name if not role else self.name_for(f"{self.name}_{role.lstrip('_')}")

    def add(self, node: ir.Node) -> str:
        self.nodes.append(node)
        return node.name

    def gather(self, role: str, x: str, indices: np.ndarray) -> str:
        weights = ir.Weights(np.asarray(indices).ravel().astype(np.float32))
        return self.add(
            ir.Gather(name=self.node_name(role), inputs=(x,), indices=weights, source=self.source)
        )

    def placed(self, role: str, x: str, indices: np.ndarray) -> str:
        """x gathered by `indices` that cover every value of x, or x itself when they keep its order."""
        flat = np.asarray(indices).ravel()
        return x if np.array_equal(flat, np.arange(flat.size)) else self.gather(role, x, flat)

    def binary(self, role: str, op: str, a: str, b: str) -> str:
        return self.add(ir.Binary(name=self.node_name(role), inputs=(a, b), op=op, source=self.source))

    def affine(self, role: str, x: str, scale: np.ndarray, shift: np.ndarray | None = None) -> str:
        return self.add(
            ir.Affine(
                name=self.node_name(role),
                inputs=(x,),
                scale=ir.Weights(np.asarray(scale, dtype=np.float64).ravel()),
                shift=None if shift is None else ir.Weights(np.asarray(shift, dtype=np.float64).ravel()),
                source=self.source,
            )
        )

    def patches(
        self,
        role: str,
        x: str,
        kernel: np.ndarray,
        patches: int,
        bias: np.ndarray | None = None,
        activation: str = "linear",
    ) -> str:
        """The same product over each of `patches` consecutive slices of x (PatchDense)."""
        return self.add(
            ir.PatchDense(
                name=self.node_name(role),
                inputs=(x,),
                kernel=ir.Weights(np.asarray(kernel, dtype=np.float64)),
                bias=None if bias is None else ir.Weights(np.asarray(bias, dtype=np.float64).ravel()),
                activation=activation,
                patches=patches,
                source=self.source,
            )
        )

    def activate(self, role: str, x: str, activation: str) -> str:
        node = ir.ActivationNode(
            name=self.node_name(role), inputs=(x,), activation=activation, source=self.source
        )
        return self.add(node)

    def group_sums(self, role: str, x: str, size: int, group: int, activation: str = "linear") -> str:
        """The sum of each of the size/group consecutive groups of `group` values."""
        return self.patches(role, x, np.ones((group, 1)), size // group, activation=activation)

    def spread(self, role: str, x: str, groups: int, group: int) -> str:
        """Each of `groups` values repeated `group` times (a per-group value beside its group)."""
        return self.gather(role, x, np.repeat(np.arange(groups), group))

    def product(
        self,
        role: str,
        a: str,
        a_shape: tuple[int, ...],
        a_axis: int,
        b: str,
        b_shape: tuple[int, ...],
        b_axis: int,
        batch: tuple[int, int] | None = None,
    ) -> tuple[str, tuple[int, ...]]:
        """Σ_k a[..., k, ...]·b[..., k, ...] over axis `a_axis` of a and `b_axis` of b (of one length): the
        result's axes are a's others then b's others (Keras's batch_dot). With `batch` = (axis of a, axis
        of b), those axes pair up instead (one product per head, say) and come first in the result. Both
        values are gathered into one layout (every pair of their other positions, k last), multiplied
        and summed per pair."""
        a_batch, b_batch = batch if batch is not None else (None, None)
        left_rows, rest_a = arranged(a_shape, a_batch, a_axis)
        right_rows, rest_b = arranged(b_shape, b_batch, b_axis)
        heads, count_a, depth = left_rows.shape
        count_b = right_rows.shape[1]
        shape = (heads, count_a, count_b, depth)
        left = self.placed(f"{role}_left", a, np.broadcast_to(left_rows[:, :, None, :], shape))
        right = self.placed(f"{role}_right", b, np.broadcast_to(right_rows[:, None, :, :], shape))
        terms = self.binary(f"{role}_terms", "mul", left, right)
        batched = () if batch is None else (heads,)
        return self.group_sums(role, terms, int(np.prod(shape)), depth), (*batched, *rest_a, *rest_b)

    def softmax(self, role: str, x: str, size: int, group: int, floor: float | None = None) -> str:
        """softmax over each consecutive group (lowering.grouped_softmax, whose last node is `role`)."""
        nodes = grouped_softmax(
            self.name_for, self.node_name(role), x, size, group, log=False, source=self.source, floor=floor
        )
        self.nodes.extend(nodes)
        return nodes[-1].name

    def standardized(
        self, role: str, x: str, size: int, group: int, epsilon: float, centre: bool = True
    ) -> str:
        """Per consecutive group: (x − mean) / sqrt(variance + epsilon), the variance the mean of the
        squared deviations; with centre=False, x / sqrt(variance + epsilon)."""
        groups = size // group
        mean = self.patches(f"{role}_mean", x, np.full((group, 1), 1.0 / group), groups)
        deviations = self.binary(
            f"{role}_centred", "sub", x, self.spread(f"{role}_mean_each", mean, groups, group)
        )
        squares = self.binary(f"{role}_squares", "mul", deviations, deviations)
        variance = self.patches(
            f"{role}_variance", squares, np.full((group, 1), 1.0 / group), groups, np.array([epsilon])
        )
        inverse = self.activate(f"{role}_inverse", variance, "rsqrt")
        each = self.spread(f"{role}_inverse_each", inverse, groups, group)
        return self.binary(role, "mul", deviations if centre else x, each)

    def normalized(
        self, role: str, x: str, shape: tuple[int, ...], axis: int, floor: float
    ) -> tuple[str, tuple[int, ...]]:
        """x / sqrt(max(Σ x², floor)) over `axis`, which the result has moved last: (value, its shape)."""
        moved = (*(d for i, d in enumerate(shape) if i != axis), shape[axis])
        x = self.placed(f"{role}_moved", x, moved_last(shape, (axis,)))
        size, group = int(np.prod(shape)), shape[axis]
        inverse = self.inverse_norms(f"{role}_inverse", x, size, group, floor)
        each = self.spread(f"{role}_each", inverse, size // group, group)
        return self.binary(role, "mul", x, each), moved

    def inverse_norms(self, role: str, x: str, size: int, group: int, floor: float) -> str:
        """Per group of `group` consecutive values, 1 / sqrt(max(Σ x², floor)): min(rsqrt(Σ x²), 1/√floor),
        Keras's ops.normalize with floor = epsilon²."""
        squares = self.binary(f"{role}_squares", "mul", x, x)
        above = self.patches(
            f"{role}_above", squares, np.ones((group, 1)), size // group, np.array([-floor]), "relu"
        )
        floored = self.affine(f"{role}_floored", above, np.ones(size // group), np.full(size // group, floor))
        return self.activate(role, floored, "rsqrt")
