"""Pre-flight check of a training script before any worker starts.

Errors: the script does not compile; it builds a model before it creates the strategy (variables would be
created outside the strategy's scope). Warnings: no BackupAndRestore (a restarted group would start over);
every worker saves the model (they would overwrite each other's files).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

STRATEGY_NAMES = {"MultiWorkerMirroredStrategy", "make_strategy"}
MODEL_BUILDERS = {"Sequential", "Model", "build_model", "compile"}
CHIEF_HINTS = ("is_chief", "task_type", "task_id", "WORKER_NUMBER", "'index'", '"index"', "chief")


@dataclass
class Report:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def called_name(node: ast.Call) -> str:
    function = node.func
    if isinstance(function, ast.Attribute):
        return function.attr
    if isinstance(function, ast.Name):
        return function.id
    return ""


def first_line(tree: ast.AST, names: set[str]) -> int | None:
    lines = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and called_name(n) in names]
    return min(lines) if lines else None


def check(script: Path) -> Report:
    report = Report()
    if not script.is_file():
        report.errors.append(f"{script}: no such file")
        return report
    source = script.read_text()
    try:
        tree = ast.parse(source, filename=str(script))
        compile(tree, str(script), "exec")
    except SyntaxError as error:
        report.errors.append(f"{script}:{error.lineno}: does not compile: {error.msg}")
        return report
    strategy = first_line(tree, STRATEGY_NAMES)
    builder = first_line(tree, MODEL_BUILDERS)
    if strategy is None:
        report.errors.append(
            f"{script}: creates no MultiWorkerMirroredStrategy: the workers would train alone"
        )
    elif builder is not None and builder < strategy and "scope" not in source:
        report.errors.append(
            f"{script}:{builder}: builds the model before the strategy (line {strategy}); "
            "create the strategy first and build inside strategy.scope()"
        )
    if "BackupAndRestore" not in source:
        report.warnings.append(
            f"{script}: no keras.callbacks.BackupAndRestore: after a failure the group restarts from scratch"
        )
    saves = [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and called_name(n) in {"save", "save_weights"}
    ]
    if saves and not any(hint in source for hint in CHIEF_HINTS):
        report.warnings.append(
            f"{script}:{saves[0]}: every worker saves the model; save from the chief (worker 0) only"
        )
    return report
