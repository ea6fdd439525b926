"""The strict C99 printer: what it writes must mean, under C's precedence, the expression it was given."""

from __future__ import annotations

import itertools

import pytest
import sympy as sp

from codegen.emit.printer import RobotCPrinter, UnprintableError

X, Y, Z = sp.symbols("x y z", real=True)
VALUES = {X: 1.3, Y: -0.7, Z: 2.1}


def _c_value(text: str) -> float:
    """Evaluate printed C with Python (same precedence and left-to-right grouping for + - * /)."""
    return eval(text, {"sqrt": lambda v: v ** 0.5, "pow": pow}, {str(s): v for s, v in VALUES.items()})


def _expressions():
    atoms = [X, Y, X + Y, X * Z, 2 * X]
    for base, exponent in itertools.product(atoms, (-4, -3, -2, -1, 2, 3, 4)):
        for other in (Z, 3 * Z, Z + 1):
            yield other * base**exponent
            yield other / base**exponent
            yield -other * base**exponent / (Z * Z)


@pytest.mark.parametrize("expr", list(_expressions()), ids=str)
def test_products_and_quotients_of_powers_keep_their_meaning(expr):
    printer = RobotCPrinter({X: "x", Y: "y", Z: "z"})
    text = printer.expression(expr)
    assert _c_value(text) == pytest.approx(float(expr.xreplace(VALUES)), rel=1e-12), text


def test_a_squared_divisor_is_parenthesised():
    """x/y**2 once printed as x/y*y, that is (x/y)*y in C."""
    assert RobotCPrinter({X: "x", Y: "y"}).expression(X / Y**2) == "x/(y*y)"


def test_a_symbol_without_a_c_name_is_refused():
    with pytest.raises(UnprintableError):
        RobotCPrinter({X: "x"}).expression(X + Y)
