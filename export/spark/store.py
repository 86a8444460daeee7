"""A Spark catalog as an export target: the registry tables, versioned SQL functions, scoring in Spark.

Spark has no transactions: a version's functions are created under versioned names (`predict_v3`), scored
and checked there, and only then do the public names (`predict`) switch to them. A failure drops what was
staged (`discard`), so the previous version keeps scoring.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import ExportError, ScoringFailure, first_line
from ..ir import graph as ir
from ..publish.pipeline import VersionRecord
from ..registry.checks import StoredCheck
from . import builtins
from .generator import FUNCTIONS, SparkGenerator, nested

MODELS = "spark_catalog.nnsql.models"
INSTALLS = "spark_catalog.nnsql.installs"
MODEL_COLUMNS = (
    "name STRING, version INT, created TIMESTAMP, active BOOLEAN, sha256 STRING, input_spec STRING, "
    "classes STRING, source STRING, metadata STRING, parity_rows INT, parity_max_abs_diff DOUBLE, "
    "parity_argmax_agreement DOUBLE, parity_tolerance DOUBLE, parity_sample_source STRING, "
    "output_kind STRING"
)
INSTALL_COLUMNS = "name STRING, version INT, script STRING, gate_check STRING"
ROWS = "_nn_rows"


def row_table(inputs: dict[str, np.ndarray], graph: ir.Graph) -> pa.Table:
    """Rows as Arrow: `_nn_row`, then one column per input, a sequence as a list of steps."""
    return spec_rows(inputs, graph.inputs)


def spec_rows(inputs: dict[str, np.ndarray], specs: Sequence[ir.TensorSpec]) -> pa.Table:
    count = len(next(iter(inputs.values())))
    columns: dict[str, pa.Array] = {"_nn_row": pa.array(np.arange(count, dtype=np.int64))}
    for spec in specs:
        values = np.asarray(inputs[spec.name], dtype=np.float64)
        if nested(spec):
            steps, features = spec.shape
            flat = pa.array(values.reshape(-1))
            inner = pa.FixedSizeListArray.from_arrays(flat, features)
            columns[spec.name] = pa.ListArray.from_arrays(
                pa.array(np.arange(0, count * steps + 1, steps, dtype=np.int32)),
                inner.cast(pa.list_(pa.float64())),
            )
        else:
            flat = pa.array(values.reshape(-1))
            columns[spec.name] = pa.ListArray.from_arrays(
                pa.array(np.arange(0, count * spec.size + 1, spec.size, dtype=np.int32)), flat
            )
    return pa.table(columns)


class SparkStore:
    """The Store of export/publish/pipeline.py over a SparkSession."""

    target = "spark"

    def __init__(self, spark: Any, *, progress: bool = True, owned: bool = False) -> None:
        self.spark = spark
        self.progress = progress
        self.owned = owned  # stop the session on close
        self.staged: SparkGenerator | None = None
        self.installed = ""

    def sql(self, statement: str, **args: object) -> Any:
        return self.spark.sql(statement, args=args or None)

    def close(self) -> None:
        if self.owned:
            from .session import stop

            stop(self.spark)

    @contextmanager
    def session(self) -> Iterator[None]:
        self.sql("CREATE DATABASE IF NOT EXISTS spark_catalog.nnsql")
        self.sql(f"CREATE TABLE IF NOT EXISTS {MODELS} ({MODEL_COLUMNS}) USING parquet")
        self.sql(f"CREATE TABLE IF NOT EXISTS {INSTALLS} ({INSTALL_COLUMNS}) USING parquet")
        for table, columns in ((MODELS, MODEL_COLUMNS), (INSTALLS, INSTALL_COLUMNS)):
            self.check_registry(table, columns)
        try:
            yield
        except BaseException:
            self.discard()
            raise

    def check_registry(self, table: str, columns: str) -> None:
        """The registry table as the exporter creates it. `IF NOT EXISTS` keeps whatever holds the name:
        a view, or a table of other columns, that someone made first ended the export (or `nnsql
        models activate`) in Spark's traceback once it was written to; it is refused in one line."""
        kind = str(self.spark.catalog.getTable(table).tableType)
        if kind.upper() == "VIEW":
            raise ExportError(
                f"{table} is a view, not the registry table the exporter creates: drop it "
                f"(DROP VIEW {table}) or use another warehouse"
            )
        expected = self.spark.createDataFrame([], columns).schema
        if described(self.spark.table(table).schema) != described(expected):
            raise ExportError(
                f"{table} has other columns ({described(self.spark.table(table).schema)}) than the "
                f"registry table the exporter creates ({columns}): drop it or use another warehouse"
            )

    def next_version(self, name: str) -> int:
        row = self.sql(f"SELECT coalesce(max(version), 0) + 1 FROM {MODELS} WHERE name = :name", name=name)
        return int(row.collect()[0][0])

    def stage(self, name: str, version: int, graph: ir.Graph) -> None:
        """The version's functions under versioned names, in the model's own database."""
        generator = SparkGenerator(graph, name, version)
        statements = generator.statements()
        builtins.refuse_replaced(self.spark, statements)
        self.sql(f"CREATE DATABASE IF NOT EXISTS spark_catalog.{name}")
        self.staged = generator
        for statement in statements:
            self.sql(statement)
        self.installed = ";\n".join([*statements, *generator.public()]) + ";\n"

    def register(self, record: VersionRecord) -> None:
        self.append(MODELS, {**record.registry_row(), "active": False})

    def append(self, table: str, row: dict[str, object]) -> None:
        """One row through named parameters; `created` is the time of writing."""
        names = [key for key in row if key != "created"]
        columns = ", ".join(names)
        markers = ", ".join(f":{key}" for key in names)
        if table == MODELS:
            columns, markers = f"{columns}, created", f"{markers}, current_timestamp()"
        self.sql(f"INSERT INTO {table} ({columns}) VALUES ({markers})", **{key: row[key] for key in names})

    def rows_view(self, inputs: dict[str, np.ndarray]) -> str:
        assert self.staged is not None
        frame = self.spark.createDataFrame(row_table(inputs, self.staged.graph))
        frame.createOrReplaceTempView(ROWS)
        return ROWS

    def calls(self, functions: Sequence[str]) -> str:
        assert self.staged is not None
        return ", ".join(self.staged.call(function) for function in functions)

    def scores(self, name: str, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """Every row's `predict`, from the staged version's function; a row that raises is named."""
        try:
            return self.predicted(inputs)
        except Exception as error:
            raise self.failure(inputs, error) from None

    def predicted(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        view = self.rows_view(inputs)
        rows = self.sql(f"SELECT {self.calls(['predict'])} AS p FROM {view} ORDER BY _nn_row").collect()
        count = len(next(iter(inputs.values())))
        return np.array([row[0] for row in rows], dtype=np.float64).reshape(count, -1)

    def failure(self, inputs: dict[str, np.ndarray], error: Exception) -> ScoringFailure:
        """The first row that raises, scored alone, with Spark's message."""
        function = f"{self.staged.name if self.staged else ''}.predict"
        for row in range(len(next(iter(inputs.values())))):
            try:
                self.predicted({key: values[row : row + 1] for key, values in inputs.items()})
            except Exception as failed:
                return ScoringFailure(row, function, spark_message(failed))
        return ScoringFailure(0, function, spark_message(error))

    def answers(
        self, name: str, inputs: dict[str, np.ndarray], functions: tuple[str, ...]
    ) -> dict[str, list[Any]]:
        view = self.rows_view(inputs)
        rows = self.sql(f"SELECT {self.calls(functions)} FROM {view} ORDER BY _nn_row").collect()
        return {function: [row[i] for row in rows] for i, function in enumerate(functions)}

    def active_classes(self, name: str) -> tuple[int, list[str]] | None:
        rows = self.sql(
            f"SELECT version, classes FROM {MODELS} WHERE name = :name AND active ORDER BY version DESC",
            name=name,
        ).collect()
        if not rows:
            return None
        return int(rows[0][0]), [str(label) for label in json.loads(rows[0][1] or "[]")]

    def activate(self, record: VersionRecord) -> None:
        """The public functions switch to the verified version, then the registry says so."""
        assert self.staged is not None
        for statement in self.staged.public():
            self.sql(statement)
        self.rewrite_models(record.name, {**record.registry_row(), "active": True})

    def rewrite_models(
        self, name: str, updated: dict[str, object] | None, dropped: int | None = None
    ) -> None:
        """The registry rewritten (Spark's Parquet tables have no UPDATE): `name`'s other versions
        inactive, the updated version's row replaced, a dropped version's row left out."""
        rows = [row.asDict() for row in self.sql(f"SELECT * FROM {MODELS}").collect()]
        kept = []
        for row in rows:
            if row["name"] == name and dropped is not None and row["version"] == dropped:
                continue
            if updated is not None and row["name"] == name:
                row["active"] = False
                if row["version"] == updated["version"]:
                    row.update(updated)
            kept.append(row)
        schema = self.spark.table(MODELS).schema
        self.spark.createDataFrame(kept, schema).write.mode("overwrite").insertInto(MODELS, overwrite=True)

    def keep(self, record: VersionRecord, check: StoredCheck) -> None:
        row = {"name": record.name, "version": record.version, "script": self.installed}
        self.append(INSTALLS, {**row, "gate_check": check.document()})

    def load_test_data(self, name: str, features: np.ndarray, labels: np.ndarray) -> None:
        raise ExportError(
            "the spark target does not load test data: write it to Parquet and read it in Spark"
        )

    def discard(self) -> None:
        """Drop the staged version's functions and registry row; the public functions were not touched."""
        if self.staged is None:
            return
        generator, self.staged = self.staged, None
        for function in ("predict", *FUNCTIONS):
            self.sql(f"DROP FUNCTION IF EXISTS {generator.qualified(generator.versioned(function))}")
        self.rewrite_models(generator.name, None, dropped=generator.version)


def described(schema: Any) -> str:
    """A table's columns as DDL (`name STRING, version INT`), nullability aside."""
    return ", ".join(f"{field.name} {field.dataType.simpleString().upper()}" for field in schema.fields)


def spark_message(error: BaseException) -> str:
    """Spark's first line, without the JVM's stack."""
    return first_line(error)
