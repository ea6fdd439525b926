"""Stage 2, scalable route: recursive algorithms written as straight-line programs.

All spatial quantities are 6-vectors [angular; linear] in base-frame coordinates
about the base origin (Plücker coordinates, Featherstone's conventions):

* inverse dynamics and the bias C q̇ + g by the recursive Newton-Euler algorithm;
* M by the composite-rigid-body algorithm;
* the Christoffel-consistent C by the recursive algorithm of Echeandia & Wensing
  (2021), as in Pinocchio's computeCoriolisMatrix — M is never differentiated;
* g by the Newton-Euler pass with q̇ = q̈ = 0.

Rotors ride on the parent link of their joint with the extra spin
gear_ratio · q̇_i about their axis; they enter every algorithm as extra bodies
whose velocity is v_parent + Ψ_m q̇_i.

The result is a SymbolicModel whose matrices are expressions over the
program's intermediate symbols (``definitions``), which keeps generation time
and operation counts roughly linear/quadratic in the number of joints.
"""

from __future__ import annotations

import time

import sympy as sp

from .. import geometry
from ..description.model import RobotDescription
from .lagrange import SymbolicModel
from .program import Program


def _cross(a: sp.Matrix) -> sp.Matrix:
    return sp.Matrix([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])


def motion_cross(v: sp.Matrix) -> sp.Matrix:
    """6x6 matrix of v× for motion vectors."""
    w, u = v[:3, 0], v[3:, 0]
    out = sp.zeros(6, 6)
    out[:3, :3] = _cross(w)
    out[3:, :3] = _cross(u)
    out[3:, 3:] = _cross(w)
    return out


def force_cross(v: sp.Matrix) -> sp.Matrix:
    """6x6 matrix of v×* = −(v×)ᵀ for force vectors."""
    return -motion_cross(v).T


def force_bar_cross(f: sp.Matrix) -> sp.Matrix:
    """The matrix F with F v = v ×* f (so F = ``f ×̄*``)."""
    n, k = f[:3, 0], f[3:, 0]
    out = sp.zeros(6, 6)
    out[:3, :3] = -_cross(n)
    out[:3, 3:] = -_cross(k)
    out[3:, :3] = -_cross(k)
    return out


def spatial_inertia(mass, com: sp.Matrix, inertia: sp.Matrix) -> sp.Matrix:
    """Spatial inertia about the origin of a body with centre ``com`` and inertia ``inertia`` about it."""
    c = _cross(com)
    out = sp.zeros(6, 6)
    out[:3, :3] = inertia + mass * c * c.T
    out[:3, 3:] = mass * c
    out[3:, :3] = mass * c.T
    out[3:, 3:] = mass * sp.eye(3)
    return out


def derive_recursive(description: RobotDescription) -> SymbolicModel:
    start = time.perf_counter()
    n = description.n
    joints = description.joints
    q = sp.symbols(f"q1:{n + 1}", real=True)
    qd = sp.symbols(f"qd1:{n + 1}", real=True)
    qdd = sp.symbols(f"qdd1:{n + 1}", real=True)
    tau = sp.symbols(f"tau1:{n + 1}", real=True)
    wrench = sp.symbols("h_fx h_fy h_fz h_mx h_my h_mz", real=True)
    gravity = sp.Matrix(description.gravity)
    program = Program()
    let_v, let_m = program.vector, program.matrix

    # Kinematics: base-frame poses of joint frames and link frames.
    joint_frames, link_frames = [], []
    for i, joint in enumerate(joints):
        parent = sp.Matrix(description.base) if joint.parent < 0 else link_frames[joint.parent]
        frame = let_m(parent * sp.Matrix(joint.placement))
        joint_frames.append(frame)
        link = frame * geometry.screw(joint.kind, sp.Matrix(joint.axis), q[i]) * sp.Matrix(joint.successor)
        link_frames.append(let_m(link))

    def line_motion(direction: sp.Matrix, point: sp.Matrix, kind: str) -> sp.Matrix:
        if kind == "revolute":
            return let_v([*direction, *point.cross(direction)])
        return let_v([0, 0, 0, *direction])

    axes = [let_v(joint_frames[i][:3, :3] * sp.Matrix(j.axis)) for i, j in enumerate(joints)]
    psi = [line_motion(axes[i], joint_frames[i][:3, 3], j.kind) for i, j in enumerate(joints)]

    def body_inertia(frame: sp.Matrix, mass, com_local, inertia_local) -> sp.Matrix:
        rotation = frame[:3, :3]
        com = let_v(frame[:3, :3] * sp.Matrix(com_local) + frame[:3, 3])
        inertia = let_m(rotation * sp.Matrix(inertia_local) * rotation.T)
        return let_m(spatial_inertia(mass, com, inertia)), com

    link_inertia, link_com = [], []
    for i, joint in enumerate(joints):
        inertia, com = body_inertia(link_frames[i], joint.inertial.mass, joint.inertial.com, joint.inertial.inertia)
        link_inertia.append(inertia)
        link_com.append(com)

    rotors = []  # (joint index, parent link, spatial inertia, motion subspace Ψ_m, centre, mass)
    for i, joint in enumerate(joints):
        rotor = joint.rotor
        if rotor is None:
            continue
        frame = joint_frames[i]
        a = sp.Matrix(rotor.axis)
        inertia_local = rotor.transverse_inertia * (sp.eye(3) - a * a.T) + rotor.inertia * (a * a.T)
        inertia, com = body_inertia(frame, rotor.mass, rotor.com, inertia_local)
        spin_axis = let_v(frame[:3, :3] * a)
        psi_m = let_v(rotor.gear_ratio * line_motion(spin_axis, com, "revolute"))
        rotors.append((i, joint.parent, inertia, psi_m, com, rotor.mass))

    def ancestors(link: int) -> list[int]:
        chain = []
        while link >= 0:
            chain.append(link)
            link = joints[link].parent
        return chain

    # Velocities, and time derivatives of the motion subspaces: Ψ̇_j = v_j × Ψ_j.
    velocity = []
    for i, joint in enumerate(joints):
        parent_v = sp.zeros(6, 1) if joint.parent < 0 else velocity[joint.parent]
        velocity.append(let_v(parent_v + psi[i] * qd[i]))
    psi_dot = [let_v(motion_cross(velocity[i]) * psi[i]) for i in range(n)]

    def newton_euler(with_velocity: bool, with_acceleration: bool, with_gravity: bool) -> sp.Matrix:
        """τ of the recursive Newton-Euler algorithm (rotors included, no friction)."""
        base_acceleration = sp.Matrix([0, 0, 0, *(-gravity)]) if with_gravity else sp.zeros(6, 1)
        vel = velocity if with_velocity else [sp.zeros(6, 1)] * n
        acc, force = [], []
        for i, joint in enumerate(joints):
            parent_a = base_acceleration if joint.parent < 0 else acc[joint.parent]
            a = parent_a
            if with_acceleration:
                a = a + psi[i] * qdd[i]
            if with_velocity:
                a = a + psi_dot[i] * qd[i]
            a = let_v(a)
            acc.append(a)
            f = link_inertia[i] * a
            if with_velocity:
                f += force_cross(vel[i]) * (link_inertia[i] * vel[i])
            force.append(f)
        torque = [sp.Integer(0)] * n
        for i, parent, inertia, psi_m, _, _ in rotors:
            parent_v = sp.zeros(6, 1) if parent < 0 or not with_velocity else vel[parent]
            parent_a = base_acceleration if parent < 0 else acc[parent]
            v_m = let_v(parent_v + psi_m * qd[i]) if with_velocity else sp.zeros(6, 1)
            a_m = parent_a
            if with_acceleration:
                a_m = a_m + psi_m * qdd[i]
            if with_velocity:
                a_m = a_m + motion_cross(v_m) * psi_m * qd[i]
            a_m = let_v(a_m)
            f_m = inertia * a_m
            if with_velocity:
                f_m += force_cross(v_m) * (inertia * v_m)
            f_m = let_v(f_m)
            torque[i] += (psi_m.T * f_m)[0, 0]
            if parent >= 0:
                force[parent] = force[parent] + f_m
        for i in reversed(range(n)):
            f = let_v(force[i])
            torque[i] = program.let(torque[i] + (psi[i].T * f)[0, 0])
            if joints[i].parent >= 0:
                force[joints[i].parent] = force[joints[i].parent] + f
        return sp.Matrix(torque)

    t0 = time.perf_counter()
    rnea_tau = newton_euler(True, True, True)
    bias = newton_euler(True, False, True)
    g = newton_euler(False, False, True)
    t_rnea = time.perf_counter()

    # Composite-rigid-body algorithm.
    composite = [sp.Matrix(link_inertia[i]) for i in range(n)]
    for i, parent, inertia, _, _, _ in rotors:
        if parent >= 0:
            composite[parent] = composite[parent] + inertia
    for i in reversed(range(n)):
        composite[i] = let_m(composite[i])
        if joints[i].parent >= 0:
            composite[joints[i].parent] = composite[joints[i].parent] + composite[i]
    M = sp.zeros(n, n)
    for i in range(n):
        f = let_v(composite[i] * psi[i])
        for j in ancestors(i):
            M[i, j] = M[j, i] = program.let((psi[j].T * f)[0, 0])
    for i, parent, inertia, psi_m, _, _ in rotors:
        f = let_v(inertia * psi_m)
        M[i, i] = program.let(M[i, i] + (psi_m.T * f)[0, 0])
        for j in ancestors(parent):
            M[i, j] = M[j, i] = program.let(M[i, j] + (psi[j].T * f)[0, 0])
    t_crba = time.perf_counter()

    # Coriolis matrix (Echeandia & Wensing 2021, Algorithm 1): with
    # B(I, v) = ½[(v×*) I + (I v)×̄* − I (v×)], C = Σ_bodies Jᵀ (I J̇ + B J).
    def b_matrix(inertia: sp.Matrix, v: sp.Matrix) -> sp.Matrix:
        return (force_cross(v) * inertia + force_bar_cross(inertia * v) - inertia * motion_cross(v)) / 2

    composite_b = [let_m(b_matrix(link_inertia[i], velocity[i])) for i in range(n)]
    composite_i = [sp.Matrix(link_inertia[i]) for i in range(n)]
    C = sp.zeros(n, n)
    for i in reversed(range(n)):
        ic, bc = let_m(composite_i[i]), let_m(composite_b[i])
        f1 = let_v(ic * psi_dot[i] + bc * psi[i])
        f2 = let_v(ic * psi[i])
        f3 = let_v(bc.T * psi[i])
        C[i, i] = program.let(C[i, i] + (psi[i].T * f1)[0, 0])
        for j in ancestors(i)[1:]:
            C[j, i] = program.let(C[j, i] + (psi[j].T * f1)[0, 0])
            C[i, j] = program.let(C[i, j] + (psi_dot[j].T * f2 + psi[j].T * f3)[0, 0])
        parent = joints[i].parent
        if parent >= 0:
            composite_i[parent] = composite_i[parent] + ic
            composite_b[parent] = composite_b[parent] + bc
    for i, parent, inertia, psi_m, _, _ in rotors:
        # Rotor body: J_m = J_parent + Ψ_m e_iᵀ, J̇_m = J̇_parent + (v_parent × Ψ_m) e_iᵀ.
        parent_v = sp.zeros(6, 1) if parent < 0 else velocity[parent]
        v_m = let_v(parent_v + psi_m * qd[i])
        b_m = let_m(b_matrix(inertia, v_m))
        columns = {j: (psi[j], psi_dot[j]) for j in ancestors(parent)}
        columns_i = (psi_m, let_v(motion_cross(parent_v) * psi_m))
        jac = {j: columns.get(j, (sp.zeros(6, 1), sp.zeros(6, 1))) for j in list(columns) + [i]}
        jac[i] = (jac[i][0] + columns_i[0], jac[i][1] + columns_i[1])
        products = {k: let_v(inertia * jac[k][1] + b_m * jac[k][0]) for k in jac}
        for r in jac:
            for k in jac:
                C[r, k] = program.let(C[r, k] + (jac[r][0].T * products[k])[0, 0])
    t_coriolis = time.perf_counter()

    friction = sp.Matrix([joint.viscous * qd[i] + joint.coulomb * sp.sign(qd[i]) for i, joint in enumerate(joints)])
    potential = program.let(-sum((joint.inertial.mass * (gravity.T * link_com[i])[0, 0]
                                  for i, joint in enumerate(joints)), sp.Integer(0))
                            - sum((mass * (gravity.T * com)[0, 0] for _, _, _, _, com, mass in rotors), sp.Integer(0)))
    kinetic = (sp.Matrix(qd).T * M * sp.Matrix(qd))[0, 0] / 2

    tool = let_m(link_frames[-1] * sp.Matrix(description.tool))
    tool_point = tool[:3, 3]
    jacobian = sp.zeros(6, n)
    for j in ancestors(n - 1):
        if joints[j].kind == "revolute":
            jacobian[:3, j] = axes[j].cross(tool_point - joint_frames[j][:3, 3])
            jacobian[3:, j] = axes[j]
        else:
            jacobian[:3, j] = axes[j]
    end = time.perf_counter()

    return SymbolicModel(
        description=description, q=q, qd=qd, qdd=qdd, tau=tau, wrench=wrench,
        parameters=description.parameter_symbols,
        M=sp.ImmutableMatrix(M), C=sp.ImmutableMatrix(C), g=sp.ImmutableMatrix(g),
        friction=sp.ImmutableMatrix(friction), kinetic_energy=kinetic, potential_energy=potential,
        link_transforms=tuple(sp.ImmutableMatrix(t) for t in link_frames),
        tool_pose=sp.ImmutableMatrix(tool), tool_jacobian=sp.ImmutableMatrix(jacobian),
        definitions=tuple(program.definitions), method="recursive",
        rnea_tau=sp.ImmutableMatrix(rnea_tau + friction), bias=sp.ImmutableMatrix(bias + friction),
        timings={"kinematics_s": t0 - start, "newton_euler_s": t_rnea - t0, "crba_s": t_crba - t_rnea,
                 "coriolis_s": t_coriolis - t_crba, "rest_s": end - t_coriolis, "total_s": end - start},
    )
