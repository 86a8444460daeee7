"""The versions of a Spark catalog's models: listed, activated again once their kept answer check passes
in Spark, removed when inactive (`nnsql models --warehouse`)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..errors import ExportError
from ..ir import graph as ir
from ..publish.store import version_in
from ..spark.generator import FUNCTIONS
from ..spark.store import INSTALLS, MODELS, ROWS, SparkStore, spark_message, spec_rows
from .checks import StoredCheck, from_document, require_agreement

# A public function as the exporter writes it: the model's function calling the same function of one
# version with the same arguments. Kept code that reads otherwise is never run.
PARAMETER = r"\w+ (?:ARRAY<DOUBLE>|ARRAY<ARRAY<DOUBLE>>|DOUBLE DEFAULT [0-9.]+)"
PUBLIC = (
    r"CREATE OR REPLACE FUNCTION {name}\.(?P<function>\w+)\((?P<parameters>{parameter}(?:, {parameter})*)\) "
    r"RETURNS (?:INT|STRING|ARRAY<STRING>|ARRAY<DOUBLE>) RETURN {name}\.(?P=function)_v{version}\("
    r"(?P<arguments>\w+(?:, \w+)*)\)"
)


def public_statements(script: str, name: str, version: int) -> list[re.Match[str]]:
    """The kept script's statements that switch `name`'s public functions to `version`, each checked
    against what the exporter writes (the script lives in a table whoever can write the catalog can
    change); one missing or reading otherwise is refused in one line."""
    pattern = re.compile(PUBLIC.format(name=re.escape(name), version=version, parameter=PARAMETER))
    found = {}
    for line in script.split(";\n"):
        match = pattern.fullmatch(line.strip())
        if match and match["function"] in ("predict", *FUNCTIONS):
            found[match["function"]] = match
    if set(found) != {"predict", *FUNCTIONS}:
        raise ExportError(
            f"the kept code of {name} version {version} does not read as the exporter wrote it: not activated"
        )
    return [found[function] for function in ("predict", *FUNCTIONS)]


def check_specs(check: StoredCheck, predict: re.Match[str]) -> list[ir.TensorSpec]:
    """The inputs in the order the version's functions take them, shaped as the check stored them."""
    names = predict["arguments"].split(", ")
    if sorted(names) != sorted(check.inputs):
        raise ExportError(f"the kept answer check names other inputs than {', '.join(names)}: not activated")
    return [ir.TensorSpec(n, tuple(int(d) for d in check.inputs[n].shape[1:])) for n in names]


class SparkVersions(SparkStore):
    """The versions of the models of a Spark catalog: listed, activated again after their kept answer
    check passes in Spark, removed when inactive."""

    where = "Spark"

    def versions(self, name: str | None = None) -> list[dict[str, Any]]:
        """The registry's rows (every model, or `name`'s), oldest first, each with `activatable`."""
        statement = (
            "SELECT m.name, m.version, m.created, m.active, m.output_kind, m.classes, m.parity_rows, "
            "m.parity_max_abs_diff, m.source, i.version IS NOT NULL AS activatable "
            f"FROM {MODELS} m LEFT JOIN {INSTALLS} i ON i.name = m.name AND i.version = m.version"
        )
        where = {"name": name} if name is not None else {}
        if where:
            statement += " WHERE m.name = :name"
        return [
            row.asDict() for row in self.sql(statement + " ORDER BY m.name, m.version", **where).collect()
        ]

    def version_row(self, name: str, version: int) -> dict[str, Any]:
        return version_in(self.versions(name), name, version)

    def activate_version(self, name: str, version: int) -> None:
        """The version's own functions answer its kept check in Spark; only then do the public functions
        switch to them and the registry say so. A version whose functions answer otherwise stays inactive."""
        self.version_row(name, version)
        kept = self.sql(
            f"SELECT script, gate_check FROM {INSTALLS} WHERE name = :name AND version = :version",
            name=name,
            version=version,
        ).collect()
        if not kept:
            raise ExportError(
                f"{name} version {version} kept no scoring code: export it again to activate it"
            )
        public = public_statements(kept[0][0], name, version)
        check = from_document(kept[0][1])
        scores, answers = self.kept_answers(name, version, check, check_specs(check, public[0]))
        require_agreement(check, scores, answers, f"{name} version {version}")
        for statement in public:
            self.sql(statement.group(0))
        self.rewrite_models(name, {"version": version, "active": True})

    def kept_answers(
        self, name: str, version: int, check: StoredCheck, specs: list[ir.TensorSpec]
    ) -> tuple[np.ndarray, dict[str, list[Any]]]:
        """`predict` and every checked function of the version, on the check's rows, in Spark."""
        self.spark.createDataFrame(spec_rows(check.inputs, specs)).createOrReplaceTempView(ROWS)
        arguments = ", ".join(spec.name for spec in specs)
        calls = ", ".join(f"{name}.{f}_v{version}({arguments})" for f in ("predict", *check.answers))
        try:
            rows = self.sql(f"SELECT {calls} FROM {ROWS} ORDER BY _nn_row").collect()
            scores = np.array([row[0] for row in rows], dtype=np.float64).reshape(len(rows), -1)
        except Exception as error:  # a dropped or broken function: Spark's own words
            message = spark_message(error)
            raise ExportError(
                f"{name} version {version} does not score in Spark: {message}; not activated"
            ) from None
        return scores, {f: [row[i + 1] for row in rows] for i, f in enumerate(check.answers)}

    def remove(self, name: str, version: int) -> None:
        """An inactive version's functions, registry row and kept code (the active one is refused)."""
        if self.version_row(name, version)["active"]:
            raise ExportError(
                f"{name} version {version} is the active one: activate another before removing it"
            )
        for function in ("predict", *FUNCTIONS):
            self.sql(f"DROP FUNCTION IF EXISTS {name}.{function}_v{version}")
        self.rewrite_models(name, None, dropped=version)
        rows = self.sql(f"SELECT * FROM {INSTALLS}").collect()
        kept = [row for row in rows if (row["name"], row["version"]) != (name, version)]
        schema = self.spark.table(INSTALLS).schema
        self.spark.createDataFrame(kept, schema).write.mode("overwrite").insertInto(INSTALLS, overwrite=True)
