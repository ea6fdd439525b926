"""Simulation and control: integrators, references, control laws and the harness.

Oracles: an independent NumPy RK4, convergence orders, energy conservation and
the friction-work balance, closed-form steady states, control laws rebuilt from
the compiled M, C, g and friction, and identity between the compiled loop and
the Python tick loop.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest

import robodyn
from robodyn import (PD, ComputedTorque, FunctionController, Harness, Hold, NoControl, PDGravity, Quintic,
                     SimulatedPlant, Sine, SlotineLi, Step, simulate)

from conftest import ROBOTS, random_state, rk4

Q0 = np.array([0.3, -0.2])
QD0 = np.array([0.5, 1.0])


def _frictionless(robot):
    for key in robot.params:
        if key in ("D", "Fv", "Fs"):
            robot.params[key] = 0.0
    return robot


# ---------------------------------------------------------------- references

REFERENCES = [
    Hold([0.1, -0.2]),
    Step([0.1, -0.2], [0.5, 0.4], time=0.25),
    Sine([0.1, -0.2], [0.3, 0.2], frequency=[0.7, 1.3], phase=[0.0, 0.5]),
    Quintic([0.1, -0.2], [0.9, -1.0], duration=0.8, t0=0.1),
]


@pytest.mark.parametrize("reference", REFERENCES, ids=lambda r: r.kind)
def test_compiled_reference_matches_numpy(reference, load):
    robot = load("rr")
    law = robot._control_law("none", **reference.c_arguments())
    times = np.concatenate([np.linspace(-0.2, 1.2, 57), [0.1, 0.25, 0.9]])
    expected = reference.evaluate(times)
    for k, t in enumerate(times):
        for got, want in zip(law.reference(t), expected):
            np.testing.assert_allclose(got, want[k], rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("reference", [REFERENCES[2], REFERENCES[3]], ids=lambda r: r.kind)
def test_reference_derivatives_by_finite_differences(reference):
    step = 1e-6
    for t in np.linspace(0.0, 1.0, 23):
        q_minus, qd_minus, _ = reference.evaluate(t - step)
        q_plus, qd_plus, _ = reference.evaluate(t + step)
        _, qd, qdd = reference.evaluate(t)
        np.testing.assert_allclose((q_plus - q_minus) / (2 * step), qd, atol=1e-7)
        np.testing.assert_allclose((qd_plus - qd_minus) / (2 * step), qdd, atol=1e-5)


def test_references_follow_their_documented_formulas():
    """Values against the formulas written out here (the finite-difference test above only ties each
    reference's derivatives to its own position)."""
    hold, step, sine, quintic = REFERENCES
    for t in (-0.1, 0.0, 0.2, 0.25, 0.6, 1.3):
        np.testing.assert_array_equal(hold.evaluate(t)[0], [0.1, -0.2])
        np.testing.assert_array_equal(step.evaluate(t)[0], [0.1, -0.2] if t < 0.25 else [0.5, 0.4])
        angle = 2 * np.pi * np.array([0.7, 1.3]) * t + np.array([0.0, 0.5])  # frequency in Hz
        q, qd, qdd = sine.evaluate(t)
        np.testing.assert_allclose(q, [0.1, -0.2] + np.array([0.3, 0.2]) * np.sin(angle), rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(qd, np.array([0.3, 0.2]) * 2 * np.pi * np.array([0.7, 1.3]) * np.cos(angle),
                                   rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(qdd, -np.array([0.3, 0.2]) * (2 * np.pi * np.array([0.7, 1.3]))**2 * np.sin(angle),
                                   rtol=1e-13, atol=1e-13)
        tau = np.clip((t - 0.1) / 0.8, 0.0, 1.0)  # minimum jerk: 10 tau^3 - 15 tau^4 + 6 tau^5
        blend = 10 * tau**3 - 15 * tau**4 + 6 * tau**5
        np.testing.assert_allclose(quintic.evaluate(t)[0], [0.1, -0.2] + blend * np.array([0.8, -0.8]),
                                   rtol=1e-14, atol=1e-15)
        speed = (30 * tau**2 - 60 * tau**3 + 30 * tau**4) / 0.8
        np.testing.assert_allclose(quintic.evaluate(t)[1], speed * np.array([0.8, -0.8]), rtol=1e-13, atol=1e-14)


def test_quintic_is_rest_to_rest():
    reference = REFERENCES[3]
    for t, position in ((0.1, reference.start), (0.9, reference.goal)):
        q, qd, qdd = reference.evaluate(t)
        np.testing.assert_allclose(q, position, atol=1e-15)
        np.testing.assert_allclose(qd, 0.0, atol=1e-15)
        np.testing.assert_allclose(qdd, 0.0, atol=1e-12)
    q_mid, _, qdd_mid = reference.evaluate(0.5)
    np.testing.assert_allclose(q_mid, 0.5 * (reference.start + reference.goal))  # symmetric blend
    np.testing.assert_allclose(qdd_mid, 0.0, atol=1e-12)  # inflection at half time


# ---------------------------------------------------------------- control laws

def _numpy_law(robot, kind, kp, kd, q, qd, q_r, qd_r, qdd_r, friction_at=None):
    """The control laws written out from the compiled M, C, g and friction."""
    e, ed = q_r - q, qd_r - qd
    if friction_at is not None:  # friction compensated at another velocity than qd
        return (_numpy_law(robot, kind, kp, kd, q, qd, q_r, qd_r, qdd_r)
                - robot.friction(qd) + robot.friction(friction_at))
    if kind == "pd":
        return kp * e + kd * ed
    if kind == "pd-gravity":
        return kp * e + kd * ed + robot.g(q)
    if kind == "computed-torque":
        a = qdd_r + kd * ed + kp * e
        return robot.M(q) @ a + robot.C(q, qd) @ qd + robot.g(q) + robot.friction(qd)
    v, a = qd_r + kp * e, qdd_r + kp * ed
    s = qd - v
    return robot.M(q) @ a + robot.C(q, qd) @ v + robot.g(q) + robot.friction(qd) - kd * s


@pytest.mark.parametrize("kind", ["pd", "pd-gravity", "computed-torque", "slotine-li"])
@pytest.mark.parametrize("name", ["rr", "rrr"])
def test_compiled_control_law_matches_numpy(name, kind, load):
    robot = load(name)
    rng = np.random.default_rng(5)
    reference = Sine(np.zeros(robot.n), 0.4, 0.6)
    kp, kd = rng.uniform(1, 50, robot.n), rng.uniform(1, 20, robot.n)
    law = robot._control_law(kind, kp=kp, kd=kd, **reference.c_arguments())
    for t in (0.0, 0.3, 1.7):
        q, qd = random_state(robot, rng)
        expected = _numpy_law(robot, kind, kp, kd, q, qd, *reference.evaluate(t))
        np.testing.assert_allclose(law(t, q, qd), expected, rtol=1e-12, atol=1e-10)
    if kind in ("computed-torque", "slotine-li"):
        planned = robot._control_law(kind, kp=kp, kd=kd, friction_at_reference=True,
                                              **reference.c_arguments())
        q, qd = random_state(robot, rng)
        q_r, qd_r, qdd_r = reference.evaluate(0.9)
        np.testing.assert_allclose(planned(0.9, q, qd),
                                   _numpy_law(robot, kind, kp, kd, q, qd, q_r, qd_r, qdd_r, friction_at=qd_r),
                                   rtol=1e-12, atol=1e-10)
    limit = np.full(robot.n, 0.5)
    saturated = robot._control_law(kind, kp=kp * 1e3, kd=kd, tau_limit=limit, **reference.c_arguments())
    q, qd = random_state(robot, rng)
    tau = saturated(0.2, q, qd)
    assert np.all(np.abs(tau) <= limit) and np.any(np.abs(tau) == limit)


def test_builtin_controller_objects_use_their_own_model(load):
    robot = load("rr")
    model = robot.copy()
    model.params["m2"] = 80.0
    reference = Quintic([0, 0], [1, -1], 1.0)
    controller = ComputedTorque(model, reference, kp=100.0, kd=20.0)
    q, qd = np.array([0.2, 0.1]), np.array([0.0, 0.3])
    expected = _numpy_law(model, "computed-torque", 100.0, 20.0, q, qd, *reference.evaluate(0.4))
    np.testing.assert_allclose(controller(0.4, q, qd), expected, rtol=1e-12)
    assert not np.allclose(controller(0.4, q, qd), _numpy_law(robot, "computed-torque", 100.0, 20.0, q, qd,
                                                               *reference.evaluate(0.4)))


def test_default_gains_are_documented_values(load):
    robot = load("rr")
    reference = Hold([0.2, 0.3])
    diagonal = np.diag(robot.M(reference.q))
    pd = PD(robot, reference, omega=10.0, zeta=0.5)
    np.testing.assert_allclose(pd.kp, 100.0 * diagonal)
    np.testing.assert_allclose(pd.kd, 10.0 * diagonal)
    ct = ComputedTorque(robot, reference, omega=10.0)
    np.testing.assert_allclose((ct.kp, ct.kd), ([100.0, 100.0], [20.0, 20.0]))
    sl = SlotineLi(robot, reference, omega=10.0)
    np.testing.assert_allclose((sl.lam, sl.k), ([10.0, 10.0], 10.0 * diagonal))


# ---------------------------------------------------------------- integrators

def _numpy_rk4(robot, q, qd, tau, dt, steps):
    def rhs(state):
        return np.concatenate([state[robot.n:], robot.forward_dynamics(state[:robot.n], state[robot.n:], tau)])

    state = rk4(rhs, np.concatenate([q, qd]), dt, steps)
    return state[:robot.n], state[robot.n:]


@pytest.mark.parametrize("name", ["rr", "rrr"])
def test_compiled_rk4_matches_numpy_rk4(name, load):
    robot = load(name)
    q0, qd0 = random_state(robot, np.random.default_rng(3))
    trajectory = simulate(robot, duration=0.2, rate=500, q0=q0, qd0=qd0)
    q, qd = _numpy_rk4(robot, q0, qd0, np.zeros(robot.n), 2e-3, 100)
    np.testing.assert_allclose(trajectory.q[-1], q, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(trajectory.qd[-1], qd, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(trajectory.qdd, robot.forward_dynamics(trajectory.q, trajectory.qd, trajectory.tau),
                               rtol=1e-13, atol=1e-12)


@pytest.mark.parametrize("integrator, order", [("rk4", 4), ("euler", 1), ("semi-implicit-euler", 1)])
def test_convergence_order(integrator, order, load):
    """Halving the step divides the error by 2^order (RK4: 16)."""
    robot = load("rr")
    exact = simulate(robot, duration=1.0, rate=1000, substeps=64, q0=Q0, qd0=QD0).q[-1]
    errors = [np.abs(simulate(robot, duration=1.0, rate=rate, q0=Q0, qd0=QD0, integrator=integrator).q[-1]
                     - exact).max() for rate in (250, 500, 1000)]
    ratios = [errors[0] / errors[1], errors[1] / errors[2]]
    assert all(0.75 * 2**order < ratio < 1.4 * 2**order for ratio in ratios), (errors, ratios)


def test_substeps_are_smaller_steps(load):
    robot = load("rr")
    coarse = simulate(robot, duration=0.5, rate=100, substeps=10, q0=Q0, qd0=QD0)
    fine = simulate(robot, duration=0.5, rate=1000, q0=Q0, qd0=QD0)
    np.testing.assert_allclose(coarse.q[-1], fine.q[-1], rtol=1e-12, atol=1e-13)


def test_a_torque_that_is_a_view_of_the_state_is_held_over_the_substeps(load):
    """The step advances q and qd in place: a torque (or wrench) that shares their memory is held at its value when
    written, as a copy would be, not changed from one substep to the next."""
    robot = load("rr")
    aliased = SimulatedPlant(robot, 0.01, q0=Q0, qd0=QD0, substeps=10)
    copied = SimulatedPlant(robot, 0.01, q0=Q0, qd0=QD0, substeps=10)
    aliased.write(aliased.qd)
    copied.write(copied.qd.copy())
    np.testing.assert_array_equal(aliased.q, copied.q)
    np.testing.assert_array_equal(aliased.qd, copied.qd)
    q, qd = np.array(Q0, dtype=float), np.array(QD0, dtype=float)
    q2, qd2 = q.copy(), qd.copy()
    state = np.concatenate([q, qd])  # q, qd and the torque as views of one array
    robot._step(state[:2], state[2:], state[1:3], dt=0.01, substeps=10)
    robot._step(q2, qd2, np.array([q[1], qd[0]]), dt=0.01, substeps=10)
    np.testing.assert_array_equal(state, np.concatenate([q2, qd2]))


def test_solve_ivp_path_agrees_with_rk4(load):
    robot = load("rr")
    adaptive = simulate(robot, duration=1.0, rate=100, q0=Q0, qd0=QD0, integrator="RK45", rtol=1e-10, atol=1e-12)
    fixed = simulate(robot, duration=1.0, rate=1000, q0=Q0, qd0=QD0)
    np.testing.assert_allclose(adaptive.q[-1], fixed.q[-1], atol=1e-8)
    assert adaptive.qdd is not None and adaptive.q.shape == (101, 2)


def test_energy_drift_without_friction(load):
    robot = _frictionless(load("rr"))
    rk4 = simulate(robot, duration=10.0, rate=1000, q0=Q0, qd0=QD0)
    assert rk4.energy_drift_rel() < 1e-8
    assert rk4.summary()["energy_drift_rel"] == rk4.energy_drift_rel()

    def halves(trajectory):
        drift = np.abs(trajectory.energy() - trajectory.energy()[0])
        return drift[:5000].max(), drift[5000:].max()

    symplectic = simulate(robot, duration=10.0, rate=1000, q0=Q0, qd0=QD0, integrator="semi-implicit-euler")
    euler = simulate(robot, duration=10.0, rate=1000, q0=Q0, qd0=QD0, integrator="euler")
    first, second = halves(symplectic)
    assert second < 1.5 * first  # bounded oscillation, no secular drift
    first, second = halves(euler)
    assert second > 1.2 * first  # explicit Euler gains energy
    assert symplectic.energy_drift_rel() < euler.energy_drift_rel()


@pytest.mark.parametrize("damping", [30.0, 80.0])
def test_viscous_friction_dissipates_its_work(damping, load):
    """The notes' free-motion runs with D = 30, 80: E(0) - E(t) = ∫ qdᵀ D qd dt."""
    robot = load("rr")
    robot.params["D"] = damping
    trajectory = simulate(robot, duration=3.0, rate=2000)
    energy = trajectory.energy()
    power = damping * np.sum(trajectory.qd**2, axis=1)
    work = np.concatenate([[0.0], np.cumsum(0.5 * (power[1:] + power[:-1]) / 2000)])
    assert np.all(np.diff(energy) <= 1e-9)
    np.testing.assert_allclose(energy[0] - energy, work, atol=1e-5 * np.abs(energy).max())


# ---------------------------------------------------------------- closed loop: tracking

MOTION = {"rr": Quintic([0, 0], [0.8, -0.6], 1.5), "rrr": Quintic([0, 0, 0], [0.8, -0.6, 0.5], 1.5)}


@pytest.mark.parametrize("controller", [ComputedTorque, SlotineLi])
@pytest.mark.parametrize("name", ["rr", "rrr"])
def test_model_based_control_tracks_to_near_zero(name, controller, load):
    """Exact model: the error comes only from holding the torque over a period (it halves with
    the period); with Coulomb friction the sign flips at rest keep a small limit cycle."""
    robot = load(name)
    if name == "rrr":
        robot.params["Fs"] = 0.0
    errors = [simulate(robot, controller(robot.copy(), MOTION[name]), duration=3.0, rate=rate).summary()
              for rate in (1000, 2000)]
    assert errors[0]["tracking_error_max"] < 1e-4
    assert errors[1]["tracking_error_max"] < 0.6 * errors[0]["tracking_error_max"]
    if name == "rrr":
        robot.params.reset()  # Coulomb friction back: its compensation chatters near rest
        measured = simulate(robot, controller(robot.copy(), MOTION[name]), duration=3.0).summary()
        planned = simulate(robot, controller(robot.copy(), MOTION[name], friction="reference"),
                           duration=3.0).summary()
        assert measured["tracking_error_max"] < 2e-3
        assert planned["tracking_error_max"] < min(1e-4, 0.2 * measured["tracking_error_max"])


def test_slotine_li_storage_function_decays_as_passivity_predicts(load):
    """V = ½ sᵀM s obeys dV/dt = −sᵀK s + ½ sᵀ(Ṁ − 2C)s = −sᵀK s with the exact model, because Ṁ − 2C is
    skew; sampled at the control rate, the mismatch is the zero-order hold's and shrinks with the period."""
    robot = load("rr")
    mismatch = []
    for rate in (1000, 5000):
        controller = SlotineLi(robot.copy(), MOTION["rr"])
        run = simulate(robot, controller, duration=1.5, rate=rate, q0=[0.1, -0.1], qd0=[0.5, 0.2])
        s = -((run.qd_ref - run.qd) + controller.lam * (run.q_ref - run.q))
        storage = 0.5 * np.einsum("ki,kij,kj->k", s, robot.M(run.q), s)
        predicted = -np.einsum("ki,i,ki->k", s, controller.k, s)[:-1] / rate
        mismatch.append(np.abs(np.diff(storage) - predicted).max() / np.abs(predicted).max())
        assert storage[-1] < 1e-6 * storage[0]
    assert mismatch[0] < 0.05 and 3.5 < mismatch[0] / mismatch[1] < 7, mismatch


def test_pd_gravity_steady_state_error_shrinks_with_the_gains(load):
    """Tracking a sinusoid, PD + g leaves an error roughly ∝ 1/Kp: ×4 gains (ω ×2) → error / ~4."""
    for name in ("rr", "rrr"):
        robot = load(name)
        reference = Sine(np.zeros(robot.n), 0.3, 0.5)
        errors = []
        for omega in (10.0, 20.0, 40.0):
            trajectory = simulate(robot, PDGravity(robot.copy(), reference, omega=omega), duration=6.0)
            errors.append(np.abs(trajectory.tracking_error[-2000:]).max())  # last period: steady state
        assert errors[0] < 0.1
        assert 2.5 < errors[0] / errors[1] < 6 and 2.5 < errors[1] / errors[2] < 6, (name, errors)


def test_pd_gravity_regulates_exactly_and_pd_alone_sags_by_g_over_kp(load):
    robot = load("rr")
    target = np.array([0.4, -0.3])
    held = simulate(robot, PDGravity(robot.copy(), Hold(target)), duration=4.0)
    assert np.abs(held.tracking_error[-1]).max() < 1e-8
    for omega in (20.0, 40.0):
        pd = PD(robot.copy(), Hold(target), omega=omega)
        final = simulate(robot, pd, duration=6.0).q[-1]
        # At rest: Kp (q_r - q) = g(q).
        np.testing.assert_allclose(pd.kp * (target - final), robot.g(final), rtol=1e-6, atol=1e-6)
        assert 0 < np.abs(target - final).max() < 0.05 * (20.0 / omega) ** 2


def test_wrong_model_error_grows_with_the_model_error(load):
    """Computed torque with the second mass mis-estimated by δ: the error grows ~linearly in δ."""
    robot = load("rr")
    errors = []
    for delta in (0.0, 0.1, 0.2, 0.4):
        model = robot.copy()
        model.params["m2"] = 50.0 * (1 + delta)
        errors.append(simulate(robot, ComputedTorque(model, MOTION["rr"]), duration=3.0).summary()[
            "tracking_error_max"])
    assert errors[0] < 0.05 * errors[1]
    assert errors[1] < errors[2] < errors[3]
    assert 1.6 < errors[2] / errors[1] < 2.4 and 1.6 < errors[3] / errors[2] < 2.4, errors


# ---------------------------------------------------------------- harness, plant, disturbances

@pytest.mark.parametrize("controller", [NoControl, PD, PDGravity, ComputedTorque, SlotineLi])
def test_python_tick_loop_reproduces_the_compiled_loop(controller, load):
    """Same control law as a Python callable: the Python loop and the C loop agree to the last bit."""
    robot = load("rrr")
    law = controller(robot) if controller is NoControl else controller(robot.copy(), MOTION["rrr"])
    q0, qd0 = random_state(robot, np.random.default_rng(1))
    compiled = simulate(robot, law, duration=0.5, q0=q0, qd0=qd0)
    python = simulate(robot, FunctionController(law, law.reference), duration=0.5, q0=q0, qd0=qd0)
    for name in ("q", "qd", "tau"):
        np.testing.assert_array_equal(getattr(python, name), getattr(compiled, name))
    np.testing.assert_allclose(python.qdd, compiled.qdd, rtol=1e-13, atol=1e-12)
    if law.reference is not None:
        np.testing.assert_allclose(python.q_ref, compiled.q_ref, rtol=1e-14, atol=1e-15)


class _LoggingPlant:
    """A plant that is not a SimulatedPlant: the harness must only use read() and write()."""

    def __init__(self, inner):
        self.inner, self.n, self.writes = inner, inner.n, 0

    def read(self):
        return self.inner.read()

    def write(self, tau):
        self.writes += 1
        self.inner.write(tau)


def test_harness_drives_any_plant_through_read_and_write(load):
    robot = load("rr")
    controller = SlotineLi(robot.copy(), MOTION["rr"])
    plant = _LoggingPlant(SimulatedPlant(robot, 1e-3))
    result = Harness(plant, controller, rate=1000).run(0.5)
    assert plant.writes == 500 and result.qdd is None
    reference = simulate(robot, controller, duration=0.5)
    np.testing.assert_array_equal(result.q, reference.q)
    assert result.summary()["tracking_error_max"] == reference.summary()["tracking_error_max"]


def test_disturbance_torque_is_added_to_the_controller(load):
    robot = load("rr")
    controller = ComputedTorque(robot.copy(), MOTION["rr"])
    rng = np.random.default_rng(2)
    disturbance = rng.normal(0.0, 20.0, (1001, 2))
    disturbed = simulate(robot, controller, duration=1.0, disturbance=disturbance)
    added = simulate(robot, lambda t, q, qd: controller(t, q, qd) + disturbance[round(t * 1000)], duration=1.0)
    np.testing.assert_array_equal(disturbed.q, added.q)
    np.testing.assert_allclose(disturbed.tau + disturbance, added.tau, rtol=1e-14)
    constant = simulate(robot, controller, duration=1.0, disturbance=lambda t: np.array([5.0, -5.0]))
    assert 1e-5 < np.abs(constant.tracking_error).max() < 1e-2


def test_wrench_enters_as_jacobian_transpose(load):
    """Free motion with a constant tool wrench h matches RK4 of M qdd = τ + Jᵀh − ... in NumPy."""
    robot = load("rr")
    h = np.array([300.0, -100.0, 0.0, 0.0, 0.0, 40.0])
    trajectory = simulate(robot, duration=0.1, rate=1000, q0=Q0, qd0=QD0, wrench=h)

    def rhs(state):
        q, qd = state[:2], state[2:]
        tau = robot.jacobian(q).T @ h
        return np.concatenate([qd, np.linalg.solve(robot.M(q), tau - robot.nonlinear_effects(q, qd))])

    state = rk4(rhs, np.concatenate([Q0, QD0]), 1e-3, 100)
    np.testing.assert_allclose(trajectory.q[-1], state[:2], rtol=1e-10)
    free = simulate(robot, duration=0.1, rate=1000, q0=Q0, qd0=QD0)
    assert np.abs(free.q[-1] - trajectory.q[-1]).max() > 1e-4  # the wrench mattered


def test_realtime_mode_paces_to_the_clock(load):
    robot = load("rr")
    trajectory = simulate(robot, ComputedTorque(robot.copy(), MOTION["rr"]), duration=0.2, rate=500,
                          realtime=True)
    loop = trajectory.summary()["loop"]
    assert loop["realtime"] and loop["ticks"] == 100 and len(trajectory.t) == 101
    assert loop["wall_time_s"] >= 0.2
    assert loop["jitter_p99_s"] is not None and np.all(np.isfinite(trajectory.loop.lateness))
    assert 0 <= loop["missed_deadlines"] <= 101
    offline = simulate(robot, ComputedTorque(robot.copy(), MOTION["rr"]), duration=0.2, rate=500)
    np.testing.assert_array_equal(trajectory.q, offline.q)  # pacing changes timing, not results


def test_cross_model_controller_from_another_module(load, cache_dir):
    """The controller's model may be a different compiled description with the same joints."""
    robot = load("rr")
    other = robodyn.load(ROBOTS / "rr.yaml", cache_dir=cache_dir, method="recursive")
    assert other.extension is not robot.extension
    a = simulate(robot, SlotineLi(other, MOTION["rr"]), duration=0.5)
    b = simulate(robot, SlotineLi(robot.copy(), MOTION["rr"]), duration=0.5)
    np.testing.assert_allclose(a.q, b.q, rtol=1e-10, atol=1e-12)


class _BufferReusingPlant(_LoggingPlant):
    """Like a hardware driver that returns its own buffers from read()."""

    def __init__(self, inner):
        super().__init__(inner)
        self.q, self.qd = np.empty(inner.n), np.empty(inner.n)

    def read(self):
        self.q[:], self.qd[:] = self.inner.read()
        return self.q, self.qd


def test_harness_records_the_state_read_not_a_reused_buffer(load):
    robot = load("rr")
    controller = PD(robot.copy(), Hold([0.5, 0.5]))
    reused = Harness(_BufferReusingPlant(SimulatedPlant(robot, 1e-3)), controller, 1000).run(0.05)
    np.testing.assert_array_equal(reused.q, simulate(robot, controller, duration=0.05).q)


def test_disturbance_function_is_sampled_once_per_tick_and_recorded_as_applied(load):
    robot = load("rr")
    rng = np.random.default_rng(9)
    calls = []

    def noise(t):
        calls.append(t)
        return rng.normal(0.0, 50.0, 2)

    controller = PD(robot.copy(), Hold([0.2, 0.1]))
    trajectory = simulate(robot, FunctionController(controller, controller.reference), duration=0.01,
                          disturbance=noise)
    assert len(calls) == 11  # ten writes and the last sample
    applied = trajectory.tau + np.array(_replay(9, 11))
    np.testing.assert_allclose(trajectory.qdd, robot.forward_dynamics(trajectory.q, trajectory.qd, applied),
                               rtol=1e-13, atol=1e-9)


def _replay(seed, count):
    rng = np.random.default_rng(seed)
    return [rng.normal(0.0, 50.0, 2) for _ in range(count)]


def test_subclassed_builtin_controller_runs_its_own_call(load):
    robot = load("rr")

    class FeedForward(PD):
        def __call__(self, t, q, qd, out=None):
            return super().__call__(t, q, qd) + 1000.0

    trajectory = simulate(robot, FeedForward(robot.copy(), Hold([0.0, 0.0])), duration=0.01)
    np.testing.assert_array_equal(trajectory.tau[0], [1000.0, 1000.0])
    controller = PD(robot, Hold([0.0, 0.0]))
    with pytest.raises(AttributeError):
        controller.kp = np.ones(2)  # gains are fixed once the law is built


def test_a_simulated_plant_serves_one_run_and_fast_rates_work(load):
    robot = load("rr")
    harness = Harness(SimulatedPlant(robot, 1e-4), PD(robot.copy(), Hold([0.1, 0.1])), 10_000)
    assert harness.run(0.01).q.shape == (101, 2)
    with pytest.raises(ValueError, match="already run"):
        harness.run(0.01)
    with pytest.raises(ValueError, match="rows"):  # refused before running, not after
        simulate(robot, duration=1.0, disturbance=np.zeros((1000, 2)))


def test_capsule_keeps_its_law_alive_and_low_level_checks(load):
    import gc

    robot = load("rr")
    dynamics = robot
    capsule = dynamics._control_law("pd", kp=np.ones(2), kd=np.ones(2), a=np.full(2, 0.3)).capsule()
    gc.collect()  # the ControlLaw object has no other reference now
    q, qd = np.zeros((11, 2)), np.zeros((11, 2))
    dynamics._simulate(capsule, q, qd, None, None, None, None, None, None, 1e-3)
    law = dynamics._control_law("pd", kp=np.ones(2), kd=np.ones(2), a=np.full(2, 0.3))
    q_live, qd_live = np.zeros((11, 2)), np.zeros((11, 2))
    dynamics._simulate(law.capsule(), q_live, qd_live, None, None, None, None, None, None, 1e-3)
    np.testing.assert_array_equal(q, q_live)
    with pytest.raises(TypeError):
        type(dynamics._control_law("none", a=np.zeros(2)))(None, "pd", np.ones(2), np.ones(2), None, "hold",
                                                          0.0, 0.0, np.zeros(2), None, None, None)
    with pytest.raises(ValueError, match="tau_limit"):
        dynamics._control_law("pd", kp=np.ones(2), kd=np.ones(2), tau_limit=-np.ones(2), a=np.zeros(2))
    with pytest.raises(ValueError, match="share memory"):
        dynamics._simulate(capsule, q, qd, None, None, None, None, None, q.reshape(-1)[11:], 1e-3)
    with pytest.raises(ValueError, match="finite"):
        dynamics._step(np.zeros(2), np.zeros(2), np.zeros(2), dt=np.inf)
    with pytest.raises(ValueError, match="finite"):
        Quintic([0.0], [1.0], duration=1.0, t0=np.nan)
    step = Step([0.0, 0.0], [1.0, 1.0], time=0.5)
    with pytest.raises(ValueError):
        step.goal[0] = 50.0  # references are immutable: a live controller shares the buffer


def test_compiled_loop_releases_the_gil(load):
    """Another Python thread keeps running while a long simulation is in C."""
    import threading

    robot = load("rr")
    controller = ComputedTorque(robot.copy(), MOTION["rr"])
    finished = threading.Event()

    def worker():
        simulate(robot, controller, duration=200.0)  # ~0.1-0.3 s of C
        finished.set()

    def spin(until):
        count = 0
        while not until():
            count += 1
        return count

    began = time.perf_counter()
    alone = spin(lambda: time.perf_counter() - began > 0.05) / 0.05  # iterations per second, alone
    thread = threading.Thread(target=worker)
    began = time.perf_counter()
    thread.start()
    count = spin(finished.is_set)
    elapsed = time.perf_counter() - began
    thread.join()
    # Holding the GIL, the C loop (nearly all of the elapsed time) would stop this thread: measured
    # with a routine that keeps the GIL, this ratio is about 0.1; releasing it, above 1.
    assert count > 0.35 * alone * elapsed, (count, alone, elapsed)


def test_ctrl_c_stops_a_long_compiled_run(load):
    """The C loop runs in chunks and checks for signals in between (like Ctrl-C)."""
    import _thread
    import threading

    robot = load("rr")
    controller = PD(robot.copy(), Hold([0.3, 0.3]))
    began = time.perf_counter()
    simulate(robot, controller, duration=400.0)
    full = time.perf_counter() - began
    timer = threading.Timer(0.02, _thread.interrupt_main)
    began = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        simulate(robot, controller, duration=400.0)
    timer.join()
    assert time.perf_counter() - began < 0.6 * full, full


def test_cli_plot(tmp_path, cache_dir, load):
    import matplotlib  # noqa: F401  (installed by the test extra: its absence is a failure, not a skip)

    load("rr")
    figure = tmp_path / "figures" / "run.png"
    result = _cli(ROBOTS / "rr.yaml", "--duration", 1, "--plot", figure, cache_dir=cache_dir)
    assert result.returncode == 0, result.stderr
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------- errors

def test_bad_inputs_raise(load):
    robot = load("rr")
    with pytest.raises(ValueError, match="q0"):
        simulate(robot, duration=1.0, q0=[0.0, np.nan])
    with pytest.raises(ValueError, match="q0"):
        simulate(robot, duration=1.0, q0=[0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="unknown integrator"):
        simulate(robot, duration=1.0, integrator="leapfrog")
    with pytest.raises(ValueError, match="disturbance"):
        simulate(robot, duration=1.0, disturbance=np.zeros((10, 2)))
    with pytest.raises(ValueError, match="wrench"):
        simulate(robot, duration=1.0, wrench=np.zeros(5))
    with pytest.raises(ValueError, match="joints"):
        ComputedTorque(robot, Hold([0.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="gains"):
        PD(robot, Hold([0.0, 0.0]), kp=-1.0, kd=1.0)
    with pytest.raises(ValueError, match="duration"):
        Quintic([0.0], [1.0], duration=0.0)
    with pytest.raises(TypeError, match="callable"):
        FunctionController(42)
    controller = ComputedTorque(robot, Hold([0.0, 0.0]))
    with pytest.raises(ValueError, match="q"):
        controller(0.0, np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="NaN"):
        controller(0.0, np.array([np.nan, 0.0]), np.zeros(2))
    with pytest.raises(ValueError, match="tau"):
        simulate(robot, lambda t, q, qd: np.zeros(3), duration=0.01)


def test_diverging_simulation_raises_with_the_time(load):
    robot = load("rr")
    wild = PD(robot, Hold([1.0, 1.0]), kp=1e9, kd=0.0)
    with pytest.raises(FloatingPointError, match=r"diverged.*|tick \d+"):
        simulate(robot, wild, duration=1.0, rate=100, integrator="euler")


def test_controller_model_with_other_joint_count_is_refused(load):
    robot, rrr = load("rr"), load("rrr")
    with pytest.raises(ValueError, match="joints"):
        simulate(robot, ComputedTorque(rrr, MOTION["rrr"]), duration=0.1)
    rows = np.zeros((3, 2))
    with pytest.raises(TypeError, match="capsule"):  # not a law of this robodyn's struct layout
        robot._simulate(object(), rows, rows.copy(), None, None, None, None, None, None, 1e-3)


# ---------------------------------------------------------------- command line

def _cli(*args, cache_dir):
    return subprocess.run([sys.executable, "-m", "robodyn", "simulate", *map(str, args), "--cache-dir",
                           str(cache_dir), "--quiet"], capture_output=True, text=True, timeout=600)


def test_cli_simulate_writes_the_summary(tmp_path, cache_dir, load):
    load("rr")  # built once, shared with the subprocess through the cache
    out = tmp_path / "run.json"
    result = _cli(ROBOTS / "rr.yaml", "--controller", "slotine-li", "--duration", 2, "--rate", 1000,
                  "--reference", "sine", "--json", out, cache_dir=cache_dir)
    assert result.returncode == 0, result.stderr
    summary = json.loads(out.read_text())
    assert summary["tracking_error_max"] < 1e-3 and summary["tracking_error_rms"] <= summary["tracking_error_max"]
    assert set(summary["loop"]) >= {"period_s", "compute_mean_s", "compute_p99_s", "jitter_p99_s",
                                    "missed_deadlines"}
    assert summary["loop"]["period_s"] == 1e-3

    free = tmp_path / "free.json"
    result = _cli(ROBOTS / "rr.yaml", "--controller", "none", "--duration", 5, "--json", free, cache_dir=cache_dir)
    assert result.returncode == 0, result.stderr
    summary = json.loads(free.read_text())
    assert summary["energy_drift_rel"] < 1e-8 and summary["tracking_error_max"] is None


def test_cli_wrong_model_and_bad_options(tmp_path, cache_dir, load):
    load("rr")
    exact, wrong = tmp_path / "exact.json", tmp_path / "wrong.json"
    assert _cli(ROBOTS / "rr.yaml", "--duration", 2, "--json", exact, cache_dir=cache_dir).returncode == 0
    assert _cli(ROBOTS / "rr.yaml", "--duration", 2, "--model-set", "m2=60", "--json", wrong,
                cache_dir=cache_dir).returncode == 0
    assert (json.loads(wrong.read_text())["tracking_error_max"]
            > 20 * json.loads(exact.read_text())["tracking_error_max"])
    bad = _cli(ROBOTS / "rr.yaml", "--set", "mass=3", cache_dir=cache_dir)
    assert bad.returncode == 1 and "unknown parameter 'mass'" in bad.stderr
    bad = _cli(ROBOTS / "rr.yaml", "--q0", "1,2,3", cache_dir=cache_dir)
    assert bad.returncode != 0 and "--q0" in bad.stderr
    assert _cli(ROBOTS / "rr.yaml", "--controller", "lqr", cache_dir=cache_dir).returncode == 2


@pytest.mark.parametrize("rate", [0, -1.0, float("inf"), float("nan"), "1000", True])
def test_simulate_refuses_a_bad_rate(load, rate):
    with pytest.raises(ValueError, match="rate"):
        simulate(load("rr"), duration=0.1, rate=rate)
