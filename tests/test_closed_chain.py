"""The compiled closed-chain modules (issue 12) against the independent oracles of
tests/closed_chain_reference.py (NumPy only, no robodyn code), against finite differences of their own
routines, against a multiplier model in redundant coordinates, against Pinocchio, and in simulation.

Robots: robots/biglide.yaml at its leg length l = 0.3606 m and at the notes' code's l = 0.2828 m (a runtime
parameter of the same module) and robots/fivebar.yaml. Each is built once per session (conftest's ``load``);
every test works on a ``copy()`` so that its parameter values are its own.

The dynamics routines are compiled for one assembly mode (+1, the build option); the geometric models
(dgm, passive_positions, igm) have every mode, and are tested for all of them.

Tolerances: 1e-10 relative against the oracles and the multiplier models (observed: 2e-12 at worst, mostly
1e-14), 1e-6 relative against central differences (observed: 1.2e-8 at worst); Pinocchio's model with
fictitious leg inertias gets 2.2e-4 (see its test). ``pytest -s -n 0`` prints the measured figures at the end
of the module.
"""

from __future__ import annotations

import itertools

import closed_chain_reference as oracles
import numpy as np
import pytest
from conftest import rk4
from scipy.optimize import brentq

import robodyn
import robodyn.errors
from codegen.description.parse import parse_text
from codegen.errors import DescriptionError
from codegen.model import derive_model
from robodyn.control import ComputedTorque, PDGravity
from robodyn.references import Sine
from robodyn.simulation import SINGULARITY_MARGIN, SingularityError

TOL = 1e-10  # relative, against the oracles
FD_TOL = 1e-6  # relative, against central differences
MODES = (1, -1)
WORKING = list(itertools.product((1, -1), repeat=2))

#: case -> (description, parameter values set at run time, the oracle with the same values)
CASES = {
    "biglide": ("biglide", {}, oracles.Biglide()),
    "biglide_l0.2828": ("biglide", {"l": 0.2828}, oracles.Biglide(l=0.2828)),
    "fivebar": ("fivebar", {}, oracles.FiveBar()),
}

#: quantity -> case -> worst relative error seen (printed at the end of the module)
FIGURES: dict[str, dict[str, float]] = {}


@pytest.fixture(scope="module", autouse=True)
def _print_figures():
    yield
    if FIGURES:
        names = list(CASES)
        print("\n\nclosed chains: worst relative error per quantity")
        print(f"  {'quantity':<46}" + "".join(f"{name:>18}" for name in names))
        for quantity, row in FIGURES.items():
            print(f"  {quantity:<46}" + "".join(f"{row[n]:>18.2e}" if n in row else f"{'':>18}" for n in names))


class Case:
    def __init__(self, name, robot, oracle):
        self.name, self.robot, self.oracle = name, robot, oracle
        self.biglide = isinstance(oracle, oracles.Biglide)

    def check(self, quantity: str, got, want, tol: float = TOL, floor: float = 0.0) -> float:
        """Worst over the states (first axis) of |got - want| / max(|want|, floor), recorded and asserted."""
        got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
        assert got.shape == want.shape, f"{quantity}: shape {got.shape}, expected {want.shape}"
        assert np.all(np.isfinite(got)), f"{quantity}: not finite"
        rows = len(got)
        difference = np.linalg.norm((got - want).reshape(rows, -1), axis=1)
        size = np.maximum(np.linalg.norm(want.reshape(rows, -1), axis=1), max(floor, 1e-300))
        worst = float(np.max(difference / size))
        row = FIGURES.setdefault(quantity, {})
        row[self.name] = max(row.get(self.name, 0.0), worst)
        assert worst < tol, f"{self.name}: {quantity}: worst relative error {worst:.3g} (tolerance {tol:g})"
        return worst

    def states(self, count: int, seed: int, mode: int = 1, margin: float = 0.05):
        """``count`` random assembled (qa, qd) of assembly mode ``mode``, the oracle's normalised singularity
        measures above ``margin`` in magnitude; draws the oracle cannot assemble are skipped."""
        rng = np.random.default_rng(seed)
        q = []
        while len(q) < count:
            qa = rng.uniform(-0.5, 0.5, 2) if self.biglide else rng.uniform(-np.pi, np.pi, 2)
            try:
                xi = self.oracle.dgm(qa, mode)
            except ValueError:
                continue
            if min(abs(self.oracle.type1_measure(qa, xi)), abs(self.oracle.type2_measure(qa, xi))) > margin:
                q.append(qa)
        return np.array(q), rng.normal(size=(count, 2))


@pytest.fixture(scope="module")
def case_of(load):
    """case_of(name) -> Case with its own copy of the built robot, with the case's parameter values."""
    cases: dict = {}

    def get(name: str) -> Case:
        if name not in cases:
            description, values, oracle = CASES[name]
            robot = load(description).copy()
            for parameter, value in values.items():
                robot.params[parameter] = value
            cases[name] = Case(name, robot, oracle)
        return cases[name]

    return get


@pytest.fixture(params=list(CASES))
def case(request, case_of):
    return case_of(request.param)


@pytest.fixture
def biglide(case_of):
    return case_of("biglide")


def wrap(angle):
    return np.angle(np.exp(1j * np.asarray(angle)))


def oracle_rows(function, *columns):
    """np.array([function(*row) for row in zip(*columns)])."""
    return np.array([function(*row) for row in zip(*columns)])


# --------------------------------------------------------------------------------------------------
# geometry: every assembly and working mode
# --------------------------------------------------------------------------------------------------
def test_metadata_names_and_modes(case):
    robot = case.robot
    assert robot.is_closed_chain and robot.assembly_mode == 1
    assert robot.modes["assembly"] == [1, -1]
    assert robot.modes["working"] == WORKING
    assert robot.task_coordinates == ("x", "y")
    if case.biglide:
        assert robot.joint_names == ("foot1_slide", "foot2_slide")
        assert robot.tree_joint_names == ("foot1_slide", "leg1_pin", "foot2_slide", "leg2_pin")
        assert robot.passive_joint_names == ("leg1_pin", "leg2_pin")
        loci = " ".join(robot.singularity_loci)
        assert "|q1 - q2| = sqrt(-d**2 + 4*l**2)" in loci  # type 2: the oracle's type2_gap
    else:
        assert robot.joint_names == ("motor1", "motor2")
        assert robot.tree_joint_names == ("motor1", "elbow1", "motor2", "elbow2")
        assert robot.passive_joint_names == ("elbow1", "elbow2")


@pytest.mark.parametrize("mode", MODES)
def test_geometric_models_against_the_oracle(case, mode):
    """dgm and passive positions in both assembly modes; igm in every working mode against the oracle's
    igm with the same (σ1, σ2); igm(dgm(qa, ω), σ) = qa for the σ the oracle says qa is in."""
    robot, oracle = case.robot, case.oracle
    q, _ = case.states(150, seed=1 + mode, mode=mode)
    xi = oracle_rows(lambda qa: oracle.dgm(qa, mode), q)
    case.check(f"dgm (mode {mode:+d})", robot.dgm(q, mode=mode), xi)
    assert np.allclose(robot.dgm_modes(q)[:, MODES.index(mode)], xi, rtol=0, atol=1e-13)
    # the oracle's loop equations at the robot's platform point
    residual = oracle_rows(oracle.loop_residual, q, robot.dgm(q, mode=mode))
    assert np.abs(residual).max() < 1e-13
    # passive joints: biglide the legs' angles φ_i; five-bar the elbow joint angles θ_i
    passive = oracle_rows(oracle.passive, q, xi)
    got = robot.passive_positions(q, mode=mode)
    case.check(f"passive_positions (mode {mode:+d})", passive + wrap(got - passive), passive)
    tree = robot.tree_positions(q, mode=mode)
    assert np.array_equal(tree[:, [0, 2]], q) and np.array_equal(tree[:, [1, 3]], got)
    assert np.abs(robot.loop_residual(tree)).max() < 1e-13
    # inverse geometry, every working mode: rows in the order of robot.modes["working"]
    every = robot.igm(xi)
    assert every.shape == (len(q), 4, 2)
    for k, sigma in enumerate(robot.modes["working"]):
        want = oracle_rows(lambda x, sigma=sigma: oracle.igm(x, sigma), xi)
        got = robot.igm(xi, mode=sigma)
        assert np.array_equal(got, every[:, k])
        case.check("igm (every working mode)", want + wrap(got - want), want)
    sigmas = [oracle.working_mode(qa, x) for qa, x in zip(q, xi)]
    back = np.array([robot.igm(robot.dgm(qa, mode=mode), mode=sigma) for qa, sigma in zip(q, sigmas)])
    case.check("igm(dgm(qa))", q + wrap(back - q), q)
    # every assembly mode of a state is the oracle's assembly mode
    assert all(oracle.assembly_mode(qa, x) == mode for qa, x in zip(q, robot.dgm(q, mode=mode)))


@pytest.mark.parametrize("name", ["biglide", "biglide_l0.2828"])
def test_dgm_refuses_what_cannot_be_assembled(case_of, name):
    """Feet further apart than 2 l: no assembly mode. (The five-bar's elbows are never more than 2 L2 apart.)"""
    case = case_of(name)
    robot = case.robot
    far = np.array([0.0, 1.5])
    with pytest.raises(ValueError):
        case.oracle.dgm(far, 1)
    assert np.all(np.isnan(robot.dgm_modes(far)))
    with pytest.raises(ValueError, match="cannot be assembled"):
        robot.dgm(far)
    with pytest.raises(ValueError, match="cannot be assembled"):
        robot.passive_positions(far, mode=-1)


# --------------------------------------------------------------------------------------------------
# loop kinematics, singularity measures and dynamics against the oracle (the build's mode, +1)
# --------------------------------------------------------------------------------------------------
def test_kinematics_and_singularity_measures_against_the_oracle(case):
    robot, oracle = case.robot, case.oracle
    q, qd = case.states(200, seed=3)
    xi = oracle_rows(lambda qa: oracle.dgm(qa, 1), q)
    A, B = robot.loop_matrices(q)
    case.check("A", A, oracle_rows(oracle.A, q, xi))
    case.check("B", B, oracle_rows(oracle.B, q, xi))
    J = oracle_rows(oracle.J, q, xi)
    case.check("J (task_jacobian)", robot.task_jacobian(q), J)
    Jp = oracle_rows(oracle.Jp, q, xi)
    case.check("Jp (passive_jacobian)", robot.passive_jacobian(q), Jp)
    case.check("Jdot (task_jacobian_derivative)", robot.task_jacobian_derivative(q, qd),
               oracle_rows(oracle.J_dot, q, qd, xi))
    case.check("b (task_bias)", robot.task_bias(q, qd), oracle_rows(oracle.b, q, qd, xi))
    measures = robot.singularity_measures(q)
    for k, (label, function) in enumerate((("det A", oracle.det_A), ("det B", oracle.det_B),
                                           ("type 2, normalised", oracle.type2_measure),
                                           ("type 1, normalised", oracle.type1_measure))):
        case.check(f"singularity measure: {label}", measures[:, k:k + 1], oracle_rows(function, q, xi)[:, None])
    # the tree's velocities: actuated qd, passive Jp qd (description order)
    tree = robot.tree_velocities(q, qd)
    case.check("tree_velocities", tree, np.stack([qd[:, 0], np.einsum("ni,ni->n", Jp[:, 0], qd),
                                                  qd[:, 1], np.einsum("ni,ni->n", Jp[:, 1], qd)], axis=1))
    # the tool frame is the platform point, carried by the first distal link
    fk, jacobian = robot.fk(q), robot.jacobian(q)
    case.check("fk (platform point)", fk[:, :2, 3], xi)
    case.check("jacobian (linear, in plane)", jacobian[:, :2], J)
    spin = Jp[:, 0] if case.biglide else Jp[:, 0] + np.array([1.0, 0.0])  # leg angle; five-bar q1 + θ1
    case.check("jacobian (angular z)", jacobian[:, 5], spin)
    assert np.abs(jacobian[:, 2:5]).max() < 1e-15


def test_dynamics_against_the_oracle(case):
    robot, oracle = case.robot, case.oracle
    rng = np.random.default_rng(4)
    q, qd = case.states(200, seed=4)
    qdd, tau = rng.normal(size=q.shape), 5 * rng.normal(size=q.shape)
    M = oracle_rows(oracle.mass_matrix, q)
    case.check("M", robot.M(q), M)
    case.check("C", robot.C(q, qd), oracle_rows(oracle.coriolis_matrix, q, qd))
    c = oracle_rows(oracle.coriolis_vector, q, qd)
    case.check("C qd", np.einsum("nij,nj->ni", robot.C(q, qd), qd), c)
    g = oracle_rows(oracle.gravity_vector, q)
    if case.biglide:  # gravity along z, normal to the plane of motion
        assert np.all(g == 0) and np.abs(robot.g(q)).max() < 1e-15
        assert np.abs(robot.potential_energy(q)).max() < 1e-15
    else:
        case.check("g", robot.g(q), g)
        case.check("potential energy", robot.potential_energy(q)[:, None],
                   oracle_rows(oracle.potential_energy, q)[:, None])
    assert np.all(robot.friction(qd) == 0)
    case.check("nonlinear_effects", robot.nonlinear_effects(q, qd), c + g, floor=1e-3)
    case.check("inverse_dynamics", robot.inverse_dynamics(q, qd, qdd),
               oracle_rows(oracle.inverse_dynamics, q, qd, qdd))
    case.check("forward_dynamics", robot.forward_dynamics(q, qd, tau),
               oracle_rows(oracle.forward_dynamics, q, qd, tau))
    case.check("kinetic energy", robot.kinetic_energy(q, qd)[:, None],
               oracle_rows(oracle.kinetic_energy, q, qd)[:, None])


def test_wrench_on_the_tool(case):
    """A wrench h on the platform point: τ(h) − τ(0) = −(Jᵀ f + j_zᵀ m_z), J the oracle's task Jacobian
    (in-plane force) and j_z the first distal link's angular rate (moment about the normal)."""
    robot, oracle = case.robot, case.oracle
    rng = np.random.default_rng(5)
    q, qd = case.states(50, seed=5)
    qdd, h = rng.normal(size=q.shape), rng.normal(size=(len(q), 6))
    xi = oracle_rows(lambda qa: oracle.dgm(qa, 1), q)
    J, Jp = oracle_rows(oracle.J, q, xi), oracle_rows(oracle.Jp, q, xi)
    spin = Jp[:, 0] if case.biglide else Jp[:, 0] + np.array([1.0, 0.0])
    want = -(np.einsum("nij,ni->nj", J, h[:, :2]) + spin * h[:, 5:6])
    got = robot.inverse_dynamics(q, qd, qdd, h) - robot.inverse_dynamics(q, qd, qdd)
    case.check("wrench: ID(h) - ID(0)", got, want)


# --------------------------------------------------------------------------------------------------
# the routines against central differences of the robot's own routines
# --------------------------------------------------------------------------------------------------
def test_kinematics_against_differences(case):
    """J, Jp against differences of dgm and passive_positions; Jdot, b and Jpdot against differences of J and
    Jp along qd; g against the potential energy's gradient."""
    robot = case.robot
    q, qd = case.states(40, seed=6)
    h = 1e-6
    E = np.eye(2)

    def central(function, qa, direction):
        return (function(qa + h * direction) - function(qa - h * direction)) / (2 * h)

    J_fd = np.array([np.stack([central(robot.dgm, qa, e) for e in E], axis=-1) for qa in q])
    case.check("J vs differences of dgm", robot.task_jacobian(q), J_fd, FD_TOL)
    Jp_fd = np.array([np.stack([wrap(robot.passive_positions(qa + h * e) - robot.passive_positions(qa - h * e))
                                / (2 * h) for e in E], axis=-1) for qa in q])
    case.check("Jp vs differences of passive_positions", robot.passive_jacobian(q), Jp_fd, FD_TOL)
    Jdot_fd = np.array([central(robot.task_jacobian, qa, v) for qa, v in zip(q, qd)])
    case.check("Jdot vs differences of J", robot.task_jacobian_derivative(q, qd), Jdot_fd, FD_TOL)
    case.check("b vs differences of J", robot.task_bias(q, qd), np.einsum("nij,nj->ni", Jdot_fd, qd), FD_TOL)
    Jpdot_fd = np.array([central(robot.passive_jacobian, qa, v) for qa, v in zip(q, qd)])
    case.check("Jpdot vs differences of Jp", robot.passive_jacobian_derivative(q, qd), Jpdot_fd, FD_TOL)
    if not case.biglide:
        g_fd = np.array([[central(robot.potential_energy, qa, e) for e in E] for qa in q])
        case.check("g vs gradient of the potential", robot.g(q), g_fd, FD_TOL)


# --------------------------------------------------------------------------------------------------
# multiplier models: the oracle's, in redundant coordinates, and the compiled virtual tree's
# --------------------------------------------------------------------------------------------------
def test_forward_and_inverse_dynamics_against_the_natural_kkt(case):
    """NaturalKKT: constant diagonal mass matrix in z (biglide (q1, q2, x, y); five-bar (E1, E2, P)),
    constraints h(z) = 0 with multipliers, no reduction at all."""
    robot, oracle = case.robot, case.oracle
    if case.biglide:
        kkt, state = oracles.biglide_kkt(oracle), oracles.biglide_state
    else:
        kkt, state = oracles.fivebar_kkt(oracle), oracles.fivebar_state
    rng = np.random.default_rng(7)
    q, qd = case.states(100, seed=7)
    tau, qdd = 5 * rng.normal(size=q.shape), rng.normal(size=q.shape)
    kkt_qdd, kkt_tau = [], []
    for qa, v, t, a in zip(q, qd, tau, qdd):
        z = state(oracle, qa, 1)
        zd = kkt.velocity(z, v)
        kkt_qdd.append(kkt.actuated_acceleration(z, zd, t))
        kkt_tau.append(kkt.inverse(z, zd, a))
    case.check("forward_dynamics vs NaturalKKT", robot.forward_dynamics(q, qd, tau), np.array(kkt_qdd))
    case.check("inverse_dynamics vs NaturalKKT", robot.inverse_dynamics(q, qd, qdd), np.array(kkt_tau))


def test_tree_routines_and_their_multiplier_model(case):
    """The virtual tree's compiled routines: the loops close (h = 0, H ẋ = 0, H ẍ + Ḣẋ = 0 on the tree's
    motion), G = ∂x/∂qa projects the tree's M and bias on the reduced ones, and the tree's own multiplier
    model [M_x Hᵀ; H 0] gives the reduced forward dynamics."""
    robot = case.robot
    rng = np.random.default_rng(8)
    q, qd = case.states(100, seed=8)
    tau = 5 * rng.normal(size=q.shape)
    actuated = [robot.tree_joint_names.index(name) for name in robot.joint_names]
    passive = [robot.tree_joint_names.index(name) for name in robot.passive_joint_names]
    n, t = len(q), len(robot.tree_joint_names)
    G = np.zeros((n, t, 2))
    G[:, actuated] = np.eye(2)
    G[:, passive] = robot.passive_jacobian(q)
    Gdot_qd = np.zeros((n, t))
    Gdot_qd[:, passive] = np.einsum("nij,nj->ni", robot.passive_jacobian_derivative(q, qd), qd)
    x, xd = robot.tree_positions(q), robot.tree_velocities(q, qd)
    H, bias = robot.loop_jacobian(x), robot.loop_bias(x, xd)
    assert np.abs(robot.loop_residual(x)).max() < 1e-13
    assert np.abs(np.einsum("nkt,nt->nk", H, xd)).max() < 1e-13 * np.abs(xd).max() * np.abs(H).max()
    qdd = robot.forward_dynamics(q, qd, tau)
    xdd = np.einsum("nti,ni->nt", G, qdd) + Gdot_qd
    case.check("loop: H xdd + Hdot xd = 0", np.einsum("nkt,nt->nk", H, xdd) + bias, np.zeros_like(bias),
               floor=1.0)
    Mx, bias_x = robot.tree_M(x), robot.tree_nonlinear_effects(x, xd)
    case.check("G^T M_x G = M", np.einsum("nti,ntu,nuj->nij", G, Mx, G), robot.M(q))
    case.check("G^T (M_x Gdot qd + bias_x) = C qd + g",
               np.einsum("nti,nt->ni", G, np.einsum("ntu,nu->nt", Mx, Gdot_qd) + bias_x),
               robot.nonlinear_effects(q, qd), floor=1e-3)
    k = H.shape[1]
    K = np.zeros((n, t + k, t + k))
    K[:, :t, :t], K[:, :t, t:], K[:, t:, :t] = Mx, np.swapaxes(H, 1, 2), H
    rhs = np.concatenate([-bias_x, -bias], axis=1)
    rhs[:, actuated] += tau
    solution = np.linalg.solve(K, rhs[..., None])[..., 0]
    case.check("forward_dynamics vs the tree's multipliers", qdd, solution[:, actuated])


# --------------------------------------------------------------------------------------------------
# Pinocchio: constraintDynamics on the biglide cut at the platform (legs PY -> RZ, 3-D point contact)
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["biglide", "biglide_l0.2828"])
def test_forward_dynamics_against_pinocchio(case_of, name):
    """Two Pinocchio models of the same mechanism. With the platform mass split between the two leg tips the
    legs need no inertia of their own: exactly the massless-leg biglide (observed 1e-14 relative). With the
    whole platform on leg 1 (the issue's recipe) the legs need a fictitious mass and inertia ε = 1e-12 for
    Pinocchio's solver: its error is the legs' physics (∝ ε, 1e-12 relative) plus round-off in a KKT whose
    condition number grows like 1/ε, so up to 1e12 x 2.2e-16 = 2.2e-4 relative: the tolerance of that
    comparison. Observed: 2.6e-5 (l = 0.3606) and 1.7e-5 (l = 0.2828) at worst over 30 states, like the 3e-5
    tests/test_closed_chain_reference.py measures between that model and the oracle."""
    pytest.importorskip("pinocchio")
    case = case_of(name)
    rng = np.random.default_rng(9)
    q, qd = case.states(30, seed=9)
    tau = 5 * rng.normal(size=q.shape)
    got = case.robot.forward_dynamics(q, qd, tau)
    exact = np.array([oracles.biglide_pinocchio_qdd(case.oracle, qa, v, t, 1, leg_inertia=0.0, split_platform=True)
                      for qa, v, t in zip(q, qd, tau)])
    case.check("forward_dynamics vs Pinocchio (split platform)", got, exact)
    recipe = np.array([oracles.biglide_pinocchio_qdd(case.oracle, qa, v, t, 1) for qa, v, t in zip(q, qd, tau)])
    case.check("forward_dynamics vs Pinocchio (legs 1e-12)", got, recipe, tol=1e12 * np.finfo(float).eps)


# --------------------------------------------------------------------------------------------------
# identities of the reduced model
# --------------------------------------------------------------------------------------------------
def test_identities(case):
    """M symmetric positive definite; Ṁ − 2C skew-symmetric (Ṁ by fourth-order central differences along q̇:
    near the type-2 margin M varies fast, and second-order ones leave 5e-7 of truncation at a step of 1e-6);
    ID(FD(τ)) = τ and FD(ID(q̈)) = q̈, without and with a tool wrench h."""
    robot = case.robot
    rng = np.random.default_rng(10)
    q, qd = case.states(100, seed=10)
    M = robot.M(q)
    assert np.array_equal(M, np.swapaxes(M, 1, 2))
    assert np.linalg.eigvalsh(M).min() > 0
    step = 1e-5
    Mdot = (8 * (robot.M(q + step * qd) - robot.M(q - step * qd))
            - (robot.M(q + 2 * step * qd) - robot.M(q - 2 * step * qd))) / (12 * step)
    C = robot.C(q, qd)
    N = Mdot - 2 * C
    scale = (np.linalg.norm(Mdot, axis=(1, 2)) + np.linalg.norm(C, axis=(1, 2)))[:, None, None]
    case.check("Mdot - 2C skew: N + N^T over |Mdot| + |C|", (N + np.swapaxes(N, 1, 2)) / scale, np.zeros_like(N),
               FD_TOL, floor=1.0)
    tau, qdd, h = 5 * rng.normal(size=q.shape), rng.normal(size=q.shape), rng.normal(size=(len(q), 6))
    for wrench, label in ((None, ""), (h, ", wrench h")):
        case.check(f"ID(FD(tau)) = tau{label}",
                   robot.inverse_dynamics(q, qd, robot.forward_dynamics(q, qd, tau, wrench), wrench), tau)
        case.check(f"FD(ID(qdd)) = qdd{label}",
                   robot.forward_dynamics(q, qd, robot.inverse_dynamics(q, qd, qdd, wrench), wrench), qdd)


# --------------------------------------------------------------------------------------------------
# simulation: drift over a long run, and the stop at a type-2 singularity
# --------------------------------------------------------------------------------------------------
def test_free_run_keeps_the_loop_closed_and_the_energy(biglide):
    """10 s of free motion at 1 kHz (RK4, compiled loop): no friction and gravity normal to the plane, so
    the kinetic energy is constant. Foot 1 starts 0.4 m below foot 2, rising at 6 cm/s: the feet pass each
    other and leg 1 goes through the horizontal (a type-1 singularity, harmless to the dynamics); the
    type-2 measure stays above 0.9 and both feet within their ±0.6 m limits.
    Measured: energy drift 1.2e-14 relative (E = 7.4e-3 J), loop residual 2.2e-16."""
    robot = biglide.robot
    q0, qd0 = np.array([-0.2, 0.2]), np.array([0.06, 0.0])
    run = robodyn.simulate(robot, None, duration=10, rate=1000, q0=q0, qd0=qd0)
    assert run.q.shape == (10001, 2) and np.all(np.isfinite(run.q)) and np.all(np.isfinite(run.qd))
    measures = robot.singularity_measures(run.q)
    assert np.abs(measures[:, 2]).min() > 0.9
    assert np.abs(measures[:, 3]).min() < 1e-3  # went through the type-1 locus
    assert np.abs(run.q).max() < 0.6
    residual = float(np.abs(robot.loop_residual(robot.tree_positions(run.q))).max())
    energy = robot.total_energy(run.q, run.qd)
    drift = float(np.abs(energy - energy[0]).max() / energy[0])
    print(f"\nbiglide free run: loop residual {residual:.2e}, energy {energy[0]:.4g} J, drift {drift:.2e} relative")
    assert residual < 1e-12
    assert drift < 1e-12, f"energy drift {drift:.3g} relative"
    # the first 0.3 s against the oracle's dynamics integrated by conftest's NumPy RK4
    oracle = biglide.oracle

    def rhs(state):
        return np.concatenate([state[2:], oracle.forward_dynamics(state[:2], state[2:], np.zeros(2))])

    reference = rk4(rhs, np.concatenate([q0, qd0]), 1e-3, 300)
    assert np.abs(reference[:2] - run.q[300]).max() < 1e-13
    assert np.abs(reference[2:] - run.qd[300]).max() < 1e-13


def test_controlled_run_keeps_the_loop_closed_and_balances_the_work(case_of):
    """The five-bar under gravity falls into a type-2 singularity within a second of free motion from
    any posture of its mode +1, so it runs 10 s under PD + gravity compensation around a posture instead
    (P at (0.02, 0.40), tracking a sine of 0.3 and 0.2 rad). The torque is held over each period, so the
    work it does is exactly Σ τ_k·(q_{k+1} − q_k): E(t) − E(0) must equal it up to the integration error.
    Measured: balance 1.5e-12 J on E ≈ 5 J, loop residual 2.2e-16."""
    robot = case_of("fivebar").robot
    reference = Sine([2.0, 1.0], [0.3, 0.2], [0.5, 0.7], [0.0, 1.0])
    q0, qd0, _ = reference.evaluate(0.0)
    run = robodyn.simulate(robot, PDGravity(robot, reference), duration=10, rate=1000, q0=q0, qd0=qd0)
    measures = robot.singularity_measures(run.q)
    assert np.abs(measures[:, 2:]).min() > 0.4
    assert np.abs(run.q - reference.evaluate(run.t)[0]).max() < 0.02
    residual = float(np.abs(robot.loop_residual(robot.tree_positions(run.q))).max())
    energy = robot.total_energy(run.q, run.qd)
    work = np.concatenate([[0.0], np.cumsum(np.einsum("ki,ki->k", run.tau[:-1], np.diff(run.q, axis=0)))])
    balance = float(np.abs(energy - energy[0] - work).max())
    print(f"\nfive-bar controlled run: loop residual {residual:.2e}, energy {energy.min():.3g} to "
          f"{energy.max():.3g} J, work {np.abs(work).max():.3g} J, balance {balance:.2e} J")
    assert residual < 1e-12
    assert balance < 1e-10, f"energy balance {balance:.3g} J"


#: The drive into the biglide's type-2 singularity: feet 0.5 m apart moving apart at 0.1 m/s (the locus
#: |q1 - q2| = sqrt(4 l² - d²) = 0.6001 m is 1.0011 s away), under τ = M·0 + C q̇ + g (computed torque with
#: zero gains and a reference at rest: q̈ = 0, the velocity stays constant), 10 kHz.
DRIVE_SPEED, DRIVE_START, DRIVE_RATE = 0.1, 0.5, 10_000


def _drive(biglide, path, margin, duration):
    """Run the drive on the compiled loop (built-in controller) or the Python loop (a callable);
    returns the SingularityError it raises."""
    robot = biglide.robot
    if path == "compiled":
        controller = ComputedTorque(robot, None, kp=0.0, kd=0.0)
    else:
        def controller(t, q, qd):
            return robot.inverse_dynamics(q, qd, np.zeros(2))
    q0 = np.array([DRIVE_START / 2, -DRIVE_START / 2])
    qd0 = np.array([DRIVE_SPEED / 2, -DRIVE_SPEED / 2])
    with pytest.raises(SingularityError) as info:
        robodyn.simulate(robot, controller, duration=duration, rate=DRIVE_RATE, q0=q0, qd0=qd0,
                         singularity_margin=margin)
    return info.value


def _crossing(oracle, margin):
    """(t*, t_locus): when the drive's |q1 − q2| makes the oracle's normalised det A equal to ``margin``,
    and when it reaches the locus."""
    def measure(gap):
        qa = np.array([gap / 2, -gap / 2])
        return oracle.type2_measure(qa, oracle.dgm(qa, 1))

    locus = oracle.type2_gap()
    return ((brentq(lambda gap: measure(gap) - margin, DRIVE_START, locus, xtol=1e-15) - DRIVE_START) / DRIVE_SPEED,
            (locus - DRIVE_START) / DRIVE_SPEED)


STOP_MARGIN = 0.1  # normalised det A; the band below it is 1.1e-3 m of |q1 − q2| wide (110 ticks of the drive)


@pytest.fixture(scope="module", params=["compiled", "python"])
def singularity_stop(request, case_of):
    """The drive with a margin of 0.1: (error, t*) on one path. The compiled run ends between t* and the locus
    (past the locus it raises FloatingPointError: see test_compiled_run_past_the_locus); the Python run is
    given 1.5 s."""
    biglide = case_of("biglide")
    t_star, t_locus = _crossing(biglide.oracle, STOP_MARGIN)
    duration = t_star + 0.5 * (t_locus - t_star) if request.param == "compiled" else 1.5
    return _drive(biglide, request.param, STOP_MARGIN, duration), t_star


def test_run_stops_at_a_type2_singularity(singularity_stop):
    """SingularityError at the first sample past the margin, never a NaN. Measured: the stop comes 0.19 ms
    after t* (the held torque lags the drive a little as M grows; 2.8 ms at 1 kHz). The distance it reports is
    along the direction of motion, here (1, -1)/sqrt(2): the distance to the locus q1 - q2 = 0.6001."""
    error, t_star = singularity_stop
    message = str(error)
    assert f"at t = {error.time:.6g} s" in message and "type-2" in message
    assert 0.0 <= error.time - t_star < 5e-4, f"stopped at {error.time} s, t* = {t_star:.6f} s"
    assert 0.0 < abs(error.measure) <= STOP_MARGIN
    locus = (CASES["biglide"][2].type2_gap() - DRIVE_START - DRIVE_SPEED * error.time) / np.sqrt(2)
    assert 0.9 < error.distance / locus < 1.1, (error.distance, locus)
    assert all(np.all(np.isfinite(a)) for a in (error.t, error.q, error.qd))


@pytest.mark.parametrize("singularity_stop", ["compiled", "python"], indirect=True)
def test_singularity_error_holds_the_samples_before_the_stop(singularity_stop, biglide):
    error, _ = singularity_stop
    ticks = round(error.time * DRIVE_RATE)
    assert len(error.t) == len(error.q) == len(error.qd) == ticks
    assert np.allclose(error.t, np.arange(ticks) / DRIVE_RATE, rtol=0, atol=1e-12)
    assert np.abs(biglide.robot.singularity_measures(error.q)[:, 2]).min() > STOP_MARGIN
    # the drive kept its speed: |q1 - q2| grows at 0.1 m/s (measured: 1.9e-5 m behind at the stop)
    gap = error.q[:, 0] - error.q[:, 1]
    lag = np.abs(gap - (DRIVE_START + DRIVE_SPEED * error.t)).max()
    print(f"\nthe drive's lag at the stop: {lag:.2e} m")
    assert lag < 1e-4


def test_compiled_run_past_the_locus(biglide):
    """The drive of test_run_stops_at_a_type2_singularity given 1.5 s on the compiled loop: it samples the
    margin's band (110 ticks wide) before it reaches the locus: it stops there, not with the failed step."""
    error = _drive(biglide, "compiled", STOP_MARGIN, 1.5)
    assert isinstance(error, SingularityError) and np.isfinite(error.distance)


@pytest.mark.parametrize("path", ["compiled", "python"])
def test_default_margin_stops_the_drive(biglide, path):
    assert SINGULARITY_MARGIN == 1e-3
    error = _drive(biglide, path, SINGULARITY_MARGIN, 1.5)
    # The band below the default margin is narrower than one step here: the run stops at the step that
    # crosses the locus. Measured 0.6-0.7 ms after the oracle's crossing, as the held torque lags the drive
    # while M grows without bound.
    assert abs(error.time - _crossing(biglide.oracle, SINGULARITY_MARGIN)[1]) < 1e-3


def test_free_run_into_the_locus_reports_its_distance(biglide):
    """Free motion from feet 0.2 m apart moving apart: the Python loop stops it at t = 9.836 s, normalised
    det A 7.7e-4, a finite distance from the locus."""
    with pytest.raises(SingularityError) as info:
        robodyn.simulate(biglide.robot, lambda t, q, qd: np.zeros(2), duration=10, rate=1000,
                         q0=[-0.1, 0.1], qd0=[0.2, 0.1])
    assert abs(info.value.time - 9.836) < 1e-2
    assert np.isfinite(info.value.distance)


# --------------------------------------------------------------------------------------------------
# description errors
# --------------------------------------------------------------------------------------------------
DYAD = """\
name: dyad
parameters:
  l: 0.3
joints:
  - name: slide1
    type: prismatic
    parent: base
    origin: {xyz: [-0.2, 0, 0]}
    axis: [0, 1, 0]
    link: {name: foot1, mass: 1}
  - name: pin1
    type: revolute
    axis: [0, 0, 1]
    link: {name: leg1, mass: 2, com: [l, 0, 0]}
  - name: slide2
    type: prismatic
    parent: base
    origin: {xyz: [0.2, 0, 0]}
    axis: [0, 1, 0]
    link: {name: foot2, mass: 1}
  - name: pin2
    type: revolute
    axis: [0, 0, 1]
    link: {name: leg2, mass: 0}
loops:
  - name: platform
    type: revolute
    links: [leg1, leg2]
    points: [[l, 0, 0], [l, 0, 0]]
actuated: [slide1, slide2]
"""

#: case -> (edit of DYAD: old, new), expected field, the line (the first line of the edited text that starts
#: with this, stripped), a fragment of the message. Every one is caught while parsing.
PARSE_ERRORS = {
    "unknown link in a loop": (("links: [leg1, leg2]", "links: [leg1, leg9]"), "loops[0].links[1]", "links:",
                               "unknown link 'leg9'"),
    "the same link twice": (("links: [leg1, leg2]", "links: [leg2, leg2]"), "loops[0].links", "links:",
                            "two different links"),
    "'actuated' missing": (("actuated: [slide1, slide2]\n", ""), "loops", "loops:", "needs 'actuated'"),
    "unknown actuated joint": (("[slide1, slide2]", "[slide1, slide3]"), "actuated[1]", "actuated:",
                               "unknown joint 'slide3'"),
    "a joint listed twice": (("[slide1, slide2]", "[slide2, slide2]"), "actuated[1]", "actuated:",
                             "'slide2' is listed twice"),
    "unknown cut-joint type": (("type: revolute\n    links", "type: universal\n    links"), "loops[0].type",
                               "type: universal", "unknown cut-joint type 'universal'"),
}


def _located(text: str, start: str) -> int:
    return 1 + next(i for i, line in enumerate(text.splitlines()) if line.strip().lstrip("- ").startswith(start))


def test_the_dyad_text_is_valid():
    """The base text of the error cases builds a closed form (so each case has exactly one mistake)."""
    model = derive_model(parse_text(DYAD, "loops.yaml"))
    assert model.closed_chain.closed_form is not None and model.n == 2


@pytest.mark.parametrize("name", list(PARSE_ERRORS))
def test_description_errors(name):
    (old, new), field, start, fragment = PARSE_ERRORS[name]
    assert DYAD.count(old) == 1
    text = DYAD.replace(old, new)
    with pytest.raises(DescriptionError) as info:
        parse_text(text, "loops.yaml")
    error = info.value
    assert type(error) is robodyn.errors.DescriptionError  # codegen.errors re-exports the runtime's class
    line = _located(text, start)
    assert (error.path, error.line, error.field) == ("loops.yaml", line, field)
    assert str(error).startswith(f"loops.yaml:{line}: {field}: ") and fragment in str(error)


@pytest.mark.parametrize("actuated", ["[slide1]", "[slide1, slide2, pin1]"])
def test_wrong_number_of_actuated_joints(actuated):
    """Mobility: 4 joints, 2 independent loop equations, so 2 actuated joints; found by derive_model."""
    text = DYAD.replace("[slide1, slide2]", actuated)
    description = parse_text(text, "loops.yaml")
    with pytest.raises(DescriptionError) as info:
        derive_model(description)
    error = info.value
    line = _located(text, "actuated:")
    assert (error.path, error.line, error.field) == ("loops.yaml", line, "actuated")
    assert str(error).startswith(f"loops.yaml:{line}: actuated: ")
    assert "2 degree(s) of freedom" in str(error) and "list exactly 2 under 'actuated'" in str(error)


def test_loop_that_can_never_close():
    """Loop points at different heights along the plane's normal: a loop equation that is a nonzero constant."""
    text = DYAD.replace("points: [[l, 0, 0], [l, 0, 0]]", "points: [[l, 0, 0], [l, 0, 0.1]]")
    with pytest.raises(DescriptionError) as info:
        derive_model(parse_text(text, "loops.yaml"))
    error = info.value
    assert (error.path, error.line, error.field) == ("loops.yaml", _located(text, "loops:"), "loops")
    assert "the loop can never close" in str(error)


def test_no_closed_form_builds_the_tree_model():
    """A prismatic cut joint has no closed-form geometry. Since 2d0a4d0 that is no longer a description error:
    the model is the virtual tree's with its loop equations, and says why there is no closed form."""
    text = DYAD.replace("type: revolute\n    links", "type: prismatic\n    axis: [1, 0, 0]\n    links")
    model = derive_model(parse_text(text, "loops.yaml"))
    chain = model.closed_chain
    assert chain.closed_form is None and "revolute cut joint" in chain.reason
    assert len(chain.tree.q) == 4 and chain.constraint.rows == 2


def test_actuated_without_loops_is_a_tree_with_passive_joints():
    """Without 'loops' the same joints are an open tree: 'actuated' then marks its motors, the other joints are
    passive coordinates (issue 13), instead of being eliminated by loop equations."""
    text = DYAD.replace(DYAD[DYAD.index("loops:"):DYAD.index("actuated:")], "")
    with pytest.raises(DescriptionError, match="joint 'pin2' moves nothing massive"):  # no loop holds leg2 now
        parse_text(text, "tree.yaml")
    text = text.replace("{name: leg2, mass: 0}", "{name: leg2, mass: 2, com: [l, 0, 0]}")
    description = parse_text(text, "tree.yaml")
    names = [joint.name for joint in description.joints]
    assert description.closure is None
    assert description.actuated == tuple(sorted(names.index(name) for name in ("slide1", "slide2")))
