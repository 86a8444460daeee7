"""What a target can compile, declared as data, and the check run before anything is written.

Each target is one entry of `TARGET_MODULES`: its name, the module whose `main` is `nnsql export NAME`,
and the modules that register its `Capabilities` and generator when imported. Nothing of a target is
imported until it is asked for: `nnsql export duckdb` loads DuckDB's modules only, `nnsql export
--supported` loads every target (`load_all`). The shared code consults the registered declarations; no
module branches on a target's name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import ExportError, UnsupportedLayer
from .ir import graph as ir


@dataclass(frozen=True)
class Capabilities:
    target: str
    node_kinds: frozenset[str]
    activations: frozenset[str] = field(default_factory=lambda: frozenset(ir.ACTIVATIONS))
    max_array_len: int | None = None  # longest array one stored value may hold; None: unlimited
    max_inputs: int | None = None
    several_outputs: bool = False  # a function per output (NAME.predict_proba_<output>)
    float32: bool = False  # computes in float32 (Oracle's BINARY_FLOAT, onnxruntime), not float64
    output_kinds: frozenset[str] = field(default_factory=lambda: frozenset(ir.OUTPUT_KINDS))

    def check(self, graph: ir.Graph) -> None:
        """Raise `UnsupportedLayer` for the first node this target cannot emit."""
        if self.max_inputs is not None and len(graph.inputs) > self.max_inputs:
            raise UnsupportedLayer(
                f"graph with {len(graph.inputs)} inputs", self.target, f"max {self.max_inputs}"
            )
        if graph.outputs and not self.several_outputs:
            names = ", ".join(spec.name for spec in graph.outputs)
            raise ExportError(
                f"target '{self.target}' does not compile a model with {len(graph.outputs)} outputs ({names})"
            )
        if graph.kind not in self.output_kinds:
            raise ExportError(f"target '{self.target}' does not compile an output of kind {graph.kind}")
        self.check_sizes(graph)
        for node in graph.all_nodes():
            if node.kind not in self.node_kinds:
                raise UnsupportedLayer(node.source or node.name, self.target, node.kind)
            activation = getattr(node, "activation", None)
            if activation is not None and activation not in self.activations:
                raise UnsupportedLayer(node.source or node.name, self.target, f"activation {activation!r}")

    def check_sizes(self, graph: ir.Graph) -> None:
        """Every vector must fit one stored array (matrices are split by the target itself)."""
        if self.max_array_len is None:
            return
        for spec in graph.inputs:
            if spec.size > self.max_array_len:
                raise UnsupportedLayer(
                    f"input '{spec.name}'", self.target, f"{spec.size} values > {self.max_array_len:,}"
                )
        for node in graph.all_nodes():
            values = graph.size_of(node.name)
            if values > self.max_array_len:
                raise UnsupportedLayer(
                    node.source or node.name, self.target, f"{values:,} values > {self.max_array_len:,}"
                )


@dataclass(frozen=True)
class Target:
    """One target as data: what it compiles and the class that writes its code."""

    capabilities: Capabilities
    generator: type | None  # None: the target converts the Keras model itself (ONNX)

    @property
    def name(self) -> str:
        return self.capabilities.target


@dataclass(frozen=True)
class TargetModules:
    """Where a target lives, by module path: imported only when the target is used."""

    command: str  # the module whose `main(argv)` is `nnsql export NAME`
    registers: tuple[str, ...]  # the modules that `register` its capabilities (kernels included)


# Adding a target is one entry here.
TARGET_MODULES: dict[str, TargetModules] = {
    "duckdb": TargetModules("nnsql.export.duckdb.__main__", ("nnsql.export.duckdb.generator",)),
    "onnx": TargetModules("nnsql.export.onnx.__main__", ("nnsql.export.onnx.capabilities",)),
    "oracle": TargetModules("nnsql.export.oracle.__main__", ("nnsql.export.oracle.generator",)),
    "postgres": TargetModules(
        "nnsql.export.postgres.__main__",
        (
            "nnsql.export.postgres.generator",
            "nnsql.export.postgres.plpython",
            "nnsql.export.postgres.cube",
        ),
    ),
    "spark": TargetModules("nnsql.export.spark.__main__", ("nnsql.export.spark.generator",)),
}

TARGETS: dict[str, Target] = {}


def emitter(generator: object, node: ir.Node, target: str) -> Callable[..., Any]:
    """The generator's `emit_<Kind>` method for this node, or `UnsupportedLayer` naming layer and target."""
    method: Callable[..., Any] | None = getattr(generator, f"emit_{node.kind}", None)
    if method is None:
        raise UnsupportedLayer(node.source or node.name, target, node.kind)
    return method


def emitted_kinds(generator_class: type) -> frozenset[str]:
    """The node kinds a generator class can emit: its `emit_<Kind>` methods (the support matrix)."""
    return frozenset(name[len("emit_") :] for name in dir(generator_class) if name.startswith("emit_"))


def register(capabilities: Capabilities, generator: type | None = None) -> Capabilities:
    """Declare what a target (or one of its kernels) compiles; its module calls this when imported."""
    TARGETS[capabilities.target] = Target(capabilities, generator)
    return capabilities


def load_all() -> dict[str, Target]:
    """Every target and kernel, registered by importing each target's modules (the support matrix)."""
    for modules in TARGET_MODULES.values():
        for module in modules.registers:
            importlib.import_module(module)
    return TARGETS


def command_of(name: str) -> Callable[[list[str]], int]:
    """The `main` of `nnsql export NAME`, its module imported now and no other target's."""
    module = importlib.import_module(TARGET_MODULES[name].command)
    main: Callable[[list[str]], int] = module.main
    return main
