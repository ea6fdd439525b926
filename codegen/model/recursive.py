"""Stage 2, scalable route: recursive algorithms written as straight-line programs.

All spatial quantities are 6-vectors [angular; linear] in base-frame coordinates
about the base origin (Plücker coordinates, Featherstone's conventions):

* inverse dynamics and the bias C q̇ + g by the recursive Newton-Euler algorithm;
* M by the composite-rigid-body algorithm;
* the Christoffel-consistent C by the recursive algorithm of Echeandia & Wensing
  (2021), as in Pinocchio's computeCoriolisMatrix — M is never differentiated;
* g by the Newton-Euler pass with q̇ = q̈ = 0.

Coupled (mimic) joints: the recursions run over the whole kinematic tree, whose joint
positions, velocities and accelerations are G q + b, G q̇, G q̈ (``common.Coupling``); τ, M, C,
g and friction are then projected on the coordinates (Gᵀ τ_tree, Gᵀ M_tree G, ...). The
articulated-body algorithm has no such projection: it is not built for coupled robots.

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
from .common import BASE_TO_SPATIAL, Coupling, Progress, base_jacobian, cross_product, model_symbols, point_jacobian
from .common import skew as _cross
from .lagrange import SymbolicModel
from .newton_euler import ClassicalNewtonEuler
from .program import Program




def _dot(a, b) -> sp.Expr:
    """Σ a_k b_k over the pairs whose factors are both nonzero, as one sum: the terms of SymPy's matrix product,
    without its conversions to and from domain matrices (most of the time of a 3 x 3 product)."""
    return sp.Add(*[x * y for x, y in zip(a, b) if x != 0 and y != 0])


def _times(R: sp.Matrix, x) -> list:
    """R x for a 3 x 3 matrix R and a 3-vector x, as a list."""
    return [_dot((R[i, 0], R[i, 1], R[i, 2]), x) for i in range(3)]


def _transpose_times(R: sp.Matrix, x) -> list:
    """Rᵀ x for a 3 x 3 matrix R and a 3-vector x, as a list."""
    return [_dot((R[0, i], R[1, i], R[2, i]), x) for i in range(3)]


def _rows_times(rows: list[list], x) -> sp.Matrix:
    """A x for a matrix A given by its rows (``tolist()``) and a vector x: the sums of SymPy's matrix product,
    without its conversions (most of the time of a product of a 6 x 6 matrix and a vector)."""
    x = list(x)
    return sp.Matrix([_dot(row, x) for row in rows])


def _product(A: sp.Matrix, B: sp.Matrix) -> sp.Matrix:
    """A B as ``_rows_times`` computes a matrix-vector product, column by column of B."""
    columns = [list(column) for column in zip(*B.tolist())]
    return sp.Matrix([[_dot(row, column) for column in columns] for row in A.tolist()])


def _motion_to_child(R: sp.Matrix, p: sp.Matrix, m) -> list:
    """A motion vector m (angular; linear) from a parent's coordinates to those of a child at (R, p) in the parent's
    (the six entries, before they are named)."""
    w, v = list(m[:3]), list(m[3:])
    shifted = [a - b for a, b in zip(v, cross_product(p, w))]
    return [*_transpose_times(R, w), *_transpose_times(R, shifted)]


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


def spatial_inertia(mass, com: sp.Matrix, inertia: sp.Matrix) -> sp.Matrix:
    """Spatial inertia about the origin of a body with centre ``com`` and inertia ``inertia`` about it."""
    c = _cross(com)
    out = sp.zeros(6, 6)
    out[:3, :3] = inertia + mass * c * c.T
    out[:3, 3:] = mass * c
    out[3:, :3] = mass * c.T
    out[3:, 3:] = mass * sp.eye(3)
    return out


def body_q(inertia: sp.Matrix, v: sp.Matrix) -> sp.Matrix:
    """B's upper-left block Q = ω× (Ī − ½ tr(Ī) 1) − u hᵀ + (u · h) 1 of a rigid-body inertia and its velocity
    (ω, u) (see ``derive_recursive``'s Coriolis matrix)."""
    h = [inertia[2, 4], inertia[0, 5], inertia[1, 3]]
    w, u = v[:3, 0], v[3:, 0]
    half_trace = (inertia[0, 0] + inertia[1, 1] + inertia[2, 2]) / 2
    turned = _product(_cross(w), inertia[:3, :3] - half_trace * sp.eye(3))
    dot = _dot(u, h)
    return sp.Matrix(3, 3, lambda a, b: turned[a, b] - u[a] * h[b] + (dot if a == b else 0))


def body_k(inertia: sp.Matrix, v: sp.Matrix) -> sp.Matrix:
    """The linear momentum k (the last three entries of I v)."""
    return _rows_times(inertia[3:, :].tolist(), v)


def moved_q(R: sp.Matrix, p: sp.Matrix, q_matrix: sp.Matrix, rk: sp.Matrix) -> sp.Matrix:
    """A subtree's Q in the coordinates of the parent, where the child's frame is at (R, p), given the subtree's
    linear momentum there (R k): R Q Rᵀ − (R k) pᵀ + (p · R k) 1."""
    rows = R.tolist()
    turned = _product(R, q_matrix)
    dot = _dot(p, rk)
    return sp.Matrix(3, 3, lambda a, b: _dot(turned[a, :], rows[b]) - rk[a] * p[b] + (dot if a == b else 0))


def project_vector(v: sp.Matrix, coupling: Coupling, off: int) -> sp.Matrix:
    """Gᵀ v over the tree's coordinates (a floating base's ``off`` first, unchanged)."""
    return sp.Matrix(list(v[:off]) + list(coupling.vector(v[off:])))


def project_matrix(a: sp.Matrix, coupling: Coupling, off: int) -> sp.Matrix:
    """Gᵀ A G with G = diag(I_off, G_joints)."""
    terms = [(k, 1) for k in range(off)] + [(off + c, m) for c, m, _ in coupling.terms]
    size = off + coupling.n
    out = sp.zeros(size, size)
    for i, (ci, mi) in enumerate(terms):
        for j, (cj, mj) in enumerate(terms):
            if a[i, j] != 0:
                out[ci, cj] += mi * mj * a[i, j]
    return out


def derive_recursive(description: RobotDescription, progress: Progress | None = None,
                     articulated: bool = True) -> SymbolicModel:
    """``progress(message)``, if given, hears each algorithm as it finishes (with its time). ``articulated``: also
    derive the articulated-body algorithm (``model.aba``, for ``--forward aba``; a tenth of the Panda's derivation)."""
    start = time.perf_counter()
    say = progress or (lambda message: None)
    joints = description.tree
    n = len(joints)  # bodies of the tree; the model has description.n coordinates
    floating = description.floating_base
    # A floating base's six velocity coordinates come first: ``off`` shifts every joint's index in M, C, τ.
    off = 6 if floating is not None else 0
    q_model, qd_model, qdd_model, tau, wrench = model_symbols(description.n, floating is not None)
    coupling = Coupling(description)
    # The tree's joint positions, velocities and accelerations (the coordinates themselves if uncoupled).
    q = coupling.positions(q_model[len(q_model) - description.n:])
    qd, qdd = coupling.rates(qd_model[off:]), coupling.rates(qdd_model[off:])
    gravity = sp.Matrix(description.gravity)
    program = Program()
    let_v, let_m = program.vector, program.matrix

    # The root: the fixed base pose, or the floating base's pose, velocity and acceleration (q, v, v̇ give them
    # in the base frame: its body coordinates, where its spatial acceleration is v̇).
    zero6 = sp.zeros(6, 1)
    if floating is not None:
        rotation = let_m(geometry.quaternion_rotation(*q_model[3:7]))
        root_pose = geometry.homogeneous(rotation, sp.Matrix(q_model[:3]))
        root_velocity = sp.Matrix([qd_model[BASE_TO_SPATIAL[k]] for k in range(6)])
        root_acceleration = sp.Matrix([qdd_model[BASE_TO_SPATIAL[k]] for k in range(6)])
        root_inertia = let_m(spatial_inertia(floating.inertial.mass, sp.Matrix(floating.inertial.com),
                                             sp.Matrix(floating.inertial.inertia)))
    else:
        root_pose, root_velocity, root_acceleration = sp.Matrix(description.base), zero6, zero6

    # Kinematics: base-frame (floating base: world-frame) poses of joint frames and link frames.
    joint_frames, link_frames = [], []
    for i, joint in enumerate(joints):
        parent = root_pose if joint.parent < 0 else link_frames[joint.parent]
        frame = let_m(parent * sp.Matrix(joint.placement))
        joint_frames.append(frame)
        link = frame * geometry.screw(joint.kind, sp.Matrix(joint.axis), q[i]) * sp.Matrix(joint.successor)
        link_frames.append(let_m(link))

    def line_motion(direction: sp.Matrix, point: sp.Matrix, kind: str) -> sp.Matrix:
        """Unit motion about (revolute) or along (prismatic) a line, in the coordinates of ``point``."""
        if kind == "revolute":
            return let_v([*direction, *point.cross(direction)])
        return let_v([0, 0, 0, *direction])

    # Local frames: everything below is in each link's own coordinates, where inertias and
    # motion subspaces are constant; only the parent -> child transforms depend on q.
    local = []  # (R, p): child pose in the parent link frame
    for i, joint in enumerate(joints):
        t = let_m(sp.Matrix(joint.placement) * geometry.screw(joint.kind, sp.Matrix(joint.axis), q[i])
                  * sp.Matrix(joint.successor))
        local.append((t[:3, :3], t[:3, 3]))
    subspace = []  # S_i in link i coordinates: the joint axis seen from the link frame
    for joint in joints:
        successor = sp.Matrix(joint.successor)
        rotation_t = successor[:3, :3].T
        subspace.append(line_motion(rotation_t * sp.Matrix(joint.axis), -rotation_t * successor[:3, 3], joint.kind))

    # The transforms spelled out on lists: the sums of SymPy's matrix products, without its conversions to and
    # from domain matrices (most of the time of a 3 x 3 product).
    def to_child(i: int, m: sp.Matrix) -> sp.Matrix:
        """Motion vector from the parent's coordinates to link i's."""
        return let_v(_motion_to_child(*local[i], m))

    def to_parent(i: int, f: sp.Matrix) -> sp.Matrix:
        """Force vector from link i's coordinates to its parent's."""
        R, p = local[i]
        n_, k = _times(R, f[:3]), _times(R, f[3:])
        return let_v([*(a + b for a, b in zip(n_, cross_product(p, k))), *k])

    def plucker(R: sp.Matrix, p: sp.Matrix) -> sp.Matrix:
        """6x6 motion transform from the parent's coordinates to the child's."""
        out = sp.zeros(6, 6)
        out[:3, :3] = R.T
        out[3:, 3:] = R.T
        out[3:, :3] = -R.T * _cross(p)
        return out

    def matrix_to_parent(i: int, A: sp.Matrix) -> sp.Matrix:
        """A force-from-motion 6x6 map (an articulated-body inertia) from link i's coordinates to its parent's:
        Xᵀ A X."""
        X = plucker(*local[i])
        return let_m(X.T * A * X)

    def inertia_to_parent(i: int, A: sp.Matrix) -> sp.Matrix:
        """A rigid-body (or composite) spatial inertia [[Ī, [h]x], [[h]xᵀ, m 1]] from link i's coordinates to its
        parent's, by its parameters rather than Xᵀ A X (a fraction of the operations, symmetric to the bit):
        m' = m, h' = R h + m p, Ī' = R Ī Rᵀ − [R h]x[p]x − [p]x[R h]x − m [p]x²."""
        R, p = local[i]
        mass = A[3, 3]
        h = sp.Matrix([A[2, 4], A[0, 5], A[1, 3]])
        inertia = A[:3, :3]
        rh = let_v(R * h)
        h_parent = let_v(rh + mass * p)
        rotated = R * inertia * R.T
        px, rhx = _cross(p), _cross(rh)
        shifted = rotated - rhx * px - px * rhx - mass * px * px
        out = sp.zeros(6, 6)
        for a in range(3):
            for b in range(a, 3):
                out[a, b] = out[b, a] = program.let(shifted[a, b])
        hx = _cross(h_parent)
        out[:3, 3:] = hx
        out[3:, :3] = hx.T
        out[3:, 3:] = mass * sp.eye(3)
        return out

    link_inertia = [let_m(spatial_inertia(j.inertial.mass, sp.Matrix(j.inertial.com), sp.Matrix(j.inertial.inertia)))
                    for j in joints]

    # Rotors, in the coordinates of the link they ride on (their joint's parent).
    rotors = []  # (joint index, parent link, spatial inertia, motion subspace Ψ_m, joint-frame pose)
    for i, joint in enumerate(joints):
        rotor = joint.rotor
        if rotor is None:
            continue
        a = sp.Matrix(rotor.axis)
        inertia_local = rotor.transverse_inertia * (sp.eye(3) - a * a.T) + rotor.inertia * (a * a.T)
        inertia_j = spatial_inertia(rotor.mass, sp.Matrix(rotor.com), inertia_local)
        psi_j = rotor.gear_ratio * line_motion(a, sp.Matrix(rotor.com), "revolute")
        placement = sp.Matrix(joint.placement)
        R, p = placement[:3, :3], placement[:3, 3]
        X = plucker(R, p)
        inertia_p = let_m(X.T * inertia_j * X)
        psi_p = let_v(X.inv() * psi_j) if X != sp.eye(6) else let_v(psi_j)
        rotors.append((i, joint.parent, inertia_p, psi_p))

    velocity = []
    for i, joint in enumerate(joints):
        parent_v = (to_child(i, root_velocity) if off else zero6) if joint.parent < 0 else \
            to_child(i, velocity[joint.parent])
        velocity.append(let_v(parent_v + subspace[i] * qd[i]))
    # Time derivative of each joint's motion subspace, seen in its link's coordinates.
    psi_dot = [let_v(motion_cross(velocity[i]) * subspace[i]) for i in range(n)]
    base_gravity = let_v(root_pose[:3, :3].T * gravity)

    def newton_euler(with_velocity: bool, with_acceleration: bool, with_gravity: bool) -> sp.Matrix:
        """τ of the recursive Newton-Euler algorithm (rotors included, no friction); a floating base's rows
        first: the wrench on it (force, moment; base frame)."""
        base_acceleration = sp.Matrix([0, 0, 0, *(-base_gravity)]) if with_gravity else sp.zeros(6, 1)
        if off and with_acceleration:
            base_acceleration = let_v(base_acceleration + root_acceleration)
        base_velocity = root_velocity if with_velocity else zero6
        zero = sp.zeros(6, 1)
        root_force = zero
        acc, force = [], []
        for i, joint in enumerate(joints):
            parent_a = base_acceleration if joint.parent < 0 else acc[joint.parent]
            a = to_child(i, parent_a) if parent_a != zero else zero
            if with_acceleration:
                a = a + subspace[i] * qdd[i]
            if with_velocity:
                a = a + psi_dot[i] * qd[i]
            a = let_v(a)
            acc.append(a)
            f = link_inertia[i] * a
            if with_velocity:
                f += force_cross(velocity[i]) * (link_inertia[i] * velocity[i])
            force.append(f)
        torque = [sp.Integer(0)] * n
        for i, parent, inertia, psi_m in rotors:
            if parent < 0:
                parent_v, parent_a = base_velocity, base_acceleration
            else:
                parent_v, parent_a = (velocity[parent] if with_velocity else zero), acc[parent]
            v_m = let_v(parent_v + psi_m * qd[i]) if with_velocity else zero
            a_m = parent_a
            if with_acceleration:
                a_m = a_m + psi_m * qdd[i]
            if with_velocity:
                a_m = a_m + motion_cross(parent_v) * psi_m * qd[i]
            a_m = let_v(a_m)
            f_m = inertia * a_m
            if with_velocity:
                f_m += force_cross(v_m) * (inertia * v_m)
            f_m = let_v(f_m)
            torque[i] += (psi_m.T * f_m)[0, 0]
            if parent >= 0:
                force[parent] = force[parent] + f_m
            else:
                root_force = root_force + f_m
        for i in reversed(range(n)):
            f = let_v(force[i])
            torque[i] = program.let(torque[i] + (subspace[i].T * f)[0, 0])
            if joints[i].parent >= 0:
                force[joints[i].parent] = force[joints[i].parent] + to_parent(i, f)
            else:
                root_force = root_force + to_parent(i, f)
        if not off:
            return sp.Matrix(torque)
        root_force += root_inertia * base_acceleration
        if with_velocity:
            root_force += force_cross(root_velocity) * (root_inertia * root_velocity)
        root_force = let_v(root_force)
        return sp.Matrix([root_force[BASE_TO_SPATIAL[k]] for k in range(6)] + torque)

    def articulated_body(tool: sp.Matrix, friction: sp.Matrix) -> tuple[sp.Matrix, list[sp.Expr]]:
        """Featherstone's articulated-body algorithm: q̈ and the pivots D_i (> 0 iff M is PD).

        Valid without rotors and coupled joints (a rotor couples its joint to the parent link's motion, which
        this algorithm's joint model does not express). The tool wrench h (base frame, at the
        tool origin) enters as an external force on the tool's link."""
        bias_c = [let_v(psi_dot[i] * qd[i]) for i in range(n)]
        inertia_a = [sp.Matrix(link_inertia[i]) for i in range(n)]
        force_a = [force_cross(velocity[i]) * (link_inertia[i] * velocity[i]) for i in range(n)]
        # External wrench, carried to the tool link's frame and origin.
        k = description.tool_joint
        frame = link_frames[k]
        rotation_t = frame[:3, :3].T
        force = sp.Matrix(wrench[:3])
        moment = sp.Matrix(wrench[3:]) + (tool[:3, 3] - frame[:3, 3]).cross(force)
        force_a[k] = force_a[k] - let_v([*(rotation_t * moment), *(rotation_t * force)])
        effort = [tau[i] - friction[i] for i in range(n)]
        U, D, u = [None] * n, [None] * n, [None] * n
        for i in reversed(range(n)):
            inertia_a[i] = let_m(inertia_a[i])
            force_a[i] = let_v(force_a[i])
            U[i] = let_v(inertia_a[i] * subspace[i])
            D[i] = program.let((subspace[i].T * U[i])[0, 0])
            u[i] = program.let(effort[i] - (subspace[i].T * force_a[i])[0, 0])
            parent = joints[i].parent
            if parent >= 0:
                inertia_small = let_m(inertia_a[i] - U[i] * U[i].T / D[i])
                force_small = let_v(force_a[i] + inertia_small * bias_c[i] + U[i] * u[i] / D[i])
                inertia_a[parent] = inertia_a[parent] + matrix_to_parent(i, inertia_small)
                force_a[parent] = force_a[parent] + to_parent(i, force_small)
        base_acceleration = sp.Matrix([0, 0, 0, *(-base_gravity)])
        acc, qdd_out = [None] * n, [None] * n
        for i, joint in enumerate(joints):
            parent_a = base_acceleration if joint.parent < 0 else acc[joint.parent]
            a_prime = let_v(to_child(i, parent_a) + bias_c[i])
            qdd_out[i] = program.let((u[i] - (U[i].T * a_prime)[0, 0]) / D[i])
            acc[i] = let_v(a_prime + subspace[i] * qdd_out[i])
        return sp.Matrix(qdd_out), D

    t0 = time.perf_counter()
    if rotors or off:
        rnea_tau = newton_euler(True, True, True)
        bias = newton_euler(True, False, True)
        g = newton_euler(False, False, True)
    else:  # the same torques in 3-vectors, with fewer operations (newton_euler.py)
        classical = ClassicalNewtonEuler(description, q, program)
        rnea_tau, bias, g = (sp.Matrix(classical.torques(qd, qdd, -base_gravity, velocity, acceleration))
                             for velocity, acceleration in ((True, True), (True, False), (False, False)))
    t_rnea = time.perf_counter()
    say(f"  Newton-Euler (torque, bias, gravity) over {n} bodies: {t_rnea - t0:.2f} s")

    # Composite-rigid-body algorithm.
    composite = [sp.Matrix(link_inertia[i]) for i in range(n)]
    composite_root = sp.Matrix(root_inertia) if off else None
    for i, parent, inertia, _ in rotors:
        if parent >= 0:
            composite[parent] = composite[parent] + inertia
        elif off:
            composite_root += inertia
    for i in reversed(range(n)):
        composite[i] = let_m(composite[i])
        if joints[i].parent >= 0:
            composite[joints[i].parent] = composite[joints[i].parent] + inertia_to_parent(i, composite[i])
        elif off:
            composite_root += inertia_to_parent(i, composite[i])

    def project_up(start: int, f: sp.Matrix, on_ancestor, on_root=None) -> None:
        """Carry force f (in link ``start``'s coordinates) to each proper ancestor j: on_ancestor(j, f_j); then,
        on a floating base, to the base: on_root(f_base)."""
        j = start
        while joints[j].parent >= 0:
            f = to_parent(j, f)
            j = joints[j].parent
            on_ancestor(j, f)
        if off and on_root is not None:
            on_root(let_v(to_parent(j, f)))

    def base_entries(f: sp.Matrix) -> list:
        """A force on the floating base as its six generalised components (force, then moment)."""
        return [f[BASE_TO_SPATIAL[k]] for k in range(6)]

    def tick(what: str, done: int) -> None:
        """A line every tenth of a large tree: these loops are quadratic in its depth."""
        if n >= 20 and done % max(1, n // 10) == 0:
            say(f"  {what}: {done}/{n} bodies ({time.perf_counter() - start:.1f} s)")

    M = sp.zeros(off + n, off + n)  # tree indices: the floating base's six, then joint i at off + i
    if off:
        composite_root = let_m(composite_root)
        for a in range(6):
            for b in range(a, 6):  # one triangle: M is then symmetric to the bit
                M[a, b] = M[b, a] = composite_root[BASE_TO_SPATIAL[a], BASE_TO_SPATIAL[b]]
    for i in range(n):
        tick("mass matrix", i)
        f = let_v(composite[i] * subspace[i])
        M[off + i, off + i] = program.let((subspace[i].T * f)[0, 0])

        def store(j, f_j, i=i):
            M[off + i, off + j] = M[off + j, off + i] = program.let((subspace[j].T * f_j)[0, 0])

        def store_root(f_root, i=i):
            for a, value in enumerate(base_entries(f_root)):
                M[a, off + i] = M[off + i, a] = value

        project_up(i, f, store, store_root)
    for i, parent, inertia, psi_m in rotors:
        f = let_v(inertia * psi_m)
        M[off + i, off + i] = program.let(M[off + i, off + i] + (psi_m.T * f)[0, 0])

        def add_root(f_root, i=i):
            for a, value in enumerate(base_entries(f_root)):
                M[a, off + i] = M[off + i, a] = program.let(M[a, off + i] + value)

        if parent >= 0:
            M[off + i, off + parent] = M[off + parent, off + i] = program.let(
                M[off + i, off + parent] + (subspace[parent].T * f)[0, 0])

            def add(j, f_j, i=i):
                M[off + i, off + j] = M[off + j, off + i] = program.let(M[off + i, off + j] + (subspace[j].T * f_j)[0, 0])

            project_up(parent, f, add, add_root)
        elif off:
            add_root(f)
    t_crba = time.perf_counter()
    say(f"  composite rigid body (mass matrix): {t_crba - t_rnea:.2f} s")

    # Coriolis matrix (Echeandia & Wensing 2021, Algorithm 1) in local coordinates: with
    # B(I, v) = ½[(v×*) I + (I v)×̄* − I (v×)], C = Σ_bodies Jᵀ (I J̇ + B J).
    # The bodies' B are not summed as 6×6 matrices (Xᵀ B X per link and level: a third of C's operations). With
    # I = [[Ī, h×], [h×ᵀ, m 1]], v = (ω, u) and the momentum I v = (n, k): B = ½[(I v)×̄* − P], where
    # P = (v×)ᵀ I + I (v×) = [[P̄, −k×], [−k×ᵀ, 0]] and P̄ = Ī ω× − ω× Ī + u× h× + h× u×; so B = [[Q, 0], [−k×, 0]]
    # with Q = −½ (n× + P̄). By (Ī ω)× = tr(Ī) ω× − Ī ω× − ω× Ī (Ī symmetric) and (h × u)× = u hᵀ − h uᵀ,
    # Q = ω× (Ī − ½ tr(Ī) 1) − u hᵀ + (u · h) 1: nine entries of a product with the skew ω× and an outer product,
    # with neither n nor P̄ formed. B's shape holds over a subtree: the bodies' Q move to the parent as
    # Q' = R Q Rᵀ − (R k) pᵀ + (p · R k) 1 (from n' = R n + p × R k and P̄' = R P̄ Rᵀ + (R k) pᵀ + p (R k)ᵀ
    # − 2 (p · R k) 1) and k as R k; B^C S reads only S's angular part, and B^Cᵀ S has no linear part (so its moves up
    # the tree are rotations). Operations of the Panda's C: 3,343 with the 6×6 B summed, 2,597 with P̄ and n (kernel
    # 2,534 instructions), 2,311 with Q (kernel 2,311 instructions, 12 % faster); the UR5's 1,553, 1,398, 1,286.
    def q_to_parent(i: int, q_matrix: sp.Matrix, rk: sp.Matrix) -> sp.Matrix:
        """A subtree's Q in its parent's coordinates, given its linear momentum there (R k)."""
        return moved_q(*local[i], q_matrix, rk).applyfunc(program.let)

    def b_composite(q_matrix: sp.Matrix, k: sp.Matrix) -> sp.Matrix:
        """B^C = [[Q, 0], [−k×, 0]] of a subtree's Q and linear momentum k."""
        out = sp.zeros(6, 6)
        out[:3, :3] = q_matrix
        out[3:, :3] = -_cross(k)
        return out

    composite_i = [sp.Matrix(link_inertia[i]) for i in range(n)]
    composite_q = [body_q(link_inertia[i], velocity[i]) for i in range(n)]
    composite_k = [body_k(link_inertia[i], velocity[i]) for i in range(n)]
    if off:  # the base: S = I in its coordinates, whose derivative is (v_base ×)
        root_cross = motion_cross(root_velocity)
        root_i, root_q = sp.Matrix(root_inertia), body_q(root_inertia, root_velocity)
        root_k = body_k(root_inertia, root_velocity)
    C = sp.zeros(off + n, off + n)
    for i in reversed(range(n)):
        tick("Coriolis matrix", n - 1 - i)
        ic, qc, kc = let_m(composite_i[i]), let_m(composite_q[i]), let_v(composite_k[i])
        bc = b_composite(qc, kc)
        ic_rows, bc_rows = ic.tolist(), bc.tolist()
        f1 = let_v(_rows_times(ic_rows, psi_dot[i]) + _rows_times(bc_rows, subspace[i]))
        f2 = let_v(_rows_times(ic_rows, subspace[i]))
        f3 = let_v(_rows_times([list(column) for column in zip(*bc_rows)], subspace[i]))
        C[off + i, off + i] = program.let(C[off + i, off + i] + _dot(subspace[i], f1))
        j, g1, g2, g3 = i, f1, f2, f3
        while joints[j].parent >= 0:
            g1, g2, g3 = to_parent(j, g1), to_parent(j, g2), to_parent(j, g3)
            j = joints[j].parent
            C[off + j, off + i] = program.let(C[off + j, off + i] + _dot(subspace[j], g1))
            C[off + i, off + j] = program.let(C[off + i, off + j] + (_dot(psi_dot[j], g2) + _dot(subspace[j], g3)))
        if off:
            g1, g2, g3 = let_v(to_parent(j, g1)), let_v(to_parent(j, g2)), let_v(to_parent(j, g3))
            row = let_v(root_cross.T * g2 + g3)
            for a in range(6):
                C[a, off + i] = program.let(C[a, off + i] + g1[BASE_TO_SPATIAL[a]])
                C[off + i, a] = program.let(C[off + i, a] + row[BASE_TO_SPATIAL[a]])
        parent = joints[i].parent
        if parent >= 0 or off:
            parent_k = let_v(_times(local[i][0], kc))
            parent_q = q_to_parent(i, qc, parent_k)
        if parent >= 0:
            composite_i[parent] = composite_i[parent] + inertia_to_parent(i, ic)
            composite_q[parent] = composite_q[parent] + parent_q
            composite_k[parent] = composite_k[parent] + parent_k
        elif off:
            root_i, root_q, root_k = root_i + inertia_to_parent(i, ic), root_q + parent_q, root_k + parent_k
    if off:
        root_b = b_composite(let_m(root_q), let_v(root_k))
        block = let_m(let_m(root_i) * root_cross + let_m(root_b))
        for a in range(6):
            for b in range(6):
                C[a, b] = program.let(C[a, b] + block[BASE_TO_SPATIAL[a], BASE_TO_SPATIAL[b]])

    # Rotors: J_m = J_parent + Ψ_m e_iᵀ. Columns of J_parent and velocities of the bodies
    # they belong to, carried into the parent's coordinates.
    # Keys are tree indices (a floating base's columns: the unit vectors of its coordinates).
    columns: dict[int, dict[int, tuple[sp.Matrix, sp.Matrix]]] = {}
    root_columns = {a: (sp.Matrix([int(k == BASE_TO_SPATIAL[a]) for k in range(6)]), root_velocity) for a in range(off)}
    if rotors:
        for i in range(n):
            parent = joints[i].parent
            above = root_columns if parent < 0 else columns[parent]
            inherited = {j: (to_child(i, s_j), to_child(i, v_j)) for j, (s_j, v_j) in above.items()}
            inherited[off + i] = (subspace[i], velocity[i])
            columns[i] = inherited
    for i, parent, inertia, psi_m in rotors:
        parent_v = root_velocity if parent < 0 else velocity[parent]
        v_m = let_v(parent_v + psi_m * qd[i])
        b_m = b_composite(let_m(body_q(inertia, v_m)), let_v(body_k(inertia, v_m)))
        jac = {j: (s_j, let_v(motion_cross(v_j) * s_j))
               for j, (s_j, v_j) in (root_columns if parent < 0 else columns[parent]).items()}
        own = (psi_m, let_v(motion_cross(parent_v) * psi_m))
        key = off + i
        jac[key] = own if key not in jac else (jac[key][0] + own[0], jac[key][1] + own[1])
        products = {k: let_v(inertia * jac[k][1] + b_m * jac[k][0]) for k in jac}
        for r in jac:
            for k in jac:
                C[r, k] = program.let(C[r, k] + (jac[r][0].T * products[k])[0, 0])
    t_coriolis = time.perf_counter()
    say(f"  Coriolis matrix: {t_coriolis - t_crba:.2f} s")

    friction = sp.Matrix([0] * off + list(coupling.friction(description, qd_model[off:])))
    tool = let_m(link_frames[description.tool_joint] * sp.Matrix(description.tool))
    aba = None if rotors or not coupling.identity or off or not articulated else articulated_body(tool, friction)
    if not coupling.identity:
        M, C = project_matrix(M, coupling, off).applyfunc(program.let), project_matrix(C, coupling, off).applyfunc(program.let)
        rnea_tau, bias, g = (project_vector(v, coupling, off).applyfunc(program.let) for v in (rnea_tau, bias, g))
    t_aba = time.perf_counter()
    say(f"  {'articulated body / ' if aba is not None else ''}couplings: {t_aba - t_coriolis:.2f} s")

    link_com = [let_v(link_frames[i][:3, :3] * sp.Matrix(j.inertial.com) + link_frames[i][:3, 3])
                for i, j in enumerate(joints)]
    rotor_terms = [(joints[i].rotor.mass,
                    let_v(joint_frames[i][:3, :3] * sp.Matrix(joints[i].rotor.com) + joint_frames[i][:3, 3]))
                   for i, _, _, _ in rotors]
    axes = [let_v(joint_frames[i][:3, :3] * sp.Matrix(j.axis)) for i, j in enumerate(joints)]

    if off:  # the floating base's own body
        base_com = root_pose[:3, :3] * sp.Matrix(floating.inertial.com) + root_pose[:3, 3]
        rotor_terms.append((floating.inertial.mass, let_v(base_com)))
    potential = program.let(-sum((joint.inertial.mass * (gravity.T * link_com[i])[0, 0]
                                  for i, joint in enumerate(joints)), sp.Integer(0))
                            - sum((mass * (gravity.T * com)[0, 0] for mass, com in rotor_terms), sp.Integer(0)))
    kinetic = (sp.Matrix(qd_model).T * M * sp.Matrix(qd_model))[0, 0] / 2

    origins = [frame[:3, 3] for frame in joint_frames]
    jacobian = sp.Matrix.vstack(*point_jacobian(description, axes, origins, tool[:3, 3], description.tool_joint))
    if off:  # the base's columns: a twist (v, ω) in the base frame moves the point by R v + R ω × (p - p_base)
        jacobian = sp.Matrix.hstack(base_jacobian(root_pose, tool[:3, 3]), jacobian)
    end = time.perf_counter()

    return SymbolicModel(
        description=description, q=q_model, qd=qd_model, qdd=qdd_model, tau=tau, wrench=wrench,
        parameters=description.parameter_symbols,
        M=sp.ImmutableMatrix(M), C=sp.ImmutableMatrix(C), g=sp.ImmutableMatrix(g),
        friction=sp.ImmutableMatrix(friction), kinetic_energy=kinetic, potential_energy=potential,
        link_transforms=tuple(sp.ImmutableMatrix(t) for t in link_frames),
        tool_pose=sp.ImmutableMatrix(tool), tool_jacobian=sp.ImmutableMatrix(jacobian),
        definitions=tuple(program.definitions), method="recursive",
        rnea_tau=sp.ImmutableMatrix(rnea_tau + friction), bias=sp.ImmutableMatrix(bias + friction),
        aba=None if aba is None else (sp.ImmutableMatrix(aba[0]), tuple(aba[1])),
        timings={"kinematics_s": t0 - start, "newton_euler_s": t_rnea - t0, "crba_s": t_crba - t_rnea,
                 "coriolis_s": t_coriolis - t_crba, "aba_s": t_aba - t_coriolis, "rest_s": end - t_aba, "total_s": end - start},
    )
