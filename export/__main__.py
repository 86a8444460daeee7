"""`python -m export --supported`: which layers each target compiles, read from the registries."""

from __future__ import annotations

import argparse
import importlib
import sys

from export.keras_frontend import PRODUCES
from export.target import TARGETS

# Target modules register their capabilities when imported.
TARGET_MODULES = ("export.duckdb.generator",)


def support_matrix() -> list[tuple[str, str, dict[str, bool]]]:
    """(Keras layer, IR node kind, {target: supported}) for every layer the front end converts."""
    for module in TARGET_MODULES:
        importlib.import_module(module)
    rows = []
    for layer, kind in sorted(PRODUCES.items()):
        support = {name: kind == "identity" or kind in caps.node_kinds for name, caps in TARGETS.items()}
        rows.append((layer, kind, support))
    return rows


def markdown_table() -> str:
    rows = support_matrix()
    targets = sorted(TARGETS)
    lines = [
        "| Keras layer | IR node | " + " | ".join(targets) + " |",
        "|---|---|" + "---|" * len(targets),
    ]
    for layer, kind, support in rows:
        marks = " | ".join("yes" if support[t] else "no" for t in targets)
        lines.append(f"| {layer} | {kind} | {marks} |")
    lines.append("")
    lines.append("Activations: " + ", ".join(sorted(next(iter(TARGETS.values())).activations)) + ".")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m export",
        description="The model compiler. Targets: python -m export.duckdb | export.postgres | "
        "export.oracle | export.onnx (each has --help).",
    )
    parser.add_argument("--supported", action="store_true", help="print the layer support matrix (Markdown)")
    args = parser.parse_args(argv)
    if not args.supported:
        parser.print_help()
        return 0
    print(markdown_table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
