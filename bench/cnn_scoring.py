"""Benchmark: TF-Spawner's CNN (two Conv2D + MaxPool2D, Dense(100), Dense(10)) scored in the databases,
as ms per image and as a ratio to Keras `predict` on the same images in the same run.

    Keras predict (baseline, batches of 256)
    DuckDB SQL macros (Gather + PatchDense + GroupMax as list lambdas)
    PostgreSQL PL/pgSQL (nnsql.gather / patch_dense / group_max), no extension
    PostgreSQL PL/Python + numpy (when plpython3u is installed)
Images are Fashion-MNIST test images when Debian's package is installed, else uniform random rows; the
network's weights are seeded (speed does not depend on their values). Writes bench/results/cnn_scoring.json.

    nnsql bench cnn_scoring [--rows 500] [--pg-rows 40]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from nnsql import quiet
from nnsql.bench.pg_paths import time_postgres_paths
from nnsql.bench.scoring import RESULTS, bench_rows, best_seconds


def duckdb_seconds(model_path: Path, images: np.ndarray, workdir: Path) -> float:
    from nnsql.export.compile import prepare
    from nnsql.export.duckdb.generator import CAPABILITIES
    from nnsql.export.duckdb.store import DuckDBStore, feature_table
    from nnsql.export.publish.pipeline import ExportRequest, publish

    request = ExportRequest(model_path=model_path, name="cnn", sample_rows=20)
    store = DuckDBStore(workdir / "bench.duckdb", progress=False)
    publish(store, request, prepare(request, CAPABILITIES), "duckdb")
    with store.registered(feature_table({"image": images})) as rows:
        store.con.execute(f"CREATE TABLE images AS SELECT _nn_row AS id, image FROM {rows}")
    return best_seconds(lambda: store.con.execute("SELECT id, cnn.score(image) FROM images").fetchall(), 2)


def postgres_seconds(model_path: Path, images: np.ndarray) -> dict[str, float]:
    from nnsql.export.postgres.store import PostgresStore
    from tests.postgres_server import start_server

    server = start_server()
    try:
        store = PostgresStore(server.dsn(), progress=False)

        def load(name: str) -> None:
            store.load_test_data(name, images.reshape(len(images), -1), np.zeros(len(images), dtype=np.int64))
            store.con.commit()

        seconds = time_postgres_paths(
            store,
            model_path,
            "cnn",
            lambda name: f"SELECT id, {name}.score(features) FROM {name}.testdata",
            load,
        )
        store.close()
        return seconds
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nnsql bench cnn_scoring", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=500, help="images for Keras and DuckDB")
    parser.add_argument("--pg-rows", type=int, default=40, help="images for PostgreSQL (0: skip it)")
    args = parser.parse_args(argv)
    from tests.models import save, tf_spawner_cnn

    flat, source = bench_rows(args.rows)
    images = flat.reshape(-1, 28, 28, 1).astype(np.float32)
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        model = tf_spawner_cnn()
        model_path = save(model, workdir / "cnn")
        keras_ms = (
            1000 * best_seconds(lambda: model.predict(images, batch_size=256, verbose=0), 3) / args.rows
        )
        per_image = {
            "keras_predict": keras_ms,
            "duckdb_sql": 1000 * duckdb_seconds(model_path, images, workdir) / args.rows,
        }
        if args.pg_rows:
            for label, seconds in postgres_seconds(model_path, images[: args.pg_rows]).items():
                per_image[label] = 1000 * seconds / args.pg_rows
    print(f"TF-Spawner CNN on {args.rows:,} {source} (PostgreSQL: {args.pg_rows})")
    print(f"{'contender':<20}{'ms/image':>10}{'× Keras predict':>18}")
    for label, ms in per_image.items():
        print(f"{label:<20}{ms:>10.3f}{ms / keras_ms:>18.1f}")
    RESULTS.mkdir(exist_ok=True)
    document = {"rows": args.rows, "postgres_rows": args.pg_rows, "source": source, "ms_per_image": per_image}
    (RESULTS / "cnn_scoring.json").write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {RESULTS / 'cnn_scoring.json'}")
    return 0


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
