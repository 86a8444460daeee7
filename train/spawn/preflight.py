"""Pre-flight check of a training script before any worker starts, from its syntax tree (not its text).

Errors: the script does not compile; it creates no distribution strategy; it builds a model before it
creates the strategy (variables would be created outside the strategy's scope). Warnings: nothing resumes
after a restart (no BackupAndRestore callback, checkpoint manager or backup directory); every worker saves
the model; `model.fit` under Keras 3. Notes: which Keras runtime will run `model.fit`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from train.spawn import runtime

STRATEGY_NAMES = {"MultiWorkerMirroredStrategy", "ParameterServerStrategy", "make_strategy"}
MODEL_BUILDERS = {"Sequential", "Model", "build_model", "compile"}
RESUMERS = {"BackupAndRestore", "CheckpointManager"}
CHIEF_HINTS = ("is_chief", "task_type", "task_id", "WORKER_NUMBER", "'index'", '"index"', "chief")


@dataclass
class Report:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def called_name(node: ast.Call) -> str:
    function = node.func
    if isinstance(function, ast.Attribute):
        return function.attr
    if isinstance(function, ast.Name):
        return function.id
    return ""


def calls(tree: ast.AST, names: set[str]) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and called_name(n) in names]


def first_line(tree: ast.AST, names: set[str]) -> int | None:
    lines = [call.lineno for call in calls(tree, names)]
    return min(lines) if lines else None


def resumes(tree: ast.AST) -> bool:
    """A BackupAndRestore callback or checkpoint manager is created, or a backup directory is passed on."""
    if calls(tree, RESUMERS):
        return True
    return any(
        keyword.arg == "backup_dir" for call in calls(tree, {"train_loop"}) for keyword in call.keywords
    )


def imports_keras_3(tree: ast.AST) -> bool:
    """`import keras` / `from keras import ...` is Keras 3 whatever TF_USE_LEGACY_KERAS says."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(alias.name.split(".")[0] == "keras" for alias in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "keras":
            return True
    return False


def parse(script: Path, report: Report) -> ast.AST | None:
    if not script.is_file():
        report.errors.append(f"{script}: no such file")
        return None
    try:
        tree = ast.parse(script.read_text(), filename=str(script))
        compile(tree, str(script), "exec")
    except SyntaxError as error:
        report.errors.append(f"{script}:{error.lineno}: does not compile: {error.msg}")
        return None
    return tree


def check_fit(script: Path, tree: ast.AST, keras: str, report: Report) -> None:
    fit = first_line(tree, {"fit"})
    if fit is None:
        return
    report.notes.append(f"{script}:{fit}: model.fit under the strategy runs on {runtime.describe(keras)}")
    if keras == "3":
        report.warnings.append(
            f"{script}:{fit}: Keras 3's model.fit fails under MultiWorkerMirroredStrategy "
            "(keras-team/keras#20585); run it with --keras 2"
        )
    elif imports_keras_3(tree):
        report.warnings.append(
            f"{script}: imports keras (Keras 3) directly, which TF_USE_LEGACY_KERAS does not switch; "
            "use `from tensorflow import keras` (or `import tf_keras as keras`) for model.fit"
        )


def check_parameter_server(script: Path, tree: ast.AST, report: Report) -> None:
    if not calls(tree, {"ParameterServerStrategy"}):
        report.errors.append(
            f"{script}: --strategy parameter-server needs tf.distribute.ParameterServerStrategy"
        )
    if not calls(tree, {"Server"}):
        report.warnings.append(
            f"{script}: starts no tf.distribute.Server: its worker and ps tasks would run the training "
            "code instead of serving the chief"
        )


def check(script: Path, keras: str = runtime.DEFAULT, *, parameter_server: bool = False) -> Report:
    report = Report()
    tree = parse(script, report)
    if tree is None:
        return report
    source = script.read_text()
    strategy = first_line(tree, STRATEGY_NAMES)
    builder = first_line(tree, MODEL_BUILDERS)
    if strategy is None:
        report.errors.append(f"{script}: creates no distribution strategy: the workers would train alone")
    elif builder is not None and builder < strategy and "scope" not in source:
        report.errors.append(
            f"{script}:{builder}: builds the model before the strategy (line {strategy}); "
            "create the strategy first and build inside strategy.scope()"
        )
    if not resumes(tree):
        report.warnings.append(
            f"{script}: no keras.callbacks.BackupAndRestore: after a failure the group restarts from scratch"
        )
    check_fit(script, tree, keras, report)
    if parameter_server:
        check_parameter_server(script, tree, report)
    saves = [call.lineno for call in calls(tree, {"save", "save_weights"})]
    if saves and not any(hint in source for hint in CHIEF_HINTS):
        report.warnings.append(
            f"{script}:{saves[0]}: every worker saves the model; save from the chief (worker 0) only"
        )
    return report
