"""Scopes and routines: the names a block, routine or package body declares, the frame of its current
activation, and the call of a procedure or function (positional or named arguments, defaults, IN
parameters by reference, OUT and IN OUT copied back when the routine returns normally)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.export.plsql import nodes as n
from tests.export.plsql.types import CollectionType, scalar
from tests.export.plsql.values import Collection, PlsqlError, ora

Thunk = Callable[[], Any]


class Returned:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def undeclared(name: str) -> PlsqlError:
    return ora(-6550, f"PLS-00201: identifier '{name}' must be declared")


class Scope:
    """Names declared in a block, a routine or a package body, and the frame of its current activation."""

    def __init__(self, parent: Scope | None, session: Any) -> None:
        self.parent, self.session = parent, session
        self.symbols: dict[str, tuple[str, Any]] = {}
        self.frame: dict[str, Any] = {}

    def find(self, name: str) -> tuple[Scope | None, tuple[str, Any] | None]:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.symbols:
                return scope, scope.symbols[name]
            scope = scope.parent
        return None, None

    def resolve_type(self, ref: n.TypeRef) -> Any:
        found = scalar(ref.name, ref.args)
        if found is not None:
            return found
        _, symbol = self.find(ref.name)
        if symbol is not None and symbol[0] == "type":
            return symbol[1]
        if ref.name in self.session.types:
            return self.session.types[ref.name]
        raise undeclared(ref.name)


class Routine:
    """A procedure or function; its body is compiled with the scope it is declared in."""

    def __init__(self, node: n.Subprogram, scope: Scope) -> None:
        self.node, self.declared_in = node, scope
        self.name = node.name
        self.compiled: tuple | None = None
        self.results: dict[tuple, Any] = {}  # a DETERMINISTIC function's results by arguments

    def compile(self) -> tuple:
        if self.compiled is None:
            if self.node.block is None:
                raise ora(-6550, f"PLS-00328: subprogram '{self.name}' is declared but never defined")
            from tests.export.plsql.interpreter import Compiler

            local = Scope(self.declared_in, self.declared_in.session)
            compiler = Compiler(local)
            params = []
            for param in self.node.params:
                type_ = local.resolve_type(param.type)
                local.symbols[param.name] = ("var", type_)
                default = None if param.default is None else compiler.expression(param.default)
                params.append((param, type_, default))
            returns = None if self.node.returns is None else local.resolve_type(self.node.returns)
            inits = compiler.declare(self.node.block.declarations)
            body = compiler.handled(self.node.block)
            self.compiled = (local, params, returns, inits, body)
        return self.compiled

    def invoke(self, actuals: list[tuple[str | None, Thunk, Callable | None]]) -> Any:
        """The routine's result. A DETERMINISTIC function with IN parameters only returns its earlier
        result for the same arguments, as Oracle may (the package declares that nothing else differs)."""
        local, params, returns, inits, body = self.compile()
        bound = self.bind(params, actuals)
        frame: dict[str, Any] = {}
        for (param, type_, default), actual in zip(params, bound, strict=True):
            if param.mode == "OUT":
                frame[param.name] = type_.initial()
            elif actual is None:
                frame[param.name] = type_.convert(default())
            else:
                frame[param.name] = passed(type_, actual[0]())
        key = None
        if self.node.deterministic and all(param.mode == "IN" for param, _, _ in params):
            key = tuple(hashable(value) for value in frame.values())
            if key in self.results:
                return copied(self.results[key])
        result = self.run(local, params, returns, inits, body, bound, frame)
        if key is not None:
            self.results[key] = copied(result)
        return result

    def run(
        self, local: Scope, params: list, returns: Any, inits: list, body: Thunk, bound: list, frame: dict
    ) -> Any:
        saved, local.frame = local.frame, frame
        try:
            for name, init in inits:
                frame[name] = init()
            result = body()
        finally:
            local.frame = saved
        for (param, _, _), actual in zip(params, bound, strict=True):
            if param.mode != "IN" and actual is not None:
                actual[1](frame[param.name])
        if returns is None:
            return None
        if not isinstance(result, Returned):
            raise ora(-6503, f"PL/SQL: Function {self.name} returned without value")
        return passed(returns, result.value)

    def takes(self, values: list[tuple[str | None, Any, Any]]) -> bool:
        """Whether the arguments' values fit this routine's parameters (see Overloads)."""
        _, params, _, _, _ = self.compile()
        names = [param.name for param, _, _ in params]
        given: set[int] = set()
        for position, (name, value, _) in enumerate(values):
            index = position if name is None else names.index(name) if name in names else -1
            if index < 0 or index >= len(params) or not fits(params[index][1], value):
                return False
            given.add(index)
        return all(i in given or default is not None for i, (_, _, default) in enumerate(params))

    def bind(self, params: list, actuals: list) -> list:
        """Each parameter's (value, setter), from positional then named arguments; None: its default."""
        bound: list[Any] = [None] * len(params)
        names = [param.name for param, _, _ in params]
        for position, (name, value, setter) in enumerate(actuals):
            index = position if name is None else names.index(name) if name in names else -1
            if index < 0 or index >= len(params):
                raise ora(-6550, f"PLS-00306: wrong number or types of arguments in call to '{self.name}'")
            bound[index] = (value, setter)
        for (param, _, default), actual in zip(params, bound, strict=True):
            if actual is None and default is None and param.mode == "IN":
                raise ora(-6550, f"PLS-00306: wrong number or types of arguments in call to '{self.name}'")
            if param.mode != "IN" and (actual is None or actual[1] is None):
                raise ora(
                    -6550, f"PLS-00363: expression cannot be used as an assignment target ({param.name})"
                )
        return bound


class Overloads:
    """The subprograms of one name in a scope, told apart by their parameters' types. A call runs the
    one whose parameters take its arguments: a collection argument picks the parameter of its type, a
    scalar a scalar one. Oracle resolves this when it compiles the call, from the arguments' declared
    types; here it is done with the values, and a NULL argument, which both would answer alike in
    the packages nnsql writes (NULL), matches any type, so the first declared matching overload runs."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.variants: list[Routine] = []

    @property
    def node(self) -> n.Subprogram:
        return self.variants[0].node

    def declared(self, declaration: n.Subprogram) -> Routine | None:
        """The variant with the same parameter types as `declaration`, if any."""
        types = signature(declaration)
        return next((r for r in self.variants if signature(r.node) == types), None)

    def compile(self) -> None:
        for variant in self.variants:
            if variant.node.block is not None:
                variant.compile()

    def invoke(self, actuals: list[tuple[str | None, Thunk, Callable | None]]) -> Any:
        if len(self.variants) == 1:
            return self.variants[0].invoke(actuals)
        values = [(name, value(), setter) for name, value, setter in actuals]
        for variant in self.variants:
            if variant.takes(values):
                return variant.invoke([(name, constant(value), setter) for name, value, setter in values])
        raise ora(-6550, f"PLS-00306: wrong number or types of arguments in call to '{self.name}'")


def signature(node: n.Subprogram) -> tuple[str, ...]:
    return tuple(param.type.name for param in node.params)


def constant(value: Any) -> Thunk:
    return lambda: value


def passed(type_: Any, value: Any) -> Any:
    """A value passed in or returned: collections by reference (NOCOPY), scalars converted."""
    if isinstance(type_, CollectionType):
        if value is not None and (not isinstance(value, Collection) or value.type.name != type_.name):
            raise ora(-6550, f"PLS-00306: wrong type of argument: expected {type_.name}")
        return value
    return type_.convert(value)


def fits(type_: Any, value: Any) -> bool:
    if value is None:
        return True
    if isinstance(type_, CollectionType):
        return isinstance(value, Collection) and value.type.name == type_.name
    return not isinstance(value, Collection)


def hashable(value: Any) -> Any:
    if isinstance(value, Collection):
        return (value.type.name, tuple(hashable(item) for item in value.items))
    return value


def copied(value: Any) -> Any:
    return value.copy() if isinstance(value, Collection) else value


def element(collection: Any, index: Any) -> Any:
    if collection is None:
        raise ora(-6531, "Reference to uninitialized collection")
    return collection.get(index)
