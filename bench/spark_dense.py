"""Benchmark: formulations of a Dense layer in pure Spark SQL, side by side in one run on local[2].

The MNIST MLP (784 → 100 relu → 10 softmax, seeded weights) scores `--rows` random rows read from
Parquet, `SELECT sum(p[0])` over every row, nothing collected. Each form is planned once (the figure
includes parsing, analysis, optimisation and code generation) and run `--repeat` times; the best run's
CPU seconds (user + sys of Spark's JVM and the Python workers it starts) give rows per CPU second, so
the load of a shared machine weighs less than on wall time. Every form's sum is checked against numpy.

    python -m nnsql.bench.spark_dense [--rows 20000] [--repeat 2] [--forms generator zip index ...]

Forms:
  generator  what nnsql's Spark generator emits today for the two Dense layers (export/spark)
  zip        zip_with + aggregate per unit: two lambda calls per weight and row, an array per unit
  index      aggregate over the input's indices reading both arrays: one lambda call per weight
  bound      `index` with each unit's weights bound once per unit
  unroll8    `index` with eight weights per lambda call
  flat       one flat kernel array, indexed by unit and input
  inline     the kernel written into plain arithmetic (x[i] * w + ...), no lambda (`--inline-units`
             hidden units only: the whole layer does not plan in minutes)
  explode    posexplode + broadcast hash join + hash aggregate over a kernel table (first layer only)
  udf        predict_batch_udf + onnxruntime, the Python-UDF route, for the ratio

Runs with any PySpark 4.x (a separate virtualenv answers what a newer Spark changes).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

IN, HIDDEN, OUT = 784, 100, 10


def weights() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    w1, b1 = rng.normal(0, 0.05, (IN, HIDDEN)), rng.normal(0, 0.1, HIDDEN)
    w2, b2 = rng.normal(0, 0.3, (HIDDEN, OUT)), rng.normal(0, 0.1, OUT)
    return w1, b1, w2, b2


def features(rows: int) -> np.ndarray:
    return np.random.default_rng(1).random((rows, IN), dtype=np.float32)


def expected(rows: int, first_layer_only: bool = False) -> float:
    """numpy's sum of the first probability (or, for a first layer alone, of every hidden unit)."""
    w1, b1, w2, b2 = weights()
    hidden = np.maximum(features(rows).astype(np.float64) @ w1 + b1, 0)
    if first_layer_only:
        return float(hidden.sum())
    z = hidden @ w2 + b2
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return float((p[:, 0] / p.sum(axis=1)).sum())


# -- the forms, each an expression of `x` (ARRAY<DOUBLE>) ---------------------------------------------
def let(expression: str, variable: str, body: str) -> str:
    return f"transform(array({expression}), {variable} -> {body})[0]"


def json_array(values: np.ndarray, element: str) -> str:
    import json

    return f"from_json('{json.dumps(values.tolist())}', 'array<{element}>')"


def unit_structs(w: np.ndarray, b: np.ndarray) -> str:
    import json

    text = json.dumps([{"w": row.tolist(), "b": float(c)} for row, c in zip(w.T, b, strict=True)])
    return f"from_json('{text}', 'array<struct<w:array<double>,b:double>>')"


def softmax(z: str) -> str:
    exps = let("array_max(_v)", "_m", "transform(_v, _e -> exp(_e - _m))")
    total = "aggregate(_x, 0D, (_a, _e) -> _a + _e)"
    return let(z, "_v", let(exps, "_x", let(total, "_s", "transform(_x, _e -> _e / _s)")))


def mlp(layer: Callable[[str, np.ndarray, np.ndarray, bool], str]) -> str:
    w1, b1, w2, b2 = weights()
    hidden = layer("x", w1, b1, True)
    return let(hidden, "_h", softmax(layer("_h", w2, b2, False)))


def zip_layer(x: str, w: np.ndarray, b: np.ndarray, relu: bool) -> str:
    z = f"aggregate(zip_with(_u.w, {x}, (_w, _x) -> _w * _x), _u.b, (_a, _e) -> _a + _e)"
    return f"transform({unit_structs(w, b)}, _u -> {f'greatest({z}, 0D)' if relu else z})"


def index_layer(x: str, w: np.ndarray, b: np.ndarray, relu: bool, per_call: int = 1) -> str:
    n = w.shape[0]
    if n % per_call:
        per_call = 1
    terms = " + ".join(f"_u.w[_i + {k}] * {x}[_i + {k}]" for k in range(per_call))
    indices = f"sequence(0, {n - per_call}, {per_call})" if per_call > 1 else f"sequence(0, {n - 1})"
    z = f"aggregate({indices}, _u.b, (_a, _i) -> _a + {terms})"
    return f"transform({unit_structs(w, b)}, _u -> {f'greatest({z}, 0D)' if relu else z})"


def bound_layer(x: str, w: np.ndarray, b: np.ndarray, relu: bool) -> str:
    """`index` with each unit's weights bound once, not read from the struct at every weight."""
    n = w.shape[0]
    z = let("_u.w", "_w", f"aggregate(sequence(0, {n - 1}), _u.b, (_a, _i) -> _a + _w[_i] * {x}[_i])")
    return f"transform({unit_structs(w, b)}, _u -> {f'greatest({z}, 0D)' if relu else z})"


def unroll8_layer(x: str, w: np.ndarray, b: np.ndarray, relu: bool) -> str:
    return index_layer(x, w, b, relu, per_call=8)


def flat_layer(x: str, w: np.ndarray, b: np.ndarray, relu: bool) -> str:
    n, units = w.shape
    kernel = let(json_array(w.T.ravel(), "double"), "_k", "_k")
    start = f"{json_array(b, 'double')}[_j]"
    z = f"aggregate(sequence(0, {n - 1}), {start}, (_a, _i) -> _a + _k[_j * {n} + _i] * {x}[_i])"
    body = f"transform(sequence(0, {units - 1}), _j -> {f'greatest({z}, 0D)' if relu else z})"
    return let(kernel, "_k", body)


def balanced_sum(terms: list[str]) -> str:
    while len(terms) > 1:
        pairs = [terms[i : i + 2] for i in range(0, len(terms), 2)]
        terms = [f"({pair[0]} + {pair[1]})" if len(pair) == 2 else pair[0] for pair in pairs]
    return terms[0]


def inline_first_layer(units: int) -> str:
    """The first `units` hidden units as plain arithmetic over literals, as an array."""
    w1, b1, _, _ = weights()
    sums = [
        balanced_sum([f"x[{i}] * {float(w1[i, j])!r}D" for i in range(IN)] + [f"{float(b1[j])!r}D"])
        for j in range(units)
    ]
    return "array(" + ", ".join(f"greatest({s}, 0D)" for s in sums) + ")"


def generator_form() -> str:
    """The two Dense layers as nnsql's Spark generator writes them (checks and function wrapper aside)."""
    from nnsql.export.ir import graph as ir
    from nnsql.export.spark.generator import SparkGenerator

    w1, b1, w2, b2 = weights()
    dense = (
        ir.Dense(name="h", inputs=("x",), kernel=ir.Weights(w1), bias=ir.Weights(b1), activation="relu"),
        ir.Dense(name="p", inputs=("h",), kernel=ir.Weights(w2), bias=ir.Weights(b2), activation="softmax"),
    )
    graph = ir.Graph((ir.TensorSpec("x", (IN,)),), dense, "p", tuple("0123456789"))
    generator = SparkGenerator(graph, "bench", 1)
    return generator.chain(graph, {"x": "x"}, lambda refs: refs["p"])


def explode_query() -> str:
    """The first layer as a join: each row's features exploded, joined to the kernel table (broadcast),
    summed per row and unit by a hash aggregate; all three operators have code generation."""
    return (
        "SELECT sum(h) FROM (SELECT /*+ BROADCAST(k) */ greatest(sum(e.x * k.w) + first(k.b), 0D) AS h "
        "FROM (SELECT id, posexplode(CAST(features AS ARRAY<DOUBLE>)) AS (i, x) FROM numbered) e "
        "JOIN kernel k ON e.i = k.i GROUP BY e.id, k.u)"
    )


def kernel_table(spark) -> None:
    w1, b1, _, _ = weights()
    i, u = np.meshgrid(np.arange(IN), np.arange(HIDDEN), indexing="ij")
    table = {"i": i.ravel(), "u": u.ravel(), "w": w1.ravel(), "b": b1[u.ravel()]}
    spark.createDataFrame(pa.table(table).to_pandas()).cache().createOrReplaceTempView("kernel")
    spark.sql("SELECT monotonically_increasing_id() AS id, features FROM rows").createOrReplaceTempView(
        "numbered"
    )


def onnx_udf(workdir: Path):
    """predict_batch_udf around onnxruntime on the same MLP (float32, as Spark users run it)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from pyspark.ml.functions import predict_batch_udf
    from pyspark.sql.types import ArrayType, FloatType

    w1, b1, w2, b2 = (
        numpy_helper.from_array(a.astype(np.float32), n) for a, n in zip(weights(), "ABCD", strict=True)
    )
    nodes = [
        helper.make_node("MatMul", ["x", "A"], ["m1"]),
        helper.make_node("Add", ["m1", "B"], ["a1"]),
        helper.make_node("Relu", ["a1"], ["h"]),
        helper.make_node("MatMul", ["h", "C"], ["m2"]),
        helper.make_node("Add", ["m2", "D"], ["z"]),
        helper.make_node("Softmax", ["z"], ["p"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, IN])],
        [helper.make_tensor_value_info("p", TensorProto.FLOAT, [None, OUT])],
        [w1, b1, w2, b2],
    )
    path = workdir / "mlp.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))

    def make_predict_fn():
        import onnxruntime

        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return lambda x: session.run(None, {"x": x.astype(np.float32)})[0]

    return predict_batch_udf(
        make_predict_fn, return_type=ArrayType(FloatType()), batch_size=1024, input_tensor_shapes=[[IN]]
    )


# -- measuring -------------------------------------------------------------------------------------------
class Clock:
    """CPU seconds (user + sys) of Spark's JVM, its reaped children and its living descendants (the
    Python workers), read from /proc (Linux)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.tick = os.sysconf("SC_CLK_TCK")

    @staticmethod
    def stat(pid: int) -> list[str]:
        text = Path(f"/proc/{pid}/stat").read_text()
        return text[text.rindex(")") + 2 :].split()  # the fields after the command name, from state on

    def descendants(self) -> list[int]:
        parents: dict[int, int] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    parents[int(entry.name)] = int(self.stat(int(entry.name))[1])
                except (OSError, ValueError, IndexError):
                    continue
        found, frontier = [], [self.pid]
        while frontier:
            children = [pid for pid, parent in parents.items() if parent in frontier]
            found += children
            frontier = children
        return found

    def cpu(self) -> float:
        fields = self.stat(self.pid)
        ticks = sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
        for pid in self.descendants():
            try:
                ticks += sum(int(value) for value in self.stat(pid)[11:13])
            except (OSError, ValueError, IndexError):
                continue
        return ticks / self.tick

    def measure(self, run: Callable[[], Any]) -> tuple[float, float, Any]:
        wall, cpu = time.perf_counter(), self.cpu()
        result = run()
        return time.perf_counter() - wall, self.cpu() - cpu, result


def spark_session(settings: list[str]):
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
    builder = builder.config("spark.driver.memory", "4g")
    for setting in settings:
        key, value = setting.split("=", 1)
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def stop(spark) -> None:
    from pyspark import SparkContext

    process = SparkContext._gateway.proc if SparkContext._gateway else None
    spark.stop()
    if process is not None:
        process.terminate()
        process.wait(timeout=60)


def query_of(form: str, inline_units: int) -> tuple[str, bool]:
    """(SQL, whether it computes the first layer alone)."""
    forms = {
        "zip": zip_layer,
        "index": index_layer,
        "bound": bound_layer,
        "unroll8": unroll8_layer,
        "flat": flat_layer,
    }
    source = "(SELECT CAST(features AS ARRAY<DOUBLE>) AS x FROM rows)"
    if form == "explode":
        return explode_query(), True
    if form == "inline":
        total = " + ".join(f"_y[{k}]" for k in range(inline_units))
        return (
            f"SELECT sum({total}) FROM (SELECT {inline_first_layer(inline_units)} AS _y FROM {source})",
            True,
        )
    body = generator_form() if form == "generator" else mlp(forms[form])
    return f"SELECT sum(({body})[0]) FROM {source}", False


def run_form(spark, clock: Clock, form: str, args, udf) -> str:
    from pyspark.sql import functions

    if form == "udf":
        planned = (0.0, 0.0, None)
        first_layer = False

        def fresh():  # a new plan each run: a plan run again reuses its shuffle and skips the scoring
            return spark.table("rows").select(functions.sum(udf("features")[0]))
    else:
        sql, first_layer = query_of(form, args.inline_units)
        planned = clock.measure(lambda: plan(spark, sql))

        def fresh():
            return plan(spark, sql)

    runs = []
    for _ in range(args.repeat):
        frame = fresh()
        runs.append(clock.measure(lambda: frame.collect()[0][0]))  # noqa: B023 (called at once)
    wall, cpu, value = min(runs, key=lambda run: run[1])
    want = expected(args.rows, first_layer)
    if form == "inline":
        want = expected_inline(args.rows, args.inline_units)
    error = abs(float(value) - want) / abs(want)
    scale = HIDDEN / args.inline_units if form == "inline" else 1
    per_cpu = args.rows / cpu / scale
    layer = " (1st layer)" if first_layer else ""
    return (
        f"{form + layer:22} {planned[0]:>8.1f} {planned[1]:>8.1f} {wall:>8.1f} {cpu:>8.1f} "
        f"{args.rows / wall / scale:>10,.0f} {per_cpu:>10,.0f} {error:>8.0e}"
    )


def expected_inline(rows: int, units: int) -> float:
    w1, b1, _, _ = weights()
    return float(np.maximum(features(rows).astype(np.float64) @ w1[:, :units] + b1[:units], 0).sum())


def plan(spark, sql: str):
    frame = spark.sql(sql)
    frame._jdf.queryExecution().executedPlan()  # analysis, optimisation, physical planning
    return frame


HEADER = (
    f"{'form':22} {'plan s':>8} {'plan cpu':>8} {'run s':>8} {'run cpu':>8} {'rows/s':>10} "
    f"{'rows/cpu-s':>10} {'rel.err':>8}"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench spark_dense", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--forms", nargs="*", default=["generator", "zip", "index", "unroll8", "udf"])
    parser.add_argument("--inline-units", type=int, default=5)
    parser.add_argument("--conf", nargs="*", default=[], help="Spark settings KEY=VALUE")
    args = parser.parse_args(argv)
    from pyspark import SparkContext, __version__

    os.environ["PYSPARK_PYTHON"] = sys.executable
    with tempfile.TemporaryDirectory(prefix="nnsql-bench-spark-dense-") as tmp:
        parquet = Path(tmp) / "rows.parquet"
        flat = pa.array(features(args.rows).ravel())
        pq.write_table(pa.table({"features": pa.FixedSizeListArray.from_arrays(flat, IN)}), parquet)
        spark = spark_session(args.conf)
        try:
            clock = Clock(SparkContext._gateway.proc.pid)  # type: ignore[union-attr]
            spark.read.parquet(str(parquet)).createOrReplaceTempView("rows")
            spark.table("rows").cache().count()
            if "explode" in args.forms:
                kernel_table(spark)
            udf = onnx_udf(Path(tmp)) if "udf" in args.forms else None
            load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
            print(f"Spark {__version__}, local[2], {args.rows:,} rows, load {load} {args.conf}")
            print(HEADER, flush=True)
            for form in args.forms:
                print(run_form(spark, clock, form, args, udf), flush=True)
        finally:
            stop(spark)
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"load at the end {load}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
