"""A Spark catalog's registry names (`nnsql.models`, `nnsql.installs`) taken first by someone else, on a
real local Spark (the session of tests/conftest.py, `-n 0`): a view, or a table of other columns, was kept
by `CREATE TABLE IF NOT EXISTS` and ended the export in Spark's traceback once it was written to. Both
are refused in one line, before anything is staged. Temporary views of the registry's names and
persistent look-alikes of the built-ins in the model's own database change nothing."""

from __future__ import annotations

import numpy as np
import pytest

from nnsql.export.errors import ExportError
from tests import models
from tests.export import mutations
from tests.export.test_spark import export, scored

SQUATS = {
    "a view": ("VIEW", "CREATE VIEW spark_catalog.nnsql.{table} AS SELECT 'm' AS name, 1 AS version"),
    "other columns": (
        "TABLE",
        "CREATE TABLE spark_catalog.nnsql.{table} (name STRING, version STRING) USING parquet",
    ),
}


@pytest.mark.parametrize("table", ["models", "installs"])
@pytest.mark.parametrize("squat", list(SQUATS))
def test_a_registry_name_taken_first_is_refused_in_one_line(spark, tmp_path, table, squat):
    path = models.save(mutations.dense(), tmp_path / "model")
    kind, statement = SQUATS[squat]
    spark.sql("CREATE DATABASE IF NOT EXISTS spark_catalog.nnsql")
    spark.sql(f"DROP TABLE IF EXISTS spark_catalog.nnsql.{table}")
    spark.sql(statement.format(table=table))
    name = f"squat_{table}_{squat.replace(' ', '_')}"
    try:
        with pytest.raises(ExportError) as refused:
            export(spark, path, name)
    finally:
        spark.sql(f"DROP {kind} spark_catalog.nnsql.{table}")
    message = str(refused.value)
    assert len(message.splitlines()) == 1 and f"spark_catalog.nnsql.{table}" in message, message
    assert not spark.catalog.databaseExists(name)  # nothing staged


def test_temporary_views_and_look_alikes_change_nothing(spark, tmp_path):
    """A temporary view named like each registry table, and persistent functions named like the built-ins
    the generated SQL calls, in the model's own database (current in the session): the export
    publishes, and its answers are Keras's."""
    path = models.save(mutations.dense(), tmp_path / "model")
    spark.sql("CREATE OR REPLACE TEMP VIEW models AS SELECT 'decoy' AS name, 99 AS version")
    spark.sql("CREATE OR REPLACE TEMP VIEW installs AS SELECT 'decoy' AS name, 99 AS version")
    spark.sql("CREATE DATABASE IF NOT EXISTS spark_catalog.lookalike")
    for function in ("exp", "greatest", "aggregate", "transform", "zip_with", "size", "element_at"):
        spark.sql(
            f"CREATE OR REPLACE FUNCTION lookalike.{function}(x DOUBLE) RETURNS DOUBLE "
            f"RETURN raise_error('the look-alike {function} was called')"
        )
    spark.sql("USE lookalike")
    try:
        prepared, version = export(spark, path, "lookalike")
        answers = scored(spark, prepared, "SELECT lookalike.score(features) FROM events")
    finally:
        spark.sql("USE default")
        spark.catalog.dropTempView("models")
        spark.catalog.dropTempView("installs")
    assert version == 1
    assert answers == list(prepared.gate.expected(np.arange(prepared.samples.rows)).argmax(axis=1))
