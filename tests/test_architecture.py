"""The layering the README promises, checked on the source: export/ does not import train/, the back ends
know nothing about Keras, the front end and the lowering know nothing about SQL targets, and the serve
blueprints do not import the app factory."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BACK_ENDS = ["export/duckdb", "export/postgres", "export/oracle", "export/lowering.py", "export/ir.py"]
BACK_ENDS += ["export/kinds.py", "export/codegen.py"]
FRONT_END = ["export/keras_frontend.py", "export/frontend_recurrent.py", "export/frontend_convolution.py"]
FRONT_END += ["export/frontend_normalization.py", "export/lowering.py", "export/passes.py"]
FRONT_END += ["export/frontend_outputs.py", "export/kinds.py"]
FRONT_END_FILES = [Path(p) for p in FRONT_END if "frontend" in p]


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):  # deferred imports inside functions count too
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
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


@pytest.mark.parametrize(
    ("places", "forbidden"),
    [
        (["export"], ("train",)),
        (
            BACK_ENDS,
            ("keras", "tf_keras", "tensorflow", "tf2onnx", *(f"export.{p.stem}" for p in FRONT_END_FILES)),
        ),
        (
            FRONT_END,
            ("export.duckdb", "export.postgres", "export.oracle", "export.onnx", "duckdb", "psycopg"),
        ),
        # Flask's tutorial: blueprints use helper modules, never the app factory that registers them
        (["serve/v2.py", "serve/tfserving.py", "serve/web.py", "serve/handling.py"], ("serve.app",)),
    ],
    ids=[
        "export-without-train",
        "back-ends-without-keras",
        "front-end-without-sql",
        "blueprints-without-app",
    ],
)
def test_layers_do_not_import_what_they_must_not_know(places, forbidden):
    assert offenders(python_files(*places), forbidden) == []


def test_the_check_finds_an_offending_import(tmp_path, monkeypatch):
    """The check itself can fail: a file importing train is reported."""
    (tmp_path / "bad.py").write_text("def f():\n    from train import mnist\n")
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert offenders([tmp_path / "bad.py"], ("train",)) == ["bad.py imports train"]
