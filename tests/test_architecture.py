"""What the import-linter contracts (pyproject.toml, `lint-imports`) cannot say, checked on the source:
converter modules register without import cycles among module-level imports, every import of the project
goes through `nnsql.` (or is relative inside its folder), and the design folders' package __init__ files
have no side effects. The layering itself (export/ imports neither train/ nor serve/, the back ends know
nothing about Keras, the front end and the IR nothing about SQL targets) is written as contracts."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("export", "train", "serve", "bench", "demo", "imagedata")


def imported_modules(path: Path, deferred: bool = True) -> set[str]:
    """The modules a file imports, relative imports spelled in full (`from ..ir import graph` in
    export/codegen/x.py is nnsql.export.ir and nnsql.export.ir.graph)."""
    tree = ast.parse(path.read_text())
    nodes = ast.walk(tree) if deferred else iter(tree.body)  # deferred imports inside functions count too
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def python_files(*places: str) -> list[Path]:
    files: list[Path] = []
    for place in places:
        path = ROOT / place
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


def offenders(files: list[Path], forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in files
        for module in sorted(imported_modules(path))
        if any(module == name or module.startswith(f"{name}.") for name in forbidden)
    ]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts if parts[0] == "nnsql" else ("nnsql", *parts)).removesuffix(".__init__")


def import_cycles(files: list[Path]) -> list[list[str]]:
    """Cycles among the module-level imports of these files (a deferred import breaks none)."""
    graph = {module_name(path): imported_modules(path, deferred=False) for path in files}
    cycles, done = [], set()

    def visit(module: str, stack: list[str]) -> None:
        if module in stack:
            cycles.append([*stack[stack.index(module) :], module])
            return
        if module in done or module not in graph:
            return
        for imported in sorted(graph[module]):
            visit(imported, [*stack, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    return cycles


def test_converters_register_without_import_cycles():
    """frontend/layers.py imports every converter module; none of them imports it, or the module walking
    the graph, back: the front end (and all of export/) imports in one direction."""
    assert import_cycles(python_files("export")) == []
    layers = imported_modules(ROOT / "export/frontend/layers.py")
    families = {
        module_name(path)
        for path in python_files("export/frontend")
        if "@converts(" in path.read_text() and path.stem != "base"
    }
    assert families <= layers, (
        f"converter modules missing from export/frontend/layers.py: {families - layers}"
    )


def is_program(path: Path) -> bool:
    """A `__main__.py`, the `__init__.py` that `python -m` runs on the way to one, or a script run by its
    path (`python train/mnist.py`)."""
    scripted = any(
        isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'"
        for node in ast.parse(path.read_text()).body
    )
    if path.name == "__main__.py" or scripted:
        return True
    return path.name == "__init__.py" and any(path.parent.rglob("__main__.py"))


def relative_imports(files: list[Path]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in files
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.level
    ]


def test_every_project_import_is_namespaced():
    """A user's own train.py, export/ or serve.py in the working directory cannot shadow the project: an
    import names nnsql, or is relative inside its own folder. A program keeps absolute imports, so that
    `python -m export.oracle` and `python train/mnist.py` load everything under the one name nnsql."""
    files = python_files(*PACKAGES, "nnsql", "tests")
    programs = [path for path in files if path.is_relative_to(ROOT / "tests") or is_program(path)]
    assert offenders(files, PACKAGES) == [] and relative_imports(programs) == []


def effects(init: Path) -> list[str]:
    """Statements of a package __init__ besides a docstring, imports, `__all__` and function definitions."""
    found = []
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.Import | ast.ImportFrom | ast.FunctionDef):
            continue
        if (
            ast.unparse(node) == "entry_only(__name__)"
        ):  # the short name runs programs only (nnsql/short_names.py)
            continue
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"]:
            continue
        found.append(f"{init.relative_to(ROOT)}:{node.lineno}")
    return found


def test_package_init_files_have_no_side_effects():
    """A package __init__ defines nothing that a second import of its file would define twice; the design
    folders' own may hand a short-name run to the nnsql program (nnsql/short_names.py)."""
    inits = [
        p
        for folder in ("export", "train", "serve", "bench", "demo")
        for p in (ROOT / folder).rglob("__init__.py")
    ]
    assert inits and [line for init in inits for line in effects(init)] == []


def test_the_checks_can_fail(tmp_path, monkeypatch):
    """The checks themselves can fail: a bare import, an import cycle (spelled absolute or relative), a
    relative import in a program and an __init__ with an effect."""
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    (tmp_path / "bad.py").write_text("def f():\n    from train import mnist\n")
    assert offenders([tmp_path / "bad.py"], ("train",)) == [
        "bad.py imports train",
        "bad.py imports train.mnist",
    ]
    (tmp_path / "a.py").write_text("import nnsql.b\n")
    (tmp_path / "b.py").write_text("from nnsql import a\n")
    assert import_cycles([tmp_path / "a.py", tmp_path / "b.py"]) == [["nnsql.a", "nnsql.b", "nnsql.a"]]
    (tmp_path / "c.py").write_text("from .d import f\n")
    (tmp_path / "d.py").write_text("from . import c\n\nif __name__ == '__main__':\n    pass\n")
    assert import_cycles([tmp_path / "c.py", tmp_path / "d.py"]) == [["nnsql.c", "nnsql.d", "nnsql.c"]]
    programs = [path for path in (tmp_path / "c.py", tmp_path / "d.py") if is_program(path)]
    assert relative_imports(programs) == ["d.py:1"]
    (tmp_path / "__init__.py").write_text('"""Doc."""\nimport os\n\nos.environ["X"] = "1"\n')
    assert effects(tmp_path / "__init__.py") == ["__init__.py:4"]


def printing(files: list[Path]) -> list[str]:
    """`print(...)` calls outside programs: where a module writes to the terminal itself."""
    return [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in files
        if not is_program(path)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
    ]


def test_database_back_ends_print_nothing():
    """A database back end returns what the user should read (a note, the kernel it chose) and its
    command prints it: a back end used from Python (a notebook, the Python API) writes nothing of its own."""
    back_ends = python_files("export/duckdb", "export/postgres", "export/oracle", "export/spark")
    assert back_ends and printing(back_ends) == []


def test_the_print_check_can_fail(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    (tmp_path / "store.py").write_text("import sys\n\n\ndef f():\n    print('note', file=sys.stderr)\n")
    (tmp_path / "__main__.py").write_text("print('kernel: cube')\n")
    assert printing([tmp_path / "store.py", tmp_path / "__main__.py"]) == ["store.py:5"]
