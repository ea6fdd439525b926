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
from .recursive import force_cross, motion_cross, spatial_inertia


def applies(model) -> bool:
    """The closed form holds for the recursive route's trees without rotors, coupled joints or loops."""
    description = model.description
    return (model.method == "recursive" and model.closed_chain is None and not description.bodies
            and all(joint.rotor is None for joint in description.tree)
            and len(description.tree) == model.n and len(model.link_transforms) == model.n)


@dataclass(frozen=True)
class RneaDerivatives:
    """The program (``definitions``, after the model's) and over it: dτ/dq, dτ/dq̇ (friction included) and,
    from the same quantities, M (M_ij = S_iᵀ I^C_i S_j) and, when split, the bias C q̇ + g + friction (τ at
    q̈ = 0; None otherwise), which do not depend on q̈: forward-dynamics derivatives solve with them before the
    q̈-dependent part."""

    definitions: tuple
    d_q: sp.Matrix
    d_qd: sp.Matrix
    mass_matrix: sp.Matrix
    bias: sp.Matrix | None


def rnea_derivatives(model, split: bool = False, prefix: str = "nd") -> RneaDerivatives:
    """The derivatives of the inverse dynamics without the tool wrench; the definitions are named
    ``<prefix><k>`` and use the model's link frames. ``split``: the accelerations' q̈-free part apart (what M and
    the bias need comes before anything that depends on q̈; a few more operations in all)."""
    program = Program(prefix)
    let_v, let_m = program.vector, program.matrix
    description = model.description
    joints = description.tree
    n = model.n
    q, qd, qdd = model.q, model.qd, model.qdd
    gravity = sp.Matrix(description.gravity)

    def cross(a, b):
        return motion_cross(a) * b

    def force_product(a, f):  # a ×* f
        return force_cross(a) * f

    # Forward pass. Split, the acceleration is a = a0 (q̈ = 0, gravity as a base acceleration) + α (from q̈), so
    # that M and the bias need nothing that depends on q̈; else a0 is a and α is zero.
    axes, velocity, rest_acceleration, joint_acceleration, psi_dot, psi_ddot = [], [], [], [], [], []
    inertia, rest_force, joint_force, symmetric, momentum = [], [], [], [], []
    zero = sp.zeros(6, 1)
    base_acceleration = sp.Matrix([0, 0, 0, *(-gravity)])
    for i, joint in enumerate(joints):
        frame = sp.Matrix(model.link_transforms[i])
        R, p = frame[:3, :3], frame[:3, 3]
        successor = sp.Matrix(joint.successor)
        to_joint = let_m(R * successor[:3, :3].T)  # the joint frame's rotation (the axis is fixed in it)
        direction = let_v(to_joint * sp.Matrix(joint.axis))
        if joint.kind == "revolute":
            origin = p - to_joint * successor[:3, 3]  # the joint frame's origin: a point of the axis
            S = let_v([*direction, *origin.cross(direction)])
        else:
            S = sp.Matrix([0, 0, 0, *direction])
        root = joint.parent < 0
        parent_v = zero if root else velocity[joint.parent]
        parent_a0 = base_acceleration if root else rest_acceleration[joint.parent]
        parent_alpha = zero if root or not split else joint_acceleration[joint.parent]
        s_dot = zero if root else let_v(cross(parent_v, S))
        # Ψ̈ = a_λ × S + v_λ × Ψ̇ with a_λ = a0_λ + α_λ: the q̈-free part here, α_λ × S added below.
        s_ddot0 = let_v(cross(parent_a0, S) + (zero if root else cross(parent_v, s_dot)))
        s_ddot = s_ddot0 if root or not split else let_v(s_ddot0 + cross(parent_alpha, S))
        v = let_v(parent_v + S * qd[i])
        a0 = let_v(parent_a0 + s_dot * qd[i] + (zero if split else S * qdd[i]))
        alpha = let_v(parent_alpha + S * qdd[i]) if split else zero
        com = let_v(R * sp.Matrix(joint.inertial.com) + p)
        # R I Rᵀ is symmetric: its upper triangle, mirrored (the lower one would cost as much again).
        turned = R * sp.Matrix(joint.inertial.inertia)
        rotated = let_m(sp.Matrix(3, 3, lambda a, b: (turned[a, :] * R[b, :].T)[0] if a <= b
                                  else (turned[b, :] * R[a, :].T)[0]))
        I = let_m(spatial_inertia(joint.inertial.mass, com, rotated))
        h = let_v(I * v)
        # B = (v ×*) I + (h ×̄*) − I (v ×) = −P + (h ×̄*) with P = (v ×)ᵀ I + I (v ×) symmetric: only P and h
        # are summed over subtrees, and (h ×̄*) x = x ×* h is applied as a cross product.
        half = I * motion_cross(v)
        axes.append(S)
        velocity.append(v)
        rest_acceleration.append(a0)
        joint_acceleration.append(alpha)
        psi_dot.append(s_dot)
        psi_ddot.append(s_ddot)
        inertia.append(I)
        symmetric.append(half + half.T)
        momentum.append(h)
        rest_force.append(I * a0 + force_product(v, h))
        joint_force.append(I * alpha)

    # Subtree sums, from the leaves: I^C, P^C, h^C, F0 and Fα (F = F0 + Fα).
    sums = [list(inertia), list(symmetric), list(momentum), list(rest_force), list(joint_force)]
    for i in reversed(range(n)):
        for values in sums:
            values[i] = (let_m if values[i].shape[1] > 1 else let_v)(values[i])
        parent = joints[i].parent
        if parent >= 0:
            for values in sums:
                values[parent] = values[parent] + values[i]
    composite_inertia, composite_symmetric, composite_momentum, composite_rest, composite_joint = sums

    def bias_times(j: int, x) -> sp.Matrix:  # B^C_j x
        return -composite_symmetric[j] * x + force_product(x, composite_momentum[j])

    def ancestors(i: int) -> list[int]:
        chain = []
        while i >= 0:
            chain.append(i)
            i = joints[i].parent
        return chain  # i first

    def dot(a, b) -> sp.Expr:
        return sum((a[k] * b[k] for k in range(6)), sp.Integer(0))

    # P^C_j S_j and S_j ×* h^C_j, each used twice: in S_jᵀ B^C_j (row j) and in B^C_j S_j (column j).
    symmetric_axis = [let_v(composite_symmetric[j] * axes[j]) for j in range(n)]
    axis_momentum = [let_v(force_product(axes[j], composite_momentum[j])) for j in range(n)]

    d_q, d_qd, M, bias = sp.zeros(n, n), sp.zeros(n, n), sp.zeros(n, n), sp.zeros(n, 1)
    for i in range(n):
        row_inertia = let_v(composite_inertia[i] * axes[i])  # (S_iᵀ I^C_i)ᵀ
        # (S_iᵀ B^C_i)ᵀ = B^C_iᵀ S_i = −P^C_i S_i − S_i ×* h^C_i
        row_bias = let_v(-symmetric_axis[i] - axis_momentum[i])
        bias[i] = dot(axes[i], composite_rest[i])
        for j in ancestors(i):  # j ⪯ i
            M[i, j] = M[j, i] = dot(row_inertia, axes[j])
            d_q[i, j] = dot(row_inertia, psi_ddot[j]) + dot(row_bias, psi_dot[j])
            d_qd[i, j] = dot(row_bias, axes[j]) + 2 * dot(row_inertia, psi_dot[j])
    for j in range(n):
        strict = ancestors(j)[1:]
        if not strict:
            continue
        force = composite_rest[j] + composite_joint[j]
        column_q = let_v(force_product(axes[j], force) + composite_inertia[j] * psi_ddot[j]
                         + bias_times(j, psi_dot[j]))
        # B^C_j S_j = −P^C_j S_j + S_j ×* h^C_j
        column_qd = let_v(-symmetric_axis[j] + axis_momentum[j] + 2 * composite_inertia[j] * psi_dot[j])
        for i in strict:  # i ≺ j
            d_q[i, j] = dot(axes[i], column_q)
            d_qd[i, j] = dot(axes[i], column_qd)
    friction = sp.Matrix(model.friction)
    for i in range(n):
        bias[i] += friction[i]
        for j in range(n):
            partial = _without_dirac(sp.diff(friction[i], qd[j]))
            if partial != 0:
                d_qd[i, j] += partial
            if friction[i].has(q[j]):
                d_q[i, j] += sp.diff(friction[i], q[j])
    return RneaDerivatives(tuple(program.definitions), d_q, d_qd, M, bias if split else None)
