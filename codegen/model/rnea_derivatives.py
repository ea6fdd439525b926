"""Analytical derivatives of the recursive Newton-Euler algorithm (issue 13, speed).

For a kinematic tree without rotors and coupled joints, dτ/dq and dτ/dq̇ in closed form over world-frame
(base-frame) spatial quantities, as Carpentier & Mansard (RSS 2018) derive them: with S_j the joint's axis,
v_j, a_j the body's velocity and acceleration (a_0 = −g), I_j its inertia, all in the world frame, and λ(j)
the parent,

    Ψ̇_j = v_λ(j) × S_j,    Ψ̈_j = a_λ(j) × S_j + v_λ(j) × Ψ̇_j,
    f_j = I_j a_j + v_j ×* I_j v_j,    B_j = (v_j ×*) I_j + (I_j v_j) ×̄* − I_j (v_j ×),

and F_i, I^C_i, B^C_i the sums of f, I and B over the subtree of i (so τ_i = S_iᵀ F_i):

    j ⪯ i (j is i or an ancestor):  ∂τ_i/∂q_j = S_iᵀ (I^C_i Ψ̈_j + B^C_i Ψ̇_j),
                                    ∂τ_i/∂q̇_j = S_iᵀ (B^C_i S_j + 2 I^C_i Ψ̇_j),
    i ≺ j (i a strict ancestor):    ∂τ_i/∂q_j = S_iᵀ (S_j ×* F_j + I^C_j Ψ̈_j + B^C_j Ψ̇_j),
                                    ∂τ_i/∂q̇_j = S_iᵀ (B^C_j S_j + 2 I^C_j Ψ̇_j),

and zero between joints on different branches. They follow from ∂X/∂q_j = S_j × X for every world-frame
quantity carried by the bodies after joint j (∂I_k/∂q_j = S_j ×* I_k − I_k S_j ×), so each pair (i, j)
costs two dot products of 6-vectors once the per-joint vectors and matrices are known; forward-mode
differentiation of the whole program (``derivatives.py``) costs about the program's size per variable.
Friction adds ∂friction/∂q̇ (viscous; Coulomb's derivative is taken as zero).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from .derivatives import _without_dirac
from .program import Program
from .recursive import _dot, _rows_times, motion_cross, spatial_inertia


def _motion_rows(v) -> list[list]:
    """The rows of v× (``recursive.motion_cross``), as lists."""
    w0, w1, w2, u0, u1, u2 = v[:6]
    return [[0, -w2, w1, 0, 0, 0], [w2, 0, -w0, 0, 0, 0], [-w1, w0, 0, 0, 0, 0],
            [0, -u2, u1, 0, -w2, w1], [u2, 0, -u0, w2, 0, -w0], [-u1, u0, 0, -w1, w0, 0]]


def applies(model) -> bool:
    """The closed form holds for the recursive route's trees without rotors, coupled joints or loops, on a fixed
    or a floating base."""
    description = model.description
    off = 6 if description.floating_base is not None else 0
    return (model.method == "recursive" and model.closed_chain is None and not description.bodies
            and all(joint.rotor is None for joint in description.tree)
            and len(description.tree) + off == model.n and len(model.link_transforms) == len(description.tree))


@dataclass(frozen=True)
class RneaDerivatives:
    """The program (``definitions``, after the model's) and over it: dτ/dq and dτ/dq̇ (friction included)."""

    definitions: tuple
    d_q: sp.Matrix
    d_qd: sp.Matrix


def rnea_derivatives(model, prefix: str = "nd") -> RneaDerivatives:
    """The derivatives of the inverse dynamics without the tool wrench; the definitions are named
    ``<prefix><k>`` and use the model's link frames.

    A floating base is a body whose six coordinates (ν, ω in its own frame) form one joint on the world: its
    world axes S_k = Ad_T e_k move with the base, so the pairs among them follow the rule for j ⪯ i; its parent
    is still, so Ψ̇_k = 0 and Ψ̈_k = −g × S_k in ∂τ/∂q. Its rates differ from a one-axis joint's in one term:
    the base's own axes carry its velocity (Ṡ v_b = V_0 × V_0 = 0), so ∂a_k/∂v_b = S × (v_k − V_0) where a
    joint's formula has 2Ψ̇ + S × v_k: in ∂τ/∂q̇, Ψ̇_k is ½ V_0 × S_k."""
    program = Program(prefix)
    let_v, let_m = program.vector, program.matrix
    description = model.description
    joints = description.tree
    floating = description.floating_base
    off = 6 if floating is not None else 0
    n = model.n  # coordinates: a floating base's six, then the joints'
    q, qd, qdd = model.q, model.qd, model.qdd
    joint_q = q[len(q) - len(joints):]
    gravity = sp.Matrix(description.gravity)

    def cross(a, b):  # a × b
        return _rows_times(_motion_rows(a), b)

    def force_product(a, f):  # a ×* f, with a ×* = −(a ×)ᵀ
        rows = _motion_rows(a)
        return _rows_times([[-rows[c][r] for c in range(6)] for r in range(6)], f)

    # Bodies: a floating base (body 0) and the joints' links; body_parent[-1] is the world. Coordinates: their
    # axes S (world), the body each moves, Ψ̇ for ∂τ/∂q and for ∂τ/∂q̇ (the same but for a floating base), Ψ̈.
    body_parent, coordinate_body = [], []
    axes, psi_dot, psi_dot_rate, psi_ddot = [], [], [], []
    velocity, acceleration = [], []
    inertia, force, symmetric, momentum = [], [], [], []
    zero = sp.zeros(6, 1)
    base_acceleration = sp.Matrix([0, 0, 0, *(-gravity)])

    def add_body(parent, I, v, a):
        rows = I.tolist()
        h = let_v(_rows_times(rows, v))
        # B = (v ×*) I + (h ×̄*) − I (v ×) = −P + (h ×̄*) with P = (v ×)ᵀ I + I (v ×) symmetric: only P and h
        # are summed over subtrees, and (h ×̄*) x = x ×* h is applied as a cross product.
        half = I * motion_cross(v)
        body_parent.append(parent)
        velocity.append(v)
        acceleration.append(a)
        inertia.append(I)
        symmetric.append(half + half.T)
        momentum.append(h)
        force.append(_rows_times(rows, a) + force_product(v, h))

    def world_inertia(inertial, R, p):
        rows = R.tolist()
        com = let_v(_rows_times(rows, sp.Matrix(inertial.com)) + p)
        # R I Rᵀ is symmetric: its upper triangle, mirrored (the lower one would cost as much again).
        columns = list(zip(*sp.Matrix(inertial.inertia).tolist()))
        turned = [[_dot(row, column) for column in columns] for row in rows]
        rotated = let_m(sp.Matrix(3, 3, lambda a, b: _dot(turned[a], rows[b]) if a <= b
                                  else _dot(turned[b], rows[a])))
        return let_m(spatial_inertia(inertial.mass, com, rotated))

    if floating is not None:
        from ..geometry import quaternion_rotation

        R = let_m(quaternion_rotation(*q[3:7]))
        p = sp.Matrix(q[:3])
        base_axes = [let_v([0, 0, 0, *R[:, k]]) for k in range(3)]
        base_axes += [let_v([*R[:, k], *p.cross(R[:, k])]) for k in range(3)]
        v0 = let_v(sum((base_axes[k] * qd[k] for k in range(6)), zero))
        alpha0 = let_v(sum((base_axes[k] * qdd[k] for k in range(6)), zero))
        for k in range(6):
            coordinate_body.append(0)
            axes.append(base_axes[k])
            psi_dot.append(zero)
            psi_dot_rate.append(let_v(cross(v0, base_axes[k]) / 2))
            psi_ddot.append(let_v(cross(base_acceleration, base_axes[k])))
        add_body(-1, world_inertia(floating.inertial, R, p), v0, let_v(base_acceleration + alpha0))

    for i, joint in enumerate(joints):
        frame = sp.Matrix(model.link_transforms[i])
        R, p = frame[:3, :3], frame[:3, 3]
        successor = sp.Matrix(joint.successor)
        to_joint = let_m(R * successor[:3, :3].T)  # the joint frame's rotation (the axis is fixed in it)
        turn = to_joint.tolist()
        direction = let_v(_rows_times(turn, sp.Matrix(joint.axis)))
        if joint.kind == "revolute":
            origin = p - _rows_times(turn, successor[:3, 3])  # the joint frame's origin: a point of the axis
            S = let_v([*direction, *origin.cross(direction)])
        else:
            S = sp.Matrix([0, 0, 0, *direction])
        parent = joint.parent + (1 if off else 0) if joint.parent >= 0 else (0 if off else -1)
        still = parent < 0
        parent_v = zero if still else velocity[parent]
        parent_a = base_acceleration if still else acceleration[parent]
        s_dot = zero if still else let_v(cross(parent_v, S))
        s_ddot = let_v(cross(parent_a, S) + (zero if still else cross(parent_v, s_dot)))  # Ψ̈ = a_λ × S + v_λ × Ψ̇
        rate = qd[off + i]
        v = let_v(parent_v + S * rate)
        a = let_v(parent_a + s_dot * rate + S * qdd[off + i])
        coordinate_body.append(len(body_parent))
        axes.append(S)
        psi_dot.append(s_dot)
        psi_dot_rate.append(s_dot)
        psi_ddot.append(s_ddot)
        add_body(parent, world_inertia(joint.inertial, R, p), v, a)

    # Subtree sums, from the leaves: I^C, P^C, h^C and F.
    sums = [list(inertia), list(symmetric), list(momentum), list(force)]
    for b in reversed(range(len(body_parent))):
        for values in sums:
            values[b] = (let_m if values[b].shape[1] > 1 else let_v)(values[b])
        if body_parent[b] >= 0:
            for values in sums:
                values[body_parent[b]] = values[body_parent[b]] + values[b]
    composite_inertia, composite_symmetric, composite_momentum, composite_force = sums
    coordinates_of = {}
    for c, b in enumerate(coordinate_body):
        coordinates_of.setdefault(b, []).append(c)

    inertia_rows = [m.tolist() for m in composite_inertia]
    negated_symmetric_rows = [[[-e for e in row] for row in m.tolist()] for m in composite_symmetric]

    def bias_times(b: int, x) -> sp.Matrix:  # B^C_b x = −P^C_b x + x ×* h^C_b
        return _rows_times(negated_symmetric_rows[b], x) + force_product(x, composite_momentum[b])

    def strict_ancestors(c: int) -> list[int]:
        """The coordinates of the bodies above c's."""
        chain, b = [], body_parent[coordinate_body[c]]
        while b >= 0:
            chain += coordinates_of[b]
            b = body_parent[b]
        return chain

    def ancestors(c: int) -> list[int]:
        """The coordinates j ⪯ c: those of c's body (all six of a floating base) and of the bodies above."""
        return coordinates_of[coordinate_body[c]] + strict_ancestors(c)

    def dot(a, b) -> sp.Expr:  # one Add of the six products: a running sum re-sorts its terms at each step
        return sp.Add(*[a[k] * b[k] for k in range(6)])

    # P^C S and S ×* h^C of each coordinate's body, each used twice: in S_iᵀ B^C (row i) and in B^C S_j (column j).
    symmetric_axis = [let_v(_rows_times(composite_symmetric[coordinate_body[j]].tolist(), axes[j])) for j in range(n)]
    axis_momentum = [let_v(force_product(axes[j], composite_momentum[coordinate_body[j]])) for j in range(n)]

    d_q, d_qd = sp.zeros(n, n), sp.zeros(n, n)
    for i in range(n):
        b = coordinate_body[i]
        row_inertia = let_v(_rows_times(inertia_rows[b], axes[i]))  # (S_iᵀ I^C_i)ᵀ
        # (S_iᵀ B^C_i)ᵀ = B^C_iᵀ S_i = −P^C_i S_i − S_i ×* h^C_i
        row_bias = let_v(-symmetric_axis[i] - axis_momentum[i])
        for j in ancestors(i):  # j ⪯ i
            d_q[i, j] = dot(row_inertia, psi_ddot[j]) + dot(row_bias, psi_dot[j])
            # B^C_i S_j with B^C_iᵀ S_i = row_bias: S_iᵀ B^C_i S_j = row_bias · S_j
            d_qd[i, j] = dot(row_bias, axes[j]) + 2 * dot(row_inertia, psi_dot_rate[j])
    for j in range(off, n):
        strict = strict_ancestors(j)
        if not strict:
            continue
        b = coordinate_body[j]
        column_q = let_v(force_product(axes[j], composite_force[b]) + _rows_times(inertia_rows[b], psi_ddot[j])
                         + bias_times(b, psi_dot[j]))
        # B^C_j S_j = −P^C_j S_j + S_j ×* h^C_j
        column_qd = let_v(-symmetric_axis[j] + axis_momentum[j]
                          + _rows_times([[2 * e for e in row] for row in inertia_rows[b]], psi_dot_rate[j]))
        for i in strict:  # i ≺ j
            d_q[i, j] = dot(axes[i], column_q)
            d_qd[i, j] = dot(axes[i], column_qd)
    friction = sp.Matrix(model.friction)
    for i in range(n):
        for j in range(n):
            partial = _without_dirac(sp.diff(friction[i], qd[j]))
            if partial != 0:
                d_qd[i, j] += partial
            if j >= off and friction[i].has(joint_q[j - off]):
                d_q[i, j] += sp.diff(friction[i], joint_q[j - off])
    return RneaDerivatives(tuple(program.definitions), d_q, d_qd)
