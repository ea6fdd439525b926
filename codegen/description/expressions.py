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

import math
import re
from dataclasses import dataclass
from typing import Callable, Mapping

import sympy as sp

def _abs(value: sp.Expr) -> sp.Expr:
    """|value|; a constant's sign is decided from 30 digits (SymPy's Abs expands products of sums of
    trigonometric constants to decide it, without bound)."""
    if value.free_symbols or isinstance(value, sp.Number):
        return sp.Abs(value)
    number = value.evalf(30)
    if number.is_real and number.is_Number and abs(number) > sp.Float("1e-25"):
        return value if number > 0 else -value
    return sp.Abs(value, evaluate=False)


FUNCTIONS: dict[str, Callable[[sp.Expr], sp.Expr]] = {
    "sin": sp.sin,
    "cos": sp.cos,
    "tan": sp.tan,
    "sqrt": sp.sqrt,
    "abs": _abs,
}
CONSTANTS: dict[str, sp.Expr] = {"pi": sp.pi}

MAX_LENGTH = 500
MAX_DEPTH = 50
MAX_EXPONENT = 16  # exact integer powers grow fast: 9^9^9 would take hours
MAX_ORDER = 100  # literals: magnitudes from 1e-100 to 1e100
MAX_DIGITS = 60  # digits of a literal (a double needs 17)
MAX_EXPONENT_DIGITS = 4
MAX_RESULT_ORDER = 300  # every constant an expression builds stays within a double's range, 1e-300..1e300
MAX_EXPONENT_DENOMINATOR = 12
#: Quantities of the model (lengths, angles, masses, inertias, friction, gear ratios, gravity: every number but a
#: joint limit) at the parameters' defaults: at most this magnitude. A robot in any units stays far below it, and
#: the model multiplies a few of them together: beyond it double precision overflows (a length of 1e90 failed the
#: regressor's check with a NumPy shape error instead of a message).
MAX_QUANTITY = 1e15
MAX_RESULT_DIGITS = 400  # ... and its exact numerator and denominator within 400 digits (1/3^16 + 1/7^16 ...)

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


_LITERAL = re.compile(r"([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?")


def _order_of_rational(value: sp.Rational) -> float:
    """log10 |value| within about 0.31, from bit lengths (no big-number division or float overflow)."""
    return (abs(value.p).bit_length() - value.q.bit_length()) * _LOG10_2


_LOG10_2 = math.log10(2)


def _check_nonnegative(value: sp.Expr, what: str) -> None:
    """A constant under a root must not be negative (nor complex): SymPy's exact powers of complex
    constants can take unbounded time, and a description's values are real."""
    if value.free_symbols:
        return
    number = value.evalf(30)
    if not number.is_Number or number.is_real is False or number < -sp.Float("1e-25"):
        raise ExpressionError(f"{what} is {_shown(number)}; it must not be negative or complex")


def _shown(value: sp.Expr) -> str:
    text = str(value)
    return text if len(text) <= 40 else text[:30] + "..."


def _digits(value: sp.Expr) -> float:
    """Decimal digits of the longest numerator or denominator among the rational numbers in ``value``."""
    return max((max(abs(r.p).bit_length(), r.q.bit_length()) * _LOG10_2 for r in value.atoms(sp.Rational)),
               default=0.0)


def _order(value: sp.Expr) -> float | None:
    """log10 |value| of a constant (None for 0 or an expression with parameters), from a 15-digit
    evaluation whose exponent cannot overflow (SymPy floats have arbitrary exponents)."""
    if value.free_symbols:
        return None
    if isinstance(value, sp.Rational):
        return None if value == 0 else _order_of_rational(value)
    number = sp.Abs(value).evalf(15)
    if not number.is_Number or number == 0:
        return None
    return float(sp.log(number, 10).evalf(15))


def parse_number_literal(text: str) -> sp.Rational:
    """Exact rational value of a decimal literal such as ``0.1`` or ``1e-3``.

    Its size is checked on the text before any exact arithmetic (``1e-999999999`` would otherwise build
    a billion-digit denominator): at most ``MAX_DIGITS`` digits, a nonzero magnitude from 1e-100 to
    1e100, an exponent of at most ``MAX_EXPONENT_DIGITS`` digits (even for zero)."""
    match = _LITERAL.fullmatch(text.strip())
    if match is None or not (match.group(2) or match.group(3)):
        raise ExpressionError(f"{text[:40]!r} is not a decimal number")
    sign, whole, fraction, exponent = match.group(1), match.group(2), match.group(3) or "", match.group(4) or "0"
    shown = text if len(text) <= 40 else text[:20] + "..." + text[-10:]
    if len(whole) + len(fraction) > MAX_DIGITS:
        raise ExpressionError(f"number {shown} has {len(whole) + len(fraction)} digits (at most {MAX_DIGITS})")
    if len(exponent.lstrip("+-").lstrip("0")) > MAX_EXPONENT_DIGITS:
        raise ExpressionError(f"number {shown} is out of range (magnitudes from 1e-100 to 1e100)")
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return sp.Integer(0)
    # The decimal order of the leading digit: 1234.5 -> 3, 0.0012 -> -3.
    order = int(exponent) + len(whole.lstrip("0")) - 1 if whole.lstrip("0") \
        else int(exponent) - (len(fraction) - len(fraction.lstrip("0"))) - 1
    if order > MAX_ORDER or order < -MAX_ORDER or (order == MAX_ORDER and digits.rstrip("0") != "1"):
        raise ExpressionError(f"number {shown} is out of range (magnitudes from 1e-100 to 1e100)")
    value = sp.Rational(int(whole + fraction), 10 ** len(fraction)) * sp.Integer(10) ** int(exponent)
    return -value if sign == "-" else value


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
            token = self.take()
            op = token.text
            rhs = self.term()
            value = self.bounded(lambda: value + rhs if op == "+" else value - rhs, token)
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
                value = self.bounded(lambda: value / rhs, token)
            else:
                value = self.bounded(lambda: value * rhs, token)
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
            if isinstance(exponent, sp.Rational) and exponent.q > MAX_EXPONENT_DENOMINATOR:
                # SymPy's exact fractional powers factor and root-test their bases: (81.81)^-1.10668847 hangs.
                raise ExpressionError(f"the exponent at column {token.column} must be an integer or a fraction with "
                                      f"a denominator of at most {MAX_EXPONENT_DENOMINATOR} (such as 0.5, 1/3 or "
                                      f"1.25), not {_shown(exponent)}")
            if not exponent.is_integer:
                _check_nonnegative(base, f"the base of the fractional power at column {token.column}")
            if base == 0 and float(exponent) <= 0:
                raise ExpressionError(f"0 raised to a power <= 0 at column {token.column}")
            # Towers such as ((9^16)^16)^16: estimate the power's size before computing it exactly.
            order = _order(base)
            if order is not None and abs(order * float(exponent)) > MAX_RESULT_ORDER + 1:
                raise ExpressionError(f"the power at column {token.column} is about 1e{order * float(exponent):.0f}; "
                                      f"constants must stay between 1e-{MAX_RESULT_ORDER} and 1e{MAX_RESULT_ORDER}")
            # A power of a constant with fractional exponents makes SymPy factor (and primality-test) its
            # exact parts: ((6.98^6.98)^6.98) has moderate size but 600-digit parts. Bound their digits.
            digits = _digits(base) * abs(float(exponent))
            if digits > MAX_RESULT_DIGITS:
                raise ExpressionError(f"the power at column {token.column} would need exact numbers of about "
                                      f"{digits:.0f} digits (at most {MAX_RESULT_DIGITS})")
            return self.bounded(lambda: base ** exponent, token)
        return base

    @staticmethod
    def bounded(compute: Callable[[], sp.Expr], token: _Token) -> sp.Expr:
        """``compute()``, after checking that every rational constant in it is within a double's range.
        SymPy's own failures become ExpressionError (``sqrt(4*10^200 + 1)`` raises ValueError in its
        factor cache in SymPy 1.14)."""
        try:
            value = compute()
        except (ValueError, ArithmeticError, TypeError, RecursionError) as exc:
            if isinstance(exc, ExpressionError):
                raise
            raise ExpressionError(f"cannot evaluate the operation at column {token.column} "
                                  f"({type(exc).__name__}: {str(exc)[:80]})") from None
        for number in value.atoms(sp.Rational):
            if number != 0 and abs(_order_of_rational(number)) > MAX_RESULT_ORDER + 1:
                raise ExpressionError(f"the result at column {token.column} has a constant of about "
                                      f"1e{_order_of_rational(number):.0f}; constants must stay between "
                                      f"1e-{MAX_RESULT_ORDER} and 1e{MAX_RESULT_ORDER}")
        if _digits(value) > MAX_RESULT_DIGITS:
            raise ExpressionError(f"the result at column {token.column} has an exact number of about "
                                  f"{_digits(value):.0f} digits (at most {MAX_RESULT_DIGITS})")
        return value

    def atom(self) -> sp.Expr:
        token = self.take()
        if token.kind == "number":
            return parse_number_literal(token.text)
        if token.kind == "name":
            if token.text in FUNCTIONS:
                self.expect("(")
                argument = self.expr()
                self.expect(")")
                if token.text == "sqrt":
                    _check_nonnegative(argument, f"the argument of sqrt at column {token.column}")
                return self.bounded(lambda: FUNCTIONS[token.text](argument), token)
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
