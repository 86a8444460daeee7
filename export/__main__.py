"""`nnsql export X ...`: compile a model for target X (the same as `python -m nnsql.export.X ...`);
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
    lines += ["", "Refused with one line naming the layer and the option, before anything is written:", ""]
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
    """Replace the table between the `supported` markers of a README with the generated one."""
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="nnsql export",
        description="The model compiler: nnsql export {duckdb,postgres,oracle,onnx} ... "
        "(`--target X --help` lists that target's options; python -m nnsql.export.X is the same command).",
        add_help=False,  # with --target, --help is the target's
    )
    parser.add_argument("-h", "--help", action="store_true", help="show this help (with --target: its help)")
    entry_points = commands()
    parser.add_argument("--target", choices=sorted(entry_points), help="compile for this target")
    parser.add_argument("--supported", action="store_true", help="print the layer support matrix (Markdown)")
    parser.add_argument("--write-readme", type=Path, metavar="README", help="update the table in README")
    args, rest = parser.parse_known_args(argv)
    if args.target:
        target_main = importlib.import_module(entry_points[args.target]).main
        return int(target_main([*rest, "--help"] if args.help else rest))
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)} (did you mean --target X {rest[0]}?)")
    if args.write_readme:
        update_readme(args.write_readme)
        return 0
    if args.help or not args.supported:
        parser.print_help()
        return 0
    print(markdown_table())
    return 0


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
