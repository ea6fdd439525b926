"""Common-subexpression elimination over a routine's program (codegen.emit.cse)."""

from __future__ import annotations

import numpy as np
import sympy as sp

from codegen.emit.cse import eliminate
from test_printer import X, Y, Z, _random_expression


def _expand(replacements, reduced):
    values = {}
    for symbol, value in replacements:
        values[symbol] = value.xreplace(values)
    return [expr.xreplace(values) for expr in reduced]


def test_eliminated_expressions_mean_the_originals_and_repeats_are_named_once():
    rng = np.random.default_rng(11)
    exprs = [_random_expression(rng, 3) for _ in range(60)]
    exprs += exprs[:10]  # whole expressions repeated too
    replacements, reduced = eliminate(exprs, sp.numbered_symbols("t"))
    point = {X: 0.37, Y: -1.3, Z: 2.2}
    for original, rebuilt in zip(exprs, _expand(replacements, reduced)):
        expected = complex(original.xreplace(point))
        assert abs(complex(rebuilt.xreplace(point)) - expected) <= 1e-12 * max(1.0, abs(expected))
    assert reduced[60:] == reduced[:10]
    values = [value for _, value in replacements]
    assert len(set(values)) == len(values)  # each subexpression named once
    defined = set()
    for symbol, value in replacements:  # each reads only earlier replacements
        assert value.free_symbols - {X, Y, Z} <= defined
        defined.add(symbol)


def test_a_product_under_two_coefficients_is_shared_and_the_result_is_deterministic():
    a, b, c = sp.symbols("a b c", real=True)
    exprs = [2 * a * b * c + 1, -a * b * c + c, sp.Rational(3, 7) * a * b * c]
    replacements, reduced = eliminate(exprs, sp.numbered_symbols("t"))
    assert len(replacements) == 1 and replacements[0][1] == a * b * c
    again = eliminate(exprs, sp.numbered_symbols("t"))
    assert str(again) == str((replacements, reduced))
