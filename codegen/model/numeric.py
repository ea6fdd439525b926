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


class NumPyPrograms:
    """Straight-line NumPy functions over shared definitions, each definition and output printed once however many
    functions read it (the self-check makes one function per routine, and most of them read the model's program).
    Every symbol has one name for all the functions (``x<k>`` for the first seen as an input, ``t<k>`` for a
    definition); each function binds its inputs to those names from its arguments, then evaluates its definitions
    in order: the same arithmetic as ``numpy_function``'s, under other names."""

    def __init__(self):
        self._names: dict = {}
        self._printer = _NumPyText(self._names)  # reads the names as they are added
        self._lines: dict = {}  # (symbol, value) -> "name = value" as printed
        self._texts: dict = {}  # entry -> its text (routines share outputs, and K's are mostly zeros)

    def _name(self, symbol, stem: str) -> str:
        name = self._names.get(symbol)
        if name is None:
            name = self._names[symbol] = f"{stem}{len(self._names)}"
        return name

    def _text(self, entry) -> str:
        text = self._texts.get(entry)
        if text is None:
            text = self._texts[entry] = self._printer._print(entry)
        return text

    def function(self, arguments: list[list[sp.Symbol]], prelude: list, entries: list):
        """f(*arguments) -> list of values, one per entry (each argument a sequence of arrays, one per symbol);
        ``prelude`` (symbol, value) pairs are evaluated first."""
        lines = [f"def evaluate({', '.join(f'a{k}' for k in range(len(arguments)))}):"]
        lines += [f"    {self._name(symbol, 'x')} = a{k}[{j}]"
                  for k, symbols in enumerate(arguments) for j, symbol in enumerate(symbols)]
        for symbol, _ in prelude:
            self._name(symbol, "t")
        for symbol, value in prelude:
            line = self._lines.get((symbol, value))
            if line is None:
                line = self._lines[(symbol, value)] = f"    {self._names[symbol]} = {self._printer._print(value)}"
            lines.append(line)
        lines.append("    return [" + ", ".join(self._text(entry) for entry in entries) + "]")
        namespace = {"numpy": np}
        exec(compile("\n".join(lines), "<robodyn numeric>", "exec"), namespace)  # our names only (see printer)
        return namespace["evaluate"]


def numpy_function(arguments: list[list[sp.Symbol]], prelude: list, entries: list):
    """f(*arguments) -> list of values, one per entry: a straight-line Python function over NumPy arrays
    (each argument a sequence of arrays, one per symbol); ``prelude`` (symbol, value) pairs are evaluated first."""
    return NumPyPrograms().function(arguments, prelude, entries)
