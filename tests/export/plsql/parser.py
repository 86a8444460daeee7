"""A recursive-descent parser of the PL/SQL subset nnsql generates, into the tree of nodes.py: the units
of a script, declarations, blocks and statements (expressions: expression_parser.py)."""

from __future__ import annotations

from typing import Any

from tests.export.plsql import nodes as n
from tests.export.plsql.expression_parser import ExpressionParser

ROUTINE_OPTIONS = {"DETERMINISTIC", "PIPELINED", "PARALLEL_ENABLE", "RESULT_CACHE"}


class Parser(ExpressionParser):
    """Units, declarations, blocks and statements."""

    # -- units
    def unit(self) -> Any:
        """One unit of a script: CREATE PACKAGE [BODY], an anonymous block, or a SQL statement."""
        if self.accept("CREATE"):
            if self.accept("OR"):
                self.expect("REPLACE")
            self.expect("PACKAGE")
            body = self.accept("BODY")
            name = self.word()
            while not self.at("IS", "AS"):
                self.position += 1  # AUTHID DEFINER
            self.position += 1
            declarations = self.declarations()
            initialization = self.statements("END") if self.accept("BEGIN") else []
            self.expect("END")
            self.accept(name)
            self.expect(";")
            if body:
                return n.PackageBody(name, declarations, initialization)
            return n.PackageSpec(name, declarations)
        if self.at("DECLARE", "BEGIN"):
            return self.block()
        statement = self.statement()
        return n.Block([], [statement])

    # -- declarations
    def declarations(self) -> list:
        found = []
        while not self.at("BEGIN", "END"):
            declaration = self.declaration()
            if declaration is not None:
                found.append(declaration)
        return found

    def declaration(self) -> Any:
        if self.accept("PRAGMA"):
            self.skip_to(";")
            return None
        if self.at("PROCEDURE", "FUNCTION"):
            return self.subprogram()
        if self.accept("TYPE"):
            return self.type_declaration()
        name = self.word()
        constant = self.accept("CONSTANT")
        type_ = self.type_ref()
        self.not_null()
        default = self.expression() if self.accept(":=", "DEFAULT") else None
        self.expect(";")
        return n.Variable(name, type_, constant, default)

    def type_declaration(self) -> n.TypeDecl:
        name = self.word()
        self.expect("IS")
        if self.accept("RECORD"):
            self.expect("(")
            fields = [(self.word(), self.type_ref())]
            while self.accept(","):
                fields.append((self.word(), self.type_ref()))
            self.expect(")")
            self.expect(";")
            return n.TypeDecl(name, "RECORD", fields)
        limit = None
        if self.accept("VARRAY", "VARYING"):
            self.accept("ARRAY")
            self.expect("(")
            limit = self.integer()
            self.expect(")")
            kind = "VARRAY"
        else:
            self.expect("TABLE")
            kind = "TABLE"
        self.expect("OF")
        element = self.type_ref()
        self.not_null()
        self.expect(";")
        return n.TypeDecl(name, kind, element, limit)

    def not_null(self) -> None:
        if self.accept("NOT"):
            self.expect("NULL")

    def type_ref(self) -> n.TypeRef:
        name = self.word()
        while self.accept("."):
            name += "." + self.word()
        args: tuple[int, ...] = ()
        if self.accept("("):
            values = [self.integer()]
            while self.accept(","):
                values.append(self.integer())
            self.accept("CHAR", "BYTE")
            self.expect(")")
            args = tuple(values)
        return n.TypeRef(name, args)

    def subprogram(self) -> n.Subprogram:
        is_function = self.word() == "FUNCTION"
        name = self.word()
        params = self.params() if self.at("(") else []
        returns = None
        if is_function:
            self.expect("RETURN")
            returns = self.type_ref()
        options = set()
        while self.at(*ROUTINE_OPTIONS):
            options.add(self.word())
        deterministic = "DETERMINISTIC" in options
        if self.accept(";"):
            return n.Subprogram(name, params, returns, None, deterministic)
        if not self.accept("IS"):
            self.expect("AS")
        declarations = self.declarations()
        block = self.block_rest(declarations)
        self.accept(name)
        self.expect(";")
        return n.Subprogram(name, params, returns, block, deterministic)

    def params(self) -> list[n.Param]:
        self.expect("(")
        params = [self.param()]
        while self.accept(","):
            params.append(self.param())
        self.expect(")")
        return params

    def param(self) -> n.Param:
        name = self.word()
        mode = "IN"
        if self.accept("IN"):
            mode = "IN OUT" if self.accept("OUT") else "IN"
        elif self.accept("OUT"):
            mode = "OUT"
        self.accept("NOCOPY")
        type_ = self.type_ref()
        default = self.expression() if self.accept(":=", "DEFAULT") else None
        return n.Param(name, mode, type_, default)

    # -- blocks and statements
    def block(self) -> n.Block:
        declarations = self.declarations() if self.accept("DECLARE") else []
        block = self.block_rest(declarations)
        self.accept(";")
        return block

    def block_rest(self, declarations: list) -> n.Block:
        """BEGIN statements [EXCEPTION handlers] END (the name and ; are the caller's)."""
        self.expect("BEGIN")
        body = self.statements("EXCEPTION", "END")
        handlers = []
        if self.accept("EXCEPTION"):
            while self.accept("WHEN"):
                names = [self.word()]
                while self.accept("OR"):
                    names.append(self.word())
                self.expect("THEN")
                handlers.append(n.Handler(names, self.statements("WHEN", "END")))
        self.expect("END")
        return n.Block(declarations, body, handlers)

    def statements(self, *stops: str) -> list:
        found = []
        while not self.at(*stops):
            found.append(self.statement())
        return found

    def statement(self) -> Any:
        token = self.token
        method = getattr(self, f"statement_{token.text.lower()}", None) if token.kind == "word" else None
        if method is not None:
            return method()
        if token.kind == "word" and token.text in ("DECLARE", "BEGIN"):
            return self.block()
        target = self.expression()
        if self.accept(":="):
            statement: Any = n.Assign(target, self.expression())
        else:
            statement = n.CallStatement(target)
        self.expect(";")
        return statement

    def statement_if(self) -> n.If:
        self.expect("IF")
        branches = []
        condition = self.expression()
        self.expect("THEN")
        branches.append((condition, self.statements("ELSIF", "ELSE", "END")))
        otherwise = None
        while True:
            if self.accept("ELSIF"):
                condition = self.expression()
                self.expect("THEN")
                branches.append((condition, self.statements("ELSIF", "ELSE", "END")))
            elif self.accept("ELSE"):
                otherwise = self.statements("END")
            else:
                break
        self.expect("END")
        self.expect("IF")
        self.expect(";")
        return n.If(branches, otherwise)

    def statement_case(self) -> n.CaseStatement:
        self.expect("CASE")
        subject = None if self.at("WHEN") else self.expression()
        whens = []
        while self.accept("WHEN"):
            condition = self.expression()
            self.expect("THEN")
            whens.append((condition, self.statements("WHEN", "ELSE", "END")))
        otherwise = self.statements("END") if self.accept("ELSE") else None
        self.expect("END")
        self.expect("CASE")
        self.expect(";")
        return n.CaseStatement(n.Case(subject, whens, otherwise))

    def loop_body(self) -> list:
        self.expect("LOOP")
        body = self.statements("END")
        self.expect("END")
        self.expect("LOOP")
        self.expect(";")
        return body

    def statement_for(self) -> n.For:
        self.expect("FOR")
        variable = self.word()
        self.expect("IN")
        reverse = self.accept("REVERSE")
        low = self.expression()
        self.expect("..")
        high = self.expression()
        return n.For(variable, reverse, low, high, self.loop_body())

    def statement_while(self) -> n.While:
        self.expect("WHILE")
        condition = self.expression()
        return n.While(condition, self.loop_body())

    def statement_loop(self) -> n.Loop:
        return n.Loop(self.loop_body())

    def exit_like(self) -> n.Exit:
        kind = self.word()
        condition = self.expression() if self.accept("WHEN") else None
        self.expect(";")
        return n.Exit(condition, kind)

    statement_exit = statement_continue = exit_like

    def statement_return(self) -> n.Return:
        self.expect("RETURN")
        value = None if self.at(";") else self.expression()
        self.expect(";")
        return n.Return(value)

    def statement_raise(self) -> n.Raise:
        self.expect("RAISE")
        name = None if self.at(";") else self.word()
        self.expect(";")
        return n.Raise(name)

    def statement_null(self) -> n.Null:
        self.expect("NULL")
        self.expect(";")
        return n.Null()

    def statement_commit(self) -> n.Sql:
        kind = self.word()
        self.expect(";")
        return n.Sql(kind)

    statement_rollback = statement_commit

    def unsupported(self) -> n.Unsupported:
        start = self.position
        self.skip_to(";")
        return n.Unsupported(" ".join(t.text for t in self.tokens[start : self.position]))

    statement_fetch = statement_close = statement_pipe = unsupported

    def statement_execute(self) -> n.Sql:
        self.expect("EXECUTE")
        self.expect("IMMEDIATE")
        text = self.expression()
        using = []
        if self.accept("USING"):
            using.append(self.bind_argument())
            while self.accept(","):
                using.append(self.bind_argument())
        self.expect(";")
        return n.Sql("EXECUTE", columns=using, values=[text])

    def bind_argument(self) -> tuple[str, Any]:
        """One argument of USING: its mode (IN, OUT or IN OUT; IN when left out) and expression."""
        mode = "IN OUT" if self.accept("IN") and self.accept("OUT") else "IN"
        if mode == "IN" and self.accept("OUT"):
            mode = "OUT"
        return mode, self.expression()

    def where(self) -> list[tuple[str, Any]]:
        if not self.accept("WHERE"):
            return []
        conditions = [self.equality()]
        while self.accept("AND"):
            conditions.append(self.equality())
        return conditions

    def equality(self) -> tuple[str, Any]:
        column = self.word()
        self.expect("=")
        return column, self.additive()

    def statement_select(self) -> n.Sql:
        self.expect("SELECT")
        items = [self.expression()]
        while self.accept(","):
            items.append(self.expression())
        self.expect("INTO")
        into = [self.postfix()]
        while self.accept(","):
            into.append(self.postfix())
        self.expect("FROM")
        table = self.word()
        where = self.where()
        if self.accept("FOR"):
            self.expect("UPDATE")
        self.expect(";")
        return n.Sql("SELECT", table, items, into=into, where=where)

    def statement_update(self) -> n.Sql:
        self.expect("UPDATE")
        table = self.word()
        self.expect("SET")
        sets = [self.equality()]
        while self.accept(","):
            sets.append(self.equality())
        where = self.where()
        self.expect(";")
        return n.Sql("UPDATE", table, sets, where=where)

    def statement_insert(self) -> n.Sql:
        self.expect("INSERT")
        self.expect("INTO")
        table = self.word()
        self.expect("(")
        columns = [self.word()]
        while self.accept(","):
            columns.append(self.word())
        self.expect(")")
        self.expect("VALUES")
        self.expect("(")
        values = [self.expression()]
        while self.accept(","):
            values.append(self.expression())
        self.expect(")")
        self.expect(";")
        return n.Sql("INSERT", table, columns, values)

    def statement_delete(self) -> n.Sql:
        self.expect("DELETE")
        self.expect("FROM")
        table = self.word()
        where = self.where()
        self.expect(";")
        return n.Sql("DELETE", table, where=where)


def parse_unit(text: str) -> Any:
    parser = Parser(text)
    unit = parser.unit()
    if parser.token.kind != "end":
        raise SyntaxError(f"line {parser.token.line}: unexpected {parser.token.text!r} after the unit")
    return unit


def parse_expression(text: str) -> Any:
    parser = Parser(text)
    expression = parser.expression()
    if parser.token.kind != "end":
        raise SyntaxError(f"unexpected {parser.token.text!r} after the expression")
    return expression
