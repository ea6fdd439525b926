"""Straight-line NumPy functions of a model's expressions: the self-check's reference evaluation and the
samples the base parameters are found from (SymPy's lambdify, which sorts terms and rewrites every statement,
took most of both)."""

from __future__ import annotations

import numpy as np
import sympy as sp
from sympy.printing.numpy import NumPyPrinter

from ..emit.printer import FastArithmetic


class _NumPyText(FastArithmetic, NumPyPrinter):
    """NumPy spelling of the model's expressions for evaluations in NumPy (the self-check's reference,
    the base parameters' samples). Symbols go through a table (as
    in the C printer, so no name from a description reaches the generated Python) and terms are printed in
    their stored order: with lambdify's sorting and its per-statement rewrites, printing took 8 of Solo12's 9 s
    of self-check."""

    def __init__(self, names: dict):
        super().__init__({"fully_qualified_modules": True, "inline": True, "allow_unknown_functions": False,
                          "order": "none"})
        self._names = names

    _one = "1"

    def _print_Symbol(self, expr):
        return self._names[expr]

    def _power(self, factor: str, base, exponent) -> str:
        if exponent.is_Integer:
            return f"{factor}**{int(exponent)}" if exponent > 0 else f"{factor}**({int(exponent)})"
        if exponent == sp.Rational(1, 2):
            return f"numpy.sqrt({self._print(base)})"
        return f"{factor}**({self._print(exponent)})"

    _print_Dummy = _print_Symbol


def numpy_function(arguments: list[list[sp.Symbol]], prelude: list, entries: list):
    """f(*arguments) -> list of values, one per entry: a straight-line Python function over NumPy arrays
    (each argument a sequence of arrays, one per symbol); ``prelude`` (symbol, value) pairs are evaluated first."""
    names = {symbol: f"a{k}[{j}]" for k, symbols in enumerate(arguments) for j, symbol in enumerate(symbols)}
    names.update({symbol: f"t{i}" for i, (symbol, _) in enumerate(prelude)})
    printer = _NumPyText(names)
    lines = [f"def evaluate({', '.join(f'a{k}' for k in range(len(arguments)))}):"]
    lines += [f"    t{i} = {printer._print(value)}" for i, (_, value) in enumerate(prelude)]
    lines.append("    return [" + ", ".join(printer._print(entry) for entry in entries) + "]")
    namespace = {"numpy": np}
    exec(compile("\n".join(lines), "<robodyn numeric>", "exec"), namespace)  # our names only (see printer)
    return namespace["evaluate"]
