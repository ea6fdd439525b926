"""Forward-dynamics derivatives and linearisation (issue 13): against central differences of the compiled
forward dynamics and of one compiled RK4 step, and the pendulum's closed form at its equilibria.
Pinocchio's computeABADerivatives is the oracle on the Panda and the UR5 in test_pinocchio.py."""

from __future__ import annotations

import numpy as np
import pytest


def _state(robot, seed: int):
    rng = np.random.default_rng(seed)
    q = rng.uniform(-0.2, 0.2, robot.n) if robot.is_closed_chain else rng.uniform(-np.pi, np.pi, robot.n)
    qd = rng.uniform(0.2, 1.5, robot.n) * rng.choice([-1.0, 1.0], robot.n)
    return q, qd, robot.inverse_dynamics(q, qd, rng.uniform(-2, 2, robot.n))


def _column_differences(function, x, step):
    return np.column_stack([(function(x + step * e) - function(x - step * e)) / (2 * step) for e in np.eye(x.size)])


@pytest.mark.parametrize("name", ["pendulum", "rr", "rrr", "puma560", "biglide"])
def test_forward_dynamics_derivatives_match_differences(load, name):
    robot = load(name)
    for seed in range(5):
        q, qd, tau = _state(robot, seed)
        d_q, d_qd, m_inv = robot.forward_dynamics_derivatives(q, qd, tau)
        scale = max(1.0, float(np.max(np.abs(d_q))), float(np.max(np.abs(d_qd))))
        assert np.max(np.abs(d_q - _column_differences(lambda v: robot.forward_dynamics(v, qd, tau), q, 1e-6))) \
            < 1e-6 * scale
        assert np.max(np.abs(d_qd - _column_differences(lambda v: robot.forward_dynamics(q, v, tau), qd, 1e-6))) \
            < 1e-6 * scale
        np.testing.assert_allclose(m_inv @ robot.M(q), np.eye(robot.n), atol=1e-12)


@pytest.mark.parametrize("name", ["rr", "rrr", "biglide"])
def test_discrete_jacobians_are_those_of_one_rk4_step(load, name):
    """With dt, (A, B) are the Jacobians of the harness's RK4 step (its compiled step, differenced)."""
    robot = load(name)
    n, dt = robot.n, 1e-3
    q, qd, tau = _state(robot, 7)

    def step(x, u):
        position, velocity = x[:n].copy(), x[n:].copy()
        robot._step(position, velocity, u, None, dt, 1, "rk4")
        return np.concatenate((position, velocity))

    A, B = robot.linearize(q, qd, tau, dt=dt)
    x = np.concatenate((q, qd))
    np.testing.assert_allclose(A, _column_differences(lambda v: step(v, tau), x, 1e-6), atol=1e-8)
    np.testing.assert_allclose(B, _column_differences(lambda u: step(x, u), tau, 1e-3), rtol=1e-6,
                               atol=1e-8 * float(np.max(np.abs(B))))  # differences: ~1e-13 of round-off


def test_pendulum_linearisation_in_closed_form(load):
    """I θ'' + d θ' + m g L sin θ = τ: about θ = 0 (hanging) A = [[0, 1], [-m g L / I, -d / I]], B = [[0], [1 / I]];
    about θ = π (upright) the gravity term changes sign."""
    robot = load("pendulum")
    m, L, inertia, d, g0 = (robot.params[k] for k in ("m", "L", "I", "d", "g0"))
    for theta, sign in ((0.0, -1.0), (np.pi, 1.0)):
        A, B = robot.linearize(np.array([theta]), np.array([0.0]), robot.g(np.array([theta])))
        np.testing.assert_allclose(A, [[0.0, 1.0], [sign * m * g0 * L / inertia, -d / inertia]], rtol=1e-12,
                                   atol=1e-12)
        np.testing.assert_allclose(B, [[0.0], [1.0 / inertia]], rtol=1e-12)


def test_bad_dt_is_refused(load):
    robot = load("rr")
    for dt in (0.0, -1e-3, float("nan"), float("inf"), True, "1e-3"):
        with pytest.raises(ValueError, match="dt"):
            robot.linearize(np.zeros(2), np.zeros(2), np.zeros(2), dt=dt)


def test_cartpole_linearisation_at_the_upright_equilibrium(load):
    """Cart x, pole angle θ from hanging down, point mass mp at l: M = [[mc + mp, mp l cos θ], [mp l cos θ, mp l²]],
    V = -mp g l cos θ. At θ = π, at rest: A = [[0, I], [-M⁻¹ K, 0]] with K = diag(0, -mp g l), B = [[0], [M⁻¹ S]]
    with S = [1, 0]ᵀ (only the cart is pushed)."""
    robot = load("cartpole")
    mc, mp, l, g0 = (robot.params[k] for k in ("mc", "mp", "l", "g0"))
    M = np.array([[mc + mp, -mp * l], [-mp * l, mp * l * l]])
    K = np.diag([0.0, -mp * g0 * l])
    q = np.array([0.3, np.pi])
    A, B = robot.linearize(q, np.zeros(2), robot.g(q))
    expected_A = np.block([[np.zeros((2, 2)), np.eye(2)], [-np.linalg.solve(M, K), np.zeros((2, 2))]])
    np.testing.assert_allclose(A, expected_A, atol=1e-12)
    # one input: the cart's force (the pole is passive)
    np.testing.assert_allclose(B, np.vstack([np.zeros((2, 1)), np.linalg.inv(M)[:, :1]]), atol=1e-12)
    assert np.max(np.linalg.eigvals(A).real) > 1.0  # the upright pole is unstable


def test_acrobot_linearisation_at_the_upright_equilibrium(load):
    """Spong's acrobot (angles from hanging down, q2 relative): M and the Hessian of the potential in closed form
    at (π, 0); A = [[0, I], [-M⁻¹ G, 0]], B = [[0], [M⁻¹ S]] with S = [0, 1]ᵀ (the shoulder is passive)."""
    robot = load("acrobot")
    m1, m2, l1, lc1, lc2, I1, I2, g0 = (robot.params[k] for k in ("m1", "m2", "l1", "lc1", "lc2", "I1", "I2", "g0"))
    c2 = 1.0  # cos q2 at q2 = 0
    M = np.array([[I1 + I2 + m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * c2), I2 + m2 * (lc2**2 + l1 * lc2 * c2)],
                  [I2 + m2 * (lc2**2 + l1 * lc2 * c2), I2 + m2 * lc2**2]])
    G = -g0 * np.array([[m1 * lc1 + m2 * l1 + m2 * lc2, m2 * lc2], [m2 * lc2, m2 * lc2]])
    q = np.array([np.pi, 0.0])
    A, B = robot.linearize(q, np.zeros(2), robot.g(q))
    np.testing.assert_allclose(A[2:, :2], -np.linalg.solve(M, G), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(A[2:, 2:], 0.0, atol=1e-12)
    np.testing.assert_allclose(B[2:], np.linalg.inv(M)[:, 1:], rtol=1e-12)  # one input: the elbow's motor



@pytest.mark.parametrize("name", ["rr", "rrr", "cartpole"])
def test_forward_dynamics_parameter_derivatives_match_differences(load, name):
    """∂q̈/∂π against central differences in π of the forward dynamics rebuilt from the regressor alone:
    τ = Y(q, q̇, q̈) π' is linear in q̈, so M(π') has columns Y(q, 0, e_k) π' − Y(q, 0, 0) π', and
    q̈(π') = M(π')⁻¹ (τ − Y(q, q̇, 0) π')."""
    from robodyn.linearization import forward_dynamics_parameter_derivatives

    robot = load(name)
    q, qd, tau = _state(robot, 11)
    n, pi = robot.n, robot.dynamic_parameters()
    zero = np.zeros(n)
    gravity_columns = robot.regressor(q, zero, zero)
    inertia_columns = [robot.regressor(q, zero, e) - gravity_columns for e in np.eye(n)]
    bias_columns = robot.regressor(q, qd, zero)

    def qdd_of(parameters):
        mass = np.column_stack([columns @ parameters for columns in inertia_columns])
        return np.linalg.solve(mass, tau - bias_columns @ parameters)

    np.testing.assert_allclose(qdd_of(pi), robot.forward_dynamics(q, qd, tau), rtol=1e-10, atol=1e-10)
    derivative = forward_dynamics_parameter_derivatives(robot, q, qd, tau)
    assert derivative.shape == (n, pi.size)
    # per parameter: values and sensitivities differ by orders of magnitude (a rotor inertia counts with its
    # gear ratio squared), so each step moves q̈ by about 1e-4 of its own column's scale
    steps = 1e-4 * np.maximum(np.abs(pi), 1.0) / np.maximum(1.0, np.max(np.abs(derivative), axis=0))
    expected = np.column_stack([(qdd_of(pi + h * e) - qdd_of(pi - h * e)) / (2 * h) for h, e in zip(steps, np.eye(pi.size))])
    np.testing.assert_allclose(derivative, expected, rtol=1e-6, atol=1e-6 * float(np.max(np.abs(expected))))


def test_parameter_derivatives_need_a_regressor(load):
    from robodyn.linearization import forward_dynamics_parameter_derivatives

    robot = load("biglide")
    with pytest.raises(AttributeError, match="no regressor"):
        forward_dynamics_parameter_derivatives(robot, np.zeros(2), np.zeros(2), np.zeros(2))
