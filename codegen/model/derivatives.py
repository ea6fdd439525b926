"""Derivatives of straight-line programs, by forward-mode differentiation (issue 13).

A model's outputs are expressions over a program's intermediates (``Program``: w_i = f_i(w_j, inputs)).
Differentiating the expanded expressions would undo what the program saves; instead each intermediate
gets the derivative of its definition by the chain rule,

    dw_i/dv = Σ_j ∂f_i/∂w_j · dw_j/dv + ∂f_i/∂v,

written as new intermediates of the same program (a derivative that is structurally zero gets no symbol).
The cost is about (number of variables) × (program size), and the results stay straight-line programs
that the emitter's CSE shares across outputs.

Conventions: sgn(x) has derivative 0 everywhere (SymPy's 2 δ(x) is dropped): the Coulomb friction term's
derivative is zero except at q̇ = 0, where it does not exist.
"""

from __future__ import annotations

import sympy as sp

from .program import Program, needed_definitions


def _without_dirac(expr: sp.Expr) -> sp.Expr:
    if expr.has(sp.DiracDelta):
        return expr.replace(lambda e: isinstance(e, sp.DiracDelta), lambda e: sp.Integer(0))
    return expr


def differentiate(definitions, outputs, variables, prefix: str = "dw") -> tuple[list, list[list[sp.Expr]]]:
    """(new definitions, jacobian) with jacobian[i][k] = d outputs[i] / d variables[k].

    ``definitions`` is the program the outputs refer to (symbol, value) in order; only those the outputs
    need are differentiated. The new definitions come after them and refer to them."""
    program = Program(prefix)
    variables = list(variables)
    index = {v: k for k, v in enumerate(variables)}
    needed = needed_definitions(list(definitions), list(outputs)) if definitions else []
    # gradient[symbol] = {k: d symbol / d variables[k]} (nonzero entries only)
    gradient: dict[sp.Symbol, dict[int, sp.Expr]] = {v: {k: sp.Integer(1)} for v, k in index.items()}

    def total(expr: sp.Expr) -> dict[int, sp.Expr]:
        """Nonzero d expr / d variables[k] through the gradients known so far."""
        out: dict[int, sp.Expr] = {}
        # Sorted: a set's order changes with the process's hash seed, and generated files must not.
        for symbol in sorted(expr.free_symbols, key=sp.default_sort_key):
            inner = gradient.get(symbol)
            if not inner:
                continue
            partial = _without_dirac(sp.diff(expr, symbol))
            if partial == 0:
                continue
            for k, d in inner.items():
                out[k] = out.get(k, sp.Integer(0)) + partial * d
        return {k: out[k] for k in sorted(out) if out[k] != 0}

    for symbol, value in needed:
        derivatives = total(value)
        if derivatives:
            gradient[symbol] = {k: program.let(d) for k, d in derivatives.items()}
    jacobian = []
    for expr in outputs:
        row = total(expr)
        jacobian.append([row.get(k, sp.Integer(0)) for k in range(len(variables))])
    return list(program.definitions), jacobian
