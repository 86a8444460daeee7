"""Runs PL/SQL: every node of the tree compiled once into a Python closure, then run as often as called.

A statement's closure returns None, or a signal that ends a loop or a routine (EXIT, CONTINUE, a
Returned value). Names are resolved when a unit is compiled (a package body when it is created, as
Oracle compiles it), except names qualified by another package, which are looked up on each call so a
replaced package body takes effect. Each scope keeps the frame of its current activation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.export.plsql import nodes as n
from tests.export.plsql import values as v
from tests.export.plsql.builtins import CONSTANTS, EXCEPTIONS, FUNCTIONS
from tests.export.plsql.types import CollectionType, RecordType, ScalarType, scalar
from tests.export.plsql.values import Collection, PlsqlError, ora

EXIT, CONTINUE = "exit", "continue"
PLS_INTEGER = ScalarType("PLS_INTEGER")
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

    def compile(self) -> tuple:
        if self.compiled is None:
            if self.node.block is None:
                raise ora(-6550, f"PLS-00328: subprogram '{self.name}' is declared but never defined")
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


def passed(type_: Any, value: Any) -> Any:
    """A value passed in or returned: collections by reference (NOCOPY), scalars converted."""
    if isinstance(type_, CollectionType):
        if value is not None and (not isinstance(value, Collection) or value.type.name != type_.name):
            raise ora(-6550, f"PLS-00306: wrong type of argument: expected {type_.name}")
        return value
    return type_.convert(value)


def element(collection: Any, index: Any) -> Any:
    if collection is None:
        raise ora(-6531, "Reference to uninitialized collection")
    return collection.get(index)


class Compiler:
    """Compiles declarations, statements and expressions of one scope."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.session = scope.session

    # -- declarations
    def declare(self, declarations: list) -> list[tuple[str, Thunk]]:
        """Registers every name, then compiles the variables' initial values and the routines' bodies;
        returns (variable, initial value) in order."""
        scope, variables = self.scope, []
        for declaration in declarations:
            if isinstance(declaration, n.TypeDecl):
                scope.symbols[declaration.name] = ("type", self.type_declaration(declaration))
            elif isinstance(declaration, n.Variable):
                type_ = scope.resolve_type(declaration.type)
                scope.symbols[declaration.name] = ("var", type_)
                variables.append((declaration, type_))
            else:
                known = scope.symbols.get(declaration.name)
                if known is not None and known[0] == "routine" and declaration.block is None:
                    continue
                if known is not None and known[0] == "routine":
                    known[1].node = declaration
                else:
                    scope.symbols[declaration.name] = ("routine", Routine(declaration, scope))
        inits = [(d.name, self.initial(d, type_)) for d, type_ in variables]
        for declaration in declarations:
            if isinstance(declaration, n.Subprogram) and declaration.block is not None:
                scope.symbols[declaration.name][1].compile()
        return inits

    def type_declaration(self, declaration: n.TypeDecl) -> Any:
        if declaration.kind == "RECORD":
            fields = tuple((name, self.scope.resolve_type(ref)) for name, ref in declaration.element)
            return RecordType(declaration.name, fields)
        element_type = self.scope.resolve_type(declaration.element)
        return CollectionType(declaration.name, element_type, declaration.limit)

    def initial(self, declaration: n.Variable, type_: Any) -> Thunk:
        if declaration.default is None:
            return type_.initial
        value = self.expression(declaration.default)
        return lambda: type_.convert(value())

    # -- blocks
    def handled(self, block: n.Block) -> Thunk:
        """The block's statements with its exception handlers (declarations are the caller's)."""
        body = self.sequence(block.body)
        if not block.handlers:
            return body
        handlers = [(handler.names, self.sequence(handler.body)) for handler in block.handlers]
        session = self.session

        def run() -> Any:
            try:
                return body()
            except PlsqlError as error:
                for names, handler in handlers:
                    if "OTHERS" in names or any(EXCEPTIONS.get(name) == error.code for name in names):
                        session.errors.append(error)
                        try:
                            return handler()
                        finally:
                            session.errors.pop()
                raise

        return run

    def block(self, block: n.Block) -> Thunk:
        """An anonymous block: its own scope, its variables set up on each run."""
        local = Scope(self.scope, self.session)
        compiler = Compiler(local)
        inits = compiler.declare(block.declarations)
        body = compiler.handled(block)

        def run() -> Any:
            frame: dict[str, Any] = {}
            saved, local.frame = local.frame, frame
            try:
                for name, init in inits:
                    frame[name] = init()
                return body()
            finally:
                local.frame = saved

        return run

    def sequence(self, statements: list) -> Thunk:
        compiled = [self.statement(statement) for statement in statements]
        if len(compiled) == 1:
            return compiled[0]

        def run() -> Any:
            for statement in compiled:
                signal = statement()
                if signal is not None:
                    return signal
            return None

        return run

    # -- statements
    def statement(self, node: Any) -> Thunk:
        method = getattr(self, f"statement_{type(node).__name__}")
        return method(node)

    def statement_Block(self, node: n.Block) -> Thunk:
        return self.block(node)

    def statement_Null(self, node: n.Null) -> Thunk:
        return lambda: None

    def statement_Assign(self, node: n.Assign) -> Thunk:
        store, value = self.target(node.target), self.expression(node.value)

        def run() -> None:
            store(value())

        return run

    def statement_CallStatement(self, node: n.CallStatement) -> Thunk:
        call = self.expression(node.call, statement=True)

        def run() -> None:
            call()

        return run

    def statement_If(self, node: n.If) -> Thunk:
        branches = [(self.expression(condition), self.sequence(body)) for condition, body in node.branches]
        otherwise = self.sequence(node.otherwise) if node.otherwise is not None else None

        def run() -> Any:
            for condition, body in branches:
                if condition() is True:
                    return body()
            return otherwise() if otherwise is not None else None

        return run

    def statement_CaseStatement(self, node: n.CaseStatement) -> Thunk:
        case = node.case
        subject = self.expression(case.subject) if case.subject is not None else None
        whens = [(self.expression(when), self.sequence(body)) for when, body in case.whens]
        otherwise = self.sequence(case.otherwise) if case.otherwise is not None else None

        def run() -> Any:
            value = subject() if subject is not None else True
            for when, body in whens:
                if v.compare_op("=", when(), value) is True:
                    return body()
            if otherwise is None:
                raise ora(-6592, "CASE not found while executing CASE statement")
            return otherwise()

        return run

    def loop_signal(self, signal: Any) -> tuple[bool, Any]:
        """(stop the loop, signal to pass on)."""
        if signal is EXIT:
            return True, None
        if signal is CONTINUE:
            return False, None
        return True, signal

    def statement_For(self, node: n.For) -> Thunk:
        low, high = self.expression(node.low), self.expression(node.high)
        local = Scope(self.scope, self.session)
        local.symbols[node.variable] = ("var", PLS_INTEGER)
        body = Compiler(local).sequence(node.body)
        variable, reverse = node.variable, node.reverse
        counts = self.session.loop_counts.setdefault(variable, [0, 0])  # bodies run, ended by CONTINUE

        def run() -> Any:
            first, last = v.subscript(low()), v.subscript(high())
            steps = range(last, first - 1, -1) if reverse else range(first, last + 1)
            frame: dict[str, Any] = {}
            saved, local.frame = local.frame, frame
            try:
                for index in steps:
                    frame[variable] = index
                    counts[0] += 1
                    signal = body()
                    if signal is not None:
                        if signal is CONTINUE:
                            counts[1] += 1
                            continue
                        return None if signal is EXIT else signal
                return None
            finally:
                local.frame = saved

        return run

    def statement_While(self, node: n.While) -> Thunk:
        condition, body = self.expression(node.condition), self.sequence(node.body)

        def run() -> Any:
            while condition() is True:
                signal = body()
                if signal is not None and signal is not CONTINUE:
                    return None if signal is EXIT else signal
            return None

        return run

    def statement_Loop(self, node: n.Loop) -> Thunk:
        body = self.sequence(node.body)

        def run() -> Any:
            while True:
                signal = body()
                if signal is not None and signal is not CONTINUE:
                    return None if signal is EXIT else signal

        return run

    def statement_Exit(self, node: n.Exit) -> Thunk:
        signal = EXIT if node.kind == "EXIT" else CONTINUE
        if node.condition is None:
            return lambda: signal
        condition = self.expression(node.condition)
        return lambda: signal if condition() is True else None

    def statement_Return(self, node: n.Return) -> Thunk:
        if node.value is None:
            return lambda: Returned(None)
        value = self.expression(node.value)
        return lambda: Returned(value())

    def statement_Raise(self, node: n.Raise) -> Thunk:
        session, name = self.session, node.name

        def run() -> None:
            if name is None:
                if not session.errors:
                    raise ora(
                        -6550,
                        "PLS-00367: a RAISE statement with no exception name must be inside a handler",
                    )
                raise session.errors[-1]
            if name not in EXCEPTIONS:
                raise undeclared(name)
            raise PlsqlError(EXCEPTIONS[name], name.lower().replace("_", " "))

        return run

    def statement_Unsupported(self, node: n.Unsupported) -> Thunk:
        def run() -> None:
            raise NotImplementedError(f"the interpreter does not run {node.text!r}")

        return run

    def statement_Sql(self, node: n.Sql) -> Thunk:
        from tests.export.plsql.store import compile_sql

        return compile_sql(self, node)

    # -- assignment targets
    def target(self, node: Any) -> Callable[[Any], None]:
        if isinstance(node, n.Bind):
            binds, name = self.session.binds, node.name
            return lambda value: binds.__setitem__(name, value)
        if isinstance(node, n.Name):
            holder, symbol = self.scope.find(node.name)
            if symbol is None or symbol[0] != "var":
                raise ora(
                    -6550, f"PLS-00363: expression '{node.name}' cannot be used as an assignment target"
                )
            type_, name = symbol[1], node.name
            assert holder is not None

            def store(value: Any) -> None:
                holder.frame[name] = type_.convert(value)

            return store
        if isinstance(node, n.Call) and len(node.args) == 1:
            collection, index = self.expression(node.base), self.expression(node.args[0][1])

            def store_element(value: Any) -> None:
                target = collection()
                if target is None:
                    raise ora(-6531, "Reference to uninitialized collection")
                target.set(index(), value)

            return store_element
        if isinstance(node, n.Member):
            record, field = self.expression(node.base), node.name
            return lambda value: record().__setitem__(field, value)
        raise ora(-6550, "PLS-00363: expression cannot be used as an assignment target")

    def setter_or_none(self, node: Any) -> Callable | None:
        try:
            return self.target(node)
        except PlsqlError:
            return None

    # -- expressions
    def expression(self, node: Any, statement: bool = False) -> Thunk:
        method = getattr(self, f"expression_{type(node).__name__}")
        return method(node, statement) if isinstance(node, n.Name | n.Member | n.Call) else method(node)

    def expression_Lit(self, node: n.Lit) -> Thunk:
        value = node.value
        return lambda: value

    def expression_Bind(self, node: n.Bind) -> Thunk:
        binds, name = self.session.binds, node.name
        return lambda: binds[name]

    def expression_Star(self, node: n.Star) -> Thunk:
        raise ora(-936, "missing expression: * outside COUNT(*)")

    def expression_Attr(self, node: n.Attr) -> Thunk:
        def run() -> None:
            raise NotImplementedError(f"the interpreter does not run %{node.name}")

        return run

    def expression_Unary(self, node: n.Unary) -> Thunk:
        operand = self.expression(node.operand)
        if node.op == "NOT":
            return lambda: v.logical_not(operand())
        return lambda: v.negate(operand())

    def expression_Binary(self, node: n.Binary) -> Thunk:
        left, right, op = self.expression(node.left), self.expression(node.right), node.op
        if op == "AND":

            def both() -> Any:
                first = left()
                return False if first is False else v.logical_and(first, right())

            return both
        if op == "OR":

            def either() -> Any:
                first = left()
                return True if first is True else v.logical_or(first, right())

            return either
        arithmetic = {"+": v.add, "-": v.subtract, "*": v.multiply, "/": v.divide, "||": v.concat}
        if op in arithmetic:
            function = arithmetic[op]
            return lambda: function(left(), right())
        return lambda: v.compare_op(op, left(), right())

    def expression_Is(self, node: n.Is) -> Thunk:
        operand, negated, what = self.expression(node.operand), node.negated, node.what

        def test() -> bool | None:
            value = operand()
            if what == "NULL":
                result = value is None
            elif value is None:
                return None
            elif type(value) not in (v.F32, v.F64):
                result = False  # a NUMBER is never NaN or infinite
            else:
                result = bool(v.np.isnan(value) if what == "NAN" else v.np.isinf(value))
            return result != negated

        return test

    def expression_Case(self, node: n.Case) -> Thunk:
        subject = self.expression(node.subject) if node.subject is not None else None
        whens = [(self.expression(when), self.expression(value)) for when, value in node.whens]
        otherwise = self.expression(node.otherwise) if node.otherwise is not None else (lambda: None)

        def run() -> Any:
            if subject is None:
                for when, value in whens:
                    if when() is True:
                        return value()
            else:
                key = subject()
                for when, value in whens:
                    if v.compare_op("=", key, when()) is True:
                        return value()
            return otherwise()

        return run

    def expression_Name(self, node: n.Name, statement: bool = False) -> Thunk:
        name = node.name
        holder, symbol = self.scope.find(name)
        if holder is not None and symbol is not None and symbol[0] == "var":
            frames = holder
            return lambda: frames.frame[name]
        if symbol is not None and symbol[0] == "routine":
            routine = symbol[1]
            return lambda: routine.invoke([])
        if name in CONSTANTS:
            constant = CONSTANTS[name]
            return lambda: constant
        errors = self.session.errors
        if name == "SQLCODE":
            return lambda: errors[-1].code if errors else 0
        if name == "SQLERRM":
            return lambda: str(errors[-1]) if errors else "ORA-0000: normal, successful completion"
        raise undeclared(name)

    def expression_Member(self, node: n.Member, statement: bool = False) -> Thunk:
        return self.member(node, [])

    def expression_Call(self, node: n.Call, statement: bool = False) -> Thunk:
        base = node.base
        if isinstance(base, n.Member):
            return self.member(base, node.args)
        if not isinstance(base, n.Name):
            raise ora(-6550, "PLS-00222: no function with this form")
        name = base.name
        _, symbol = self.scope.find(name)
        if symbol is not None and symbol[0] == "var":
            collection = self.expression(base)
            (index,) = [self.expression(arg) for _, arg in node.args]
            return lambda: element(collection(), index())
        if symbol is not None and symbol[0] == "routine":
            routine, actuals = symbol[1], self.actuals(node.args)
            return lambda: routine.invoke(actuals)
        type_ = symbol[1] if symbol is not None and symbol[0] == "type" else self.session.types.get(name)
        if isinstance(type_, CollectionType):
            items = [self.expression(arg) for _, arg in node.args]
            return lambda: type_.construct([item() for item in items])
        if name in FUNCTIONS:
            function, items = FUNCTIONS[name], [self.expression(arg) for _, arg in node.args]
            return lambda: function(*(item() for item in items))
        raise undeclared(name)

    def actuals(self, args: list) -> list[tuple[str | None, Thunk, Callable | None]]:
        return [(name, self.expression(arg), self.setter_or_none(arg)) for name, arg in args]

    def member(self, node: n.Member, args: list) -> Thunk:
        """x.COUNT, x.EXTEND(n) and the other collection methods; record.field; package.routine(...);
        UTL_NLA.BLAS_...(...)."""
        base, name = node.base, node.name
        if isinstance(base, n.Name):
            _, symbol = self.scope.find(base.name)
            if symbol is not None and symbol[0] == "var":
                if isinstance(symbol[1], RecordType):
                    record = self.expression(base)
                    return lambda: record()[name]
                return self.method(self.expression(base), name, [self.expression(arg) for _, arg in args])
            if base.name == "UTL_NLA":
                from tests.export.plsql.utl_nla import utl_nla_call

                return utl_nla_call(self, name, args)
            if symbol is None:
                packages, package, actuals = self.session.packages, base.name, self.actuals(args)

                def call() -> Any:
                    if package not in packages:
                        raise undeclared(package)
                    return packages[package].routine(name).invoke(actuals)

                return call
        record = self.expression(base)
        return lambda: record()[name]

    def method(self, collection: Thunk, name: str, args: list[Thunk]) -> Thunk:
        def target() -> Collection:
            value = collection()
            if value is None:
                raise ora(-6531, "Reference to uninitialized collection")
            return value

        if name == "COUNT":
            return lambda: len(target().items)
        if name == "LIMIT":
            return lambda: target().type.limit
        if name == "FIRST":
            return lambda: 1 if target().items else None
        if name == "LAST":
            return lambda: len(target().items) or None
        if name == "EXTEND":
            count = args[0] if args else (lambda: 1)
            return lambda: target().extend(v.subscript(count()))
        if name == "TRIM":
            count = args[0] if args else (lambda: 1)
            return lambda: target().trim(v.subscript(count()))
        if name == "EXISTS":
            (index,) = args
            return lambda: 1 <= v.subscript(index()) <= len(target().items)
        raise ora(-6550, f"PLS-00302: component '{name}' must be declared")
