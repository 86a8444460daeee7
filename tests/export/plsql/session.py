"""One database session: the table store, the packages created so far (their state lives as long as the
session, like Oracle's package state), SQL*Plus bind variables, and the scripts run unit by unit
(WHENEVER SQLERROR EXIT: the first error stops the run and propagates)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from tests.export.plsql import nodes as n
from tests.export.plsql.interpreter import Compiler
from tests.export.plsql.lexer import tokenize
from tests.export.plsql.parser import parse_unit
from tests.export.plsql.scope import Routine, Scope
from tests.export.plsql.script import units
from tests.export.plsql.store import CREATE_TABLE, Store
from tests.export.plsql.types import SCHEMA_TYPES
from tests.export.plsql.values import DECIMAL, F32, F64, Collection, PlsqlError, ora

ALTER_NUMERIC_CHARACTERS = re.compile(
    r"\s*ALTER\s+SESSION\s+SET\s+NLS_NUMERIC_CHARACTERS\s*=\s*'(\S\S)'\s*;?\s*$", re.I
)

# What EXECUTE IMMEDIATE runs as PL/SQL (after any leading comments); other text is SQL or table DDL.
DYNAMIC_PLSQL = re.compile(r"(\s|--[^\n]*\n)*(DECLARE|BEGIN|CREATE\s+(OR\s+REPLACE\s+)?PACKAGE)\b", re.I)
# The one DDL on packages a dynamic statement runs here: dropping a version's package.
DROP_PACKAGE = re.compile(r'\s*DROP\s+PACKAGE\s+"?(\w+)"?\s*$', re.I)


class Package:
    def __init__(self, name: str, public: set[str]) -> None:
        self.name, self.public = name, public
        self.scope: Scope | None = None

    def routine(self, name: str) -> Routine:
        if self.scope is None:
            raise ora(-4067, f'not executed, package body "{self.name}" does not exist')
        symbol = self.scope.symbols.get(name)
        if name not in self.public or symbol is None or symbol[0] != "routine":
            raise ora(-6550, f"PLS-00302: component '{name}' must be declared")
        return symbol[1]


class Session:
    def __init__(self) -> None:
        self.types: dict[str, Any] = dict(SCHEMA_TYPES)
        self.store = Store(self.types)
        self.packages: dict[str, Package] = {}
        self.binds: dict[str, Any] = {}
        self.errors: list[PlsqlError] = []  # the exceptions being handled (SQLCODE, RAISE;)
        self.blas_calls: list[tuple[str, dict[str, Any]]] = []
        self.loop_counts: dict[str, list[int]] = {}  # FOR loop variable → [bodies run, ended by CONTINUE]
        self.numeric_characters = ".,"  # NLS_NUMERIC_CHARACTERS: the decimal, then the group character
        self.schema = "NNSQL"  # the schema that owns every unit ($$PLSQL_UNIT_OWNER)
        # CREATE PUBLIC SYNONYM name FOR other_schema.package: what an unqualified package name that no
        # unit of this schema holds resolves to, as in Oracle; a schema-qualified name never does
        self.public_synonyms: dict[str, Package] = {}
        self.output: list[str] = []  # DBMS_OUTPUT.PUT_LINE's lines, printed after each unit
        self.server_output = False  # SET SERVEROUTPUT ON: SQL*Plus prints them

    # -- scripts
    def run_script(self, path: Path, text: str | None = None) -> None:
        """Every unit of a script in order; @@name runs a script beside it. Binary floating-point
        arithmetic overflows to infinity without a warning, as IEEE and Oracle have it."""
        for unit in units(path.read_text() if text is None else text):
            try:
                with np.errstate(all="ignore"), self.nls():
                    self.run_unit(unit.kind, unit.text, path.parent)
            except PlsqlError as error:
                error.add_note(f"{path.name}, line {unit.line}")
                raise
            finally:
                if self.server_output and self.output:
                    print("\n".join(self.output))
                self.output.clear()

    def run_unit(self, kind: str, text: str, directory: Path) -> None:
        if kind == "command":
            words = text.split()
            if [word.upper() for word in words[:2]] == ["SET", "SERVEROUTPUT"]:
                self.server_output = len(words) > 2 and words[2].upper() == "ON"
            elif words[0].upper() in ("VARIABLE", "VAR"):
                self.binds[words[1].upper()] = None
            elif text.startswith("@"):
                self.run_script(directory / text.lstrip("@"))
            elif words[0].upper() in ("EXEC", "EXECUTE"):  # SQL*Plus runs it as BEGIN statement; END;
                statement = text.split(None, 1)[1].rstrip().rstrip(";")
                self.run_parsed(parse_unit(f"BEGIN {statement}; END;"))
            return
        if kind == "sql" and (found := ALTER_NUMERIC_CHARACTERS.match(text)):
            self.numeric_characters = found[1]
            return
        if kind == "sql" and CREATE_TABLE.match(text.rstrip().rstrip(";").split("\n    VARRAY")[0]):
            self.store.execute_ddl(text.rstrip().rstrip(";").split("\n    VARRAY")[0])
            return
        self.run_parsed(parse_unit(text))

    def run_parsed(self, unit: Any) -> None:
        if isinstance(unit, n.PackageSpec):
            public = {d.name for d in unit.declarations if isinstance(d, n.Subprogram)}
            self.packages[unit.name] = Package(unit.name, public)
        elif isinstance(unit, n.PackageBody):
            self.create_body(unit)
        else:
            Compiler(Scope(None, self)).block(unit)()

    def execute_immediate(self, text: str, using: list[tuple[str, Any, Any]]) -> None:
        """EXECUTE IMMEDIATE: a PL/SQL unit (an anonymous block, whose placeholders take the USING
        arguments by position of their first appearance, OUT ones written back; or CREATE [OR REPLACE]
        PACKAGE [BODY], which raises ORA-24344 when the body did not compile, as dynamic DDL does), else
        the table store's DDL."""
        if not DYNAMIC_PLSQL.match(text):
            if using:
                raise ora(-1006, "bind variable does not exist")
            if dropped := DROP_PACKAGE.match(text):
                if self.packages.pop(dropped[1].upper(), None) is None:
                    raise ora(-4043, f"object {dropped[1]} does not exist")
                return
            self.store.execute_ddl(text.strip())
            return
        placeholders = list(dict.fromkeys(t.text for t in tokenize(text) if t.kind == "bind"))
        if len(placeholders) != len(using):
            raise ora(-1008, "not all variables bound")
        outer, self.binds = self.binds, {}
        try:
            for name, (mode, value, _) in zip(placeholders, using, strict=True):
                self.binds[name] = value() if mode != "OUT" else None
            unit = parse_unit(text)
            self.run_parsed(unit)
            if isinstance(unit, n.PackageBody) and self.packages[unit.name].scope is None:
                raise ora(-24344, "success with compilation error")
            written = dict(self.binds)
        finally:
            self.binds = outer
        for name, (mode, _, setter) in zip(placeholders, using, strict=True):
            if mode != "IN" and setter is not None:
                setter(written[name])

    def create_body(self, unit: n.PackageBody) -> None:
        """Compiles the body (its errors go to user_errors, as CREATE PACKAGE BODY records them) and
        initialises the package's state."""
        package = self.packages.get(unit.name)
        if package is None:
            raise ora(-6550, f"PLS-00304: cannot compile body of '{unit.name}' without its specification")
        errors = self.store.tables["USER_ERRORS"]
        errors.rows = [row for row in errors.rows if row["NAME"] != unit.name]
        scope = Scope(None, self)
        try:
            inits = Compiler(scope).declare(unit.declarations)
        except PlsqlError as error:
            errors.rows.append(
                {
                    "NAME": unit.name,
                    "TYPE": "PACKAGE BODY",
                    "LINE": 0,
                    "TEXT": str(error),
                    "ATTRIBUTE": "ERROR",
                }
            )
            package.scope = None
            return
        scope.frame = {}
        for name, init in inits:
            scope.frame[name] = init()
        package.scope = scope

    @contextlib.contextmanager
    def nls(self) -> Iterator[None]:
        """This session's decimal character for the conversions run meanwhile."""
        token = DECIMAL.set(self.numeric_characters[0])
        try:
            yield
        finally:
            DECIMAL.reset(token)

    # -- calls from Python
    def call(self, package: str, function: str, *args: Any) -> Any:
        """package.function(args): a row (a sequence of numbers, None for NULL elements) is passed as
        a UTL_NLA_ARRAY_FLT, a Python number as a NUMBER; a collection comes back as a numpy array (a
        nested table of labels as a list)."""
        routine = self.packages[package.upper()].routine(function.upper())
        actuals: list[tuple[str | None, Any, Any]] = [
            (None, constant(self.argument(arg)), None) for arg in args
        ]
        with np.errstate(all="ignore"), self.nls():
            return result(routine.invoke(actuals))

    def argument(self, value: Any) -> Any:
        if value is None or isinstance(value, int | float | str):
            return value
        if isinstance(value, Rows):
            return value.bound(self.types[value.type], self.argument)
        flt = SCHEMA_TYPES["UTL_NLA_ARRAY_FLT"]
        items = np.asarray(value, dtype=object).ravel()
        with np.errstate(all="ignore"):  # beyond float32's range: infinite once bound
            return Collection(flt, [None if item is None else F32(item) for item in items])


class Rows:
    """An argument of a collection of rows (nnsql_rows: a VARRAY of UTL_NLA_ARRAY_FLT), from a sequence
    of rows (each flattened; None for a NULL row), as a caller binds one."""

    def __init__(self, rows: Any, type_name: str = "NNSQL_ROWS") -> None:
        self.rows, self.type = list(rows), type_name

    def bound(self, type_: Any, element: Any) -> Collection:
        return Collection(type_, [element(row) for row in self.rows])


def constant(value: Any) -> Any:
    return lambda: value


def result(value: Any) -> Any:
    if isinstance(value, Collection):
        if value.type.element.name in ("BINARY_FLOAT", "BINARY_DOUBLE"):
            kind = F32 if value.type.element.name == "BINARY_FLOAT" else F64
            return np.array([np.nan if item is None else item for item in value.items], dtype=kind)
        return list(value.items)
    return value
