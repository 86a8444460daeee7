"""The expressions of the subset compiled to closures, and assignment targets: literals, variables,
collection elements and methods (COUNT, EXTEND...), record fields, routine and package calls, built-in
functions, UTL_NLA calls, operators with Oracle's typing and three-valued logic, CASE and IS tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.export.plsql import nodes as n
from tests.export.plsql import values as v
from tests.export.plsql.builtins import CONSTANTS, FUNCTIONS
from tests.export.plsql.scope import Scope, Thunk, element, undeclared
from tests.export.plsql.types import CollectionType, RecordType
from tests.export.plsql.values import Collection, PlsqlError, ora


class Expressions:
    """Compiles expressions and assignment targets in one scope."""

    scope: Scope
    session: Any

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
    def expression(self, node: Any) -> Thunk:
        method = getattr(self, f"expression_{type(node).__name__}")
        return method(node)

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

    def expression_Name(self, node: n.Name) -> Thunk:
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
        if name == "$$PLSQL_UNIT_OWNER":
            schema = self.session.schema
            return lambda: schema
        errors = self.session.errors
        if name == "SQLCODE":
            return lambda: errors[-1].code if errors else 0
        if name == "SQLERRM":
            return lambda: str(errors[-1]) if errors else "ORA-0000: normal, successful completion"
        raise undeclared(name)

    def expression_Member(self, node: n.Member) -> Thunk:
        return self.member(node, [])

    def expression_Call(self, node: n.Call) -> Thunk:
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
        UTL_NLA.BLAS_...(...); DBMS_ASSERT.<check>(...)."""
        base, name = node.base, node.name
        if isinstance(base, n.Member) and isinstance(base.base, n.Name):  # schema.package.routine(...)
            return self.qualified(base.base.name, base.name, name, args)
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
            if base.name == "DBMS_OUTPUT" and name == "PUT_LINE":
                (text,) = [self.expression(arg) for _, arg in args]
                lines = self.session.output
                return lambda: lines.append(v.to_char(text()) or "")
            if base.name == "DBMS_ASSERT":
                from tests.export.plsql.dbms_assert import dbms_assert_call

                return dbms_assert_call(self, name, args)
            if symbol is None:
                packages, package, actuals = self.session.packages, base.name, self.actuals(args)
                synonyms = self.session.public_synonyms

                def call() -> Any:
                    found = packages.get(package) or synonyms.get(package)
                    if found is None:
                        raise undeclared(package)
                    return found.routine(name).invoke(actuals)

                return call
        record = self.expression(base)
        return lambda: record()[name]

    def qualified(self, schema: str, package: str, name: str, args: list) -> Thunk:
        """SYS.DBMS_ASSERT.<check>(...), or a routine of a package of the session's schema named with
        its schema: no synonym is consulted."""
        if (schema, package) == ("SYS", "DBMS_ASSERT"):
            from tests.export.plsql.dbms_assert import dbms_assert_call

            return dbms_assert_call(self, name, args)
        packages, actuals, own = self.session.packages, self.actuals(args), schema == self.session.schema

        def call() -> Any:
            if not own or package not in packages:
                raise undeclared(f"{schema}.{package}")
            return packages[package].routine(name).invoke(actuals)

        return call

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
