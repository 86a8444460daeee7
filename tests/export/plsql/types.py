"""PL/SQL data types and the conversion an assignment applies: BINARY_FLOAT rounds to float32, NUMBER and
PLS_INTEGER follow Oracle's ranges, VARCHAR2(n) its length, and collections are copied (value semantics)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tests.export.plsql.values import F32, F64, Collection, checked, ora, subscript, to_char

NUMBERS = {"NUMBER", "NUMERIC", "DECIMAL", "DEC", "FLOAT", "REAL", "INTEGER", "INT", "SMALLINT"}
INTEGERS = {"PLS_INTEGER", "BINARY_INTEGER", "SIMPLE_INTEGER", "NATURAL", "POSITIVE", "NATURALN", "POSITIVEN"}
STRINGS = {"VARCHAR2", "VARCHAR", "CHAR", "NVARCHAR2", "CLOB", "NCHAR", "NCLOB", "STRING"}
OTHER = {"BOOLEAN", "BINARY_FLOAT", "BINARY_DOUBLE", "SYS_REFCURSOR", "TIMESTAMP", "DATE"}
PLS_INTEGER_MAX = 2**31 - 1


@dataclass(frozen=True)
class ScalarType:
    name: str
    size: int | None = None

    def convert(self, value: Any) -> Any:
        if value is None:
            return None
        name = self.name
        if type(value) is F32 and name == "BINARY_FLOAT":
            return value
        if name == "BINARY_FLOAT":
            return self.binary(value, F32)
        if name == "BINARY_DOUBLE":
            return self.binary(value, F64)
        if name in NUMBERS:
            return self.number(value)
        if name in INTEGERS:
            number = subscript(self.number(value))
            if abs(number) > PLS_INTEGER_MAX:
                raise ora(-1426, "numeric overflow")
            return number
        if name in STRINGS:
            text = to_char(value)
            if self.size is not None and text is not None and len(text) > self.size:
                raise ora(-6502, "PL/SQL: numeric or value error: character string buffer too small")
            return text
        if name == "BOOLEAN" and not isinstance(value, bool):
            raise ora(-6550, f"PLS-00382: expression is of wrong type for BOOLEAN: {value!r}")
        return value

    @staticmethod
    def binary(value: Any, kind: type) -> Any:
        if isinstance(value, str):
            value = float(value)
        if isinstance(value, bool | Collection):
            raise ora(-6550, f"PLS-00382: expression is of wrong type: {value!r}")
        return kind(value)  # beyond float32's range: infinite (the session runs under np.errstate)

    def number(self, value: Any) -> Any:
        if isinstance(value, str):
            value = float(value)
        if isinstance(value, bool | Collection):
            raise ora(-6550, f"PLS-00382: expression is of wrong type: {value!r}")
        if type(value) in (F32, F64):
            if not math.isfinite(value):
                raise ora(-1426, "numeric overflow")
            value = float(value)
        if self.name in ("INTEGER", "INT", "SMALLINT"):
            value = subscript(value)
        return checked(value)

    def initial(self) -> Any:
        return None


@dataclass(frozen=True)
class CollectionType:
    name: str
    element: Any
    limit: int | None  # a VARRAY's; None for a nested table

    def convert(self, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, Collection) or value.type.name != self.name:
            got = value.type.name if isinstance(value, Collection) else type(value).__name__
            raise ora(-6550, f"PLS-00382: expression is of wrong type: {got} is not {self.name}")
        return value.copy()

    def construct(self, values: list) -> Collection:
        if self.limit is not None and len(values) > self.limit:
            raise ora(-6532, "Subscript outside of limit")
        return Collection(self, [self.element.convert(value) for value in values])

    def initial(self) -> Any:
        return None  # atomically NULL until constructed


@dataclass(frozen=True)
class RecordType:
    name: str
    fields: tuple[tuple[str, Any], ...] = field(default_factory=tuple)

    def convert(self, value: Any) -> Any:
        return None if value is None else dict(value)

    def initial(self) -> Any:
        return {name: type_.initial() for name, type_ in self.fields}


def scalar(name: str, args: tuple[int, ...] = ()) -> ScalarType | None:
    if name in NUMBERS | INTEGERS | STRINGS | OTHER:
        return ScalarType(name, args[0] if args and name in STRINGS else None)
    return None


UTL_NLA_ARRAY_FLT = CollectionType("UTL_NLA_ARRAY_FLT", ScalarType("BINARY_FLOAT"), 1_000_000)
UTL_NLA_ARRAY_DBL = CollectionType("UTL_NLA_ARRAY_DBL", ScalarType("BINARY_DOUBLE"), 1_000_000)
SCHEMA_TYPES = {"UTL_NLA_ARRAY_FLT": UTL_NLA_ARRAY_FLT, "UTL_NLA_ARRAY_DBL": UTL_NLA_ARRAY_DBL}
