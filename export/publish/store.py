"""The store every database target shares: the registry of versions, the version numbers, and the steps
of the lifecycle that `publish` runs (export/publish/pipeline.py: session, stage, verify, activate, discard).

A target's store says how its driver runs a statement (`execute`, `fetch_one`, `placeholders`), which
rows hold its tensors, how its scoring code is installed, how sample rows are scored in bulk, and how its
session discards a staged version: PostgreSQL and DuckDB roll their one transaction back, Oracle (whose
DDL commits) overrides `discard` to drop what it staged. Everything else is written once here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from tqdm import tqdm

from ..errors import ExportError
from ..ir import graph as ir
from ..registry.checks import StoredCheck
from .pipeline import VersionRecord


def values_in(row: Mapping[str, object]) -> int:
    """How many values a row of the tensors table holds (its flat numpy `value`)."""
    value = row["value"]
    assert isinstance(value, np.ndarray)
    return int(value.size)


class RegistryStore:
    target: str
    models_table = "nnsql.models"
    tensors_table = "nnsql.tensors"
    active: tuple[object, object] = (True, False)  # how the registry's `active` column says yes, no
    progress: bool

    # -- what each driver does its own way ------------------------------------------------------------
    def execute(self, statement: str, params: Sequence[object] = ()) -> None:
        raise NotImplementedError

    def fetch_one(self, statement: str, params: Sequence[object] = ()) -> Sequence[Any] | None:
        raise NotImplementedError

    def placeholders(self, count: int) -> list[str]:
        """The driver's positional parameter markers for `count` values."""
        raise NotImplementedError

    def tensor_rows(self, name: str, version: int, graph: ir.Graph) -> Iterator[dict[str, object]]:
        """The rows of the tensors table that the version's scoring code reads; `value` is a flat numpy
        array, turned into the driver's type one row at a time by `insert_tensor`."""
        raise NotImplementedError

    def install(self, name: str, version: int, graph: ir.Graph) -> None:
        """The version's scoring code, beside the active version's."""
        raise NotImplementedError

    # -- the lifecycle, shared ----------------------------------------------------------------------
    def next_version(self, name: str) -> int:
        """One more than the newest version, active or not (the caller's session serialises exports)."""
        marker = self.placeholders(1)[0]
        statement = f"SELECT coalesce(max(version), 0) + 1 FROM {self.models_table} WHERE name = {marker}"
        row = self.fetch_one(statement, [name])
        return int(row[0]) if row else 1

    def active_classes(self, name: str) -> tuple[int, list[str]] | None:
        """The active version of `name` and its class labels, or None before its first version."""
        name_marker, active_marker = self.placeholders(2)
        row = self.fetch_one(
            f"SELECT version, classes FROM {self.models_table} "
            f"WHERE name = {name_marker} AND active = {active_marker} ORDER BY version DESC",
            [name, self.active[0]],
        )
        if row is None:
            return None
        text = row[1].read() if hasattr(row[1], "read") else row[1]  # Oracle's CLOB comes as a LOB
        classes = text if isinstance(text, list) else json.loads(text or "[]")
        return int(row[0]), [str(label) for label in classes]

    def insert(self, table: str, row: Mapping[str, object]) -> None:
        """One row; the column names are the code's own, the values are parameters."""
        markers = ", ".join(self.placeholders(len(row)))
        self.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({markers})", list(row.values()))

    def insert_tensor(self, row: dict[str, object]) -> None:
        raise NotImplementedError

    def stage(self, name: str, version: int, graph: ir.Graph) -> None:
        """The new version's tensors and scoring code; the active version keeps scoring."""
        rows = list(self.tensor_rows(name, version, graph))
        bar = tqdm(
            total=sum(values_in(row) for row in rows),
            desc=f"{name} v{version}: weights",
            unit="value",
            unit_scale=True,
            disable=not self.progress,
        )
        with bar:  # counted in values, not tensors: one large kernel dominates the time and the ETA
            for row in rows:
                self.insert_tensor(row)
                bar.update(values_in(row))
        self.install(name, version, graph)

    def registry_row(self, record: VersionRecord, *, active: bool = True) -> dict[str, object]:
        return {**record.registry_row(), "active": self.active[0 if active else 1]}

    def register(self, record: VersionRecord) -> None:
        """The staged version's registry row, inactive, before it is verified: its functions read their
        class labels there (as data). `activate` completes it."""
        self.insert(self.models_table, self.registry_row(record, active=False))

    def update_row(self, record: VersionRecord, *, active: bool) -> None:
        """The version's registry row rewritten from the record (the verified figures)."""
        row = self.registry_row(record, active=active)
        markers = self.placeholders(len(row) + 2)
        assignments = ", ".join(f"{column} = {marker}" for column, marker in zip(row, markers, strict=False))
        where = f"name = {markers[-2]} AND version = {markers[-1]}"
        statement = f"UPDATE {self.models_table} SET {assignments} WHERE {where}"
        self.execute(statement, [*row.values(), record.name, record.version])

    def activate(self, record: VersionRecord) -> None:
        """The verified version becomes the one `NAME.score` runs, and the registry says so."""
        value, name = self.placeholders(2)
        statement = f"UPDATE {self.models_table} SET active = {value} WHERE name = {name}"
        self.execute(statement, [self.active[1], record.name])
        self.update_row(record, active=True)

    # -- after the export: the versions kept, activated, removed (`nnsql models`) ------------------------
    installs_table: str | None = "nnsql.installs"  # None: the target keeps no code to install again
    installed = ""  # the scoring code `install` ran last, kept with its version

    def keep(self, record: VersionRecord, check: StoredCheck) -> None:
        """The published version's scoring code and answer check, for activating it again later."""
        if self.installs_table is not None:
            row = {"name": record.name, "version": record.version, "script": self.installed}
            self.insert(self.installs_table, {**row, "gate_check": check.document()})

    def versions(self, name: str | None = None) -> list[dict[str, Any]]:
        """The registry's rows (every model, or `name`'s), oldest first, each with `activatable`: whether
        its code and check were kept."""
        columns = "m.name, m.version, m.created, m.active, m.output_kind, m.classes, m.parity_rows, "
        columns += "m.parity_max_abs_diff, m.source, i.version IS NOT NULL"
        statement = (
            f"SELECT {columns} FROM {self.models_table} m LEFT JOIN {self.installs_table} i "
            "ON i.name = m.name AND i.version = m.version"
        )
        params: list[object] = []
        if name is not None:
            statement += f" WHERE m.name = {self.placeholders(1)[0]}"
            params.append(name)
        keys = ["name", "version", "created", "active", "output_kind", "classes", "parity_rows"]
        keys += ["parity_max_abs_diff", "source", "activatable"]
        rows = self.fetch_all(statement + " ORDER BY m.name, m.version", params)
        return [{**dict(zip(keys, row, strict=True)), "active": row[3] == self.active[0]} for row in rows]

    def fetch_all(self, statement: str, params: Sequence[object] = ()) -> Sequence[Sequence[Any]]:
        raise NotImplementedError

    def version_row(self, name: str, version: int) -> dict[str, Any]:
        """One version's registry row, or an ExportError naming the versions there are."""
        return version_in(self.versions(name), name, version)

    def kept(self, name: str, version: int) -> tuple[str, Any, Any]:
        """The version's kept script, answer check and input spec."""
        name_marker, version_marker = self.placeholders(2)
        row = self.fetch_one(
            f"SELECT i.script, i.gate_check, m.input_spec FROM {self.models_table} m "
            f"JOIN {self.installs_table} i ON i.name = m.name AND i.version = m.version "
            f"WHERE m.name = {name_marker} AND m.version = {version_marker}",
            [name, version],
        )
        if row is None:
            raise ExportError(
                f"{name} version {version} was published before versions kept their scoring code: "
                "export it again to activate it"
            )
        return str(row[0]), row[1], row[2]

    def switch(self, name: str, version: int) -> None:
        """`version` becomes the active one in the registry (its code is installed by the caller)."""
        chosen, yes, no, model = self.placeholders(4)  # positional: in the statement's order
        self.execute(
            f"UPDATE {self.models_table} SET active = CASE WHEN version = {chosen} THEN {yes} ELSE {no} END "
            f"WHERE name = {model}",
            [version, *self.active, name],
        )

    def remove(self, name: str, version: int) -> None:
        """An inactive version's rows: registry, tensors, kept code (the active one is refused)."""
        if self.version_row(name, version)["active"]:
            raise ExportError(
                f"{name} version {version} is the active one: activate another before removing it"
            )
        tables = [(self.tensors_table, "model"), (self.models_table, "name")]
        if self.installs_table is not None:
            tables.append((self.installs_table, "name"))
        name_marker, version_marker = self.placeholders(2)
        for table, column in tables:
            self.execute(
                f"DELETE FROM {table} WHERE {column} = {name_marker} AND version = {version_marker}",
                [name, version],
            )

    def discard(self) -> None:
        """Remove a staged version after a failure; a transactional store's rollback already has."""


def version_in(rows: Sequence[dict[str, Any]], name: str, version: int) -> dict[str, Any]:
    """The row of `version` among a model's registry rows, or an ExportError naming the versions there are."""
    for row in rows:
        if row["version"] == version:
            return row
    there = ", ".join(str(row["version"]) for row in rows) or "none"
    raise ExportError(f"{name} has no version {version} (versions: {there})")
