"""Post-build self-check: the compiled module against identities and the SymPy model.

Run on random states with the default parameters:

* M symmetric positive definite;
* Ṁ − 2C skew-symmetric, Ṁ by central finite differences along q̇;
* inverse ∘ forward dynamics = identity (with and without a tool wrench);
* compiled = symbolic (lambdify of the same SymPy expressions) to 1e-12,
  relative to the largest entry.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import sympy as sp

from ..model.lagrange import SymbolicModel
from ..model.program import needed_definitions

SYMBOLIC_TOLERANCE = 1e-12
IDENTITY_TOLERANCE = 1e-9
SKEW_TOLERANCE = 1e-6  # finite differences of M limit this one


@dataclass(frozen=True)
class Check:
    name: str
    error: float
    tolerance: float

    @property
    def passed(self) -> bool:
        return bool(np.isfinite(self.error)) and self.error <= self.tolerance


def random_states(model: SymbolicModel, count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = model.n
    q = np.empty((count, n))
    for i, joint in enumerate(model.description.joints):
        low, high = (-np.pi, np.pi) if joint.kind == "revolute" else (-1.0, 1.0)
        if joint.limits.lower is not None:
            low = joint.limits.lower
        if joint.limits.upper is not None:
            high = joint.limits.upper
        q[:, i] = rng.uniform(low, high, count)
    qd = rng.uniform(-2.0, 2.0, (count, n))
    return q, qd


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    scale = max(float(np.max(np.abs(b))), 1e-300)
    return float(np.max(np.abs(a - b)) / scale) if np.max(np.abs(b)) > 0 else float(np.max(np.abs(a)))


def run_selfcheck(dynamics, model: SymbolicModel, samples: int = 25, seed: int = 0) -> list[Check]:
    """``dynamics`` is the compiled module's Dynamics object, with default parameters."""
    n = model.n
    params = np.array([p.default for p in model.description.parameters], dtype=float)
    q_all, qd_all = random_states(model, samples, seed)
    rng = np.random.default_rng(seed + 1)
    args = (model.q, model.qd, model.parameters)

    def function(expr):
        # A recursive model's expressions refer to intermediate symbols: lambdify evaluates
        # their definitions first, in Python, independently of the C code.
        outputs = list(expr) if isinstance(expr, sp.MatrixBase) else [expr]
        prelude = needed_definitions(model.definitions, outputs) if model.definitions else []
        cse = (lambda exprs: (prelude, exprs)) if prelude else False
        return sp.lambdify(args, expr, "numpy", cse=cse)

    symbolic = {
        "M": function(model.M),
        "C": function(model.C),
        "g": function(model.g),
        "friction": function(model.friction),
        "fk": function(model.tool_pose),
        "jacobian": function(model.tool_jacobian),
        "kinetic_energy": function(model.kinetic_energy),
        "potential_energy": function(model.potential_energy),
    }
    worst = {"symmetric": 0.0, "positive_definite": 0.0, "skew": 0.0, "inverse_forward": 0.0,
             "inverse_forward_wrench": 0.0}
    worst.update({f"compiled_vs_symbolic_{k}": 0.0 for k in symbolic})
    eps = 1e-6
    for q, qd in zip(q_all, qd_all):
        M = dynamics.M(q)
        worst["symmetric"] = max(worst["symmetric"], _relative(M, M.T))
        eigenvalues = np.linalg.eigvalsh(M)
        if eigenvalues[0] <= 0:
            worst["positive_definite"] = np.inf
        C = dynamics.C(q, qd)
        M_dot = (dynamics.M(q + eps * qd) - dynamics.M(q - eps * qd)) / (2 * eps)
        N = M_dot - 2 * C
        scale = max(np.max(np.abs(M_dot)), np.max(np.abs(C)), 1e-12)
        worst["skew"] = max(worst["skew"], float(np.max(np.abs(N + N.T)) / scale))

        tau = rng.normal(0, 10, n)
        qdd = dynamics.forward_dynamics(q, qd, tau)
        worst["inverse_forward"] = max(worst["inverse_forward"],
                                       _relative(dynamics.inverse_dynamics(q, qd, qdd), tau))
        h = rng.normal(0, 5, 6)
        qdd_h = dynamics.forward_dynamics(q, qd, tau, h)
        worst["inverse_forward_wrench"] = max(worst["inverse_forward_wrench"],
                                              _relative(dynamics.inverse_dynamics(q, qd, qdd_h, h), tau))

        values = {
            "M": M, "C": C, "g": dynamics.g(q), "friction": dynamics.friction(qd), "fk": dynamics.fk(q),
            "jacobian": dynamics.jacobian(q), "kinetic_energy": np.array([dynamics.kinetic_energy(q, qd)]),
            "potential_energy": np.array([dynamics.potential_energy(q)]),
        }
        for name, function in symbolic.items():
            reference = np.array(function(q, qd, params), dtype=float).reshape(values[name].shape)
            key = f"compiled_vs_symbolic_{name}"
            worst[key] = max(worst[key], _relative(values[name], reference))

    tolerances = {"symmetric": 0.0, "positive_definite": 0.0, "skew": SKEW_TOLERANCE,
                  "inverse_forward": IDENTITY_TOLERANCE, "inverse_forward_wrench": IDENTITY_TOLERANCE}
    return [Check(name, float(error), tolerances.get(name, SYMBOLIC_TOLERANCE)) for name, error in worst.items()]


def report(checks: list[Check]) -> dict:
    return {"passed": all(c.passed for c in checks),
            "checks": [dict(asdict(c), passed=c.passed) for c in checks]}
