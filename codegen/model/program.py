"""Straight-line programs: SymPy expressions over named intermediate symbols.

A recursive algorithm written with plain SymPy expressions grows trees that are
exponential in the depth of the robot. Instead, every non-trivial intermediate
result gets a symbol (``w12``) and a definition, so the recursion builds a
small DAG. Identical definitions are shared; zeros and ones stay literal so
that SymPy's automatic simplification removes them on the spot.
"""

from __future__ import annotations

import sympy as sp

from .names import PROGRAM_PREFIXES


class Program:
    def __init__(self, prefix: str = "w"):
        if prefix not in PROGRAM_PREFIXES:  # a name a description parameter could take (codegen.model.names)
            raise ValueError(f"Program prefix {prefix!r} is not declared in codegen.model.names.PROGRAM_PREFIXES")
        self.prefix = prefix
        self.definitions: list[tuple[sp.Symbol, sp.Expr]] = []
        self._by_expression: dict[sp.Expr, sp.Symbol] = {}

    def let(self, expr) -> sp.Expr:
        """Name ``expr`` unless it is already an atom (symbol, number) or its negation."""
        if not isinstance(expr, sp.Basic):
            expr = sp.Integer(expr) if isinstance(expr, int) else sp.Float(expr)
        if expr.is_Atom or (expr.is_Mul and len(expr.args) == 2 and expr.args[0] == -1 and expr.args[1].is_Atom):
            return expr
        existing = self._by_expression.get(expr)
        if existing is not None:
            return existing
        symbol = sp.Symbol(f"{self.prefix}{len(self.definitions)}", real=True)
        self.definitions.append((symbol, expr))
        self._by_expression[expr] = symbol
        return symbol

    def vector(self, items) -> sp.Matrix:
        return sp.Matrix([self.let(e) for e in items])

    def matrix(self, m: sp.Matrix) -> sp.Matrix:
        return m.applyfunc(self.let)


#: The free symbols of definition values and outputs: ``free_symbols`` walks the expression each time it is asked,
#: and the emitter and the self-check ask for the same definitions routine after routine (a humanoid's model
#: program, 20 times over), and for the same outputs (K's 10⁵ entries, most of them zeros). Keyed by value (two
#: programs name their intermediates alike); kept for one program, the one whose first definition is ``_OWNER``'s,
#: and emptied when full.
_FREE_SYMBOLS: dict = {}
_FREE_SYMBOLS_LIMIT = 200_000
_OWNER: list = [None]


def _free_symbols(value: sp.Expr):
    found = _FREE_SYMBOLS.get(value)
    if found is None:
        if len(_FREE_SYMBOLS) >= _FREE_SYMBOLS_LIMIT:
            _FREE_SYMBOLS.clear()
        found = _FREE_SYMBOLS[value] = value.free_symbols
    return found


def needed_definitions(definitions, outputs) -> list[tuple[sp.Symbol, sp.Expr]]:
    """The definitions that ``outputs`` depend on, in definition order."""
    if definitions and definitions[0] is not _OWNER[0]:  # another program: what the cache holds is not wanted
        _FREE_SYMBOLS.clear()
        _OWNER[0] = definitions[0]
    index = {symbol: i for i, (symbol, _) in enumerate(definitions)}
    wanted: set[int] = set()
    stack = [s for e in outputs for s in _free_symbols(e) if s in index]
    while stack:
        i = index[stack.pop()]
        if i in wanted:
            continue
        wanted.add(i)
        stack.extend(s for s in _free_symbols(definitions[i][1]) if s in index and index[s] not in wanted)
    return [definitions[i] for i in sorted(wanted)]


def expand_program(definitions, expr):
    """Substitute all definitions into ``expr`` (small programs only: the result can be large)."""
    for symbol, value in reversed(definitions):
        expr = expr.xreplace({symbol: value})
    return expr
