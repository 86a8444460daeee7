"""Rows the model cannot take are refused, the same way on every target: lists that are not numbers (DuckDB
macros take any argument), NaN, infinities and values beyond the float32 range; the PL/SQL package's checks
run in the independent interpreter. (A row that overflows float32 inside the network:
tests/serve/test_overflow.py.)"""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from tests.export.executors import DuckDBExecutor, OracleScriptExecutor
from tests.export.plsql_interpreter import PlsqlError, load_scripts

NUMBERS = "mnist: features must be a list of numbers, got "
NONFINITE = "mnist: features holds NaN, infinity or a value beyond the float32 range at 0-based index "


@pytest.fixture(scope="module")
def duckdb_mnist(tmp_path_factory, cern_mlp_path) -> DuckDBExecutor:
    executor = DuckDBExecutor(tmp_path_factory.mktemp("duckdb"))
    assert executor.export(cern_mlp_path) == 0
    return executor


@pytest.mark.duckdb
@pytest.mark.parametrize(
    ("row", "received"),
    [
        ("list_transform(range(784), lambda i: '0.5')", "VARCHAR[]"),
        ("list_transform(range(784), lambda i: i % 2 = 0)", "BOOLEAN[]"),
        ("list_transform(range(784), lambda i: [0.5])", "DECIMAL(2,1)[][]"),
    ],
)
def test_duckdb_refuses_lists_that_are_not_numbers(duckdb_mnist, row, received):
    with pytest.raises(duckdb.InvalidInputException) as error:
        duckdb_mnist.query(f"SELECT mnist.score({row})")
    assert str(error.value).endswith(NUMBERS + received)


def sample_row(cast: str = "") -> str:
    return f"list_transform(range(784), lambda i: (i % 7) / 4){cast}"


@pytest.mark.duckdb
@pytest.mark.parametrize("cast", ["FLOAT[784]", "INTEGER[]"])
def test_duckdb_takes_every_list_of_numbers(duckdb_mnist, cast):
    """Any numeric list or fixed-size array scores as the DOUBLE list of its values."""
    (values,) = duckdb_mnist.query(f"SELECT {sample_row('::' + cast)}::DOUBLE[]")[0]
    (expected,) = duckdb_mnist.query("SELECT mnist.predict_proba(?::DOUBLE[])", [values])[0]
    (actual,) = duckdb_mnist.query(f"SELECT mnist.predict_proba({sample_row('::' + cast)})")[0]
    assert np.array_equal(actual, expected)


@pytest.fixture(scope="module")
def oracle_package(tmp_path_factory, cern_mlp_path):
    executor = OracleScriptExecutor(tmp_path_factory.mktemp("oracle"))
    assert executor.export(cern_mlp_path) == 0
    return load_scripts(executor.directory)


@pytest.mark.oracle
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, 3.5e38])
def test_oracle_refuses_nan_infinity_and_beyond_float32_in_the_interpreter(oracle_package, bad):
    """ORA-20003 from the package's own check: 3.5e38 is infinite once bound to a BINARY_FLOAT array."""
    row = np.full(784, 0.5)
    row[5] = bad
    with pytest.raises(PlsqlError) as error:
        oracle_package.run({"features": row})
    assert error.value.code == -20003 and error.value.message == NONFINITE + "5"


@pytest.mark.oracle
def test_oracle_length_null_and_valid_rows_in_the_interpreter(oracle_package, cern_mlp_path):
    import keras

    with pytest.raises(PlsqlError) as length:
        oracle_package.run({"features": np.ones(3)})
    with pytest.raises(PlsqlError) as nulls:
        oracle_package.run({"features": [None, *[0.5] * 783]})
    assert (length.value.code, length.value.message) == (
        -20001,
        "mnist: features must have 784 values, got 3",
    )
    assert (nulls.value.code, nulls.value.message) == (
        -20002,
        "mnist: features contains NULL values",
    )
    assert oracle_package.run({"features": None}) is None
    row = np.random.default_rng(3).random(784, dtype=np.float32)
    expected = keras.saving.load_model(cern_mlp_path).predict(row[None], verbose=0)[0]
    assert np.abs(oracle_package.run({"features": row}) - expected).max() <= 1e-5
