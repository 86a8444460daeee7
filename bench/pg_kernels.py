"""Benchmark: each way a role without superuser can compute the MNIST MLP's Dense products in PostgreSQL,
side by side in one session, as the server CPU time of a row (serial plan).

    cube_predict           the exported cube kernel: SELECT name.predict(features), one call per row
    cube_distances         only the cube distances that kernel computes for the first layer (100 units ×
                           8 points of 98 coordinates, and the row's term), in a PL/pgSQL function of the
                           same form: the floor of any kernel built on cube for this layer
    cube_distances_x_first the same with the input's point named first (the order before this release)
    sql_expression         one unit as one PL/pgSQL expression, features[i] * w_i summed: PostgreSQL's
                           own float8 arithmetic, scaled to the MLP's multiply-adds
    set_based              unnest(features) WITH ORDINALITY joined to a weights table, one GROUP BY per
                           unit, array_agg (the first layer), scaled to the MLP's multiply-adds
    plpgsql_predict        the exported plpgsql kernel (library.sql's loops)

The slow ones run on --slow-rows rows. Each figure is the best of --repeat runs, the contenders taking
turns; compare the ratios, which hold within one run, and read the load printed beside them. Writes
bench/results/pg_kernels.json.

    nnsql bench pg_kernels [--rows 2000] [--slow-rows 20] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from nnsql import quiet
from nnsql.bench.scoring import RESULTS, backend_cpu_seconds, bench_rows, conditions, reference_model

GOAL_MS_PER_ROW = 0.2
TABLE = "mnist_cube.testdata"


def point(values: np.ndarray) -> str:
    return "'(" + ", ".join(repr(float(value)) for value in values) + ")'::nnsql.cube"


def spans(inputs: int, chunk: int) -> list[tuple[int, int]]:
    return [(first + 1, min(first + chunk, inputs)) for first in range(0, inputs, chunk)]


def distances_function(name: str, kernel: np.ndarray, *, weights_first: bool) -> str:
    """A PL/pgSQL function computing only the first layer's cube distances, as the cube kernel lays out."""
    from nnsql.export.postgres.kernels import cube_kernel

    layout = cube_kernel(kernel)
    parts = spans(layout.inputs, layout.chunk)

    def distance(literal: str, c: int) -> str:
        pair = (literal, f"x[{c}]") if weights_first else (f"x[{c}]", literal)
        return f"nnsql.cube_distance({pair[0]}, {pair[1]})"

    shift = [distance(point(np.full(b - a + 1, -layout.shift)), c + 1) for c, (a, b) in enumerate(parts)]
    units = [
        " + ".join(distance(point(layout.vectors[j][a - 1 : b]), c + 1) for c, (a, b) in enumerate(parts))
        for j in range(layout.units)
    ]
    chunks = ", ".join(f"nnsql.cube(features[{a}:{b}])" for a, b in parts)
    return (
        f"CREATE FUNCTION bench_kernels.{name}(features float8[]) RETURNS float8[] LANGUAGE plpgsql "
        f"STABLE AS $fn$ DECLARE x nnsql.cube[]; row float8; BEGIN x := ARRAY[{chunks}]; "
        f"row := {' + '.join(shift)}; RETURN ARRAY[{', '.join(units)}]; END $fn$"
    )


def expression_function(kernel: np.ndarray) -> str:
    """One unit of the first layer as a single float8 expression over features[i]."""
    terms = " + ".join(f"features[{i + 1}] * {float(w)!r}::float8" for i, w in enumerate(kernel[:, 0]))
    return (
        "CREATE FUNCTION bench_kernels.one_unit(features float8[]) RETURNS float8 LANGUAGE plpgsql "
        f"STABLE AS $fn$ BEGIN RETURN {terms}; END $fn$"
    )


SET_BASED = """
CREATE FUNCTION bench_kernels.set_based(features float8[]) RETURNS float8[] LANGUAGE sql STABLE AS $fn$
    SELECT array_agg(t.s ORDER BY t.unit) FROM (
        SELECT w.unit, sum(x.e * w.value) AS s
          FROM unnest(features) WITH ORDINALITY AS x(e, i) JOIN bench_kernels.weights w ON w.input = x.i
         GROUP BY w.unit) AS t
$fn$"""


def create_contenders(con: Any, kernel: np.ndarray) -> None:
    con.execute("CREATE SCHEMA bench_kernels")
    con.execute(distances_function("distances", kernel, weights_first=True))
    con.execute(distances_function("distances_x_first", kernel, weights_first=False))
    con.execute(expression_function(kernel))
    con.execute("CREATE TABLE bench_kernels.weights (input integer, unit integer, value float8)")
    with con.cursor().copy("COPY bench_kernels.weights FROM STDIN") as copy:
        for (i, j), value in np.ndenumerate(kernel):
            copy.write_row((i + 1, j + 1, float(value)))
    con.execute("CREATE INDEX ON bench_kernels.weights (input)")
    con.execute("ANALYZE bench_kernels.weights")
    con.execute(SET_BASED)
    con.commit()


def queries(kernel: np.ndarray, rows: int, slow_rows: int) -> Iterator[tuple[str, str, int, float]]:
    """(contender, query, rows scored, factor from what the query computes to the whole MLP)."""
    inputs, units = kernel.shape
    macs = inputs * units + units * 10  # the MLP's multiply-adds: 784 × 100 + 100 × 10
    every, few = f"FROM {TABLE} WHERE id < {rows}", f"FROM {TABLE} WHERE id < {slow_rows}"
    yield "cube_predict", f"SELECT id, mnist_cube.predict(features) {every}", rows, 1.0
    yield "cube_distances", f"SELECT id, bench_kernels.distances(features) {every}", rows, 1.0
    yield "cube_distances_x_first", f"SELECT id, bench_kernels.distances_x_first(features) {every}", rows, 1.0
    yield "sql_expression", f"SELECT id, bench_kernels.one_unit(features) {every}", rows, macs / inputs
    yield (
        "set_based",
        f"SELECT id, bench_kernels.set_based(features) {few}",
        slow_rows,
        macs / (inputs * units),
    )
    yield "plpgsql_predict", f"SELECT id, mnist_plpgsql.predict(features) {few}", slow_rows, 1.0


def cpu_ms_per_row(con: Any, runs: list[tuple[str, str, int, float]], repeat: int) -> dict[str, float]:
    """Per contender, the best server CPU time a row of `repeat` runs, taken in turns (a shared machine's
    load then weighs on every contender alike); a first run parses each function."""
    best = {name: float("inf") for name, _, _, _ in runs}
    for round_ in range(repeat + 1):
        for name, query, rows, _ in runs:
            started = backend_cpu_seconds(con)
            con.execute(query).fetchall()
            if round_:
                best[name] = min(best[name], 1000 * (backend_cpu_seconds(con) - started) / rows)
    return best


def exported(dsn: str, model_path: Path, x: np.ndarray) -> None:
    """The MLP exported with the cube and plpgsql kernels by the role of `dsn`, and the rows loaded."""
    from nnsql.export.compile import prepare
    from nnsql.export.postgres.generator import CAPABILITIES
    from nnsql.export.postgres.store import PostgresStore
    from nnsql.export.publish.pipeline import ExportRequest, publish

    store = PostgresStore(dsn, progress=False)
    for kernel in ("cube", "plpgsql"):
        store.requested_kernel = kernel
        request = ExportRequest(
            model_path=model_path, name=f"mnist_{kernel}", sample_rows=5, parity_seconds=600
        )
        publish(store, request, prepare(request, CAPABILITIES), "postgres")
    store.load_test_data("mnist_cube", x, np.zeros(len(x), dtype=np.int64))
    store.con.commit()
    store.close()


def measure(server: Any, model_path: Path, x: np.ndarray, slow_rows: int, repeat: int) -> dict[str, Any]:
    import keras

    from nnsql.export.postgres.store import connect  # a session pinned to pg_catalog, as every one of ours

    with connect(server.dsn()) as admin:
        admin.execute("CREATE ROLE bench_owner LOGIN NOSUPERUSER")
        admin.execute("GRANT CREATE ON DATABASE postgres TO bench_owner")
        admin.commit()
    exported(server.dsn(user="bench_owner"), model_path, x)
    model = keras.saving.load_model(model_path, compile=False)
    kernel = next(layer.get_weights()[0] for layer in model.layers if layer.get_weights())  # the first Dense
    results = {}
    with connect(server.dsn(user="bench_owner")) as con:
        create_contenders(con, kernel)
        con.execute("SET max_parallel_workers_per_gather = 0")
        runs = list(queries(kernel, len(x), slow_rows))
        best = cpu_ms_per_row(con, runs, repeat)
        for name, _, rows, factor in runs:
            measured = best[name]
            results[name] = {
                "rows": rows,
                "measured_ms_per_row": measured,
                "mlp_ms_per_row": measured * factor,
            }
    floor = results["cube_distances"]  # one coordinate per weight, and the row's term: one per input
    floor["ns_per_coordinate"] = 1e6 * floor["mlp_ms_per_row"] / (kernel.size + kernel.shape[0])
    return results


def report(results: dict[str, Any], rows: int, slow_rows: int) -> list[str]:
    cube = results["cube_predict"]["mlp_ms_per_row"]
    lines = [
        conditions(),
        f"MNIST MLP 784 → 100 → 10 in PostgreSQL, role without superuser: server CPU a row, serial plan, "
        f"{rows:,} rows ({slow_rows} for the slow ones)",
        f"{'contender':<24}{'ms/row':>10}{'× cube_predict':>16}   goal ≤ {GOAL_MS_PER_ROW}",
    ]
    for name, figures in results.items():
        value = figures["mlp_ms_per_row"]
        scaled = "" if figures["mlp_ms_per_row"] == figures["measured_ms_per_row"] else " (scaled to the MLP)"
        verdict = "met" if value <= GOAL_MS_PER_ROW else "MISSED"
        lines.append(f"{name:<24}{value:>10.4f}{value / cube:>16.2f}   {verdict}{scaled}")
    floor = results["cube_distances"]
    lines.append(
        f"cube: {floor['ns_per_coordinate']:.2f} ns a coordinate (each call and the function around them "
        f"included); the first layer's distances alone take {floor['mlp_ms_per_row']:.4f} ms a row "
        f"({'within' if floor['mlp_ms_per_row'] <= GOAL_MS_PER_ROW else 'beyond'} the goal)"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    from tests.postgres_server import start_server

    parser = argparse.ArgumentParser(prog="nnsql bench pg_kernels", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--slow-rows", type=int, default=20, help="rows for set_based and plpgsql_predict")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    x, _ = bench_rows(args.rows)
    server = start_server()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            results = measure(server, reference_model(Path(scratch)), x, args.slow_rows, args.repeat)
    finally:
        server.stop()
    lines = report(results, args.rows, args.slow_rows)
    print("\n".join(lines))
    RESULTS.mkdir(exist_ok=True)
    document = {"conditions": lines[0], "rows": args.rows, "slow_rows": args.slow_rows, "results": results}
    (RESULTS / "pg_kernels.json").write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {RESULTS / 'pg_kernels.json'}")
    return 0


if __name__ == "__main__":
    quiet.install()
    sys.exit(main())
