"""Pieces both derivation routes share: the model's symbols and geometric Jacobians."""

from __future__ import annotations

import sympy as sp

from ..description.model import RobotDescription


def model_symbols(n: int):
    """q, q̇, q̈, τ (n each) and the tool wrench h = (force, moment)."""
    return (sp.symbols(f"q1:{n + 1}", real=True), sp.symbols(f"qd1:{n + 1}", real=True),
            sp.symbols(f"qdd1:{n + 1}", real=True), sp.symbols(f"tau1:{n + 1}", real=True),
            sp.symbols("h_fx h_fy h_fz h_mx h_my h_mz", real=True))


def point_jacobian(description: RobotDescription, axes, origins, point: sp.Matrix,
                   link: int) -> tuple[sp.Matrix, sp.Matrix]:
    """Geometric Jacobian (linear, angular; base frame) of a point fixed to ``link`` (-1: the base).

    ``axes`` and ``origins`` are each joint's axis and a point on it, in the base frame."""
    n = description.n
    jv, jw = sp.zeros(3, n), sp.zeros(3, n)
    for j in description.chain(link):
        if description.joints[j].kind == "revolute":
            jv[:, j] = axes[j].cross(point - origins[j])
            jw[:, j] = axes[j]
        else:
            jv[:, j] = axes[j]
    return jv, jw
