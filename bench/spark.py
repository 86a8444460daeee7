"""Benchmark: rows per second of the Spark target's pure Spark SQL, read from Parquet on local[2], beside
`pyspark.ml.functions.predict_batch_udf` + onnxruntime on the same rows and the same Spark, and DuckDB's
macros on the same Parquet file, in one run. The MNIST MLP (784 → 100 → 10, seeded weights) and
CERN's Inclusive Classifier (GRU over 801 × 19 particles, 80–120 real ones per event, as in
bench/recurrent_scoring.py) at growing row counts; each figure is the best of `--repeat` runs of
`SELECT sum(NAME.predict_proba(...)[0]) FROM parquet` (every row scored, nothing collected).

    nnsql bench spark [--mlp-rows 10000 100000 1000000] [--gru-rows 10000 100000] [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from nnsql import quiet
from nnsql.bench.recurrent_scoring import events
from nnsql.bench.scoring import best_seconds


def mlp_table(rows: int) -> pa.Table:
    features = np.random.default_rng(0).random((rows, 784), dtype=np.float32)
    return pa.table({"features": pa.FixedSizeListArray.from_arrays(pa.array(features.ravel()), 784)})


def gru_table(rows: int) -> pa.Table:
    particles, hlf = events(rows)
    steps = pa.FixedSizeListArray.from_arrays(pa.array(particles.ravel()), 19).cast(pa.list_(pa.float32()))
    offsets = pa.array(np.arange(0, rows * 801 + 1, 801, dtype=np.int32))
    return pa.table(
        {
            "gru_input": pa.ListArray.from_arrays(offsets, steps),
            "hlf_input": pa.FixedSizeListArray.from_arrays(pa.array(hlf.ravel()), 14),
        }
    )


def export(model, name: str, workdir: Path, spark, duckdb_file: Path) -> None:
    """The model exported to the Spark session's catalog and to a DuckDB file, each through its gate."""
    from nnsql.export.compile import prepare
    from nnsql.export.duckdb.generator import CAPABILITIES as DUCKDB
    from nnsql.export.duckdb.store import DuckDBStore
    from nnsql.export.publish.pipeline import ExportRequest, publish
    from nnsql.export.spark.generator import CAPABILITIES as SPARK
    from nnsql.export.spark.store import SparkStore
    from tests.models import save

    request = ExportRequest(
        model_path=save(model, workdir / name), name=name, sample_rows=12, parity_seconds=600, quiet=True
    )
    publish(SparkStore(spark, progress=False), request, prepare(request, SPARK), "spark")
    store = DuckDBStore(duckdb_file, progress=False)
    try:
        publish(store, request, prepare(request, DUCKDB), "duckdb")
    finally:
        store.close()


def onnx_udf(model, name: str, workdir: Path, shapes: list[list[int]]):
    """The Python-UDF route Spark users take today: `predict_batch_udf` around onnxruntime, the model
    converted by `nnsql export onnx`'s converter, each input flattened to one array per row."""
    from pyspark.ml.functions import predict_batch_udf
    from pyspark.sql.types import ArrayType, FloatType

    from nnsql.export.onnx.emit import convert

    path = workdir / f"{name}.onnx"
    zeros = [np.zeros((1, *shape), np.float32) for shape in shapes]
    model.predict(zeros if len(zeros) > 1 else zeros[0], verbose=0)  # Keras converts a model once called
    convert(model, path)
    names = [tensor.name for tensor in model.inputs]

    def make_predict_fn():
        import onnxruntime

        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        order = {spec.name: index for index, spec in enumerate(session.get_inputs())}
        inputs = sorted(names, key=lambda input_name: order.get(input_name, 0))
        by_name = dict(zip(names, range(len(names)), strict=True))

        def run(*arrays):
            feeds = {input_name: arrays[by_name[input_name]].astype(np.float32) for input_name in inputs}
            return session.run(None, feeds)[0]

        def one(x):  # predict_batch_udf counts the inputs from the signature
            return run(x)

        def two(x, y):
            return run(x, y)

        return one if len(names) == 1 else two

    return predict_batch_udf(
        make_predict_fn, return_type=ArrayType(FloatType()), batch_size=1024, input_tensor_shapes=[*shapes]
    )


def measure(spark, duckdb_file: Path, name: str, arguments: str, parquet: Path, repeat: int, udf) -> dict:
    import duckdb
    from pyspark.sql import functions

    query = f"SELECT sum({name}.predict_proba({arguments})[{{first}}]) FROM {{source}}"
    frame = spark.read.parquet(str(parquet))
    frame.createOrReplaceTempView("rows")
    spark_seconds = best_seconds(lambda: spark.sql(query.format(first=0, source="rows")).collect(), repeat)
    columns = [
        functions.flatten(column) if column == "gru_input" else functions.col(column)
        for column in frame.columns
    ]
    udf_seconds = best_seconds(lambda: frame.select(functions.sum(udf(*columns)[0])).collect(), repeat)
    con = duckdb.connect(str(duckdb_file), read_only=True)
    try:
        source = f"read_parquet('{parquet}')"
        flat = query.replace("gru_input,", "flatten(gru_input),")  # DuckDB's macros take flat lists
        duck_seconds = best_seconds(
            lambda: con.execute(flat.format(first=1, source=source)).fetchall(), repeat
        )
    finally:
        con.close()
    return {"spark": spark_seconds, "udf": udf_seconds, "duckdb": duck_seconds}


GRU_SHAPES = [[801, 19], [14]]
HEADER = (
    f"{'model':7} {'rows':>9} {'Spark SQL rows/s':>17} {'UDF+ORT rows/s':>15} {'DuckDB rows/s':>14} "
    f"{'SQL/UDF':>8}"
)


def line(name: str, rows: int, seconds: dict) -> str:
    rates = {route: rows / value for route, value in seconds.items()}
    ratio = rates["spark"] / rates["udf"]
    return (
        f"{name:7} {rows:>9,} {rates['spark']:>17,.0f} {rates['udf']:>15,.0f} {rates['duckdb']:>14,.0f} "
        f"{ratio:>7.2f}x"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nnsql bench spark", description=__doc__.splitlines()[0])
    parser.add_argument("--mlp-rows", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--gru-rows", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    from nnsql.export.spark import session
    from tests import models

    with tempfile.TemporaryDirectory(prefix="nnsql-bench-spark-") as tmp:
        workdir = Path(tmp)
        # the UDF's Python workers run this interpreter (onnxruntime, pyarrow), not the system's python3
        os.environ["PYSPARK_PYTHON"] = sys.executable
        spark = session.start(session.Where(workdir / "warehouse", "local[2]"))
        spark.sparkContext.setLogLevel("ERROR")
        duckdb_file = workdir / "models.duckdb"
        cases = [
            ("mnist", "features", models.cern_mlp(), mlp_table, args.mlp_rows, [[784]]),
            (
                "higgs",
                "gru_input, hlf_input",
                models.inclusive_classifier(),
                gru_table,
                args.gru_rows,
                GRU_SHAPES,
            ),
        ]
        print(HEADER)
        try:
            for name, arguments, model, table, sizes, shapes in cases:
                if not sizes:
                    continue
                export(model, name, workdir, spark, duckdb_file)
                udf = onnx_udf(model, name, workdir, shapes)
                for rows in sizes:
                    parquet = workdir / f"{name}-{rows}.parquet"
                    pq.write_table(table(rows), parquet)
                    seconds = measure(spark, duckdb_file, name, arguments, parquet, args.repeat, udf)
                    print(line(name, rows, seconds), flush=True)
        finally:
            session.stop(spark)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory of the Python process: {peak:,.0f} MB (Spark's JVM not included)")
    return 0


if __name__ == "__main__":
    quiet.install()
    sys.exit(main())
