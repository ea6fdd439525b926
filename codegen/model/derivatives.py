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


def differentiate(definitions, outputs, variables, prefix: str = "dw",
                  seeds: dict | None = None) -> tuple[list, list[list[sp.Expr]]]:
    """(new definitions, jacobian) with jacobian[i][k] = d outputs[i] / d variables[k].

    ``definitions`` is the program the outputs refer to (symbol, value) in order; only those the outputs
    need are differentiated. The new definitions come after them and refer to them.

    ``seeds`` ({input symbol: {k: d input / d direction k}}) replaces ``variables``: the derivatives are then
    taken along directions that are not inputs themselves (a floating base's tangent space, whose directions
    move its position and quaternion together); the jacobian has a column per direction."""
    program = Program(prefix)
    variables = list(variables)
    if seeds is None:
        gradient = {v: {k: sp.Integer(1)} for k, v in enumerate(variables)}
    else:
        gradient = {symbol: {k: d for k, d in sorted(row.items()) if d != 0} for symbol, row in seeds.items()}
    needed = needed_definitions(list(definitions), list(outputs)) if definitions else []
    # gradient[symbol] = {k: d symbol / d direction k} (nonzero entries only)

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


def tangent_seeds(q, qd, floating: bool) -> tuple[list, dict]:
    """(directions, seeds) for ``differentiate``: the derivatives along the configuration's tangent space, then
    along q̇. With a floating base, q = (p, quaternion x y z w, joints) moves along δ = (δν, δω, δq_joints) as
    Pinocchio's ``integrate`` does to first order: p + R δν and quaternion ⊗ (δω/2, 1), so that

        dp/dδν = R,    d(x, y, z)/dδω = ½ (w I + [xyz]×),    dw/dδω = −½ (x y z),

    and the derivatives come out nv × nv as Pinocchio's (computeRNEADerivatives, computeABADerivatives)."""
    from ..geometry import quaternion_rotation

    if not floating:
        return list(q) + list(qd), None
    nv = len(qd)
    x, y, z, w = q[3:7]
    R = quaternion_rotation(x, y, z, w)
    half = sp.Rational(1, 2)
    vector_rows = [[w, -z, y], [z, w, -x], [-y, x, w]]  # w I + [xyz]x
    seeds = {}
    for a in range(3):
        seeds[q[a]] = {k: R[a, k] for k in range(3)}
        seeds[q[3 + a]] = {3 + k: half * vector_rows[a][k] for k in range(3)}
    seeds[w] = {3 + k: -half * c for k, c in enumerate((x, y, z))}
    for j, symbol in enumerate(q[7:]):
        seeds[symbol] = {6 + j: sp.Integer(1)}
    for k, symbol in enumerate(qd):
        seeds[symbol] = {nv + k: sp.Integer(1)}
    return list(range(2 * nv)), seeds
