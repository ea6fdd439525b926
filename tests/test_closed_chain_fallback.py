"""Closed chains without a closed form (issue 12): robots/fourbar.yaml, whose module is its virtual tree plus the
loop routines, solved and simulated by robodyn.closed_chain.ConstrainedDynamics (the multiplier model).

* Geometry: ``assemble`` and ``follow`` against the four-bar's closed form written below (NumPy only: the
  coupler-rocker pin is where the circle about the crank tip (radius = coupler) meets the circle about the
  rocker's pivot (radius = rocker), on either side of the line between their centres: the two branches).
* Dynamics: ``forward_dynamics`` against an independent multiplier model in natural coordinates written below
  (z = the crank tip A and the pin B, a constant mass matrix, three length constraints).
* Simulation: ``robodyn.simulate`` runs the four-bar with this model (loop residual, energy, a Python
  controller, the passive joints' torques ignored, the start and integrator it refuses), and the command line.
* The same model as the cross-check of the compiled reduced models of robots/biglide.yaml and
  robots/fivebar.yaml, and of tests/data/fivebar_motors.yaml (the five-bar with a geared rotor, Coulomb and
  viscous friction on an actuated and a passive joint, and a massive distal link).

``pytest -s -n 0`` prints the measured figures at the end of the module.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROBOTS, ROOT, rk4

import robodyn
from robodyn.closed_chain import ConstrainedDynamics

#: quantity -> worst figure measured (printed at the end of the module)
FIGURES: dict[str, float] = {}

BRANCHES = (1, -1)
MOTORS = ROOT / "tests" / "data" / "fivebar_motors.yaml"


@pytest.fixture(scope="module", autouse=True)
def _print_figures():
    yield
    if FIGURES:
        print("\n\nclosed chains without a closed form: measured figures")
        for quantity, value in FIGURES.items():
            print(f"  {quantity:<64}{value:>12.3e}")


def record(quantity: str, value: float, bound: float) -> float:
    """Keep the worst ``value`` seen for ``quantity`` and assert it is below ``bound``."""
    value = float(value)
    FIGURES[quantity] = max(FIGURES.get(quantity, 0.0), value)
    assert np.isfinite(value) and value < bound, f"{quantity}: {value:.3g} (bound {bound:g})"
    return value


def relative(got, want) -> float:
    """Worst over the rows of |got - want| / |want| (2-norms)."""
    got, want = np.atleast_2d(got), np.atleast_2d(want)
    assert got.shape == want.shape and np.all(np.isfinite(got)), (got.shape, want.shape)
    return float(np.max(np.linalg.norm(got - want, axis=1) / np.linalg.norm(want, axis=1)))


def angle_error(a, b) -> float:
    """Largest difference of two arrays of angles, modulo 2π."""
    return float(np.max(np.abs(np.angle(np.exp(1j * (np.asarray(a) - np.asarray(b)))))))


# --------------------------------------------------------------------------------------------------
# the independent four-bar: closed-form geometry and a multiplier model in natural coordinates
# --------------------------------------------------------------------------------------------------
def rot90(v):
    return np.array([-v[1], v[0]])


def cross(a, b) -> float:
    return float(a[0] * b[1] - a[1] * b[0])


def direction(angle):
    return np.array([np.cos(angle), np.sin(angle)])


class FourBar:
    """The crank-rocker of robots/fourbar.yaml, from its drawing alone: fixed pivots O = 0 and D = (ground, 0),
    crank tip A = crank (cos θ, sin θ), pin B with |B − A| = coupler and |B − D| = rocker; three uniform bars
    (centres of mass at their middles, inertia m L²/12), gravity g0 along −y. The tree's angles are the crank's
    θ, the coupler's relative to the crank φ (the coupler's own angle is θ + φ) and the rocker's ψ from +x.

    Branch b = sign of cross(D − A, B − A): B to the left (+1) or the right (−1) of the line from A to D.

    Natural coordinates z = (A, B) ∈ R⁴. A uniform bar between points p and q of length L has the kinetic
    energy m/6 (|ṗ|² + ṗ·q̇ + |q̇|²) while |q − p| = L (½ m |v_c|² with v_c = (ṗ + q̇)/2, plus ½ (m L²/12) ω²
    with L ω = |q̇ − ṗ|), so the mass matrix is constant; the three lengths are the constraints."""

    def __init__(self, ground, crank, coupler, rocker, m1, m2, m3, g0):
        self.crank, self.coupler, self.rocker, self.g0 = crank, coupler, rocker, g0
        self.masses = (m1, m2, m3)
        self.D = np.array([ground, 0.0])
        eye = np.eye(2)
        self.M = np.block([[(m1 + m2) / 3 * eye, m2 / 6 * eye], [m2 / 6 * eye, (m2 + m3) / 3 * eye]])

    # ---- geometry ---------------------------------------------------------------------------------
    def tip(self, theta):
        return self.crank * direction(theta)

    def pin(self, theta, branch):
        """B: the circles about A (radius coupler) and D (radius rocker) meet at A + a e/s ± h e⊥/s."""
        A = self.tip(theta)
        e = self.D - A
        s = np.hypot(*e)
        a = (s * s + self.coupler**2 - self.rocker**2) / (2 * s)
        h = np.sqrt(self.coupler**2 - a * a)
        return A + (a * e + branch * h * rot90(e)) / s

    def branch(self, A, B) -> int:
        return int(np.sign(cross(self.D - A, B - A)))

    def tree_angles(self, theta, branch):
        A, B = self.tip(theta), self.pin(theta, branch)
        return np.array([theta, np.arctan2(*(B - A)[::-1]) - theta, np.arctan2(*(B - self.D)[::-1])])

    def pins(self, qt):
        """The pin B as the coupler's end and as the rocker's end, from tree angles (the same when closed)."""
        A = self.tip(qt[0])
        return A + self.coupler * direction(qt[0] + qt[1]), self.D + self.rocker * direction(qt[2])

    # ---- natural coordinates ----------------------------------------------------------------------
    def state(self, theta, thetad, branch):
        """(z, ż) at crank angle and speed θ, θ̇: Ȧ = θ̇ A⊥, and Ḃ from (B − A)·(Ḃ − Ȧ) = 0, (B − D)·Ḃ = 0."""
        A, B = self.tip(theta), self.pin(theta, branch)
        Ad = thetad * rot90(A)
        Bd = np.linalg.solve(np.array([B - A, B - self.D]), np.array([(B - A) @ Ad, 0.0]))
        return np.concatenate([A, B]), np.concatenate([Ad, Bd])

    def constraint_jacobian(self, z):
        A, B = z[:2], z[2:]
        H = np.zeros((3, 4))
        H[0, :2] = 2 * A
        H[1, :2], H[1, 2:] = -2 * (B - A), 2 * (B - A)
        H[2, 2:] = 2 * (B - self.D)
        return H

    def force(self, z, tau):
        """Generalised forces: gravity (−∂V/∂z) and the crank torque τ (virtual work τ δθ, δθ = A⊥·δA / crank²)."""
        m1, m2, m3 = self.masses
        Q = np.array([0.0, -self.g0 * (m1 + m2) / 2, 0.0, -self.g0 * (m2 + m3) / 2])
        Q[:2] += tau * rot90(z[:2]) / self.crank**2
        return Q

    def zdd(self, z, zd, tau):
        """[M Hᵀ; H 0] [z̈; λ] = [Q; −Ḣż], Ḣż = 2 (|Ȧ|², |Ḃ − Ȧ|², |Ḃ|²)."""
        Ad, Bd = zd[:2], zd[2:]
        H = self.constraint_jacobian(z)
        K = np.block([[self.M, H.T], [H, np.zeros((3, 3))]])
        rhs = np.concatenate([self.force(z, tau), -2 * np.array([Ad @ Ad, (Bd - Ad) @ (Bd - Ad), Bd @ Bd])])
        return np.linalg.solve(K, rhs)[:4]

    def tree_rates(self, z, zd):
        """Tree angles' rates from (z, ż): an angle's rate is cross(r, ṙ)/|r|² of the bar's vector r."""
        A, B, Ad, Bd = z[:2], z[2:], zd[:2], zd[2:]
        crank = cross(A, Ad) / self.crank**2
        coupler = cross(B - A, Bd - Ad) / self.coupler**2
        return np.array([crank, coupler - crank, cross(B - self.D, Bd) / self.rocker**2])

    def accelerations(self, z, zd, tau):
        """(θ̈, φ̈, ψ̈): with the lengths constant, an angle's acceleration is cross(r, r̈)/|r|²."""
        return self.tree_rates(z, self.zdd(z, zd, tau))

    def energy(self, z, zd):
        m1, m2, m3 = self.masses
        return 0.5 * zd @ self.M @ zd + self.g0 * ((m1 + m2) / 2 * z[1] + (m2 + m3) / 2 * z[3])


FOURBAR = {"ground": 0.25, "crank": 0.1, "coupler": 0.3, "rocker": 0.2, "m1": 0.2, "m2": 0.3, "m3": 0.25,
           "g0": 9.81}
FB = FourBar(**FOURBAR)


@pytest.fixture(scope="module")
def fourbar(load):
    robot = load("fourbar").copy()
    assert dict(robot.params.defaults) == FOURBAR  # the reference above describes the shipped four-bar
    assert robot.is_closed_chain and not robot.metadata["closed_chain"]["closed_form"]
    assert robot.n == 3 and robot.joint_names == ("crank_joint", "coupler_joint", "rocker_joint")
    return robot


@pytest.fixture(scope="module")
def model(fourbar):
    model = ConstrainedDynamics(fourbar)
    assert list(model.actuated) == [0] and list(model.passive) == [1, 2] and model.k == 2
    return model


def assembled(model, theta, branch, thetad=0.0):
    """Tree positions and consistent velocities (``passive_velocities``) at crank angle and speed θ, θ̇ on
    ``branch``, by ``assemble`` from the closed form's passive angles."""
    qt = model.assemble([theta], FB.tree_angles(theta, branch)[1:])
    return qt, np.concatenate([[thetad], model.passive_velocities(qt, [thetad])])


# --------------------------------------------------------------------------------------------------
# 1. geometry
# --------------------------------------------------------------------------------------------------
def test_reference_closes_its_own_loop():
    """The closed form itself: both lengths, the branch sign, and its tree angles put both pins on B."""
    for theta in np.linspace(-np.pi, np.pi, 13):
        for branch in BRANCHES:
            A, B = FB.tip(theta), FB.pin(theta, branch)
            assert abs(np.hypot(*(B - A)) - FB.coupler) < 1e-14 and abs(np.hypot(*(B - FB.D)) - FB.rocker) < 1e-14
            assert FB.branch(A, B) == branch
            on_coupler, on_rocker = FB.pins(FB.tree_angles(theta, branch))
            assert np.abs(on_coupler - B).max() < 1e-14 and np.abs(on_rocker - B).max() < 1e-14


@pytest.mark.parametrize("branch", BRANCHES)
def test_assemble_finds_the_branch_nearest_the_guess(fourbar, model, branch):
    """From the closed form's passive angles perturbed by up to 0.3 rad, given as passive or as tree positions,
    ``assemble`` lands on the guess's branch: the closed form's angles, the loop closed."""
    rng = np.random.default_rng(1 if branch > 0 else 2)
    for theta in np.linspace(-np.pi, np.pi, 24, endpoint=False):
        exact = FB.tree_angles(theta, branch)
        noisy = exact + np.concatenate([[0.0], rng.uniform(-0.3, 0.3, 2)])
        for guess in (noisy[1:], noisy):
            qt = model.assemble([theta], guess)
            assert qt[0] == theta
            record("assemble: passive angles vs the closed form [rad]", angle_error(qt, exact), 1e-12)
            record("assemble: loop residual", np.abs(fourbar.loop_residual(qt)).max(), 1e-13)
            assert FB.branch(FB.tip(theta), FB.pins(qt)[1]) == branch


def test_assemble_refuses_a_loop_that_cannot_close(fourbar):
    """Pivots 0.7 m apart: the crank tip stays 0.6 m or more from the rocker's pivot, beyond coupler + rocker."""
    robot = fourbar.copy()
    robot.params["ground"] = 0.7
    with pytest.raises(ValueError, match="cannot be assembled"):
        ConstrainedDynamics(robot).assemble([0.3], FB.tree_angles(0.3, 1)[1:])


@pytest.mark.parametrize("branch", BRANCHES)
def test_follow_keeps_one_branch_over_a_full_turn(fourbar, model, branch):
    """A full crank turn in 720 steps of 0.5°, from the closed form's start: every sample on the start's branch
    (the closed form's angles, the sign of the cross product constant), no jump between samples, and back to the
    start after the turn."""
    theta = 0.4 + np.linspace(0.0, 2 * np.pi, 721)
    rows = model.follow(theta[:, None], FB.tree_angles(theta[0], branch)[1:])
    assert rows.shape == (721, 3) and np.array_equal(rows[:, 0], theta)
    exact = np.array([FB.tree_angles(t, branch) for t in theta])
    record("follow: passive angles vs the closed form [rad]", angle_error(rows, exact), 1e-11)
    record("follow: loop residual", np.abs(fourbar.loop_residual(rows)).max(), 1e-12)
    signs = {FB.branch(FB.tip(q[0]), FB.pins(q)[1]) for q in rows}
    assert signs == {branch}
    steps = np.abs(np.diff(rows[:, 1:], axis=0))
    exact_steps = np.abs(np.angle(np.exp(1j * np.diff(exact[:, 1:], axis=0))))
    # continuation: the solver's angles move as continuously as the closed form's (no 2π jumps either)
    assert steps.max() < 1.01 * exact_steps.max() + 1e-12 and steps.max() < 0.05
    assert angle_error(rows[-1, 1:], rows[0, 1:]) < 1e-11


# --------------------------------------------------------------------------------------------------
# 2. the multiplier model against the natural-coordinate one
# --------------------------------------------------------------------------------------------------
def test_forward_dynamics_against_natural_coordinates(fourbar, model):
    """At 40 assembled states (both branches, crank speeds and torques drawn at random): the passive velocities,
    the energy and the accelerations of every tree joint under a crank torque (given per actuated joint, or per
    tree joint with zeros on the passive ones) equal the natural-coordinate model's."""
    rng = np.random.default_rng(3)
    got, want = [], []
    for index in range(40):
        branch = BRANCHES[index % 2]
        theta, thetad, tau = rng.uniform(-np.pi, np.pi), rng.normal(0.0, 3.0), rng.normal(0.0, 0.5)
        qt, qtd = assembled(model, theta, branch, thetad)
        z, zd = FB.state(theta, thetad, branch)
        record("passive velocities vs natural coordinates (relative)", relative(qtd, FB.tree_rates(z, zd)), 1e-12)
        energy = FB.energy(z, zd)
        record("energy vs natural coordinates (relative)", abs(model.energy(qt, qtd) - energy) / abs(energy), 1e-12)
        record("robot.total_energy vs natural coordinates (relative)",
               abs(fourbar.total_energy(qt, qtd) - energy) / abs(energy), 1e-12)
        qtdd, _ = model.forward_dynamics(qt, qtd, [tau])
        tree_tau, _ = model.forward_dynamics(qt, qtd, [tau, 0.0, 0.0])
        assert np.array_equal(qtdd, tree_tau)
        got.append(qtdd)
        want.append(FB.accelerations(z, zd, tau))
    got, want = np.array(got), np.array(want)
    record("crank acceleration vs natural coordinates (relative)",
           np.max(np.abs(got[:, 0] - want[:, 0]) / np.abs(want[:, 0])), 1e-8)
    record("tree accelerations vs natural coordinates (relative)", relative(got, want), 1e-8)


# --------------------------------------------------------------------------------------------------
# 3. simulation
# --------------------------------------------------------------------------------------------------
#: The free run's start: crank at 0.3 rad on branch +1, turning at 4 rad/s; it then swings between -3.35 and
#: 0.37 rad (0.34 J of kinetic energy at most), the type-2 measure staying above 0.2.
START, START_SPEED = 0.3, 4.0


@pytest.fixture(scope="module")
def free_run(fourbar, model):
    q0, qd0 = assembled(model, START, 1, START_SPEED)
    return q0, qd0, robodyn.simulate(fourbar, None, duration=10, rate=1000, q0=q0, qd0=qd0)


def test_free_run_keeps_the_loops_closed_and_the_energy(fourbar, model, free_run):
    """10 s of free motion at 1 kHz (RK4 on the multiplier model, projected after each step): every sample's loop
    residual, velocity constraint and energy drift (relative to the energy that moved: the largest kinetic energy
    or the range of the potential energy), and the first 0.3 s against the natural-coordinate model integrated by
    conftest's NumPy RK4 at the same step (and at half of it, with ConstrainedDynamics.step: the gap is
    the discretisations' and falls like the step's fourth power)."""
    q0, qd0, run = free_run
    assert run.q.shape == run.qd.shape == (10001, 3) and np.all(np.isfinite(run.q)) and np.all(np.isfinite(run.qd))
    assert np.array_equal(run.q[0], q0)
    record("free run: loop residual, every sample", np.abs(fourbar.loop_residual(run.q)).max(), 1e-12)
    velocity = np.einsum("nkt,nt->nk", fourbar.loop_jacobian(run.q), run.qd)
    record("free run: |H qd| / |qd|, every sample", np.abs(velocity).max() / np.abs(run.qd).max(), 1e-12)
    assert {FB.branch(FB.tip(q[0]), FB.pins(q)[1]) for q in run.q[::10]} == {1}
    energy = fourbar.total_energy(run.q, run.qd)
    for k in (0, 5000, 10000):
        assert abs(model.energy(run.q[k], run.qd[k]) - energy[k]) < 1e-14
    kinetic = fourbar.kinetic_energy(run.q, run.qd)
    scale = max(kinetic.max(), np.ptp(fourbar.potential_energy(run.q)))
    drift = np.abs(energy - energy[0]).max() / scale
    assert drift == pytest.approx(run.energy_drift_rel(), rel=1e-6)
    record("free run: energy drift over 10 s (relative)", drift, 1e-7)
    errors = [natural_coordinates_gap(run.q[300], run.qd[300], 1e-3, 300)]
    record("free run: angles at 0.3 s vs natural coordinates [rad]", errors[0][0], 1e-8)
    record("free run: rates at 0.3 s vs natural coordinates (relative)", errors[0][1], 1e-7)
    # the gap is the two RK4 discretisations': ConstrainedDynamics.step at half the step narrows it 16-fold
    q, qd = q0, qd0
    for _ in range(600):
        q, qd = model.step(q, qd, [0.0], 5e-4)
    errors.append(natural_coordinates_gap(q, qd, 5e-4, 600))
    record("free run: angle gap at 1 ms over the gap at 0.5 ms", errors[0][0] / errors[1][0], np.inf)
    assert errors[1][0] < errors[0][0] / 8 and errors[1][1] < errors[0][1] / 8, errors


def natural_coordinates_gap(q, qd, dt, steps):
    """How far tree state (q, qd) is from the free run's start integrated in natural coordinates by conftest's
    NumPy RK4 (``steps`` of ``dt``): angles [rad], rates (relative)."""
    def rhs(state):
        return np.concatenate([state[4:], FB.zdd(state[:4], state[4:], 0.0)])

    z0, zd0 = FB.state(START, START_SPEED, 1)
    state = rk4(rhs, np.concatenate([z0, zd0]), dt, steps)
    z, zd = state[:4], state[4:]
    crank = np.arctan2(z[1], z[0])
    angles = np.array([crank, np.arctan2(*(z[2:] - z[:2])[::-1]) - crank, np.arctan2(*(z[2:] - FB.D)[::-1])])
    return angle_error(q, angles), relative(qd, FB.tree_rates(z, zd))


def _controlled_run(fourbar, q0, qd0, passive):
    """1 s under a Python controller: a crank torque of 0.3 sin(3t) N m with damping 0.02 N m s/rad, and
    ``passive`` (a function of t) on the passive joints."""
    def controller(t, q, qd):
        return np.concatenate([[0.3 * np.sin(3 * t) - 0.02 * qd[0]], passive(t)])

    return robodyn.simulate(fourbar, controller, duration=1, rate=1000, q0=q0, qd0=qd0)


def test_python_controller_drives_the_crank_and_passive_torques_do_nothing(fourbar, free_run):
    """The crank torque does work: E(t) − E(0) = Σ τ_k (θ_{k+1} − θ_k) (the torque is held over each period), and
    the run leaves the free one; torques on the passive joints (zero, or large and time-varying) give the same
    trajectory to the bit."""
    q0, qd0, free = free_run
    run = _controlled_run(fourbar, q0, qd0, lambda t: np.zeros(2))
    other = _controlled_run(fourbar, q0, qd0, lambda t: np.array([5.0, -7.0 * np.cos(10 * t)]))
    assert np.array_equal(run.q, other.q) and np.array_equal(run.qd, other.qd)
    assert np.array_equal(run.tau[:, 0], other.tau[:, 0]) and np.abs(other.tau[:, 1]).min() == 5.0
    assert np.array_equal(run.qdd, other.qdd)
    record("controlled run: loop residual", np.abs(fourbar.loop_residual(run.q)).max(), 1e-12)
    assert np.abs(run.q[-1] - free.q[1000]).max() > 1e-2
    energy = fourbar.total_energy(run.q, run.qd)
    work = np.concatenate([[0.0], np.cumsum(run.tau[:-1, 0] * np.diff(run.q[:, 0]))])
    assert np.abs(work).max() > 0.05
    record("controlled run: |E - E0 - work| / max|work|", np.abs(energy - energy[0] - work).max() / np.abs(work).max(),
           1e-7)


def test_simulate_refuses_an_open_start_and_other_integrators(fourbar, free_run):
    """A start that does not close the loop (perturbed, or the default zeros): ValueError naming q0; an integrator
    other than rk4 (a compiled one or a solve_ivp method): ValueError naming rk4 and the integrator."""
    q0, qd0, _ = free_run
    for start in (q0 + np.array([0.0, 0.1, 0.0]), None):  # None: zeros, which do not close the loop either
        with pytest.raises(ValueError, match="q0") as info:
            robodyn.simulate(fourbar, None, duration=0.01, q0=start)
        assert "close the loops" in str(info.value)
    for integrator in ("euler", "semi-implicit-euler", "RK45"):
        with pytest.raises(ValueError, match="rk4") as info:
            robodyn.simulate(fourbar, None, duration=0.01, q0=q0, qd0=qd0, integrator=integrator)
        assert repr(integrator) in str(info.value)


# --------------------------------------------------------------------------------------------------
# 4. the cross-check of the closed-form mechanisms
# --------------------------------------------------------------------------------------------------
def random_states(robot, count, seed, margin=0.05):
    """``count`` assembled (q, qd, tau) of the compiled mode, both normalised singularity measures above
    ``margin`` in magnitude."""
    rng = np.random.default_rng(seed)
    biglide = robot.joint_types[0] == "prismatic"
    rows = []
    while len(rows) < count:
        q = rng.uniform(-0.5, 0.5, 2) if biglide else rng.uniform(-np.pi, np.pi, 2)
        try:
            robot.tree_positions(q)
        except ValueError:
            continue
        if np.abs(robot.singularity_measures(q)[2:]).min() > margin:
            rows.append(q)
    q = np.array(rows)
    return q, rng.normal(size=q.shape), 5 * rng.normal(size=q.shape)


def check_against_multipliers(robot, q, qd, tau, label):
    """The reduced forward dynamics against ConstrainedDynamics at the tree state (actuated accelerations, and the
    passive ones: Jp q̈ + J̇p q̇)."""
    model = ConstrainedDynamics(robot)
    x, xd = robot.tree_positions(q), robot.tree_velocities(q, qd)
    qdd = robot.forward_dynamics(q, qd, tau)
    xdd = np.array([model.forward_dynamics(a, b, c)[0] for a, b, c in zip(x, xd, tau)])
    record(f"{label}: forward_dynamics vs ConstrainedDynamics (relative)", relative(xdd[:, model.actuated], qdd),
           1e-10)
    passive = (np.einsum("nij,nj->ni", robot.passive_jacobian(q), qdd)
               + np.einsum("nij,nj->ni", robot.passive_jacobian_derivative(q, qd), qd))
    record(f"{label}: passive accelerations vs ConstrainedDynamics (relative)",
           relative(xdd[:, model.passive], passive), 1e-10)
    return model, x


@pytest.mark.parametrize("name", ["biglide", "fivebar"])
def test_closed_form_against_the_multiplier_model(load, name):
    """At 40 assembled states away from singularities: the reduced forward dynamics equals ConstrainedDynamics's
    at tree_positions(q), tree_velocities(q, qd), and assemble from tree_positions(q) perturbed by 1 cm or
    10 mrad (given as tree or passive positions) returns tree_positions(q)."""
    robot = load(name).copy()
    q, qd, tau = random_states(robot, 40, seed=4)
    model, x = check_against_multipliers(robot, q, qd, tau, name)
    rng = np.random.default_rng(5)
    for qa, exact in zip(q, x):
        noisy = exact + rng.normal(0.0, 1e-2, (2, len(exact)))
        for guess in (noisy[0], noisy[1, model.passive]):  # tree or passive positions
            record(f"{name}: assemble from a perturbed guess vs tree_positions",
                   np.abs(model.assemble(qa, guess) - exact).max(), 1e-12)


# --------------------------------------------------------------------------------------------------
# 5. everything switched on: rotor, friction on an actuated and a passive joint, a massive distal link
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def motors(cache_dir):
    return robodyn.load(MOTORS, cache_dir=cache_dir)


def test_fivebar_with_motors_and_friction(load, motors):
    """tests/data/fivebar_motors.yaml: the self-check passed; the tree holds the rotor (k_r² I_m = 20² · 1e-5 on
    motor 1's diagonal, against the plain five-bar's tree) and every joint's friction (the odd part in q̇ of the
    tree's bias: 0.1 q̇ + 0.05 sgn q̇ on motor 1, 0.01 q̇ on elbow 2); friction(q̇) is motor 1's alone, and the
    reduced bias (C q̇ + g + friction) has the odd part f_a(q̇) + Jpᵀ f_p(Jp q̇), the passive joint's friction
    included; the reduced forward dynamics equals the multiplier model's at assembled states with nonzero
    velocities (so rotor, friction of actuated and passive joints and the distal link's mass enter both alike);
    ID∘FD and FD∘ID are identities."""
    robot, plain = motors, load("fivebar")
    assert robot.selfcheck["status"] == "passed", robot.selfcheck
    assert robot.is_closed_chain and robot.metadata["closed_chain"]["closed_form"]
    assert robot.tree_joint_names == ("motor1", "elbow1", "motor2", "elbow2")
    q, qd, tau = random_states(robot, 40, seed=6)
    qd += 0.5 * np.sign(qd)  # every velocity at least 0.5 rad/s: Coulomb friction away from its jump
    x, xd = robot.tree_positions(q), robot.tree_velocities(q, qd)
    assert np.abs(xd).min() > 1e-3
    record("motors: rotor on motor 1's diagonal of the tree M [kg m^2]",
           np.abs(robot.tree_M(x)[:, 0, 0] - plain.tree_M(x)[:, 0, 0] - 20**2 * 1e-5).max(), 1e-15)
    odd = 0.5 * (robot.tree_nonlinear_effects(x, xd) - robot.tree_nonlinear_effects(x, -xd))
    friction = np.zeros_like(xd)
    friction[:, 0] = 0.1 * xd[:, 0] + 0.05 * np.sign(xd[:, 0])
    friction[:, 3] = 0.01 * xd[:, 3]
    record("motors: odd part of the tree bias vs every joint's friction", np.abs(odd - friction).max(), 1e-13)
    assert np.allclose(robot.friction(qd), friction[:, :2] * [1.0, 0.0], rtol=1e-14, atol=0)
    Jp = robot.passive_jacobian(q)
    elbow2 = robot.passive_joint_names.index("elbow2")
    passive_friction = np.zeros((len(q), 2))
    passive_friction[:, elbow2] = 0.01 * np.einsum("nj,nj->n", Jp[:, elbow2], qd)
    reduced_odd = 0.5 * (robot.nonlinear_effects(q, qd) - robot.nonlinear_effects(q, -qd))
    record("motors: odd part of the reduced bias vs f_a(qd) + Jp^T f_p(Jp qd) (relative)",
           relative(reduced_odd, friction[:, :2] * [1.0, 0.0] + np.einsum("nji,nj->ni", Jp, passive_friction)),
           1e-12)
    check_against_multipliers(robot, q, qd, tau, "motors")
    qdd = robot.forward_dynamics(q, qd, tau)
    record("motors: ID(FD(tau)) = tau (relative)", relative(robot.inverse_dynamics(q, qd, qdd), tau), 1e-12)
    record("motors: FD(ID(qdd)) = qdd (relative)",
           relative(robot.forward_dynamics(q, qd, robot.inverse_dynamics(q, qd, qdd)), qdd), 1e-12)


# --------------------------------------------------------------------------------------------------
# 6. the command line
# --------------------------------------------------------------------------------------------------
def _simulate_command(cache_dir, *arguments) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "robodyn", "simulate", ROBOTS / "fourbar.yaml", "--cache-dir", cache_dir,
               *arguments]
    return subprocess.run(list(map(str, command)), capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env=dict(os.environ), check=False)


def test_command_line_simulates_the_fourbar(fourbar, cache_dir):
    """The default run (no controller, the start assembled by the command) ends with status 0 and prints the
    energy drift."""
    result = _simulate_command(cache_dir, "--duration", "1")
    assert result.returncode == 0, result.stderr
    drift = re.search(r"relative energy drift: ([-+0-9.e]+)", result.stdout)
    assert drift, result.stdout
    record("command line: relative energy drift over 1 s", float(drift.group(1)), 1e-7)


def test_command_line_refuses_a_builtin_controller(fourbar, cache_dir):
    """A built-in controller needs the closed-form model the four-bar lacks: status 2, one line naming it."""
    result = _simulate_command(cache_dir, "--duration", "1", "--controller", "pd")
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "--controller pd" in errors[0] and "closed-form model" in errors[0], result.stderr


@pytest.mark.parametrize("name", ["biglide", "fourbar"])
def test_demo_of_a_closed_chain(name, fourbar, cache_dir):
    """`python -m robodyn demo` on a closed chain shows an assembled state: finite torques, no error."""
    command = [sys.executable, "-m", "robodyn", "demo", ROBOTS / f"{name}.yaml", "--cache-dir", cache_dir]
    result = subprocess.run(list(map(str, command)), capture_output=True, text=True, cwd=ROOT, timeout=300,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert "nan" not in result.stdout and "error" not in result.stderr.lower(), (result.stdout, result.stderr)
    assert "inverse dynamics  tau" in result.stdout
