"""A small, safe arithmetic language for numbers in robot descriptions.

Grammar (whitespace is ignored)::

    expr    := term (("+" | "-") term)*
    term    := unary (("*" | "/") unary)*
    unary   := ("+" | "-") unary | power
    power   := atom (("^" | "**") unary)?
    atom    := NUMBER | NAME | NAME "(" expr ")" | "(" expr ")"

NAME is a declared parameter, the constant ``pi`` or one of the functions in
``FUNCTIONS``. The parser builds SymPy objects directly from tokens: user text
never reaches ``eval``, ``exec`` or ``sympify``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Mapping

import sympy as sp

FUNCTIONS: dict[str, Callable[[sp.Expr], sp.Expr]] = {
    "sin": sp.sin,
    "cos": sp.cos,
    "tan": sp.tan,
    "sqrt": sp.sqrt,
    "abs": sp.Abs,
}
CONSTANTS: dict[str, sp.Expr] = {"pi": sp.pi}

MAX_LENGTH = 500
MAX_DEPTH = 50
MAX_EXPONENT = 16  # exact integer powers grow fast: 9^9^9 would take hours
MAX_LITERAL = 1e100

_TOKEN = re.compile(
    r"\s*(?:(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z_0-9]*)"
    r"|(?P<op>\*\*|[-+*/^()]))"
)


class ExpressionError(ValueError):
    """Raised with a message that says what is wrong and where (column)."""


@dataclass(frozen=True)
class _Token:
    kind: str  # "number", "name", "op", "end"
    text: str
    column: int  # 1-based


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            column = pos + len(text[pos:]) - len(text[pos:].lstrip()) + 1
            raise ExpressionError(f"unexpected character {text[column - 1]!r} at column {column}")
        kind = match.lastgroup
        start = match.start(kind)
        tokens.append(_Token(kind, match.group(kind), start + 1))
        pos = match.end()
    tokens.append(_Token("end", "", len(text) + 1))
    return tokens


def parse_number_literal(text: str) -> sp.Rational:
    """Exact rational value of a decimal literal such as ``0.1`` or ``1e-3``."""
    magnitude = abs(float(text))
    if magnitude > MAX_LITERAL or (magnitude != 0.0 and magnitude < 1.0 / MAX_LITERAL):
        raise ExpressionError(f"number {text} is out of range (magnitudes from 1e-100 to 1e100)")
    frac = Fraction(text)
    return sp.Rational(frac.numerator, frac.denominator)


class _Parser:
    def __init__(self, text: str, symbols: Mapping[str, sp.Symbol]):
        self.tokens = _tokenize(text)
        self.index = 0
        self.symbols = symbols
        self.depth = 0

    def peek(self) -> _Token:
        return self.tokens[self.index]

    def take(self) -> _Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def expect(self, text: str) -> None:
        token = self.take()
        if token.text != text:
            found = "end of expression" if token.kind == "end" else repr(token.text)
            raise ExpressionError(f"expected {text!r} at column {token.column}, found {found}")

    def parse(self) -> sp.Expr:
        value = self.expr()
        token = self.peek()
        if token.kind != "end":
            raise ExpressionError(f"unexpected {token.text!r} at column {token.column}")
        return value

    def expr(self) -> sp.Expr:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExpressionError("expression is nested too deeply")
        value = self.term()
        while self.peek().text in ("+", "-"):
            op = self.take().text
            rhs = self.term()
            value = value + rhs if op == "+" else value - rhs
        self.depth -= 1
        return value

    def term(self) -> sp.Expr:
        value = self.unary()
        while self.peek().text in ("*", "/"):
            token = self.take()
            rhs = self.unary()
            if token.text == "/":
                if rhs == 0:
                    raise ExpressionError(f"division by zero at column {token.column}")
                value = value / rhs
            else:
                value = value * rhs
        return value

    def unary(self) -> sp.Expr:
        token = self.peek()
        if token.text in ("+", "-"):
            self.take()
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise ExpressionError("expression is nested too deeply")
            value = self.unary()
            self.depth -= 1
            return -value if token.text == "-" else value
        return self.power()

    def power(self) -> sp.Expr:
        base = self.atom()
        if self.peek().text in ("^", "**"):
            token = self.take()
            exponent = self.unary()
            if exponent.free_symbols or not exponent.is_number or not exponent.is_real \
                    or abs(float(exponent)) > MAX_EXPONENT:
                raise ExpressionError(f"the exponent at column {token.column} must be a constant between "
                                      f"-{MAX_EXPONENT} and {MAX_EXPONENT}")
            return base ** exponent
        return base

    def atom(self) -> sp.Expr:
        token = self.take()
        if token.kind == "number":
            return parse_number_literal(token.text)
        if token.kind == "name":
            if token.text in FUNCTIONS:
                self.expect("(")
                argument = self.expr()
                self.expect(")")
                return FUNCTIONS[token.text](argument)
            if token.text in CONSTANTS:
                return CONSTANTS[token.text]
            if token.text in self.symbols:
                return self.symbols[token.text]
            raise ExpressionError(f"unknown name {token.text!r} at column {token.column}"
                                  " (declare it under 'parameters')")
        if token.text == "(":
            value = self.expr()
            self.expect(")")
            return value
        found = "end of expression" if token.kind == "end" else repr(token.text)
        raise ExpressionError(f"expected a number, name or '(' at column {token.column}, found {found}")


def parse_expression(text: str, symbols: Mapping[str, sp.Symbol]) -> sp.Expr:
    """Parse ``text`` into a SymPy expression over the given parameter symbols."""
    if not isinstance(text, str):
        raise ExpressionError(f"expected a number or an expression string, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"expression longer than {MAX_LENGTH} characters")
    if text.strip() == "":
        raise ExpressionError("empty expression")
    return _Parser(text, symbols).parse()
