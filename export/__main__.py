"""`nnsql export TARGET ...`: compile a model for TARGET (the same as `python -m nnsql.export.TARGET ...`);
`nnsql export --supported`: which layers and output kinds each target compiles, read from the
registries."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from nnsql import quiet
from nnsql.export.frontend.core import LOWERED_ACTIVATIONS
from nnsql.export.frontend.layers import PRODUCES, REFUSES
from nnsql.export.ir import graph as ir
from nnsql.export.ir import kinds
from nnsql.export.ir.lowering import BODY_KINDS
from nnsql.export.target import TARGETS

# Target modules register their capabilities when imported.
TARGET_MODULES = (
    "nnsql.export.duckdb.generator",
    "nnsql.export.oracle.generator",
    "nnsql.export.postgres.generator",
    "nnsql.export.postgres.plpython",
    "nnsql.export.postgres.cube",
    "nnsql.export.onnx.capabilities",
    "nnsql.export.spark.generator",
)


def support_matrix() -> list[tuple[str, str, dict[str, bool]]]:
    """(Keras layer, IR node kind, {target: supported}) for every layer the front end converts."""
    commands()  # imports every target module, which registers its target
    rows = []
    for layer, kind in sorted(PRODUCES.items()):
        kinds = set(kind.split("+")) - {"identity"}  # a layer lowered to several primitives needs them all
        if "Scan" in kinds:  # and a scan, the primitives its body is made of
            kinds |= BODY_KINDS
        support = {name: kinds <= t.capabilities.node_kinds for name, t in TARGETS.items()}
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


def commands() -> dict[str, str]:
    """Target name → the module whose `main` is `nnsql export NAME`."""
    for module in TARGET_MODULES:
        importlib.import_module(module)
    return {name: target.command for name, target in TARGETS.items() if target.command is not None}


def parser(targets: list[str]) -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(
        prog="nnsql export",
        usage="nnsql export TARGET [OPTIONS ...] | nnsql export --supported",
        description="The model compiler: a trained Keras model (.keras, .h5 or SavedModel) compiled for "
        f"TARGET ({', '.join(targets)}), checked against Keras on sample rows in the target itself, then "
        "published. `nnsql export TARGET --help` lists that target's options; `python -m "
        "nnsql.export.TARGET` is the same command.",
        epilog="next step: nnsql export duckdb --model model.keras --db scores.duckdb --name mymodel",
        add_help=False,  # after TARGET, --help is the target's
    )
    result.add_argument("-h", "--help", action="store_true", help="show this help")
    result.add_argument("--target", choices=targets, help=argparse.SUPPRESS)  # the older spelling
    result.add_argument("--supported", action="store_true", help="print the layer support matrix (Markdown)")
    result.add_argument(
        "--write-table",
        "--write-readme",
        type=Path,
        metavar="FILE",
        help="update the table in FILE (Markdown)",
    )
    return result


def main(argv: list[str] | None = None) -> int:
    """`nnsql export TARGET ...` runs the target's own command; `--supported` prints the matrix."""
    args = list(sys.argv[1:] if argv is None else argv)
    entry_points = commands()
    if args and args[0] in entry_points:
        return int(importlib.import_module(entry_points[args[0]]).main(args[1:]))
    command = parser(sorted(entry_points))
    options, rest = command.parse_known_args(args)
    if options.target:
        target_main = importlib.import_module(entry_points[options.target]).main
        return int(target_main([*rest, "--help"] if options.help else rest))
    if rest:
        first = rest[0]
        hint = (
            f"no target '{first}'"
            if not first.startswith("-")
            else f"unrecognized arguments: {' '.join(rest)}"
        )
        command.error(f"{hint} (nnsql export TARGET ..., TARGET one of {', '.join(sorted(entry_points))})")
    if options.write_table:
        update_readme(options.write_table)
        return 0
    if options.help or not options.supported:
        command.print_help()
        return 0
    print(markdown_table())
    return 0


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
