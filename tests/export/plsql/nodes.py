"""The syntax tree of the PL/SQL subset: expressions, statements, declarations and the units a script
creates (package specs and bodies, anonymous blocks, SQL statements)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Lit:
    value: Any


@dataclass
class Name:
    name: str


@dataclass
class Member:
    base: Any
    name: str


@dataclass
class Call:
    base: Any
    args: list[tuple[str | None, Any]]


@dataclass
class Attr:
    base: Any
    name: str  # %NOTFOUND and the like


@dataclass
class Bind:
    name: str


@dataclass
class Star:
    pass


@dataclass
class Unary:
    op: str
    operand: Any


@dataclass
class Binary:
    op: str
    left: Any
    right: Any


@dataclass
class Is:
    operand: Any
    what: str  # NULL, NAN, INFINITE
    negated: bool


@dataclass
class Case:
    subject: Any  # None for a searched CASE
    whens: list[tuple[Any, Any]]
    otherwise: Any


@dataclass
class TypeRef:
    name: str
    args: tuple[int, ...] = ()


@dataclass
class Assign:
    target: Any
    value: Any


@dataclass
class CallStatement:
    call: Any


@dataclass
class If:
    branches: list[tuple[Any, list]]
    otherwise: list | None


@dataclass
class CaseStatement:
    case: Case  # whens and otherwise hold statement lists


@dataclass
class For:
    variable: str
    reverse: bool
    low: Any
    high: Any
    body: list


@dataclass
class While:
    condition: Any
    body: list


@dataclass
class Loop:
    body: list


@dataclass
class Exit:
    condition: Any
    kind: str  # EXIT or CONTINUE


@dataclass
class Return:
    value: Any


@dataclass
class Raise:
    name: str | None


@dataclass
class Null:
    pass


@dataclass
class Sql:
    """A SQL statement run against the table store: kind SELECT, INSERT, UPDATE, DELETE, EXECUTE,
    COMMIT or ROLLBACK."""

    kind: str
    table: str = ""
    columns: list = field(default_factory=list)  # SELECT items, INSERT columns, UPDATE (column, value),
    # EXECUTE IMMEDIATE's USING (mode, expression)
    values: list = field(default_factory=list)  # INSERT values, or EXECUTE IMMEDIATE's text
    into: list = field(default_factory=list)
    where: list = field(default_factory=list)  # (column, expression), all equal


@dataclass
class Unsupported:
    """A statement the generated text holds but no test executes (the batch path's cursor loop)."""

    text: str


@dataclass
class Variable:
    name: str
    type: TypeRef
    constant: bool = False
    default: Any = None


@dataclass
class TypeDecl:
    name: str
    kind: str  # TABLE, VARRAY or RECORD
    element: Any  # TypeRef, or the record's fields [(name, TypeRef)]
    limit: int | None = None


@dataclass
class Param:
    name: str
    mode: str  # IN, OUT or IN OUT
    type: TypeRef
    default: Any = None


@dataclass
class Subprogram:
    name: str
    params: list[Param]
    returns: TypeRef | None
    block: Block | None  # None: a declaration only
    deterministic: bool = False


@dataclass
class Handler:
    names: list[str]  # OTHERS, NO_DATA_FOUND, ...
    body: list


@dataclass
class Block:
    declarations: list
    body: list
    handlers: list[Handler] = field(default_factory=list)


@dataclass
class PackageSpec:
    name: str
    declarations: list


@dataclass
class PackageBody:
    name: str
    declarations: list
    initialization: list
