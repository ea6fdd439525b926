"""The compiled floating-base step (rd_step in native/robodyn_sim.c) and whole-horizon loop against the Python
ManifoldStepper (robodyn.floating_step), which is the reference: the same RKMK4 and semi-implicit Euler, so the two
agree to rounding; Solo12's free flight through the C loop conserves momentum and energy; the paths that stay in
Python (contacts, Python controllers) and the errors (integrators, quaternions, divergence).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_floating_configuration

import robodyn
from robodyn import _native
from robodyn.floating_step import DIVERGED, ManifoldStepper
from robodyn.simulation import Harness, SimulatedPlant
from test_floating_base_pinocchio import _urdf

INTEGRATORS = ("rk4", "semi-implicit-euler")


@pytest.fixture(scope="module")
def solo(cache_dir):
    return robodyn.load(_urdf("solo_description/robots/solo12.urdf"), cache_dir=cache_dir, base="floating")


def _close(actual, expected, tolerance=1e-13):
    """Equal to ``tolerance`` relative to the larger of 1 and the values' size (rounding, not method error)."""
    scale = max(1.0, float(np.max(np.abs(expected))))
    np.testing.assert_allclose(actual, expected, rtol=0, atol=tolerance * scale)


def _state(robot, rng, spin: float = 5.0):
    """A random configuration (some with w < 0: the hemisphere must be kept) and a velocity whose base turns at
    about ``spin`` rad/s, so that steps of a few ms reach the closed forms of the exponential map (angle > 0.01)."""
    q = random_floating_configuration(robot, rng)
    v = rng.uniform(-2.0, 2.0, robot.n)
    v[3:6] = spin * rng.normal(size=3) / np.sqrt(3.0)
    return q, v


@pytest.mark.parametrize("integrator", INTEGRATORS)
@pytest.mark.parametrize("dt, substeps", [(1e-3, 1), (4e-3, 3), (2e-3, 7)])
def test_compiled_step_equals_the_manifold_stepper(solo, integrator, dt, substeps):
    """One compiled call of ``substeps`` steps under a torque and a tool wrench against as many Python steps: equal
    to 1e-13, the acceleration at the start (qdd0) too; the quaternion stays unit. Dropping the 1/12 term of
    dexp⁻¹ in C fails the rk4 cases."""
    rng = np.random.default_rng(int(dt * 1e4) + substeps)
    stepper = ManifoldStepper(solo, integrator)
    for trial in range(4):
        q, v = _state(solo, rng)
        if trial == 0:
            q[3:7] = -q[3:7] if q[6] > 0.0 else q[3:7]  # w < 0
        tau = rng.uniform(-2.0, 2.0, solo.n)
        h = rng.uniform(-5.0, 5.0, 6)
        q_py, v_py = q.copy(), v.copy()
        for _ in range(substeps):
            q_py, v_py = stepper.step(q_py, v_py, tau, h, dt)
        q_c, v_c, qdd0 = q.copy(), v.copy(), np.empty(solo.n)
        solo._step(q_c, v_c, tau, h, dt, substeps, integrator, qdd0)
        _close(q_c, q_py)
        _close(v_c, v_py)
        _close(qdd0, solo.forward_dynamics(q, v, tau, h))
        assert abs(np.linalg.norm(q_c[3:7]) - 1.0) < 1e-15
        assert np.dot(q_c[3:7], q[3:7]) > 0.0  # the input's hemisphere
        assert np.max(np.abs(q_c - q)) > 1e-4  # it moved: the comparison compared something


def test_exponential_map_branches_are_exercised(solo):
    """Both branches of the SE(3) map (series below 0.01 rad, closed form above) and a rotation far from small:
    one step of 20 ms with the base turning at 1e-3, 0.3 (series) and 20 rad/s (0.4 rad), joints at rest."""
    robot = solo.copy()
    robot.params["gravity_z"] = 0.0
    rng = np.random.default_rng(3)
    stepper = ManifoldStepper(robot, "rk4")
    for spin in (1e-3, 0.3, 20.0):
        q, v = _state(robot, rng, spin)
        v[6:] = 0.0
        q_py, v_py = stepper.step(q, v, np.zeros(robot.n), None, 0.02)
        q_c, v_c = q.copy(), v.copy()
        robot._step(q_c, v_c, np.zeros(robot.n), None, 0.02, 1, "rk4")
        _close(q_c, q_py)
        _close(v_c, v_py)
    # A rotation beyond π in one step (semi-implicit Euler, 0.2 s at 20 rad/s): q ⊗ exp(Ω/2) lands in the other
    # hemisphere and is negated back, in C as in Python (without that rule q differs by about 1.5).
    rng = np.random.default_rng(0)
    q = random_floating_configuration(robot, rng)
    v = np.zeros(robot.n)
    v[:3] = rng.uniform(-2.0, 2.0, 3)
    v[3:6] = 20.0 * rng.normal(size=3) / np.sqrt(3.0)
    q_py, v_py = ManifoldStepper(robot, "semi-implicit-euler").step(q, v, np.zeros(robot.n), None, 0.2)
    q_c, v_c = q.copy(), v.copy()
    robot._step(q_c, v_c, np.zeros(robot.n), None, 0.2, 1, "semi-implicit-euler")
    assert np.pi < np.linalg.norm(0.2 * v_c[3:6]) < 3.0 * np.pi  # cos(θ/2) < 0: the product changed hemisphere
    _close(q_c, q_py)
    _close(v_c, v_py)


@pytest.fixture(scope="module")
def free_flight(solo):
    robot = solo.copy()
    robot.params["gravity_z"] = 0.0
    assert np.all(robot.friction(np.ones(robot.n)) == 0.0)  # Solo12's URDF has no joint friction
    rng = np.random.default_rng(0)
    q0 = robot.neutral()
    q0[7:] = rng.uniform(-1, 1, robot.n - 6)
    v0 = rng.uniform(-2, 2, robot.n)
    return robot, q0, v0


def _spatial_momentum(robot, q, v):
    """World-frame momentum about the world origin, from the centroidal momentum."""
    h = np.einsum("kij,kj->ki", robot.centroidal_momentum_matrix(q), v)
    c = robot.center_of_mass(q)
    return np.hstack([h[:, :3], h[:, 3:] + np.cross(c, h[:, :3])])


def _python_loop_forbidden(monkeypatch):
    def refuse(*_args, **_kwargs):
        raise AssertionError("this run should be one call of the C loop, not the Python tick loop")

    monkeypatch.setattr(Harness, "_run_ticks", refuse)


def test_free_flight_through_the_c_loop_conserves_momentum_and_energy(free_flight, monkeypatch):
    """Solo12 without gravity, no torque, 0.5 s: the whole run is one C call; linear and angular momentum and the
    energy drift at the level of RKMK4's error (Python loop before: 250 Hz 1.2e-10 / 2.7e-10, 1 kHz 4.8e-13 /
    1.0e-12), fourth order between the rates, and the quaternion stays unit."""
    robot, q0, v0 = free_flight
    _python_loop_forbidden(monkeypatch)
    errors = {}
    for rate in (250.0, 1000.0):
        run = robodyn.simulate(robot, duration=0.5, rate=rate, q0=q0, qd0=v0)
        assert run.q.shape == (len(run.t), robot.nq) and run.qd.shape == run.qdd.shape == (len(run.t), robot.n)
        assert np.all(run.tau == 0.0)
        momentum = _spatial_momentum(robot, run.q, run.qd)
        energy = run.energy(robot)
        errors[rate] = (float(np.max(np.abs(momentum - momentum[0])) / np.max(np.abs(momentum[0]))),
                        float(np.max(np.abs(energy - energy[0])) / energy[0]))
        assert np.max(np.abs(np.linalg.norm(run.q[:, 3:7], axis=1) - 1.0)) < 1e-14
        print(f"\nSolo12 free flight, compiled loop, {rate:g} Hz, 0.5 s: momentum drift {errors[rate][0]:.2g}, "
              f"energy drift {errors[rate][1]:.2g} (relative); {run.loop.wall_time / (len(run.t) - 1) * 1e6:.1f} "
              "us per tick")
    assert max(errors[250.0]) < 1e-9 and max(errors[1000.0]) < 1e-11, errors
    assert errors[250.0][0] > 100 * errors[1000.0][0] and errors[250.0][1] > 100 * errors[1000.0][1], errors


def _python_reference(robot, q0, v0, ticks, period, substeps, integrator, tau, wrench):
    """q, v, q'' per sample of the Python ManifoldStepper under per-tick torques tau[k] and a constant wrench."""
    stepper = ManifoldStepper(robot, integrator)
    q, v = [q0], [v0]
    for k in range(ticks):
        state = q[-1], v[-1]
        for _ in range(substeps):
            state = stepper.step(*state, tau[k], wrench, period / substeps)
        q.append(state[0])
        v.append(state[1])
    q, v = np.array(q), np.array(v)
    return q, v, robot.forward_dynamics(q, v, tau[:ticks + 1], np.broadcast_to(wrench, (ticks + 1, 6)).copy())


@pytest.mark.parametrize("integrator, substeps", [("rk4", 2), ("semi-implicit-euler", 3)])
def test_both_loops_record_what_the_manifold_stepper_computes(free_flight, integrator, substeps):
    """A run under a disturbance and a tool wrench, through the C loop (no controller) and through the Python tick
    loop around the compiled step (a Python controller giving zero), against the Python stepper: q (nq per row),
    qd, the accelerations recorded at each sample, and tau."""
    robot, q0, v0 = free_flight
    rate, ticks = 250.0, 20
    disturbance = np.zeros(robot.n)
    disturbance[6:] = np.linspace(-0.5, 0.5, robot.n - 6)
    disturbance[:6] = 0.3  # a push on the base: the disturbance acts on passive coordinates too
    wrench = np.array([1.0, -2.0, 0.5, 0.1, 0.2, -0.3])
    expected = _python_reference(robot, q0, v0, ticks, 1.0 / rate, substeps, integrator,
                                 np.tile(disturbance, (ticks + 1, 1)), wrench)
    compiled = robodyn.simulate(robot, duration=ticks / rate, rate=rate, q0=q0, qd0=v0, integrator=integrator,
                                substeps=substeps, disturbance=disturbance, wrench=wrench)
    python = robodyn.simulate(robot, lambda t, q, qd: np.zeros(robot.n), duration=ticks / rate, rate=rate, q0=q0,
                              qd0=v0, integrator=integrator, substeps=substeps, disturbance=disturbance, wrench=wrench)
    for run in (compiled, python):
        for actual, wanted in zip((run.q, run.qd, run.qdd), expected):
            _close(actual, wanted, 1e-12)
        assert np.all(run.tau == 0.0)


def test_controllers_choose_their_loop(free_flight, monkeypatch):
    """Free motion (None, NoControl, ZeroTorque) runs in C and gives one trajectory; a Python controller runs its
    tick loop around the compiled step; the joint-space laws are refused on a floating base."""
    from robodyn.control import ZeroTorque

    robot, q0, v0 = free_flight
    plant = SimulatedPlant(robot, 1e-3, q0, v0)
    assert plant.compiled and plant.floating and plant.manifold is None
    with monkeypatch.context() as patch:
        _python_loop_forbidden(patch)
        runs = [robodyn.simulate(robot, controller, duration=0.02, q0=q0, qd0=v0)
                for controller in (None, robodyn.NoControl(robot), ZeroTorque(robot.n))]
    for run in runs[1:]:
        np.testing.assert_array_equal(run.q, runs[0].q)
        np.testing.assert_array_equal(run.qdd, runs[0].qdd)
    # a torque on the joints from Python: the tick loop, stepping in C (the plant drops the base's six)
    push = np.r_[np.full(6, 7.0), np.full(robot.n - 6, 0.2)]
    run = robodyn.simulate(robot, lambda t, q, qd: push, duration=0.02, q0=q0, qd0=v0)
    expected = _python_reference(robot, q0, v0, 20, 1e-3, 1, "rk4", np.tile(np.r_[np.zeros(6), push[6:]], (21, 1)),
                                 np.zeros(6))
    _close(run.q, expected[0], 1e-12)
    np.testing.assert_array_equal(run.tau[:, :6], 0.0)
    with pytest.raises(ValueError, match="floating base"):
        robot._control_law("pd", kp=np.ones(robot.n), kd=np.ones(robot.n), a=np.zeros(robot.n))
    # with contacts the Python stepper stays
    contact = SimulatedPlant(robot, 1e-3, q0, v0, contacts=["FL_FOOT"])
    assert contact.manifold is not None and not contact.compiled


def test_integrators_and_quaternions_are_checked(solo):
    q, v, tau = solo.neutral(), np.zeros(solo.n), np.zeros(solo.n)
    for integrator in ("euler", "RK45"):
        with pytest.raises(ValueError, match="rk4 or semi-implicit-euler"):
            SimulatedPlant(solo, 1e-3, integrator=integrator)
    with pytest.raises(ValueError, match="rk4 or semi-implicit-euler"):
        solo._step(q.copy(), v.copy(), tau, None, 1e-3, 1, "euler")
    bad = q.copy()
    bad[6] = 1.001
    with pytest.raises(ValueError, match="normalize"):
        solo._step(bad, v.copy(), tau, None, 1e-3, 1, "rk4")
    with pytest.raises(ValueError, match="normalize"):
        SimulatedPlant(solo, 1e-3, bad)
    with pytest.raises(ValueError, match=r"shape \(19,\)"):
        solo._step(np.zeros(solo.n), v.copy(), tau, None, 1e-3, 1, "rk4")


def test_divergence_stops_both_loops_with_advice(solo):
    """ManifoldStepper._check's compiled twin: a velocity beyond DIVERGED (or NaN) stops the step and the C loop
    with a FloatingPointError naming the velocity, the step and the cure."""
    assert _native.DIVERGED == DIVERGED
    with pytest.raises(FloatingPointError, match=r"diverged \(a velocity reached .*\) with steps of 0.02 s "
                                                 r"\(simulation stopped at tick \d+.*use more substeps"):
        robodyn.simulate(solo, duration=0.2, rate=50.0, qd0=np.full(solo.n, 50.0))
    plant = SimulatedPlant(solo, 0.02, qd0=np.full(solo.n, 50.0))
    with pytest.raises(FloatingPointError, match=r"solo: the integration diverged .* use more substeps"):
        for _ in range(10):
            plant.write(np.zeros(solo.n))
    assert np.max(np.abs(plant.qd)) > DIVERGED or not np.all(np.isfinite(plant.qd))
    # the same state in Python diverges at the same step
    stepper, q, v = ManifoldStepper(solo, "rk4"), solo.neutral(), np.full(solo.n, 50.0)
    steps = 0
    with pytest.raises(FloatingPointError, match="use more substeps"):
        while True:
            q, v = stepper.step(q, v, np.zeros(solo.n), None, 0.02)
            steps += 1
    assert plant.tick == steps
