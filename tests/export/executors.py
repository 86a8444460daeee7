"""One executor per database target: export a model, score rows in the database, read the registry.

The grid tests in test_targets.py run every case against every executor.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import psycopg

from nnsql.export.duckdb.__main__ import main as export_duckdb
from nnsql.export.onnx.__main__ import main as export_onnx
from nnsql.export.onnx.runtime import numpy_type
from nnsql.export.oracle.__main__ import main as export_oracle
from nnsql.export.postgres.__main__ import main as export_postgres
from nnsql.export.publish.pipeline import joined
from tests.export.plsql_interpreter import load_scripts

# Fewer parity rows than the product's default of 1,000 keep the suite fast; the check is the same.
TEST_SAMPLE_ROWS = ["--sample-rows", "100"]


class DuckDBExecutor:
    target = "duckdb"
    error = duckdb.Error

    def __init__(self, tmp_path: Path) -> None:
        self.db = tmp_path / "models.duckdb"

    def export(self, model: Path, name: str = "mnist", *extra: str) -> int:
        return export_duckdb(
            [
                "--model",
                str(model),
                "--db",
                str(self.db),
                "--name",
                name,
                "--quiet",
                *TEST_SAMPLE_ROWS,
                *extra,
            ]
        )

    def query(self, sql: str, params: list | None = None) -> list[tuple]:
        with duckdb.connect(str(self.db), read_only=True) as con:
            return con.execute(sql, params or []).fetchall()

    def predict(self, name: str, x: np.ndarray) -> np.ndarray:
        rows = self.query(
            f"SELECT {name}.predict(f) FROM "
            "(SELECT unnest(?) AS f, generate_subscripts(?, 1) AS i) ORDER BY i",
            [x.reshape(len(x), -1).astype(np.float64).tolist()] * 2,
        )
        return np.array([row[0] for row in rows])

    def predict_rows(self, name: str, *inputs: np.ndarray) -> np.ndarray:
        """A model with several inputs (e.g. particles and high-level features), each row flattened per
        input. One query for all rows: DuckDB plans a recurrent model's macro for most of a second, which
        one query per row would pay again for every row."""
        columns = ", ".join(f"unnest(?) AS input_{k}" for k in range(len(inputs)))
        arguments = ", ".join(f"input_{k}" for k in range(len(inputs)))
        flat = [v.reshape(len(v), -1).tolist() for v in inputs]
        rows = self.query(
            f"SELECT {name}.predict({arguments}) FROM "
            f"(SELECT {columns}, generate_subscripts(?, 1) AS i) ORDER BY i",
            [*flat, flat[0]],
        )
        return np.array([row[0] for row in rows])

    def predict_inputs(self, name: str, inputs: list[np.ndarray]) -> np.ndarray:
        return self.predict_rows(name, *inputs)

    def snapshot(self) -> bytes:
        return self.db.read_bytes() if self.db.exists() else b""


class PostgresExecutor:
    """The PostgreSQL target with plain PL/pgSQL (chosen explicitly: auto would pick PL/Python here)."""

    target = "postgres"
    error = psycopg.Error
    options: tuple[str, ...] = ("--kernel", "plpgsql")

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    def export(self, model: Path, name: str = "mnist", *extra: str) -> int:
        return export_postgres(
            [
                *("--model", str(model), "--dsn", self.dsn, "--name", name, "--quiet"),
                *TEST_SAMPLE_ROWS,
                *self.options,
                *extra,
            ]
        )

    def query(self, sql: str, params: list | None = None) -> list[tuple]:
        with psycopg.connect(self.dsn) as con:
            return con.execute(sql.replace("?", "%s"), params or []).fetchall()

    def predict(self, name: str, x: np.ndarray) -> np.ndarray:
        rows = self.query(
            f"SELECT {name}.predict(f::float8[]) FROM jsonb_array_elements(?::jsonb) WITH ORDINALITY "
            "AS t(j, i), LATERAL (SELECT array_agg(e::float8) AS f FROM jsonb_array_elements_text(j) e) a "
            "ORDER BY i",
            [psycopg.types.json.Jsonb(x.reshape(len(x), -1).astype(np.float64).tolist())],
        )
        return np.array([row[0] for row in rows])

    def predict_inputs(self, name: str, inputs: list[np.ndarray]) -> np.ndarray:
        """One call per row, each input a float8[] parameter (models with several inputs)."""
        marks = ", ".join(["%s::float8[]"] * len(inputs))
        with psycopg.connect(self.dsn) as con:
            rows = [
                con.execute(f"SELECT {name}.predict({marks})", [v.ravel().tolist() for v in row]).fetchone()[
                    0
                ]
                for row in zip(*inputs, strict=True)
            ]
        return np.array(rows, dtype=np.float64)

    def snapshot(self) -> list[tuple]:
        return self.query(
            "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') ORDER BY 1, 2"
        )


class PlPythonExecutor(PostgresExecutor):
    """The PostgreSQL target with the PL/Python + numpy fast path (the fixture's role is a superuser)."""

    target = "postgres+plpython"
    options = ("--kernel", "plpython")


class CubeExecutor(PostgresExecutor):
    """The PostgreSQL target with the cube kernel (the trusted extension's C distances)."""

    target = "postgres+cube"
    options = ("--kernel", "cube")


class OracleScriptExecutor:
    """Oracle without a server: `--script-only` scripts, run as text by the PL/SQL test interpreter."""

    target = "oracle"

    def __init__(self, tmp_path: Path) -> None:
        self.directory = tmp_path / "oracle_scripts"

    def export(self, model: Path, name: str = "mnist", *extra: str) -> int:
        args = ["--model", str(model), "--name", name, "--script-only", str(self.directory), "--quiet"]
        return export_oracle([*args, "--sample-rows", "50", *extra])

    def predict(self, name: str, x: np.ndarray) -> np.ndarray:
        """Rows of a single-input model, run by the interpreter under the package's own parameter name."""
        interpreter = load_scripts(self.directory)
        (parameter,) = interpreter.parameters
        return np.array([interpreter.run({parameter: row}) for row in x])

    def predict_inputs(self, name: str, inputs: list[np.ndarray]) -> np.ndarray:
        """Rows of any model: the package's parameters take the inputs in order."""
        interpreter = load_scripts(self.directory)
        return np.array(
            [
                interpreter.run(dict(zip(interpreter.parameters, row, strict=True)))
                for row in zip(*inputs, strict=True)
            ]
        )


class OnnxExecutor:
    """ONNX: `nnsql export onnx` into a model repository, scored by onnxruntime."""

    target = "onnx"

    def __init__(self, tmp_path: Path) -> None:
        self.repo = tmp_path / "model_repository"

    def export(self, model: Path, name: str = "mnist", *extra: str) -> int:
        args = ["--model", str(model), "--repo", str(self.repo), "--name", name, "--quiet"]
        return export_onnx([*args, *TEST_SAMPLE_ROWS, *extra])

    def predict_inputs(self, name: str, inputs: list[np.ndarray]) -> np.ndarray:
        import onnxruntime

        latest = max((p for p in (self.repo / name).iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
        session = onnxruntime.InferenceSession(str(latest / "model.onnx"), providers=["CPUExecutionProvider"])
        feeds = {
            i.name: x.astype(numpy_type(i.type)) for i, x in zip(session.get_inputs(), inputs, strict=True)
        }
        return joined(session.run(None, feeds))  # every output, joined as predict_proba joins them

    def predict(self, name: str, x: np.ndarray) -> np.ndarray:
        return self.predict_inputs(name, [x])
