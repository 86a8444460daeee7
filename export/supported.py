"""The support matrix that `nnsql export --supported` prints and `make supported` writes into
docs/layers.md: which layers and output kinds each target compiles, read from the registries. Importing
this module loads every target."""

from __future__ import annotations

from pathlib import Path

from .frontend.core import LOWERED_ACTIVATIONS
from .frontend.layers import PRODUCES, REFUSES
from .ir import graph as ir
from .ir import kinds
from .ir.lowering import BODY_KINDS
from .target import TARGETS, load_all


def support_matrix() -> list[tuple[str, str, dict[str, bool]]]:
    """(Keras layer, IR node kind, {target: supported}) for every layer the front end converts."""
    targets = load_all()
    rows = []
    for layer, kind in sorted(PRODUCES.items()):
        kinds = set(kind.split("+")) - {"identity"}  # a layer lowered to several primitives needs them all
        if "Scan" in kinds:  # and a scan, the primitives its body is made of
            kinds |= BODY_KINDS
        support = {name: kinds <= t.capabilities.node_kinds for name, t in targets.items()}
        rows.append((layer, kind, support))
    return rows


def markdown_table() -> str:
    """The support matrix, the activations, the refused options and the output kinds, in Markdown."""
    rows = support_matrix()
    targets = sorted(TARGETS)  # every target and kernel, registered by support_matrix
    lines = [
        "| Keras layer | IR node | " + " | ".join(targets) + " |",
        "|---|---|" + "---|" * len(targets),
    ]
    for layer, kind, support in rows:
        marks = " | ".join("yes" if support[t] else "no" for t in targets)
        lines.append(f"| {layer} | {kind} | {marks} |")
    lines.append("")
    activations = set(next(iter(TARGETS.values())).capabilities.activations) - set(ir.INTERNAL_ACTIVATIONS)
    activations |= set(LOWERED_ACTIVATIONS)  # built from primitives by the front end
    lines.append("Activations: " + ", ".join(sorted(activations)) + ".")
    lines += [
        "",
        "Refused with one line naming the layer and the option, before anything is written. None of these"
        " is impossible in SQL; they are not lowered yet. `nnsql export onnx` may still convert a model"
        " using them (Keras's ONNX exporter decides):",
        "",
    ]
    lines += [f"- {layer}: {REFUSES[layer]}" for layer in sorted(REFUSES)]
    return "\n".join([*lines, "", *kinds_table(targets)])


def kinds_table(targets: list[str]) -> list[str]:
    """Output kinds × targets, with what each kind is read from and the functions that answer for it
    (docs/output-kinds.md). ONNX answers over HTTP: V2 and :predict, :classify and /score."""
    lines = [
        "| Output kind | Read from | SQL functions | " + " | ".join(targets) + " |",
        "|---|---|---|" + "---|" * len(targets),
    ]
    for kind in kinds.KINDS.values():
        marks = " | ".join(
            "yes" if kind.name in TARGETS[t].capabilities.output_kinds else "no" for t in targets
        )
        lines.append(f"| {kind.name} | {kind.reads} | {', '.join(kind.functions)} | {marks} |")
    return lines


def update_readme(path: Path) -> None:
    """Replace the table between the `supported` markers of a Markdown file with the generated one."""
    start, end = "<!-- supported:start -->\n", "<!-- supported:end -->"
    text = path.read_text()
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{start}{markdown_table()}\n{end}{tail}")
