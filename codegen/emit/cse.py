"""Common-subexpression elimination over a routine's whole straight-line program.

A routine is a list of expressions over named intermediates (the recursive algorithms' ``w12 = ...``, see
codegen.model.program) and the arguments. ``eliminate`` names every subexpression that occurs more than once
across all of them, intermediates' definitions included (identical subtrees, found by hashing, which SymPy
caches per expression), and the product of a term's symbolic factors when it recurs under another numeric
coefficient (``2*a*b`` and ``-a*b`` share ``a*b``). Expressions are rebuilt unevaluated: SymPy's own ``cse``
re-evaluates every rebuilt node, and with its optimisation passes that made it most of the emission time.
"""

from __future__ import annotations

from typing import Iterator

import sympy as sp


def _is_leaf(expr: sp.Basic) -> bool:
    """Atoms and negated atoms stay inline (``-x`` costs one operation wherever it is used)."""
    if expr.is_Atom:
        return True
    return expr.is_Mul and len(expr.args) == 2 and expr.args[0] is sp.S.NegativeOne and expr.args[1].is_Atom


def _scaled(expr: sp.Basic) -> tuple[sp.Basic, sp.Basic] | None:
    """(coefficient, product of the other factors) of a product with a numeric coefficient and at least two other
    factors, else None."""
    if expr.is_Mul and expr.args[0].is_Number and len(expr.args) > 2:
        return expr.args[0], sp.Mul(*expr.args[1:], evaluate=False)
    return None


def eliminate(exprs: list[sp.Expr], symbols: Iterator[sp.Symbol]) -> tuple[list[tuple[sp.Symbol, sp.Expr]], list]:
    """(replacements, reduced): each replacement's value reads only earlier replacements; the reduced expressions
    read the replacements."""
    seen: set = set()
    repeated: set = set()

    def visit(root: sp.Basic) -> None:
        stack = [root]
        while stack:
            expr = stack.pop()
            if _is_leaf(expr):
                continue
            scaled = _scaled(expr)
            if scaled is not None:  # the coefficient is counted apart from its product
                expr = scaled[1]
            if expr in seen:
                repeated.add(expr)
                continue
            seen.add(expr)
            stack.extend(expr.args)

    for expr in exprs:
        visit(expr)

    replacements: list[tuple[sp.Symbol, sp.Expr]] = []
    memo: dict = {}

    def rebuild(expr: sp.Basic) -> sp.Basic:
        if _is_leaf(expr):
            return expr
        found = memo.get(expr)
        if found is not None:
            return found
        scaled = _scaled(expr)
        if scaled is not None:
            coefficient, product = scaled
            new_product = rebuild(product)
            result = (expr if new_product is product and product not in repeated
                      else sp.Mul(coefficient, new_product, evaluate=False))
        else:
            args = [rebuild(arg) for arg in expr.args]
            changed = any(new is not old for new, old in zip(args, expr.args))
            result = expr.func(*args, evaluate=False) if changed else expr
            if expr in repeated:
                symbol = next(symbols)
                replacements.append((symbol, result))
                result = symbol
        memo[expr] = result
        return result

    # Recursion as deep as the expressions, as SymPy's own cse and printers: a model's program names its
    # intermediates, so they stay shallow.
    return replacements, [rebuild(expr) for expr in exprs]
