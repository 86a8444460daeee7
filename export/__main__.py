"""`nnsql export TARGET ...`: compile a model for TARGET (the same as `python -m nnsql.export.TARGET ...`);
`nnsql export --supported`: which layers and output kinds each target compiles, read from the
registries. Only the target asked for is imported (export/target.py's TARGET_MODULES)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nnsql import quiet
from nnsql.export.target import TARGET_MODULES, command_of


def markdown_table() -> str:
    """The support matrix of every target (export/supported.py), in Markdown."""
    from nnsql.export.supported import markdown_table as table

    return table()


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
    if args and args[0] in TARGET_MODULES:
        return int(command_of(args[0])(args[1:]))
    names = sorted(TARGET_MODULES)
    command = parser(names)
    options, rest = command.parse_known_args(args)
    if options.target:
        return int(command_of(options.target)([*rest, "--help"] if options.help else rest))
    if rest:
        first = rest[0]
        hint = (
            f"no target '{first}'"
            if not first.startswith("-")
            else f"unrecognized arguments: {' '.join(rest)}"
        )
        command.error(f"{hint} (nnsql export TARGET ..., TARGET one of {', '.join(names)})")
    if options.write_table:
        from nnsql.export.supported import update_readme

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
