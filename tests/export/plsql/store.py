"""The tables the scripts touch, held in Python: SELECT ... INTO, INSERT, UPDATE and DELETE with
`column = value` conditions, and the DDL of EXECUTE IMMEDIATE (CREATE TABLE and TYPE, ALTER TABLE ADD,
DROP TABLE) raising Oracle's codes (ORA-00955 name in use, ORA-01430 column exists, ORA-00942 no table),
which the scripts' handlers test."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.export.plsql import nodes as n
from tests.export.plsql.types import CollectionType, RecordType, scalar
from tests.export.plsql.values import Collection, PlsqlError, compare, ora

CREATE_TABLE = re.compile(r"\s*CREATE\s+TABLE\s+(\w+)\s*\((.*)\)[^()]*$", re.I | re.S)
CREATE_TYPE = re.compile(
    r"\s*CREATE\s+(?:OR\s+REPLACE\s+)?TYPE\s+(\w+)\s+(?:AS|IS)\s+"
    r"(?:(OBJECT)\s*\((.*)\)|TABLE\s+OF\s+(.+?)|VARRAY\s*\((\d+)\)\s+OF\s+(.+?))\s*$",
    re.I | re.S,
)
ALTER_ADD = re.compile(r"\s*ALTER\s+TABLE\s+(\w+)\s+ADD\s*\(\s*(\w+)\b.*\)\s*$", re.I | re.S)
DROP_TABLE = re.compile(r"\s*DROP\s+TABLE\s+(\w+)(\s+PURGE)?\s*$", re.I)
NOT_COLUMNS = {"CONSTRAINT", "PRIMARY", "UNIQUE", "CHECK", "FOREIGN"}


def split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    return [*parts, text[start:]]


def stored(value: Any) -> Any:
    return value.copy() if isinstance(value, Collection) else value


class Table:
    def __init__(self, columns: list[str]) -> None:
        self.columns = columns
        self.rows: list[dict[str, Any]] = []

    def matching(self, keys: list[tuple[str, Any]]) -> list[dict[str, Any]]:
        for column, _ in keys:
            self.column(column)
        return [row for row in self.rows if all(compare(row[c], value) == 0 for c, value in keys)]

    def column(self, name: str) -> str:
        if name not in self.columns:
            raise ora(-904, f'"{name}": invalid identifier')
        return name


class Store:
    """Tables by name, and the schema's SQL types (`types`, shared with the session)."""

    def __init__(self, types: dict[str, Any]) -> None:
        self.types = types
        self.tables: dict[str, Table] = {"USER_ERRORS": Table(["NAME", "TYPE", "LINE", "TEXT", "ATTRIBUTE"])}

    def table(self, name: str) -> Table:
        if name not in self.tables:
            raise ora(-942, "table or view does not exist")
        return self.tables[name]

    def execute_ddl(self, text: str) -> None:
        if match := CREATE_TABLE.match(text):
            self.create_table(match[1].upper(), match[2])
        elif match := CREATE_TYPE.match(text):
            self.create_type(match)
        elif match := ALTER_ADD.match(text):
            table, column = self.table(match[1].upper()), match[2].upper()
            if column in table.columns:
                raise ora(-1430, "column being added already exists in table")
            table.columns.append(column)
            for row in table.rows:
                row[column] = None
        elif match := DROP_TABLE.match(text):
            self.table(match[1].upper())
            del self.tables[match[1].upper()]
        else:
            raise ora(-900, f"invalid SQL statement (not in the subset): {text.strip()[:60]}")

    def create_table(self, name: str, body: str) -> None:
        if name in self.tables or name in self.types:
            raise ora(-955, "name is already used by an existing object")
        words = [part.split()[0].upper() for part in split_top_level(body) if part.split()]
        self.tables[name] = Table([word for word in words if word not in NOT_COLUMNS])

    def create_type(self, match: re.Match) -> None:
        name = match[1].upper()
        if name in self.types or name in self.tables:
            raise ora(-955, "name is already used by an existing object")
        if match[2]:
            fields = [part.split() for part in split_top_level(match[3])]
            self.types[name] = RecordType(name, tuple((f[0].upper(), self.type_named(f[1])) for f in fields))
        else:
            element = match[4] or match[6]
            limit = int(match[5]) if match[5] else None
            self.types[name] = CollectionType(name, self.type_named(element), limit)

    def type_named(self, text: str) -> Any:
        found = re.match(r"\s*(\w+)\s*(?:\((\d+)\))?", text)
        assert found is not None, text
        type_name = found[1].upper()
        args = (int(found[2]),) if found[2] else ()
        return scalar(type_name, args) or self.types[type_name]


def where(compiler: Any, conditions: list) -> list[tuple[str, Callable]]:
    return [(column, compiler.expression(value)) for column, value in conditions]


def compile_sql(compiler: Any, node: n.Sql) -> Callable[[], None]:
    store: Store = compiler.session.store
    keys = where(compiler, node.where)

    def matching() -> list[dict[str, Any]]:
        return store.table(node.table).matching([(column, value()) for column, value in keys])

    if node.kind == "SELECT":
        targets = [compiler.target(target) for target in node.into]
        counting = [isinstance(item, n.Call) and item.base == n.Name("COUNT") for item in node.columns]
        columns = [None if count else item.name for item, count in zip(node.columns, counting, strict=True)]

        def select() -> None:
            rows = matching()
            if not all(counting):
                if not rows:
                    raise PlsqlError(100, "no data found")
                if len(rows) > 1:
                    raise ora(-1422, "exact fetch returns more than requested number of rows")
            for target, column in zip(targets, columns, strict=True):
                target(
                    len(rows) if column is None else stored(rows[0][store.table(node.table).column(column)])
                )

        return select
    if node.kind == "INSERT":
        values = [compiler.expression(value) for value in node.values]

        def insert() -> None:
            table = store.table(node.table)
            row = dict.fromkeys(table.columns)
            for column, value in zip(node.columns, values, strict=True):
                row[table.column(column)] = stored(value())
            table.rows.append(row)

        return insert
    if node.kind == "UPDATE":
        sets = [(column, compiler.expression(value)) for column, value in node.columns]

        def update() -> None:
            rows = matching()
            new = [(store.table(node.table).column(column), value()) for column, value in sets]
            for row in rows:
                row.update({column: stored(value) for column, value in new})

        return update
    if node.kind == "DELETE":

        def delete() -> None:
            table = store.table(node.table)
            doomed = {id(row) for row in matching()}
            table.rows = [row for row in table.rows if id(row) not in doomed]

        return delete
    if node.kind == "EXECUTE":
        text = compiler.expression(node.values[0])
        using = [(mode, compiler.expression(e), compiler.setter_or_none(e)) for mode, e in node.columns]
        session = compiler.session
        return lambda: session.execute_immediate(text(), using)
    return lambda: None  # COMMIT, ROLLBACK: one session, nothing to undo here
