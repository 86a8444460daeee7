"""The short names of a source checkout (`export`, `train`, `serve`) as program entries only.

A checkout's root is on sys.path when Python runs there, so its design folders are importable under
their short names too, beside the one name every module has (`nnsql.export`: nnsql/export links to
../export). Importing a file under both would make two module objects of it, with two sets of globals
and registries. So the short name is not a package that can be imported: `python -m export.oracle`,
`python -m train.spawn` and `python -m serve` run `nnsql.export.oracle`, `nnsql.train.spawn` and
`nnsql.serve` as the program, and `import export.ir.graph` is refused in one line that names the
module to import instead.
"""

from __future__ import annotations

import sys


def entry_only(name: str) -> None:
    """Called with its own `__name__` by the `__init__` of a design folder. Under `nnsql.` nothing
    happens; under its short name it runs the `python -m` program as `nnsql.<program>` and exits, or
    refuses an import."""
    if name.startswith("nnsql."):
        return
    program = program_of(sys.orig_argv) if sys.argv[:1] == ["-m"] else None
    if program is None or not (program == name or program.startswith(f"{name}.")):
        raise ImportError(f"import nnsql.{name}, not {name}: the short name only runs `python -m {name}...`")
    import runpy  # only a program run by its short name needs it

    runpy.run_module(f"nnsql.{program}", run_name="__main__", alter_sys=True)
    raise SystemExit(0)


# Interpreter options followed by a separate argument (`-X importtime`, `-W error`).
WITH_ARGUMENT = ("-X", "-W", "--check-hash-based-pycs")


def program_of(argv: list[str]) -> str | None:
    """The module that `python [options] -m MODULE ...` runs, or None for another form."""
    arguments = iter(argv[1:])
    for argument in arguments:
        if argument == "-m":
            return next(arguments, None)
        if argument.startswith("-m"):
            return argument[2:]
        if argument in WITH_ARGUMENT:
            next(arguments, None)
        elif argument in ("-c", "-") or not argument.startswith("-"):
            return None
    return None
