"""How expressions are spelled in C: a strict C99 printer.

Symbols are printed through an explicit table (``q1`` -> ``q[0]``, parameter
``m2`` -> ``p[1]``); a symbol missing from the table is a bug and raises, so
user-chosen names can never reach the C source. Small integer powers become
products, ``sign`` becomes a branch-free comparison, and every constant is a
double literal with 17 significant digits.
"""

from __future__ import annotations

import re
from typing import Mapping

import sympy as sp
from sympy.printing.c import C99CodePrinter


class UnprintableError(ValueError):
    pass


class RobotCPrinter(C99CodePrinter):
    def __init__(self, names: Mapping[sp.Symbol, str]):
        # order="none": print terms in their canonical argument order; sorting them for
        # display dominates printing time and adds nothing to C.
        super().__init__({"strict": True, "math_macros": {}, "order": "none"})
        self._names = dict(names)

    def expression(self, expr) -> str:
        """C text of one expression (``doprint`` without its statement machinery, ~5x faster)."""
        return self._print(expr)

    def _print_Symbol(self, expr):
        try:
            return self._names[expr]
        except KeyError:
            raise UnprintableError(f"no C name for symbol {expr!r}") from None

    def _print_Float(self, expr):
        value = float(expr)
        text = repr(value)
        if "e" not in text and "." not in text and "inf" not in text and "nan" not in text:
            text += ".0"
        return text

    def _print_Integer(self, expr):
        return f"{int(expr)}.0"

    def _print_Rational(self, expr):
        return f"({int(expr.p)}.0/{int(expr.q)}.0)"

    def _print_sign(self, expr):
        arg = self._print(expr.args[0])
        return f"(double)(({arg} > 0.0) - ({arg} < 0.0))"

    def _print_Pow(self, expr):
        base, exponent = expr.base, expr.exp
        if exponent.is_Integer and 1 <= abs(int(exponent)) <= 4:
            factor = self.parenthesize(base, sp.printing.precedence.PRECEDENCE["Mul"])
            product = "*".join([factor] * abs(int(exponent)))
            if exponent < 0:
                return f"1.0/({product})"
            # Parenthesised: SymPy prints a Pow without parentheses wherever a product would need them, as
            # the divisor of a/b**2 ("a/b*b" would be (a/b)*b).
            return product if exponent == 1 else f"({product})"
        if exponent == sp.Rational(1, 2):
            return f"sqrt({self._print(base)})"
        if exponent == sp.Rational(-1, 2):
            return f"1.0/sqrt({self._print(base)})"
        return f"pow({self._print(base)}, {self._print(exponent)})"

    def _print_NumberSymbol(self, expr):
        return self._print_Float(sp.Float(expr.evalf(20)))

    _print_Pi = _print_NumberSymbol
    _print_Exp1 = _print_NumberSymbol


_OPERATION = re.compile(r"[-+*/]|\b(?:sin|cos|tan|sqrt|pow|fabs)\(")


def count_operations(c_text: str) -> int:
    """Arithmetic operators and math-library calls in a C expression (unary minus included)."""
    return len(_OPERATION.findall(c_text))


def fold_constants(expr: sp.Expr) -> sp.Expr:
    """Evaluate symbol-free function calls such as cos(157/100) once, at generation time."""
    replacements = {}
    for atom in expr.atoms(sp.Function, sp.Pow, sp.NumberSymbol):
        if not atom.free_symbols and not atom.is_Rational:
            replacements[atom] = sp.Float(sp.N(atom, 30), 30)
    return expr.xreplace(replacements) if replacements else expr
