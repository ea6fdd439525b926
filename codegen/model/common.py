"""Pieces both derivation routes share: the model's symbols, joint couplings and geometric Jacobians."""

from __future__ import annotations

from typing import Callable

import sympy as sp

from ..description.model import RobotDescription
from .names import WRENCH_NAMES

#: A callable that hears one line of progress at a time (the pipeline prints it on stderr).
Progress = Callable[[str], None]


def model_symbols(n: int, floating: bool = False):
    """q, q̇, q̈, τ (n each) and the tool wrench h = (force, moment). A floating base puts its coordinates first
    (docs/floating_base.md): q gets its position and unit quaternion (qb1..qb7: x y z, qx qy qz qw), q̇ and q̈ its
    linear and angular velocity and acceleration in the base frame (qdb1..qdb6, qddb1..qddb6), τ the wrench on it
    (taub1..taub6: force, then moment, base frame)."""
    q, qd, qdd, tau = (sp.symbols(f"{stem}1:{n + 1}", real=True) for stem in ("q", "qd", "qdd", "tau"))
    if floating:
        q = sp.symbols("qb1:8", real=True) + q
        qd, qdd, tau = (sp.symbols(f"{stem}b1:7", real=True) + rest
                        for stem, rest in (("qd", qd), ("qdd", qdd), ("tau", tau)))
    return q, qd, qdd, tau, sp.symbols(" ".join(WRENCH_NAMES), real=True)


#: Velocity coordinates of a floating base (linear, then angular) -> index in a spatial vector [angular; linear].
BASE_TO_SPATIAL = (3, 4, 5, 0, 1, 2)


class Coupling:
    """The map from the model's coordinates to the joints of the kinematic tree (mimic joints):
    q_tree = G q + b, with one nonzero per row of G (the multiplier).

    The tree's dynamics project onto the coordinates: τ = Gᵀ τ_tree(Gq + b, Gq̇, Gq̈),
    M = Gᵀ M_tree G, C = Gᵀ C_tree G, g = Gᵀ g_tree, friction = Gᵀ friction_tree(G q̇); Jacobians
    become J_tree G. Without coupled joints G is the identity and every method returns its input."""

    def __init__(self, description: RobotDescription):
        self.terms = description.couplings  # per tree joint: (coordinate, multiplier, offset)
        self.n = description.n
        self.identity = not description.bodies
        self.coordinate = [c for c, _, _ in self.terms]

    def positions(self, q) -> list[sp.Expr]:
        return [m * q[c] + o for c, m, o in self.terms]

    def rates(self, qd) -> list[sp.Expr]:
        """Velocities (or accelerations) of the tree joints: G q̇."""
        return [m * qd[c] for c, m, _ in self.terms]

    def vector(self, v) -> sp.Matrix:
        """Gᵀ v for a vector over the tree joints (generalised forces)."""
        if self.identity:
            return sp.Matrix(v)
        out = [sp.Integer(0)] * self.n
        for i, (c, m, _) in enumerate(self.terms):
            out[c] += m * v[i]
        return sp.Matrix(out)

    def matrix(self, a: sp.Matrix) -> sp.Matrix:
        """Gᵀ A G for a matrix over the tree joints."""
        if self.identity:
            return sp.Matrix(a)
        out = sp.zeros(self.n, self.n)
        for i, (ci, mi, _) in enumerate(self.terms):
            for j, (cj, mj, _) in enumerate(self.terms):
                if a[i, j] != 0:
                    out[ci, cj] += mi * mj * a[i, j]
        return out

    def columns(self, j: sp.Matrix) -> sp.Matrix:
        """J G for a Jacobian over the tree joints."""
        if self.identity:
            return sp.Matrix(j)
        out = sp.zeros(j.rows, self.n)
        for i, (c, m, _) in enumerate(self.terms):
            out[:, c] += m * j[:, i]
        return out

    def friction(self, description: RobotDescription, qd) -> sp.Matrix:
        """Gᵀ (Fv G q̇ + Fs sgn(G q̇)): each tree joint's friction at its own velocity."""
        rates = self.rates(qd)
        return self.vector([joint.viscous * rate + joint.coulomb * sp.sign(rate)
                            for joint, rate in zip(description.tree, rates)])


def point_jacobian(description: RobotDescription, axes, origins, point: sp.Matrix,
                   link: int, projected: bool = True) -> tuple[sp.Matrix, sp.Matrix]:
    """Geometric Jacobian (linear, angular; base frame) of a point fixed to ``link`` (-1: the base),
    with respect to the model's coordinates (``projected``) or to every joint of the tree.

    ``link`` indexes the kinematic tree; ``axes`` and ``origins`` are each tree joint's axis and a
    point on it, in the base frame. Projected, a coupled joint's column adds, times its
    multiplier, to its coordinate's."""
    tree = description.tree
    if projected:
        n, terms = description.n, description.couplings
    else:
        n, terms = len(tree), [(i, 1, 0) for i in range(len(tree))]
    jv, jw = sp.zeros(3, n), sp.zeros(3, n)
    for j in description.chain(link):
        column, multiplier, _ = terms[j]
        if tree[j].kind == "revolute":
            jv[:, column] += multiplier * axes[j].cross(point - origins[j])
            jw[:, column] += multiplier * axes[j]
        else:
            jv[:, column] += multiplier * axes[j]
    return jv, jw


def base_jacobian(root_pose: sp.Matrix, point: sp.Matrix) -> sp.Matrix:
    """6 x 6: world-frame linear velocity of ``point`` (world coordinates) and angular velocity of any body, per
    floating-base velocity coordinate (linear, angular; base frame)."""
    rotation = root_pose[:3, :3]
    out = sp.zeros(6, 6)
    out[:3, :3] = rotation
    out[:3, 3:] = -skew(point - root_pose[:3, 3]) * rotation
    out[3:, 3:] = rotation
    return out


def skew(a: sp.Matrix) -> sp.Matrix:
    """[a]x: the matrix of a x (cross product)."""
    return sp.Matrix([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])


def cross_product(a, b) -> list:
    """a × b of 3-vectors, as a list (the entries before they are named)."""
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
