"""The token helpers and the expression grammar of the PL/SQL subset (Oracle's precedence: unary signs,
then * and /, then +, - and || on one level, then comparisons and IS [NOT] NULL/NAN/INFINITE, then NOT,
AND and OR)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.export.plsql import nodes as n
from tests.export.plsql.lexer import Token, tokenize

COMPARISONS = {"=", "<>", "!=", "^=", "~=", "<", ">", "<=", ">="}


def number(text: str) -> Any:
    """A numeric literal with Oracle's type: 1.5f BINARY_FLOAT, 1.5d BINARY_DOUBLE, else NUMBER."""
    suffix = text[-1].lower()
    if suffix == "f":
        return np.float32(text[:-1])
    if suffix == "d":
        return np.float64(text[:-1])
    return int(text) if text.isdigit() else float(text)


class ExpressionParser:
    """Tokens in order, and the expressions they spell."""

    def __init__(self, text: str) -> None:
        self.tokens: list[Token] = tokenize(text)
        # the text of each word and operator (None for other tokens): what `at` compares, quickly
        self.texts = [t.text if t.kind in ("word", "op") else None for t in self.tokens]
        self.position = 0

    # -- tokens
    @property
    def token(self) -> Token:
        return self.tokens[self.position]

    def peek(self, offset: int = 1) -> Token:
        return self.tokens[min(self.position + offset, len(self.tokens) - 1)]

    def at(self, *texts: str) -> bool:
        return self.texts[self.position] in texts

    def accept(self, *texts: str) -> bool:
        if self.texts[self.position] in texts:
            self.position += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.accept(text):
            raise SyntaxError(f"line {self.token.line}: expected {text}, found {self.token.text!r}")

    def word(self) -> str:
        token = self.token
        if token.kind != "word":
            raise SyntaxError(f"line {token.line}: expected a name, found {token.text!r}")
        self.position += 1
        return token.text

    def integer(self) -> int:
        token = self.token
        self.position += 1
        return int(token.text)

    def skip_to(self, text: str) -> None:
        while not self.at(text):
            if self.token.kind == "end":
                raise SyntaxError(f"expected {text} before the end")
            self.position += 1
        self.position += 1

    def expression(self) -> Any:
        literal = self.lone_number()
        if literal is not None:
            return literal
        left = self.conjunction()
        while self.accept("OR"):
            left = n.Binary("OR", left, self.conjunction())
        return left

    def lone_number(self) -> n.Lit | None:
        """A numeric literal (with a sign) that is a whole argument or list item, read at once: the
        tensors' and sample rows' constructors hold hundreds of thousands of them."""
        position, sign = self.position, 1
        if self.texts[position] == "-":
            position, sign = position + 1, -1
        token = self.tokens[position]
        if token.kind != "number" or self.texts[position + 1] not in (",", ")"):
            return None
        self.position = position + 1
        value = number(token.text)
        return n.Lit(-value if sign < 0 else value)

    def conjunction(self) -> Any:
        left = self.negation()
        while self.accept("AND"):
            left = n.Binary("AND", left, self.negation())
        return left

    def negation(self) -> Any:
        if self.accept("NOT"):
            return n.Unary("NOT", self.negation())
        return self.comparison()

    def comparison(self) -> Any:
        left = self.additive()
        if self.token.kind == "op" and self.token.text in COMPARISONS:
            op = self.token.text
            self.position += 1
            return n.Binary("<>" if op in ("!=", "^=", "~=") else op, left, self.additive())
        if self.accept("IS"):
            negated = self.accept("NOT")
            what = self.word()
            if what not in ("NULL", "NAN", "INFINITE"):
                raise SyntaxError(f"line {self.token.line}: IS {what} is not in the subset")
            return n.Is(left, what, negated)
        return left

    def additive(self) -> Any:
        left = self.term()
        while self.at("+", "-", "||"):
            op = self.word_or_op()
            left = n.Binary(op, left, self.term())
        return left

    def term(self) -> Any:
        left = self.unary()
        while self.at("*", "/"):
            op = self.word_or_op()
            left = n.Binary(op, left, self.unary())
        return left

    def word_or_op(self) -> str:
        text = self.token.text
        self.position += 1
        return text

    def unary(self) -> Any:
        if self.accept("-"):
            return n.Unary("-", self.unary())
        if self.accept("+"):
            return self.unary()
        return self.postfix()

    def primary(self) -> Any:
        token = self.token
        if token.kind == "number":
            self.position += 1
            return n.Lit(number(token.text))
        if token.kind == "string":
            self.position += 1
            return n.Lit(token.text)
        if token.kind == "bind":
            self.position += 1
            return n.Bind(token.text)
        if self.accept("("):
            inner = self.expression()
            self.expect(")")
            return inner
        if self.accept("*"):
            return n.Star()
        if self.accept("NULL"):
            return n.Lit(None)
        if self.accept("TRUE", "FALSE"):
            return n.Lit(self.tokens[self.position - 1].text == "TRUE")
        if self.at("CASE"):
            return self.case()
        return n.Name(self.word())

    def postfix(self) -> Any:
        node = self.primary()
        while True:
            if self.accept("."):
                node = n.Member(node, self.word())
            elif self.at("(") and isinstance(node, n.Name | n.Member | n.Call):
                node = n.Call(node, self.arguments())
            elif self.accept("%"):
                node = n.Attr(node, self.word())
            else:
                return node

    def arguments(self) -> list[tuple[str | None, Any]]:
        self.expect("(")
        args: list[tuple[str | None, Any]] = []
        if self.accept(")"):
            return args
        while True:
            name = None
            if self.token.kind == "word" and self.peek().text == "=>":
                name = self.word()
                self.expect("=>")
            args.append((name, self.expression()))
            if not self.accept(","):
                break
        self.expect(")")
        return args

    def case(self) -> n.Case:
        self.expect("CASE")
        subject = None if self.at("WHEN") else self.expression()
        whens = []
        while self.accept("WHEN"):
            condition = self.expression()
            self.expect("THEN")
            whens.append((condition, self.expression()))
        otherwise = self.expression() if self.accept("ELSE") else None
        self.expect("END")
        return n.Case(subject, whens, otherwise)
