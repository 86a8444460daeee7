"""Pre-flight check of a training script before any worker starts, from its syntax tree (not its text).

It never refuses a script that could run: the only error is a script that does not compile (or is not
there). Warnings: the model seems to be built before the strategy; nothing resumes after a restart (no
BackupAndRestore callback, checkpoint manager or backup directory); the model is saved on the chief only,
which deadlocks MultiWorkerMirroredStrategy (every worker must call save: TensorFlow's pattern, which
`nnsql.train.spawn.output_path` implements); `model.fit` under Keras 3. Notes: which Keras runtime runs
`model.fit`; a strategy of one machine (MirroredStrategy, OneDeviceStrategy, the default strategy), or
none that can be seen, with which the workers will not train together. `--no-preflight` skips it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from nnsql.train.spawn import runtime

STRATEGY_NAMES = {"MultiWorkerMirroredStrategy", "ParameterServerStrategy", "make_strategy"}
ONE_MACHINE = {
    "MirroredStrategy",
    "OneDeviceStrategy",
    "CentralStorageStrategy",
    "get_strategy",
    "TPUStrategy",
}
MODEL_BUILDERS = {"Sequential", "Model", "build_model", "compile"}
RESUMERS = {"BackupAndRestore", "CheckpointManager"}
CHIEF_HINTS = ("is_chief", "task_type", "task_id", "WORKER_NUMBER", "'index'", '"index"', "chief")
SAVERS = {"save", "save_weights"}
HELPER = "model.save(output_path('model.keras')) with `from nnsql.train.spawn import output_path`"


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
    if not calls(tree, {"ParameterServerStrategy", "make_strategy"}):
        report.warnings.append(
            f"{script}: --strategy parameter-server needs tf.distribute.ParameterServerStrategy, which "
            "the script does not seem to create"
        )
    if not calls(tree, {"Server"}):
        report.warnings.append(
            f"{script}: starts no tf.distribute.Server: its worker and ps tasks would run the training "
            "code instead of serving the chief"
        )


def check_strategy(script: Path, tree: ast.AST, source: str, report: Report) -> None:
    strategy = first_line(tree, STRATEGY_NAMES)
    if strategy is None:
        single = first_line(tree, ONE_MACHINE)
        kind = "a strategy of one machine" if single else "no multi-worker strategy that this check can see"
        report.notes.append(
            f"{script}{f':{single}' if single else ''}: {kind}: each worker will train on its own, not "
            "together; use tf.distribute.MultiWorkerMirroredStrategy to share the training, or -w 1"
        )
        return
    builder = first_line(tree, MODEL_BUILDERS)
    if builder is not None and builder < strategy and "scope" not in source:
        report.warnings.append(
            f"{script}:{builder}: the model seems to be built before the strategy (line {strategy}); "
            "TensorFlow needs the strategy first and the model built inside strategy.scope()"
        )


def chief_only(tree: ast.AST) -> list[int]:
    """Lines of save calls that sit under an `if` testing whether this worker is the chief."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and any(hint in ast.unparse(node.test) for hint in CHIEF_HINTS):
            lines += [call.lineno for child in node.body for call in calls(child, SAVERS)]
    return sorted(lines)


def check_saving(script: Path, tree: ast.AST, source: str, report: Report) -> None:
    saves = [call.lineno for call in calls(tree, SAVERS)]
    if not saves or not calls(tree, {"MultiWorkerMirroredStrategy"}):
        return
    guarded = chief_only(tree)
    if guarded:
        report.warnings.append(
            f"{script}:{guarded[0]}: saves on the chief only: under MultiWorkerMirroredStrategy every worker "
            f"must call save (the others to a temporary path) or the chief waits for ever; {HELPER}"
        )
    elif not any(hint in source for hint in CHIEF_HINTS):
        report.notes.append(
            f"{script}:{saves[0]}: every worker saves to the same path; TensorFlow's pattern gives the "
            f"non-chief workers a temporary path: {HELPER}"
        )


def check(script: Path, keras: str = runtime.DEFAULT, *, parameter_server: bool = False) -> Report:
    report = Report()
    tree = parse(script, report)
    if tree is None:
        return report
    source = script.read_text()
    check_strategy(script, tree, source, report)
    if not resumes(tree):
        report.warnings.append(
            f"{script}: no keras.callbacks.BackupAndRestore: after a failure the group restarts from scratch"
        )
    check_fit(script, tree, keras, report)
    if parameter_server:
        check_parameter_server(script, tree, report)
    check_saving(script, tree, source, report)
    return report
