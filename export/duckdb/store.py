"""A DuckDB database file as an export target: registry, tensors, macros, in-database scoring."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from ..codegen.inputs import InputForm, as_held, forms_held, held_rows
from ..errors import ExportError, ScoringFailure, first_line
from ..ir import graph as ir
from ..publish.store import RegistryStore
from .generator import TEMPLATES, DuckDBGenerator, weights_table
from .trust import check_file

TENSOR_SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("version", pa.int32()),
        ("tensor", pa.string()),
        ("shape", pa.list_(pa.int32())),
        ("layout", pa.string()),
        ("value", pa.list_(pa.float64())),
    ]
)


# DuckDB's own files carry this at byte 8. DuckDB opens a file of another format through the extension
# that reads it (a SQLite file: sqlite_scanner), downloading that extension when it is not installed: a
# file named by --db made the export fetch a native library from the network and load it.
MAGIC, MAGIC_AT = b"DUCK", 8


def check_format(path: Path) -> None:
    """A file that exists and holds bytes must be DuckDB's own: no other format is opened."""
    try:  # non-blocking: a FIFO in the file's place must not hold the command
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # DuckDB creates it
    except OSError as error:
        raise ExportError(f"cannot open {path}: {error.strerror or error}") from None
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise ExportError(f"{path} is not a regular file: not opened as a DuckDB database")
        head = file.read(MAGIC_AT + len(MAGIC))
    if head and head[MAGIC_AT:] != MAGIC:
        raise ExportError(f"{path} is not a DuckDB database file (another format, or damaged): not opened")


def connect(path: str | Path, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open a DuckDB file with a one-line error for a locked or foreign file."""
    check_format(Path(path))
    try:
        return duckdb.connect(str(path), read_only=read_only)
    except duckdb.IOException as error:
        message = str(error).splitlines()[0]
        if "lock" in message.lower():
            raise ExportError(f"{path} is in use by another process; close it and retry") from error
        raise ExportError(f"cannot open {path} as a DuckDB database: {message}") from error
    except duckdb.Error as error:
        raise ExportError(f"cannot open {path}: {str(error).splitlines()[0]}") from error


def check_file_name(path: Path, name: str) -> None:
    """DuckDB names a file's catalog after its stem; a schema of the same name becomes ambiguous."""
    if path.stem in (name, "nnsql"):
        raise ExportError(
            f"{path.name} would make DuckDB's catalog '{path.stem}' collide with the schema "
            f"'{path.stem}' (queries like {name}.score(...) become ambiguous); "
            "choose another file name, e.g. models.duckdb"
        )


def stored_tensors(graph: ir.Graph) -> Iterator[tuple[str, np.ndarray, str]]:
    """(tensor name, array as stored, layout) for every constant the macros read."""
    for node in graph.all_nodes():
        for role, weights in node.weights():
            array = weights.float64  # DOUBLE: the float64 digits of derived values (ir.Weights)
            layout = "as in Keras"
            if role == "kernel" and isinstance(node, ir.Dense | ir.PatchDense):
                array, layout = array.T, "units x inputs (Keras kernel transposed), row-major"
            yield f"{node.name}.{role}", array, layout


def feature_table(inputs: dict[str, np.ndarray]) -> pa.Table:
    """Rows as a pyarrow table: `_nn_row` then one DOUBLE[] column per input."""
    columns: dict[str, pa.Array] = {}
    n_rows = len(next(iter(inputs.values())))
    columns["_nn_row"] = pa.array(np.arange(n_rows, dtype=np.int64))
    for name, values in inputs.items():
        flat = np.ascontiguousarray(values, dtype=np.float64).reshape(n_rows, -1)
        columns[name] = pa.FixedSizeListArray.from_arrays(pa.array(flat.ravel()), flat.shape[1])
    return pa.table(columns)


def held_column(form: InputForm, rows: np.ndarray) -> pa.Array:
    """Rows as users hold them (export/codegen/inputs.py): a list of steps, each nested to its last
    axis, the steps of padding at the end left out."""
    held = [as_held(form, row) for row in rows]
    values: pa.Array = pa.array(np.concatenate([h.ravel() for h in held]).astype(np.float64))
    for extent in reversed(form.shape[1:]):  # lists, as users' lists of lists are (not fixed-size arrays)
        values = pa.ListArray.from_arrays(
            pa.array(np.arange(0, len(values) + 1, extent, dtype=np.int32)), values
        )
    offsets = np.cumsum([0, *(len(h) for h in held)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), values)


class DuckDBStore(RegistryStore):
    target = "duckdb"

    def __init__(self, path: str | Path, *, progress: bool = True) -> None:
        self.path = Path(path)
        self.progress = progress
        self.con = connect(self.path)
        self.staged: tuple[str, int, ir.Graph] | None = None

    def close(self) -> None:
        self.con.close()

    @contextmanager
    def registered(self, table: pa.Table) -> Iterator[str]:
        """Expose a pyarrow table to SQL under a private name for the duration of the block."""
        self.con.register("_nn_rows", table)
        try:
            yield "_nn_rows"
        finally:
            self.con.unregister("_nn_rows")

    @contextmanager
    def session(self) -> Iterator[None]:
        self.con.execute("BEGIN TRANSACTION")
        try:
            check_file(self.con, self.path)
            self.con.execute((TEMPLATES / "registry.sql").read_text())
            yield
        except duckdb.Error as error:
            # What the file holds is its author's (a registry table of other columns): one line, as
            # PostgreSQL's session says its errors, never DuckDB's traceback.
            self.con.execute("ROLLBACK")
            raise ExportError(f"DuckDB error on {self.path.name}: {first_line(error)}") from error
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    def execute(self, statement: str, params: Sequence[object] = ()) -> None:
        self.con.execute(statement, list(params))

    def fetch_one(self, statement: str, params: Sequence[object] = ()) -> Sequence[Any] | None:
        return self.con.execute(statement, list(params)).fetchone()

    def placeholders(self, count: int) -> list[str]:
        return ["?"] * count

    def tensor_rows(self, name: str, version: int, graph: ir.Graph) -> Iterator[dict[str, object]]:
        for tensor, array, layout in stored_tensors(graph):
            yield {
                "model": name,
                "version": version,
                "tensor": tensor,
                "shape": list(array.shape),
                "layout": layout,
                "value": np.asarray(array, dtype=np.float64).ravel(),
            }

    def insert_tensor(self, row: dict[str, object]) -> None:
        """Through Arrow: a long list as a query parameter is slow to bind."""
        table = pa.table([[value] for value in row.values()], schema=TENSOR_SCHEMA)
        with self.registered(table) as relation:
            self.con.execute(f"INSERT INTO nnsql.tensors SELECT * FROM {relation}")

    def fetch_all(self, statement: str, params: Sequence[object] = ()) -> Sequence[Sequence[Any]]:
        return self.con.execute(statement, list(params)).fetchall()

    def install(self, name: str, version: int, graph: ir.Graph) -> None:
        """The version's weights table (built from its tensors, replacing any table of that name), then
        its macros; only the macros are kept for `nnsql models activate`, which reads the table as built."""
        generator = DuckDBGenerator(graph, name, version)
        self.con.execute(generator.render_weights())
        self.installed = generator.render()
        self.con.execute(self.installed)
        self.staged = (name, version, graph)  # for `failure`

    def remove(self, name: str, version: int) -> None:
        """An inactive version's registry rows (RegistryStore.remove), then its weights table."""
        super().remove(name, version)
        self.con.execute(f"DROP TABLE IF EXISTS {weights_table(name, version)}")

    def scores(self, name: str, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """Every row's probabilities. When the query raises, the transaction is lost (DuckDB has no
        savepoints): the row is found in a scratch in-memory copy of the version (`failure`)."""
        try:
            return self.score_rows(name, inputs)
        except duckdb.Error as error:
            raise self.failure(name, inputs, error) from None

    def score_rows(self, name: str, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """predict of every row: flat, except every other row as users hold it where an input nests or
        pads (its answer is held to Keras's on the flat row all the same)."""
        forms = forms_held(self.staged[2], name) if self.staged is not None else {}
        n_rows = len(next(iter(inputs.values())))
        held = held_rows(n_rows) if forms else np.arange(0)
        flat = np.setdiff1d(np.arange(n_rows), held)
        scores = self.predicted(name, feature_table({k: v[flat] for k, v in inputs.items()}))
        if not held.size:
            return scores
        table = feature_table({k: v[held] for k, v in inputs.items()})
        for key, form in forms.items():
            column = table.schema.get_field_index(key)
            table = table.set_column(column, key, held_column(form, inputs[key][held]))
        result = np.empty((n_rows, scores.shape[1]))
        result[flat], result[held] = scores, self.predicted(name, table)
        return result

    def predicted(self, name: str, table: pa.Table) -> np.ndarray:
        """Every row's `predict`, in one query. DuckDB scans a registered table one record batch per
        thread: the rows are cut into as many batches as it has threads, so all of them score."""
        arguments = ", ".join(table.column_names[1:])
        threads = int(self.fetch_one("SELECT current_setting('threads')")[0])  # type: ignore[index]
        if len(table) > 1:
            batches = table.to_batches(max_chunksize=-(-len(table) // threads))
            table = pa.Table.from_batches(batches, schema=table.schema)
        with self.registered(table) as relation:
            result = self.con.execute(
                f"SELECT {name}.predict({arguments}) AS p FROM {relation} ORDER BY _nn_row"
            ).to_arrow_table()
        column = result.column("p").combine_chunks()
        return np.asarray(column.flatten(), dtype=np.float64).reshape(len(table), -1)

    def failure(self, name: str, inputs: dict[str, np.ndarray], error: duckdb.Error) -> ScoringFailure:
        """The first sample row that raises, scored alone in an in-memory database holding the staged
        version (each query its own transaction there), with the database's message."""
        function = f"{name}.predict"
        if self.staged is None:
            return ScoringFailure(0, function, first_line(error))
        scratch = DuckDBStore(":memory:", progress=False)
        try:
            scratch.con.execute((TEMPLATES / "registry.sql").read_text())
            scratch.stage(*self.staged)
            for row in range(len(next(iter(inputs.values())))):
                try:
                    scratch.score_rows(name, {key: values[row : row + 1] for key, values in inputs.items()})
                except duckdb.Error as failed:
                    return ScoringFailure(row, function, first_line(failed))
        finally:
            scratch.close()
        return ScoringFailure(0, function, first_line(error))

    def answers(
        self, name: str, inputs: dict[str, np.ndarray], functions: tuple[str, ...]
    ) -> dict[str, list[Any]]:
        arguments = ", ".join(inputs)
        calls = ", ".join(f"{name}.{function}({arguments})" for function in functions)
        with self.registered(feature_table(inputs)) as relation:
            rows = self.con.execute(f"SELECT {calls} FROM {relation} ORDER BY _nn_row").fetchall()
        return {function: [row[i] for row in rows] for i, function in enumerate(functions)}

    def load_test_data(self, name: str, features: np.ndarray, labels: np.ndarray) -> None:
        table = feature_table({"features": features}).append_column(
            "label", pa.array(labels.astype(np.int32))
        )
        with self.registered(table) as relation:
            self.con.execute(
                f"CREATE OR REPLACE TABLE {name}.testdata AS SELECT _nn_row::INTEGER AS id, "
                f"features::FLOAT[] AS features, label FROM {relation}"
            )
