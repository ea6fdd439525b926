"""Inverse-dynamics derivatives (issue 13, first part): the compiled dtau/dq, dtau/dqd against central
differences of the compiled inverse dynamics, on both derivation routes, with rotors, Coulomb friction and
a closed chain; and the routine conventions (batches, out=). Pinocchio's computeRNEADerivatives is the
oracle on the Panda and the UR5 in test_pinocchio.py."""

from __future__ import annotations

import numpy as np
import pytest

ROBOTS = ["pendulum", "rr", "rrr", "puma560", "biglide"]


def _states(robot, count: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        q = rng.uniform(-0.2, 0.2, robot.n) if robot.is_closed_chain else rng.uniform(-np.pi, np.pi, robot.n)
        qd = rng.uniform(0.2, 2.0, robot.n) * rng.choice([-1.0, 1.0], robot.n)  # away from Coulomb's jump
        yield q, qd, rng.uniform(-3.0, 3.0, robot.n)


def _differences(robot, q, qd, qdd, which: int, step: float = 1e-6) -> np.ndarray:
    columns = []
    for k in range(robot.n):
        plus, minus = [q.copy(), qd.copy(), qdd], [q.copy(), qd.copy(), qdd]
        plus[which][k] += step
        minus[which][k] -= step
        columns.append((robot.inverse_dynamics(*plus) - robot.inverse_dynamics(*minus)) / (2 * step))
    return np.column_stack(columns)


@pytest.mark.parametrize("name", ROBOTS)
def test_derivatives_match_central_differences(load, name):
    robot = load(name)
    worst = 0.0
    for q, qd, qdd in _states(robot, 20, 0):
        d_q, d_qd = robot.inverse_dynamics_derivatives(q, qd, qdd)
        scale = max(float(np.max(np.abs(robot.M(q)))), 1.0)
        for which, derivative in ((0, d_q), (1, d_qd)):
            reference = _differences(robot, q, qd, qdd, which)
            worst = max(worst, float(np.max(np.abs(derivative - reference))) / max(scale, np.max(np.abs(reference))))
    assert worst < 1e-6, worst


def test_a_pendulums_derivatives_in_closed_form(load):
    """One link: tau = (I + m l²) qdd + m g l sin q + D qd, so dtau/dq = m g l cos q, dtau/dqd = D (C = 0)."""
    robot = load("pendulum")
    q, qd, qdd = np.array([0.4]), np.array([0.7]), np.array([-1.2])
    d_q, d_qd = robot.inverse_dynamics_derivatives(q, qd, qdd)
    g = robot.g
    assert d_q[0, 0] == pytest.approx((g(q + 1e-7)[0] - g(q - 1e-7)[0]) / 2e-7, rel=1e-7)
    assert d_qd[0, 0] == pytest.approx(robot.friction(np.array([1.0]))[0] - robot.friction(np.array([0.0]))[0],
                                       rel=1e-12, abs=1e-15)


def test_batches_and_out_buffers(load):
    robot = load("rrr")
    rng = np.random.default_rng(3)
    q, qd, qdd = (rng.uniform(-1, 1, (5, 3)) for _ in range(3))
    d_q, d_qd = robot.inverse_dynamics_derivatives(q, qd, qdd)
    assert d_q.shape == d_qd.shape == (5, 3, 3)
    out = (np.empty((3, 3)), np.empty((3, 3)))
    result = robot.inverse_dynamics_derivatives(q[2], qd[2], qdd[2], out=out)
    assert result[0] is out[0] and np.array_equal(out[0], d_q[2]) and np.array_equal(out[1], d_qd[2])
