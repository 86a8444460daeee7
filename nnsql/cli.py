"""`nnsql`: one command for the whole path, dispatching to each part's own command.

    nnsql spawn ...            train with N workers              (python -m nnsql.train.spawn)
    nnsql export TARGET ...    compile into a database or ONNX   (python -m nnsql.export.TARGET)
    nnsql models ACTION ...    list, activate, remove versions   (python -m nnsql.export.registry.cli)
    nnsql serve ...            the HTTP/gRPC scorer              (python -m nnsql.serve)
    nnsql bench NAME ...       a benchmark of a source checkout  (python -m nnsql.bench.NAME)
    nnsql demo                 train, export to DuckDB, score    (python -m nnsql.demo)

Each command is the module's own `main(argv)`, so its options, help and exit codes are those of the
`python -m` form: one parser each. Modules are imported only when their command runs.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import pkgutil
import re
import sys
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path

import nnsql

from . import quiet


@dataclass(frozen=True)
class Command:
    module: str  # whose main(argv) runs the command
    summary: str


COMMANDS = {
    "spawn": Command(
        "nnsql.train.spawn.__main__",
        "run a tf.distribute training script with N workers, "
        "as local processes or on Kubernetes, and hand back the model",
    ),
    "export": Command(
        "nnsql.export.__main__",
        "compile a trained Keras model into DuckDB, PostgreSQL or "
        "Oracle (scored in SQL, parity proven there), or ONNX for the scorer",
    ),
    "serve": Command(
        "nnsql.serve.__main__",
        "serve a repository of ONNX models over KServe V2 / Open "
        "Inference Protocol and TF Serving REST; --manifests writes Kubernetes manifests",
    ),
    "bench": Command("nnsql.bench", "run a benchmark (source checkout): nnsql bench NAME"),
    "demo": Command(
        "nnsql.demo.__main__",
        "train the reference model, export it to DuckDB and score "
        "the test set in SQL (what `make demo` runs)",
    ),
    "models": Command(
        "nnsql.export.registry.cli",
        "list the versions of an exported model, activate one (roll back or forward, its answers "
        "checked again in the target) or remove one that is not active",
    ),
}
NEXT_STEP = """\
start here:
  nnsql export duckdb --model model.keras --db scores.duckdb --name mymodel
      compiles your trained model into a DuckDB file and proves its scores match Keras there;
  nnsql COMMAND --help lists a command's options and names its next step."""


# The extras each command needs, first the one it cannot run without: a missing package is reported with
# the extra among these that brings it.
COMMAND_EXTRAS = {
    "spawn": ("train", "k8s", "s3"),
    "export": ("export", "postgres", "oracle", "s3"),
    "models": ("export", "postgres"),
    "serve": ("serve", "k8s"),
    "demo": ("train", "export"),
}
# Import names whose distribution is named otherwise (the rest: the import name, `_` read as `-`).
DISTRIBUTIONS = {
    "dotenv": "python-dotenv",
    "sklearn": "scikit-learn",
    "grpc": "grpcio",
    "grpc_tools": "grpcio-tools",
    "grpc_reflection": "grpcio-reflection",
    "google": "protobuf",
    "simdjson": "pysimdjson",
    "yaml": "pyyaml",
}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements() -> list[str]:
    """nnsql's requirements as `name...; extra == "x"` strings: a source checkout's pyproject.toml (the
    code that runs, installed or not), else the installed distribution's metadata."""
    checkout = nnsql.source_checkout()
    if checkout is not None and (checkout / "pyproject.toml").is_file():
        project = tomllib.loads((checkout / "pyproject.toml").read_text()).get("project", {})
        extras = project.get("optional-dependencies", {})
        return [f'{item}; extra == "{extra}"' for extra, items in extras.items() for item in items]
    try:
        return importlib.metadata.requires("nnsql") or []
    except importlib.metadata.PackageNotFoundError:
        return []


def extra_for(module: str, command: str) -> str | None:
    """The extra of nnsql that brings the top-level `module` (None when no extra does)."""
    top = module.split(".")[0]
    wanted = normalized(DISTRIBUTIONS.get(top, top))
    extras = []
    for requirement in requirements():
        name = re.match(r"[A-Za-z0-9._-]+", requirement)
        extra = re.search(r"""extra\s*==\s*['"]([\w-]+)['"]""", requirement)
        if name and extra and normalized(name.group()) == wanted and extra.group(1) != "all":
            extras.append(extra.group(1))
    preferred = [extra for extra in COMMAND_EXTRAS.get(command, ()) if extra in extras]
    return (preferred or extras or [None])[0]


def install_command(extra: str) -> str:
    """The pip command that adds `extra` to what runs: the checkout's folder (relative to the working
    directory when inside it), the wheel nnsql was installed from, else the package's name."""
    checkout = nnsql.source_checkout()
    if checkout is not None:
        try:
            relative = checkout.relative_to(Path.cwd())
            where = "." if relative == Path() else f"./{relative}"
        except ValueError:
            where = str(checkout)
        return f'pip install "{where}[{extra}]"'
    return f'pip install "{installed_from() or "nnsql"}[{extra}]"'


def installed_from() -> str | None:
    """The wheel file nnsql was installed from (pip records it in direct_url.json), if it was."""
    try:
        record = importlib.metadata.distribution("nnsql").read_text("direct_url.json")
        url = json.loads(record or "{}").get("url", "")
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None
    return url.removeprefix("file://") if url.startswith("file://") and url.endswith(".whl") else None


def run_command(name: str, argv: list[str]) -> int:
    """The command's own main(argv); a package of an extra that is not installed is one line naming the
    extra and the command that installs it (the serve extra holds no psycopg), not a traceback."""
    try:
        return int(importlib.import_module(COMMANDS[name].module).main(argv))
    except ModuleNotFoundError as error:
        missing = (error.name or "").split(".")[0]
        extra = extra_for(missing, name) if missing else None
        if extra is None:
            raise
        print(
            f"error: nnsql {name} needs {missing}, which the '{extra}' extra installs: "
            f"{install_command(extra)}",
            file=sys.stderr,
        )
        return 2


def summary(name: str, command: Command, width: int) -> str:
    indent = " " * (width + 4)
    return textwrap.fill(
        command.summary, 100, initial_indent=f"  {name:<{width}}  ", subsequent_indent=indent
    )


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [
        "usage: nnsql [--version] [--verbose] COMMAND [OPTIONS ...]",
        "",
        "Train a Keras model with N workers, compile it into your database with its scores proven",
        "equal to Keras's there, and serve it.",
        "",
        "commands:",
        *(
            textwrap.fill(
                command.summary,
                100,
                initial_indent=f"  {name:<{width}}  ",
                subsequent_indent=" " * (width + 4),
            )
            for name, command in COMMANDS.items()
        ),
        "",
        "options:",
        "  -h, --help     this help",
        "  --version      the installed version",
        "  --verbose      keep TensorFlow's start-up lines (any command; or NNSQL_VERBOSE=1)",
        "",
        NEXT_STEP,
    ]
    return "\n".join(lines)


def benchmarks() -> list[str]:
    """The benchmark modules of a source checkout (the wheel does not ship bench/)."""
    try:
        package = importlib.import_module("nnsql.bench")
    except ModuleNotFoundError:
        return []
    found = []
    for module in pkgutil.iter_modules(package.__path__):
        path = Path(package.__path__[0]) / (
            f"{module.name}/__main__.py" if module.ispkg else f"{module.name}.py"
        )
        if path.is_file() and "def main(" in path.read_text():  # a benchmark, not a helper module
            found.append(module.name)
    return sorted(found)


def bench(argv: list[str]) -> int:
    names = benchmarks()
    if not names:
        print(
            "error: the benchmarks run from a source checkout (git clone, then make bench)", file=sys.stderr
        )
        return 2
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: nnsql bench NAME [OPTIONS ...]\n\nbenchmarks: " + ", ".join(names))
        print("\nnnsql bench NAME --help lists a benchmark's options.")
        return 0
    if argv[0] not in names:
        print(f"error: no benchmark '{argv[0]}' (choose from {', '.join(names)})", file=sys.stderr)
        return 2
    module = importlib.import_module(f"nnsql.bench.{argv[0]}")
    if hasattr(module, "main"):
        return int(module.main(argv[1:]))
    return int(importlib.import_module(f"nnsql.bench.{argv[0]}.__main__").main(argv[1:]))


def main(argv: list[str] | None = None) -> int:
    """Dispatch `nnsql COMMAND ...` to the command's own main(argv); returns its exit status."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0
    if args[0] == "--version":
        print(f"nnsql {nnsql.__version__}")
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"error: no command '{name}' (one of {', '.join(COMMANDS)}; nnsql --help)", file=sys.stderr)
        return 2
    if name == "bench":
        return bench(rest)
    return run_command(name, rest)


def run() -> None:
    """The `nnsql` console script: TensorFlow kept quiet unless --verbose, then the command."""
    quiet.install()
    sys.exit(main())
