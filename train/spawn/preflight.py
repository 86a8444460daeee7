"""Pre-flight check of a training script before any worker starts, from its syntax tree (not its text).

It never refuses a script that could run: the errors are a script that does not compile (or is not
there) and a ParameterServerStrategy under --strategy multi-worker (its workers would serve for ever;
without --strategy such a script runs with parameter servers). Warnings: the model seems to be built
before the strategy; nothing resumes after a restart (no BackupAndRestore callback, checkpoint manager or
backup directory); the model is saved on the chief only, which deadlocks MultiWorkerMirroredStrategy
(every worker must call save: TensorFlow's pattern, which `nnsql.train.spawn.output_path` implements);
`model.fit` under Keras 3; tf.data opening an `s3://` path (TensorFlow has no S3 file system any more).
Notes: which Keras runtime runs `model.fit`; a strategy of one machine (MirroredStrategy,
OneDeviceStrategy, the default strategy), or none that can be seen, with which the workers will not train
together. `--no-preflight` skips it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from . import runtime

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


def parameter_server_line(script: Path) -> int | None:
    """The line creating a ParameterServerStrategy, from the syntax tree (None: none, or unreadable)."""
    try:
        tree = ast.parse(script.read_text(), filename=str(script))
    except (OSError, SyntaxError, ValueError):
        return None
    return first_line(tree, {"ParameterServerStrategy"})


# tf.data and tf.io calls that open files through TensorFlow's own file systems
TF_READERS = {"TFRecordDataset", "TextLineDataset", "FixedLengthRecordDataset", "list_files", "glob", "GFile"}
S3_FIX = (
    "TensorFlow 2.21 has no S3 file system; read the records with `from nnsql.train.data import "
    'tfrecords` and `tfrecords("s3://bucket/prefix/*.tfrecord")`, which stages each worker\'s shard'
)


def s3_names(tree: ast.AST) -> set[str]:
    """Names assigned an s3:// string somewhere in the script."""
    return {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and is_s3(node.value, set())
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def is_s3(node: ast.AST, names: set[str]) -> bool:
    for part in ast.walk(node):
        if isinstance(part, ast.Constant) and isinstance(part.value, str) and part.value.startswith("s3://"):
            return True
        if isinstance(part, ast.Name) and part.id in names:
            return True
    return False


def check_s3(script: Path, tree: ast.AST, report: Report) -> None:
    names = s3_names(tree)
    for call in calls(tree, TF_READERS):
        if any(is_s3(arg, names) for arg in [*call.args, *(k.value for k in call.keywords)]):
            report.warnings.append(f"{script}:{call.lineno}: {called_name(call)} of an s3:// path: {S3_FIX}")
            return


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
    elif (line := first_line(tree, {"ParameterServerStrategy"})) is not None:
        report.errors.append(
            f"{script}:{line}: creates ParameterServerStrategy, whose worker tasks would wait in "
            "server.join() for ever under --strategy multi-worker: use --strategy parameter-server "
            "(or leave --strategy out)"
        )
    check_saving(script, tree, source, report)
    check_s3(script, tree, report)
    return report
