"""The published functions as PySpark columns: `df.withColumn("p", predict_proba("higgs", "gru_input",
"hlf_input"))`. Each is a call of the SQL function in the model's database, so the scoring is the same
pure Spark SQL as `SELECT higgs.predict_proba(gru_input, hlf_input) FROM events`."""

from __future__ import annotations

from typing import Any

from ..names import check_model_name


def call(name: str, function: str, inputs: tuple[Any, ...]) -> Any:
    """`name.function(inputs...)` as a Column; an input is a column name or a Column."""
    from pyspark.sql import functions

    check_model_name(name)
    if not inputs:
        raise ValueError(f"{name}.{function} needs one column per model input")
    columns = [functions.col(value) if isinstance(value, str) else value for value in inputs]
    return functions.call_function(f"{name}.{function}", *columns)


def predict(name: str, *inputs: Any) -> Any:
    """What model.predict returns, as ARRAY<DOUBLE>."""
    return call(name, "predict", inputs)


def predict_proba(name: str, *inputs: Any) -> Any:
    """Class probabilities, as ARRAY<DOUBLE>."""
    return call(name, "predict_proba", inputs)


def score(name: str, *inputs: Any) -> Any:
    """The predicted class index (0-based), as INT."""
    return call(name, "score", inputs)


def label(name: str, *inputs: Any) -> Any:
    """The predicted class label, as STRING."""
    return call(name, "label", inputs)
