"""Runs PL/SQL: every node of the tree compiled once into a Python closure, then run as often as called.

A statement's closure returns None, or a signal that ends a loop or a routine (EXIT, CONTINUE, a
Returned value). Names are resolved when a unit is compiled (a package body when it is created, as
Oracle compiles it), except names qualified by another package, which are looked up on each call so a
replaced package body takes effect. Each scope keeps the frame of its current activation.
"""

from __future__ import annotations

from typing import Any

from tests.export.plsql import nodes as n
from tests.export.plsql import values as v
from tests.export.plsql.builtins import EXCEPTIONS
from tests.export.plsql.expressions import Expressions
from tests.export.plsql.scope import Overloads, Returned, Routine, Scope, Thunk, undeclared
from tests.export.plsql.types import CollectionType, RecordType, ScalarType
from tests.export.plsql.values import PlsqlError, ora

EXIT, CONTINUE = "exit", "continue"
PLS_INTEGER = ScalarType("PLS_INTEGER")


class Compiler(Expressions):
    """Compiles declarations, blocks and statements of one scope (expressions: see Expressions)."""

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
                self.declare_routine(declaration)
        inits = [(d.name, self.initial(d, type_)) for d, type_ in variables]
        for declaration in declarations:
            if isinstance(declaration, n.Subprogram) and declaration.block is not None:
                scope.symbols[declaration.name][1].compile()
        return inits

    def declare_routine(self, declaration: n.Subprogram) -> None:
        """A subprogram's declaration or body: the body of one declared before with the same parameter
        types completes it; other parameter types make an overload of the same name."""
        scope = self.scope
        known = scope.symbols.get(declaration.name)
        if known is None or known[0] != "routine":
            scope.symbols[declaration.name] = ("routine", Overloads(declaration.name))
            known = scope.symbols[declaration.name]
        overloads = known[1]
        same = overloads.declared(declaration)
        if same is None:
            overloads.variants.append(Routine(declaration, scope))
        elif declaration.block is not None:
            same.node = declaration

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
        call = self.expression(node.call)

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
