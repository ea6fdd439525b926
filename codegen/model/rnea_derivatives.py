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

import sympy as sp

from .derivatives import _without_dirac
from .program import Program
from .recursive import force_bar_cross, force_cross, motion_cross, spatial_inertia


def applies(model) -> bool:
    """The closed form holds for the recursive route's trees without rotors, coupled joints or loops."""
    description = model.description
    return (model.method == "recursive" and model.closed_chain is None and not description.bodies
            and all(joint.rotor is None for joint in description.tree)
            and len(description.tree) == model.n and len(model.link_transforms) == model.n)


def rnea_derivatives(model, prefix: str = "nd") -> tuple[list, sp.Matrix, sp.Matrix]:
    """(definitions, dτ/dq, dτ/dq̇) of the inverse dynamics without the tool wrench; the definitions come after
    the model's (they use its link frames) and are named ``<prefix><k>``."""
    program = Program(prefix)
    let_v, let_m = program.vector, program.matrix
    description = model.description
    joints = description.tree
    n = model.n
    q, qd, qdd = model.q, model.qd, model.qdd
    gravity = sp.Matrix(description.gravity)

    def cross(a, b):
        return motion_cross(a) * b

    axes, velocity, acceleration, psi_dot, psi_ddot = [], [], [], [], []
    inertia, bias_matrix, force = [], [], []
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
        parent_v = zero if joint.parent < 0 else velocity[joint.parent]
        parent_a = base_acceleration if joint.parent < 0 else acceleration[joint.parent]
        s_dot = let_v(cross(parent_v, S)) if joint.parent >= 0 else zero
        s_ddot = let_v(cross(parent_a, S) + (cross(parent_v, s_dot) if joint.parent >= 0 else zero))
        v = let_v(parent_v + S * qd[i])
        a = let_v(parent_a + S * qdd[i] + s_dot * qd[i])
        com = let_v(R * sp.Matrix(joint.inertial.com) + p)
        rotated = let_m(R * sp.Matrix(joint.inertial.inertia) * R.T)
        I = let_m(spatial_inertia(joint.inertial.mass, com, rotated))
        h = let_v(I * v)
        f = let_v(I * a + force_cross(v) * h)
        B = let_m(force_cross(v) * I + force_bar_cross(h) - I * motion_cross(v))
        axes.append(S)
        velocity.append(v)
        acceleration.append(a)
        psi_dot.append(s_dot)
        psi_ddot.append(s_ddot)
        inertia.append(I)
        bias_matrix.append(B)
        force.append(f)

    # Subtree sums, from the leaves.
    composite_inertia, composite_bias, subtree_force = list(inertia), list(bias_matrix), list(force)
    for i in reversed(range(n)):
        composite_inertia[i] = let_m(composite_inertia[i])
        composite_bias[i] = let_m(composite_bias[i])
        subtree_force[i] = let_v(subtree_force[i])
        parent = joints[i].parent
        if parent >= 0:
            composite_inertia[parent] = composite_inertia[parent] + composite_inertia[i]
            composite_bias[parent] = composite_bias[parent] + composite_bias[i]
            subtree_force[parent] = subtree_force[parent] + subtree_force[i]

    def ancestors(i: int) -> list[int]:
        chain = []
        while i >= 0:
            chain.append(i)
            i = joints[i].parent
        return chain  # i first

    def dot(a, b) -> sp.Expr:
        return sum((a[k] * b[k] for k in range(6)), sp.Integer(0))

    d_q, d_qd = sp.zeros(n, n), sp.zeros(n, n)
    for i in range(n):
        row_inertia = let_v(composite_inertia[i].T * axes[i])  # (S_iᵀ I^C_i)ᵀ
        row_bias = let_v(composite_bias[i].T * axes[i])  # (S_iᵀ B^C_i)ᵀ
        for j in ancestors(i):  # j ⪯ i
            d_q[i, j] = dot(row_inertia, psi_ddot[j]) + dot(row_bias, psi_dot[j])
            d_qd[i, j] = dot(row_bias, axes[j]) + 2 * dot(row_inertia, psi_dot[j])
    for j in range(n):
        strict = ancestors(j)[1:]
        if not strict:
            continue
        column_q = let_v(force_cross(axes[j]) * subtree_force[j] + composite_inertia[j] * psi_ddot[j]
                         + composite_bias[j] * psi_dot[j])
        column_qd = let_v(composite_bias[j] * axes[j] + 2 * composite_inertia[j] * psi_dot[j])
        for i in strict:  # i ≺ j
            d_q[i, j] = dot(axes[i], column_q)
            d_qd[i, j] = dot(axes[i], column_qd)
    friction = sp.Matrix(model.friction)
    for i in range(n):
        for j in range(n):
            partial = _without_dirac(sp.diff(friction[i], qd[j]))
            if partial != 0:
                d_qd[i, j] += partial
            if friction[i].has(q[j]):
                d_q[i, j] += sp.diff(friction[i], q[j])
    return list(program.definitions), d_q, d_qd
