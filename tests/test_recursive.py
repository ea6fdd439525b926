"""The recursive route against the Euler-Lagrange route, on every example small enough for both."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from codegen import derive, resolve_method
from codegen.model.program import needed_definitions
from conftest import EXAMPLES, ROBOTS


QUANTITIES = {
    "M": lambda m: m.M, "C": lambda m: m.C, "g": lambda m: m.g,
    "inverse_dynamics": lambda m: m.inverse_dynamics(with_wrench=True),
    "nonlinear_effects": lambda m: m.nonlinear_effects(),
    "kinetic_energy": lambda m: m.kinetic_energy, "potential_energy": lambda m: m.potential_energy,
    "tool_pose": lambda m: m.tool_pose, "tool_jacobian": lambda m: m.tool_jacobian,
}


@pytest.mark.parametrize("name", EXAMPLES)
def test_routes_agree(name, derived):
    lagrange = derived(name)
    recursive = derive(ROBOTS / f"{name}.yaml", method="recursive")
    assert recursive.method == "recursive" and recursive.definitions
    rng = np.random.default_rng(21)
    args_l = (lagrange.q, lagrange.qd, lagrange.qdd, lagrange.wrench)
    for quantity, get in QUANTITIES.items():
        expr_l, expr_r = get(lagrange), get(recursive)
        # The wrench symbols are shared by both models; give them numbers through q-independent args.
        f_l = sp.lambdify((*args_l, lagrange.parameters), expr_l, "numpy")
        prelude = needed_definitions(recursive.definitions, list(expr_r) if isinstance(expr_r, sp.MatrixBase)
                                     else [expr_r])
        f_r = sp.lambdify((recursive.q, recursive.qd, recursive.qdd, recursive.wrench, recursive.parameters),
                          expr_r, "numpy", cse=(lambda exprs, prelude=prelude: (prelude, exprs)))
        params = [p.default for p in lagrange.description.parameters]
        for _ in range(10):
            q, qd, qdd = rng.uniform(-2, 2, (3, lagrange.n))
            h = rng.normal(size=6)
            a = np.array(f_l(q, qd, qdd, h, params), dtype=float)
            b = np.array(f_r(q, qd, qdd, h, params), dtype=float)
            scale = max(np.abs(a).max(), 1e-300)
            assert np.abs(a - b).max() <= 1e-11 * scale, (quantity, a, b)


def test_auto_method_choice():
    assert resolve_method("auto", 3) == "lagrange"
    assert resolve_method("auto", 4) == "recursive"
    with pytest.raises(ValueError):
        resolve_method("newton", 2)
