"""`make demo`: train (or reuse) the reference MLP, export it to DuckDB, score the test set in SQL.

Offline by design: MNIST when it can be loaded here, otherwise Fashion-MNIST (Debian's package).
Everything is written under build/demo/.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import nnsql.imagedata as data
from nnsql import quiet

BUILD = Path("build/demo")


def choose_dataset() -> tuple[str, str]:
    """(data set, model name) and the first line of output saying which and why."""
    try:
        data.load("mnist")
        print("Data set: MNIST")
        return "mnist", "mnist"
    except data.DataUnavailable:  # offline: the reason is no news, and its errno reads like a failure
        print(
            "Data set: Fashion-MNIST (MNIST is neither cached nor downloadable here; Debian ships this one)"
        )
        return "fashion-mnist", "fashion"


def train_or_reuse(dataset: str) -> Path:
    from nnsql.train import mnist

    out = BUILD / dataset
    metadata = out / "metadata.json"
    if metadata.exists() and json.loads(metadata.read_text()).get("dataset") == dataset:
        print(f"Reusing the trained model in {out} (delete it to retrain)")
        return out / "model.keras"
    print(f"Training input → Dense(100, sigmoid) → Dense(10, softmax) on {dataset} ...")
    if mnist.main(["--dataset", dataset, "--out", str(out), "--quiet"]) != 0:
        raise SystemExit(2)
    return out / "model.keras"


def export(model: Path, db: Path, name: str) -> None:
    from nnsql.export.duckdb.__main__ import main as export_duckdb

    print(f"Exporting to {db} as schema '{name}' (weights in tables, scoring as SQL macros) ...")
    args = ["--model", str(model), "--db", str(db), "--name", name, "--load-test-data", "--quiet"]
    if export_duckdb(args) != 0:
        raise SystemExit(2)


def score_in_sql(db: Path, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(labels, in-database classes, in-database probabilities, seconds for the SQL scoring)."""
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        started = time.perf_counter()
        scored = con.execute(f"SELECT id, {name}.score(features) FROM {name}.testdata ORDER BY id").fetchall()
        seconds = time.perf_counter() - started
        rows = con.execute(
            f"SELECT label, {name}.predict_proba(features) FROM {name}.testdata ORDER BY id"
        ).fetchall()
    labels = np.array([row[0] for row in rows])
    probabilities = np.array([row[1] for row in rows])
    classes = np.array([row[1] for row in scored])
    return labels, classes, probabilities, seconds


def save_confusion_matrix(labels: np.ndarray, predicted: np.ndarray, classes: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(classes)
    matrix = np.zeros((n, n), dtype=int)
    np.add.at(matrix, (labels, predicted), 1)
    figure, axes = plt.subplots(figsize=(7, 6))
    image = axes.imshow(matrix, cmap="Blues")
    axes.set_xticks(range(n), classes, rotation=45, ha="right")
    axes.set_yticks(range(n), classes)
    axes.set_xlabel("predicted in DuckDB SQL")
    axes.set_ylabel("true label")
    for i in range(n):
        for j in range(n):
            colour = "white" if matrix[i, j] > matrix.max() / 2 else "black"
            axes.text(j, i, matrix[i, j], ha="center", va="center", color=colour, fontsize=7)
    figure.colorbar(image)
    axes.set_title(f"Confusion matrix, {len(labels)} test images")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(
        prog="nnsql demo",
        description=__doc__.splitlines()[0],
        epilog="next step: your own model, nnsql export duckdb --model model.keras --db scores.duckdb "
        "--name mymodel (nnsql export --help)",
    ).parse_args(argv)
    dataset, name = choose_dataset()
    BUILD.mkdir(parents=True, exist_ok=True)
    model_path = train_or_reuse(dataset)
    db = BUILD / "models.duckdb"
    export(model_path, db, name)

    import keras

    labels, sql_classes, sql_proba, seconds = score_in_sql(db, name)
    loaded = data.load(dataset)
    tf_proba = keras.saving.load_model(model_path, compile=False).predict(loaded.x_test, verbose=0)
    classes = list(loaded.classes)
    figure = BUILD / "confusion_matrix.png"
    save_confusion_matrix(labels, sql_classes, classes, figure)

    rows = len(labels)
    print()
    print(f"{'metric':<34}{'value':>16}")
    print(f"{'-' * 50}")
    print(f"{'test images':<34}{rows:>16,}")
    print(f"{'TensorFlow accuracy':<34}{(tf_proba.argmax(1) == labels).mean():>16.4f}")
    print(f"{'in-database (DuckDB SQL) accuracy':<34}{(sql_classes == labels).mean():>16.4f}")
    print(f"{'parity: max |p_sql - p_tf|':<34}{np.abs(sql_proba - tf_proba).max():>16.2e}")
    print(f"{'parity: same class':<34}{(sql_classes == tf_proba.argmax(1)).mean():>16.2%}")
    print(f"{'SQL scoring rows/s':<34}{rows / seconds:>16,.0f}")
    print(f"{'SQL scoring ms/row':<34}{1000 * seconds / rows:>16.4f}")
    print()
    print(f"Confusion matrix: {figure}")
    print(f"Try it:  .venv/bin/python -c \"import duckdb; print(duckdb.connect('{db}').sql(")
    print(f"           'SELECT id, {name}.label(features), label FROM {name}.testdata LIMIT 5'))\"")
    print(
        "Next, your own model: .venv/bin/nnsql export duckdb --model model.keras --db mine.duckdb --name mine"
    )
    print("          (README.md's quick starts: training with N workers, PostgreSQL, ONNX behind HTTP)")
    return 0


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
