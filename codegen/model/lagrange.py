"""Stage 2: the Euler-Lagrange dynamic model of a serial robot, in SymPy.

    M(q) q'' + C(q, q') q' + g(q) + Fv q' + Fs sgn(q') = tau + J(q)^T h

M is assembled from centre-of-mass Jacobians, Σ m Jvᵀ Jv + Jωᵀ R Ī Rᵀ Jω,
plus the rotors; C from the Christoffel symbols of M, so that Ṁ − 2C is
skew-symmetric; g = ∂P/∂q. ``h`` is the wrench (force, then moment, in the
base frame) that the environment exerts on the tool frame origin.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import sympy as sp

from .. import geometry
from .common import Coupling, Progress, model_symbols
from .common import point_jacobian as geometric_point_jacobian
from ..description.model import RobotDescription


@dataclass(frozen=True)
class SymbolicModel:
    description: RobotDescription
    q: tuple[sp.Symbol, ...]
    qd: tuple[sp.Symbol, ...]
    qdd: tuple[sp.Symbol, ...]
    tau: tuple[sp.Symbol, ...]
    wrench: tuple[sp.Symbol, ...]  # fx fy fz mx my mz acting on the tool, base frame
    parameters: tuple[sp.Symbol, ...]
    M: sp.ImmutableMatrix
    C: sp.ImmutableMatrix
    g: sp.ImmutableMatrix
    friction: sp.ImmutableMatrix
    kinetic_energy: sp.Expr
    potential_energy: sp.Expr
    link_transforms: tuple[sp.ImmutableMatrix, ...]  # one per joint of the kinematic tree (description.tree)
    tool_pose: sp.ImmutableMatrix
    tool_jacobian: sp.ImmutableMatrix  # 6 x n: linear velocity of the tool origin, then angular velocity
    # Recursive route: the matrices above are expressions over intermediate symbols defined here,
    # in order; the Newton-Euler τ and bias (C q̇ + g + friction) come straight from the recursion.
    definitions: tuple = ()
    method: str = "lagrange"
    rnea_tau: sp.ImmutableMatrix | None = None
    bias: sp.ImmutableMatrix | None = None
    aba: tuple | None = None  # (q̈ expressions, pivots D_i) of the articulated-body algorithm
    regressor: object | None = None  # regressor.Regressor: τ = Y π, the dynamic and base parameters
    closed_chain: object | None = None  # closed_chain.ClosedChainModel: loops, geometry, the tree's model
    timings: dict = field(default_factory=dict, compare=False)

    @property
    def n(self) -> int:
        """Degrees of freedom: the size of M, q̇, q̈ and τ (joints, plus six for a floating base)."""
        return len(self.qd)

    @property
    def nq(self) -> int:
        """The size of q: n, plus one for a floating base (its orientation is a unit quaternion)."""
        return len(self.q)

    def coriolis_vector(self) -> sp.Matrix:
        return self.C * sp.Matrix(self.qd)

    def nonlinear_effects(self) -> sp.Matrix:
        """C q̇ + g + friction."""
        if self.bias is not None:
            return sp.Matrix(self.bias)
        return self.coriolis_vector() + self.g + self.friction

    def inverse_dynamics(self, with_wrench: bool = True) -> sp.Matrix:
        """τ = M q̈ + C q̇ + g + friction − Jᵀ h."""
        if self.rnea_tau is not None:
            tau = sp.Matrix(self.rnea_tau)
        else:
            tau = self.M * sp.Matrix(self.qdd) + self.nonlinear_effects()
        if with_wrench:
            tau -= self.tool_jacobian.T * sp.Matrix(self.wrench)
        return tau


def _tidy(expr: sp.Expr, simplify: bool, parameters: tuple[sp.Symbol, ...] = ()) -> sp.Expr:
    """Expand, then simplify the trigonometry of each parameter monomial's coefficient.

    The coefficients are small trigonometric polynomials in q, which trigsimp handles
    quickly; on the whole expression it is several times slower."""
    expr = sp.expand(expr)
    if not simplify:
        return expr
    present = [s for s in parameters if expr.has(s)]
    if not present:
        return sp.trigsimp(expr)
    if not expr.is_polynomial(*present):
        # A parameter under a root, a division or a function (mass: sqrt(m1)): no monomials to split
        # by. Left expanded; trigsimp on the whole expression could take minutes.
        return expr
    result = sp.Integer(0)
    for powers, coefficient in sp.Poly(expr, *present).terms():
        monomial = sp.Mul(*[s**k for s, k in zip(present, powers)])
        result += monomial * sp.trigsimp(coefficient)
    return result


def derive_lagrange(description: RobotDescription, simplify: bool = True,
                    progress: Progress | None = None) -> SymbolicModel:
    """Derive M, C, g, friction, energies and tool kinematics of a serial robot.

    Coupled (mimic) joints: the model is derived in the positions x of every joint of the tree
    (simplified there, where each angle is one symbol), then projected on the coordinates with
    x = G q + b: M = Gᵀ M_x G, C = Gᵀ C_x G (the Christoffel matrix of the projected M, G being
    constant), g = Gᵀ g_x, Jacobians J_x G."""
    start = time.perf_counter()
    say = progress or (lambda message: None)
    q, qd, qdd, tau, wrench = model_symbols(description.n)
    coupling = Coupling(description)
    joints = description.tree
    n = len(joints)
    if not coupling.identity:  # derive in the tree's own coordinates, project at the end
        q = sp.symbols(f"x1:{n + 1}", real=True)
        qd = sp.symbols(f"xd1:{n + 1}", real=True)
    gravity = sp.Matrix(description.gravity)

    # Forward kinematics: joint frames (before the motion) and link frames.
    link_frames: list[sp.Matrix] = []
    joint_frames: list[sp.Matrix] = []
    for i, joint in enumerate(joints):
        parent = sp.Matrix(description.base) if joint.parent < 0 else link_frames[joint.parent]
        frame = parent * sp.Matrix(joint.placement)
        joint_frames.append(frame)
        link = frame * geometry.screw(joint.kind, sp.Matrix(joint.axis), q[i]) * sp.Matrix(joint.successor)
        link_frames.append(link.applyfunc(lambda e: sp.trigsimp(e) if simplify else e))

    axes = [joint_frames[i][:3, :3] * sp.Matrix(joint.axis) for i, joint in enumerate(joints)]
    origins = [joint_frames[i][:3, 3] for i in range(n)]

    def point_jacobian(point: sp.Matrix, link: int) -> tuple[sp.Matrix, sp.Matrix]:
        return geometric_point_jacobian(description, axes, origins, point, link, projected=False)

    say(f"  kinematics of {n} links: {time.perf_counter() - start:.2f} s")
    M = sp.zeros(n, n)
    potential = sp.Integer(0)
    for i, joint in enumerate(joints):
        say(f"  energy of link {i + 1}/{n} ({joint.link_name})")
        inertial = joint.inertial
        frame = link_frames[i]
        rotation = frame[:3, :3]
        com = (frame * sp.Matrix([*inertial.com, 1]))[:3, 0]
        jv, jw = point_jacobian(com, i)
        M += inertial.mass * jv.T * jv + jw.T * rotation * sp.Matrix(inertial.inertia) * rotation.T * jw
        potential -= inertial.mass * (gravity.T * com)[0, 0]

        rotor = joint.rotor
        if rotor is not None:
            # The rotor rides on the parent link and spins at gear_ratio * qd_i about its axis.
            joint_frame = joint_frames[i]
            r = joint_frame[:3, :3]
            rotor_com = (joint_frame * sp.Matrix([*rotor.com, 1]))[:3, 0]
            jv_m, jw_m = point_jacobian(rotor_com, joint.parent)
            spin_axis = r * sp.Matrix(rotor.axis)
            jw_m[:, i] += rotor.gear_ratio * spin_axis
            a = sp.Matrix(rotor.axis)
            # Axisymmetric rotor: its inertia does not depend on its spin angle.
            inertia_m = rotor.transverse_inertia * (sp.eye(3) - a * a.T) + rotor.inertia * (a * a.T)
            M += rotor.mass * jv_m.T * jv_m + jw_m.T * r * inertia_m * r.T * jw_m
            potential -= rotor.mass * (gravity.T * rotor_com)[0, 0]

    parameters = description.parameter_symbols
    for row in range(n):
        say(f"  {'simplifying' if simplify else 'collecting'} row {row + 1}/{n} of M")
        M[row, row:] = M[row, row:].applyfunc(lambda e: _tidy(e, simplify, parameters))
    # Exact symmetry, whatever the simplifier did to the two triangles.
    for a_ in range(n):
        for b_ in range(a_ + 1, n):
            M[b_, a_] = M[a_, b_]
    t_mass = time.perf_counter()

    # Christoffel symbols of the first kind: c_ijk = ½(∂M_kj/∂q_i + ∂M_ki/∂q_j − ∂M_ij/∂q_k),
    # C_kj = Σ_i c_ijk q̇_i.
    dM = [M.diff(q[k]) for k in range(n)]
    C = sp.zeros(n, n)
    for k in range(n):
        say(f"  Christoffel symbols, row {k + 1}/{n} of C")
        for j in range(n):
            entry = sp.Integer(0)
            for i in range(n):
                c_ijk = (dM[i][k, j] + dM[j][k, i] - dM[k][i, j]) / 2
                entry += c_ijk * qd[i]
            # M is already simplified; its derivatives need only collecting.
            C[k, j] = sp.collect(sp.expand(entry), qd)
    t_coriolis = time.perf_counter()

    potential = _tidy(potential, simplify, parameters)
    g = sp.Matrix([sp.expand(potential.diff(q[k])) for k in range(n)])
    tool = link_frames[description.tool_joint] * sp.Matrix(description.tool)
    tool = tool.applyfunc(sp.expand)
    jv_t, jw_t = point_jacobian(tool[:3, 3], description.tool_joint)
    jacobian = sp.Matrix.vstack(jv_t, jw_t).applyfunc(sp.expand)

    if not coupling.identity:
        x, xd = q, qd
        q, qd = model_symbols(description.n)[:2]
        at = dict(zip(x, coupling.positions(q))) | dict(zip(xd, coupling.rates(qd)))
        M, C = coupling.matrix(M.xreplace(at)), coupling.matrix(C.xreplace(at))
        g, potential = coupling.vector(g.xreplace(at)), potential.xreplace(at)
        link_frames = [frame.xreplace(at) for frame in link_frames]
        tool, jacobian = tool.xreplace(at), coupling.columns(jacobian.xreplace(at))
    friction = coupling.friction(description, qd)
    kinetic = (sp.Matrix(qd).T * M * sp.Matrix(qd))[0, 0] / 2
    end = time.perf_counter()

    return SymbolicModel(
        description=description, q=q, qd=qd, qdd=qdd, tau=tau, wrench=wrench,
        parameters=description.parameter_symbols,
        M=sp.ImmutableMatrix(M), C=sp.ImmutableMatrix(C), g=sp.ImmutableMatrix(g),
        friction=sp.ImmutableMatrix(friction), kinetic_energy=kinetic, potential_energy=potential,
        link_transforms=tuple(sp.ImmutableMatrix(t) for t in link_frames),
        tool_pose=sp.ImmutableMatrix(tool), tool_jacobian=sp.ImmutableMatrix(jacobian),
        timings={"mass_matrix_s": t_mass - start, "coriolis_s": t_coriolis - t_mass,
                 "rest_s": end - t_coriolis, "total_s": end - start},
    )
