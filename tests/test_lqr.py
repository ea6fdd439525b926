"""LQR and time-varying LQR (issue 13). Oracles: the nonlinear closed loop differenced around the equilibrium
(its eigenvalues are the design's), the Hamiltonian's stable eigenvalues (an independent route to the
continuous Riccati solution), the discrete Riccati equation's residual, convergence of the nonlinear
simulation from disturbed starts and from states sampled inside the estimated region of attraction, and the
time-varying recursion against the infinite-horizon gain on a constant nominal."""

from __future__ import annotations

import numpy as np
import pytest

import robodyn
from robodyn.lqr import LQR, TimeVaryingLQR, equilibrium_torque, region_of_attraction

UPRIGHT = {"cartpole": np.array([0.0, np.pi]), "acrobot": np.array([np.pi, 0.0]), "pendulum": np.array([np.pi])}
WEIGHTS = {"cartpole": dict(Q=[10.0, 10.0, 1.0, 1.0], R=1.0), "acrobot": dict(Q=None, R=1.0),
           "pendulum": dict(Q=[10.0, 1.0], R=0.1)}


def _jacobian(function, x, step=1e-6):
    return np.column_stack([(function(x + step * e) - function(x - step * e)) / (2 * step) for e in np.eye(x.size)])


def _sorted(values):
    return np.array(sorted(values, key=lambda z: (round(z.real, 6), round(z.imag, 6))))


@pytest.mark.parametrize("name", ["cartpole", "acrobot"])
def test_continuous_lqr_eigenvalues_are_those_of_the_nonlinear_closed_loop(load, name):
    robot = load(name)
    law = LQR(robot, UPRIGHT[name], **WEIGHTS[name])
    n = robot.n

    def closed_loop(x):  # the compiled law on the compiled forward dynamics
        q, qd = np.ascontiguousarray(x[:n]), np.ascontiguousarray(x[n:])
        return np.concatenate((qd, robot.forward_dynamics(q, qd, law(0.0, q, qd))))

    x0 = np.concatenate((UPRIGHT[name], np.zeros(n)))
    measured = np.linalg.eigvals(_jacobian(closed_loop, x0))
    np.testing.assert_allclose(_sorted(measured), _sorted(law.closed_loop_eigenvalues), rtol=1e-6)
    assert np.max(law.closed_loop_eigenvalues.real) < 0.0
    # The stable eigenvalues of the Hamiltonian [[A, -B R⁻¹ Bᵀ], [-Q, -Aᵀ]] are the optimal closed loop's.
    A, B = law.A, law.B
    hamiltonian = np.block([[A, -B @ np.linalg.solve(law.R, B.T)], [-law.Q, -A.T]])
    stable = [z for z in np.linalg.eigvals(hamiltonian) if z.real < 0.0]
    np.testing.assert_allclose(_sorted(stable), _sorted(law.closed_loop_eigenvalues), rtol=1e-8)
    assert law.K.shape == (1, 4) and np.all(law.gain[list(set(range(n)) - set(robot.actuated))] == 0.0)


@pytest.mark.parametrize("name", ["cartpole", "acrobot"])
def test_discrete_lqr_eigenvalues_are_those_of_one_closed_loop_harness_step(load, name):
    robot = load(name)
    dt = 1e-3
    law = LQR(robot, UPRIGHT[name], dt=dt, **WEIGHTS[name])
    n = robot.n

    def tick(x):  # what the harness does in one period: the law, then one RK4 step with the torque held
        q, qd = x[:n].copy(), x[n:].copy()
        robot._step(q, qd, law(0.0, q, qd), None, dt, 1, "rk4")
        return np.concatenate((q, qd))

    x0 = np.concatenate((UPRIGHT[name], np.zeros(n)))
    jacobian = _jacobian(tick, x0)
    np.testing.assert_allclose(jacobian, law.A - law.B @ law.K, rtol=0.0, atol=1e-8)
    np.testing.assert_allclose(_sorted(np.linalg.eigvals(jacobian)), _sorted(law.closed_loop_eigenvalues), rtol=1e-6)
    assert np.max(np.abs(law.closed_loop_eigenvalues)) < 1.0
    A, B, P = law.A, law.B, law.P  # the discrete algebraic Riccati equation holds
    residual = A.T @ P @ A - P - A.T @ P @ B @ np.linalg.solve(law.R + B.T @ P @ B, B.T @ P @ A) + law.Q
    assert np.max(np.abs(residual)) < 1e-8 * np.max(np.abs(P))


def test_compiled_law_is_the_documented_one(load):
    robot = load("acrobot")
    law = LQR(robot, UPRIGHT["acrobot"], tau_limit=[0.0, 5.0])
    rng = np.random.default_rng(3)
    for _ in range(20):
        q, qd = UPRIGHT["acrobot"] + rng.normal(0, 0.05, 2), rng.normal(0, 0.3, 2)
        tau = law(0.0, q, qd)
        x = np.concatenate((q - law.q0, qd))
        expected = np.clip(law.u0 - law.K @ x, -5.0, 5.0)
        np.testing.assert_allclose(tau, [0.0, expected[0]], rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(law.motor_torque(q, qd), expected, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("name", ["cartpole", "acrobot"])
@pytest.mark.parametrize("dt", [None, 1e-3])
def test_lqr_stabilises_the_upright_equilibrium_from_a_disturbed_start(load, name, dt):
    robot = load(name)
    law = LQR(robot, UPRIGHT[name], dt=dt, **WEIGHTS[name])

    class NoPythonCalls:  # the compiled law, refusing to be called from Python: the loop must run in C
        def __init__(self, inner):
            self.inner = inner

        def capsule(self):
            return self.inner.capsule()

        def __call__(self, *args):
            raise AssertionError("the LQR was evaluated in Python, not in the compiled loop")

    law._law = NoPythonCalls(law._law)
    run = robodyn.simulate(robot, law, duration=10.0, q0=UPRIGHT[name] + [0.05, -0.1], qd0=[0.1, 0.2])
    assert np.max(np.abs(run.q[-1] - UPRIGHT[name])) < 1e-4 and np.max(np.abs(run.qd[-1])) < 1e-4


def test_sampled_states_inside_the_region_of_attraction_converge(load):
    robot = load("cartpole")
    law = LQR(robot, UPRIGHT["cartpole"], tau_limit=[20.0, 0.0], **WEIGHTS["cartpole"])
    region = region_of_attraction(robot, law, directions=500, levels=40)
    assert region.rho > 0.0 and not region.capped
    assert region_of_attraction(robot, law, directions=50, levels=5, max_level=1e-6).capped
    starts = region.sample(12, np.random.default_rng(0))
    assert np.all(region.contains(starts[:, :2], starts[:, 2:]))
    for x in starts:
        run = robodyn.simulate(robot, law, duration=12.0, q0=x[:2], qd0=x[2:])
        assert np.max(np.abs(run.q[-1] - UPRIGHT["cartpole"])) < 1e-3, x


def test_an_lqr_needs_an_equilibrium(load):
    robot = load("acrobot")
    with pytest.raises(ValueError, match="not an equilibrium .* shoulder"):
        LQR(robot, [0.5, 0.0])
    with pytest.raises(ValueError, match="not an equilibrium"):
        LQR(robot, UPRIGHT["acrobot"], u0=[1.0])
    with pytest.raises(ValueError, match="R: must be positive definite"):
        LQR(robot, UPRIGHT["acrobot"], R=0.0)
    with pytest.raises(ValueError, match="Q: expected"):
        LQR(robot, UPRIGHT["acrobot"], Q=np.eye(3))
    np.testing.assert_allclose(equilibrium_torque(robot, UPRIGHT["acrobot"]), [0.0], atol=1e-12)
    given = LQR(robot, UPRIGHT["acrobot"], u0=[0.0, 0.0])  # per joint is accepted and kept per motor
    assert given.u0.shape == (1,) and given.motor_torque(UPRIGHT["acrobot"], np.zeros(2)).shape == (1,)


def test_time_varying_lqr_on_a_constant_nominal_is_the_infinite_horizon_lqr(load):
    robot = load("pendulum")
    dt, steps = 1e-3, 4000
    lqr = LQR(robot, UPRIGHT["pendulum"], dt=dt, **WEIGHTS["pendulum"])
    t = np.arange(steps + 1) * dt
    q = np.tile(UPRIGHT["pendulum"], (steps + 1, 1))
    tau = np.tile(robot.g(UPRIGHT["pendulum"]), (steps + 1, 1))
    tracker = TimeVaryingLQR(robot, (t, q, np.zeros_like(q), tau), **WEIGHTS["pendulum"], Qf=lqr.P)
    np.testing.assert_allclose(tracker.K[0], lqr.K, rtol=1e-9)
    np.testing.assert_allclose(tracker.P[0], lqr.P, rtol=1e-9)


def test_time_varying_lqr_tracks_a_simulated_nominal(load):
    """The nominal is a run of the exact model (computed torque along a quintic): from the nominal's start the
    tracker reproduces it; from a disturbed start on a plant with heavier links it converges to it."""
    robot = load("rr")
    reference = robodyn.Quintic(np.zeros(2), np.array([1.0, -0.8]), duration=1.5)
    nominal = robodyn.simulate(robot, robodyn.ComputedTorque(robot, reference), duration=2.0)
    tracker = TimeVaryingLQR(robot, nominal, Q=[1e4, 1e4, 10.0, 10.0], R=1e-3)
    replay = robodyn.simulate(robot, tracker, duration=2.0)
    np.testing.assert_allclose(replay.q, nominal.q, atol=1e-10)

    plant = robot.copy()
    for name in plant.params:
        if name.startswith("m"):
            plant.params[name] *= 1.2
    feedforward = robodyn.simulate(plant, lambda t, q, qd: nominal.tau[min(int(round(t * 1e3)), 2000)],
                                   duration=2.0, q0=[0.1, 0.1])
    tracked = robodyn.simulate(plant, tracker, duration=2.0, q0=[0.1, 0.1])
    error_ff = np.max(np.abs(feedforward.q[-1] - nominal.q[-1]))
    error_tv = np.max(np.abs(tracked.q[-1] - nominal.q[-1]))
    assert error_tv < 0.05 and error_tv < 0.05 * error_ff, (error_tv, error_ff)


@pytest.mark.parametrize("arguments, error", [
    (dict(q0=[np.nan, 0.0]), "q0"), (dict(q0=[0.0]), "q0"), (dict(Q=[1.0, np.inf, 1.0, 1.0]), "Q"),
    (dict(Q=[[1.0, 2.0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]), "symmetric"), (dict(Q=-1.0), "Q"),
    (dict(R=[[1.0, 0.0]]), "R"), (dict(dt=-1e-3), "dt"), (dict(dt=float("nan")), "dt"),
    (dict(tau_limit=[-1.0, 1.0]), "tau_limit"), (dict(tau_limit=[1.0, 2.0, 3.0]), "tau_limit"),
    (dict(u0=[1.0, 2.0, 3.0]), "tau"),
])
def test_bad_lqr_arguments_raise_value_errors(load, arguments, error):
    robot = load("acrobot")
    arguments = {"q0": UPRIGHT["acrobot"], **arguments}
    with pytest.raises(ValueError, match=error):
        LQR(robot, arguments.pop("q0"), **arguments)


def test_bad_nominal_trajectories_raise_value_errors(load):
    robot = load("pendulum")
    t = np.arange(11) * 1e-3
    q, qd, tau = np.zeros((11, 1)), np.zeros((11, 1)), np.zeros((11, 1))
    for nominal, error in (((t[:1], q[:1], qd[:1], tau[:1]), "N >= 1"), ((t, q[:5], qd, tau), "expected t"),
                           ((t**2, q, qd, tau), "evenly spaced"), ((t, q * np.nan, qd, tau), "finite"),
                           ((t[::-1], q, qd, tau), "evenly spaced")):
        with pytest.raises(ValueError, match=error):
            TimeVaryingLQR(robot, nominal)


def test_the_compiled_state_feedback_law_checks_its_arrays(load):
    robot = load("rr")
    with pytest.raises(ValueError, match="needs gain"):
        robot._control_law("state-feedback", a=np.zeros(2))
    with pytest.raises(ValueError, match="gain: expected shape"):
        robot._control_law("state-feedback", gain=np.zeros((2, 2)), tau_ref=np.zeros(2), a=np.zeros(2))
    with pytest.raises(ValueError, match="NaN or infinity"):
        robot._control_law("state-feedback", gain=np.full((2, 4), np.nan), tau_ref=np.zeros(2), a=np.zeros(2))
    with pytest.raises(ValueError, match="for the controller 'state-feedback'"):
        robot._control_law("pd", kp=np.ones(2), kd=np.ones(2), gain=np.zeros((2, 4)), a=np.zeros(2))
