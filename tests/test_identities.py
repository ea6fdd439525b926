"""Identities that must hold for every example robot, checked on the compiled modules.

M symmetric positive definite; Ṁ − 2C skew (Ṁ by finite differences);
inverse ∘ forward dynamics = identity; batches equal loops; energy balance
in simulation, with and without friction.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import EXAMPLES, random_state, rk4


@pytest.mark.parametrize("name", EXAMPLES)
def test_mass_matrix_symmetric_positive_definite(name, load):
    robot = load(name)
    rng = np.random.default_rng(10)
    for _ in range(50):
        q, _ = random_state(robot, rng)
        M = robot.M(q)
        np.testing.assert_array_equal(M, M.T)
        assert np.linalg.eigvalsh(M)[0] > 0


@pytest.mark.parametrize("name", EXAMPLES)
def test_mdot_minus_2c_is_skew(name, load):
    robot = load(name)
    rng = np.random.default_rng(11)
    eps = 1e-6
    for _ in range(30):
        q, qd = random_state(robot, rng)
        M_dot = (robot.M(q + eps * qd) - robot.M(q - eps * qd)) / (2 * eps)
        N = M_dot - 2 * robot.C(q, qd)
        scale = max(np.abs(M_dot).max(), np.abs(robot.C(q, qd)).max(), 1e-12)
        assert np.abs(N + N.T).max() <= 1e-7 * scale
        # C q̇ is the velocity part of the bias: nonlinear_effects − g − friction.
        np.testing.assert_allclose(robot.C(q, qd) @ qd,
                                   robot.nonlinear_effects(q, qd) - robot.g(q) - robot.friction(qd),
                                   rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", EXAMPLES)
def test_inverse_after_forward_is_identity(name, load):
    robot = load(name)
    rng = np.random.default_rng(12)
    for _ in range(50):
        q, qd = random_state(robot, rng)
        tau = rng.normal(0, 20, robot.n)
        h = rng.normal(0, 5, 6)
        qdd = robot.forward_dynamics(q, qd, tau)
        np.testing.assert_allclose(robot.inverse_dynamics(q, qd, qdd), tau, rtol=1e-9, atol=1e-9)
        qdd_h = robot.forward_dynamics(q, qd, tau, h)
        np.testing.assert_allclose(robot.inverse_dynamics(q, qd, qdd_h, h), tau, rtol=1e-9, atol=1e-9)
        # The wrench enters as J^T h.
        np.testing.assert_allclose(robot.inverse_dynamics(q, qd, qdd) - robot.inverse_dynamics(q, qd, qdd, h),
                                   robot.jacobian(q).T @ h, rtol=1e-9, atol=1e-9)
        # Forward dynamics is M^{-1}(τ − bias).
        expected = np.linalg.solve(robot.M(q), tau - robot.nonlinear_effects(q, qd))
        np.testing.assert_allclose(qdd, expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", EXAMPLES)
def test_jacobian_matches_finite_differences_of_fk(name, load):
    robot = load(name)
    rng = np.random.default_rng(13)
    eps = 1e-6
    for _ in range(10):
        q, qd = random_state(robot, rng)
        T_plus, T_minus = robot.fk(q + eps * qd), robot.fk(q - eps * qd)
        velocity = (T_plus[:3, 3] - T_minus[:3, 3]) / (2 * eps)
        R_dot = (T_plus[:3, :3] - T_minus[:3, :3]) / (2 * eps)
        omega_hat = R_dot @ robot.fk(q)[:3, :3].T
        omega = np.array([omega_hat[2, 1], omega_hat[0, 2], omega_hat[1, 0]])
        np.testing.assert_allclose(robot.jacobian(q) @ qd, np.concatenate([velocity, omega]), atol=1e-7)


@pytest.mark.parametrize("name", EXAMPLES)
def test_gravity_is_gradient_of_potential(name, load):
    robot = load(name)
    rng = np.random.default_rng(14)
    eps = 1e-6
    for _ in range(10):
        q, _ = random_state(robot, rng)
        gradient = [(robot.potential_energy(q + eps * e) - robot.potential_energy(q - eps * e)) / (2 * eps)
                    for e in np.eye(robot.n)]
        np.testing.assert_allclose(robot.g(q), gradient, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", EXAMPLES)
def test_batch_equals_loop(name, load):
    robot = load(name)
    rng = np.random.default_rng(15)
    states = [random_state(robot, rng) for _ in range(7)]
    Q = np.array([s[0] for s in states])
    QD = np.array([s[1] for s in states])
    TAU = rng.normal(size=Q.shape)
    H = rng.normal(size=(len(Q), 6))
    np.testing.assert_array_equal(robot.M(Q), np.array([robot.M(q) for q in Q]))
    np.testing.assert_array_equal(robot.C(Q, QD), np.array([robot.C(q, qd) for q, qd in zip(Q, QD)]))
    np.testing.assert_array_equal(robot.forward_dynamics(Q, QD, TAU, H),
                                  np.array([robot.forward_dynamics(*args) for args in zip(Q, QD, TAU, H)]))
    np.testing.assert_array_equal(robot.kinetic_energy(Q, QD),
                                  np.array([robot.kinetic_energy(q, qd) for q, qd in zip(Q, QD)]))
    np.testing.assert_array_equal(robot.fk(Q), np.array([robot.fk(q) for q in Q]))
    # The other output layouts and the optional wrench, too: (n,), (), (6, n).
    np.testing.assert_array_equal(robot.g(Q), np.array([robot.g(q) for q in Q]))
    np.testing.assert_array_equal(robot.potential_energy(Q), np.array([robot.potential_energy(q) for q in Q]))
    np.testing.assert_array_equal(robot.jacobian(Q), np.array([robot.jacobian(q) for q in Q]))
    np.testing.assert_array_equal(robot.inverse_dynamics(Q, QD, TAU, H),
                                  np.array([robot.inverse_dynamics(*args) for args in zip(Q, QD, TAU, H)]))
    np.testing.assert_array_equal(robot.nonlinear_effects(Q, QD),
                                  np.array([robot.nonlinear_effects(q, qd) for q, qd in zip(Q, QD)]))


def _rk4(robot, q, qd, dt, steps, tau):
    """Fixed-step RK4 of the state (q, qd) plus the friction work ∫ qdᵀ friction(qd) dt."""

    def rhs(state):
        q_, qd_ = state[:robot.n], state[robot.n:2 * robot.n]
        qdd = robot.forward_dynamics(q_, qd_, tau)
        return np.concatenate([qd_, qdd, [qd_ @ robot.friction(qd_)]])

    energies = [robot.total_energy(q, qd)]
    state = rk4(rhs, np.concatenate([q, qd, [0.0]]), dt, steps,
                lambda s: energies.append(robot.total_energy(s[:robot.n], s[robot.n:2 * robot.n])))
    return np.array(energies), state[-1]


@pytest.mark.parametrize("name", ["pendulum", "rr", "rrr", "pr"])
def test_energy_is_conserved_without_friction_or_torque(name, load):
    robot = load(name)
    for key in robot.params:
        if key in ("d", "Fv", "Fs"):
            robot.params[key] = 0.0
    q, qd = random_state(robot, np.random.default_rng(16))
    energies, friction_work = _rk4(robot, q, qd, 1e-3, 10_000, np.zeros(robot.n))
    assert friction_work == 0.0
    scale = max(abs(energies[0]), np.ptp(energies), 1.0)
    assert np.abs(energies - energies[0]).max() / scale <= 1e-8


@pytest.mark.parametrize("name", ["pendulum", "rrr"])
def test_friction_dissipates_exactly_its_work(name, load):
    """E(0) − E(T) = ∫ qdᵀ (Fv qd + Fs sgn qd) dt with τ = 0."""
    robot = load(name)
    q, qd = random_state(robot, np.random.default_rng(17))
    energies, friction_work = _rk4(robot, q, qd, 5e-4, 6_000, np.zeros(robot.n))
    assert friction_work > 0
    assert np.all(np.diff(energies) <= 1e-9 * abs(energies[0]) + 1e-12)  # never gains energy
    lost = energies[0] - energies[-1]
    assert lost == pytest.approx(friction_work, rel=1e-4)
