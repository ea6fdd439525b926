"""Derivatives and linearisation of floating-base robots (issue 16, point 5).

The derivative routines of a floating base, built on request (``derivatives="yes"``), take the configuration
derivative along the tangent space (q ⊕ δ as ``integrate`` moves it): checked against Pinocchio's
``computeRNEADerivatives`` and ``computeABADerivatives`` on Solo12's free-flyer model, joints mapped by name,
and against central differences along ``integrate`` on the YAML space arm. ``linearize`` is checked against
finite differences of the flow in the chart about q (continuous) and of one step of the harness's RKMK4
integrator (discrete)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio
import pytest

import robodyn
from robodyn.floating_step import ManifoldStepper
from robodyn.linearization import linearize

ROOT = Path(__file__).resolve().parents[1]


def _state(robot, seed):
    rng = np.random.default_rng(seed)
    q = robot.neutral()
    q[:3] = rng.uniform(-1.0, 1.0, 3)
    quaternion = rng.normal(size=4)
    q[3:7] = quaternion / np.linalg.norm(quaternion)
    q[7:] = rng.uniform(-1.0, 1.0, robot.nq - 7)
    tau = rng.uniform(-1.0, 1.0, robot.n)
    tau[:6] = 0.0
    return q, rng.uniform(-1.0, 1.0, robot.n), rng.uniform(-3.0, 3.0, robot.n), tau


@pytest.fixture(scope="module")
def space_arm(cache_dir):
    robot = robodyn.load(ROOT / "robots" / "space_arm.yaml", cache_dir=cache_dir, derivatives="yes")
    robot.params["g0"] = 9.81  # gravity, so that the orientation matters
    return robot


def _central(function, x, step):
    return np.column_stack([(function(x + e) - function(x - e)) / (2 * step) for e in np.eye(x.size) * step])


def test_default_floating_build_has_no_derivatives_and_linearize_says_how(cache_dir):
    robot = robodyn.load(ROOT / "robots" / "space_arm.yaml", cache_dir=cache_dir)
    assert "inverse_dynamics_derivatives" not in robot.routine_names
    q, v, _, tau = _state(robot, 0)
    with pytest.raises(ValueError, match="derivatives='yes'"):
        linearize(robot, q, v, tau)


def test_derivatives_against_differences_along_integrate(space_arm):
    robot = space_arm
    for seed in range(3):
        q, v, a, tau = _state(robot, seed)
        d_q, d_v = robot.inverse_dynamics_derivatives(q, v, a)
        along = _central(lambda d: robot.inverse_dynamics(robot.integrate(q, d), v, a), np.zeros(robot.n), 1e-6)
        rates = _central(lambda w: robot.inverse_dynamics(q, w, a), v, 1e-6)
        scale = max(np.max(np.abs(along)), np.max(np.abs(rates)))
        assert np.max(np.abs(d_q - along)) < 1e-7 * scale
        assert np.max(np.abs(d_v - rates)) < 1e-7 * scale
        f_q, f_v, m_inv = robot.forward_dynamics_derivatives(q, v, tau)
        along = _central(lambda d: robot.forward_dynamics(robot.integrate(q, d), v, tau), np.zeros(robot.n), 1e-6)
        np.testing.assert_allclose(f_q, along, rtol=0, atol=1e-7 * np.max(np.abs(along)))
        np.testing.assert_allclose(m_inv, np.linalg.inv(robot.M(q)), rtol=0, atol=1e-12 * np.max(np.abs(m_inv)))
        # ID∘FD: M ∂q̈/∂x = −∂τ/∂x at q̈ = FD(q, v, τ)
        qdd = robot.forward_dynamics(q, v, tau)
        d_q, d_v = robot.inverse_dynamics_derivatives(q, v, qdd)
        M = robot.M(q)
        np.testing.assert_allclose(M @ f_q, -d_q, rtol=0, atol=1e-10 * np.max(np.abs(d_q)))
        np.testing.assert_allclose(M @ f_v, -d_v, rtol=0, atol=1e-10 * np.max(np.abs(d_v)))


def test_continuous_linearisation_in_the_chart(space_arm):
    robot = space_arm
    n = robot.n
    q, v, _, tau = _state(robot, 5)
    A, B = linearize(robot, q, v, tau)

    def flow(x):  # (δ̇, v̇) at q ⊕ δ, δ̇ = d/dt difference(q, (q ⊕ δ) ⊕ t v) at t = 0
        point, velocity = robot.integrate(q, x[:n]), x[n:]
        rate = (robot.difference(q, robot.integrate(point, velocity, 1e-4))
                - robot.difference(q, robot.integrate(point, velocity, -1e-4))) / 2e-4
        return np.concatenate([rate, robot.forward_dynamics(point, velocity, tau)])

    expected = _central(flow, np.concatenate([np.zeros(n), v]), 1e-4)
    assert np.max(np.abs(A - expected)) < 1e-6 * np.max(np.abs(expected))
    assert np.max(np.abs(A[:6, :6])) > 0.1  # the −½ ad_v block is there (v is not small)
    actuated = list(robot.actuated)
    inputs = _central(lambda u: np.concatenate([np.zeros(n), robot.forward_dynamics(q, v, _full(robot, u))]),
                      tau[actuated], 1e-6)
    np.testing.assert_allclose(B, inputs, rtol=0, atol=1e-8 * np.max(np.abs(inputs)))


def _full(robot, u):
    tau = np.zeros(robot.n)
    tau[list(robot.actuated)] = u
    return tau


def test_discrete_linearisation_is_the_jacobian_of_one_rkmk4_step(space_arm):
    robot = space_arm
    n, dt = robot.n, 0.01
    q, v, _, tau = _state(robot, 6)
    Ad, Bd = linearize(robot, q, v, tau, dt=dt)
    stepper = ManifoldStepper(robot, "rk4")
    q_next, _ = stepper.step(q, v, tau, None, dt)

    def step(x, torque=tau):
        reached, velocity = stepper.step(robot.integrate(q, x[:n]), x[n:], torque, None, dt)
        return np.concatenate([robot.difference(q_next, reached), velocity])

    x0 = np.concatenate([np.zeros(n), v])
    expected = _central(step, x0, 1e-5)
    assert np.max(np.abs(Ad - expected)) < 1e-8 * np.max(np.abs(expected))
    actuated = list(robot.actuated)
    inputs = _central(lambda u: step(x0, _full(robot, u)), tau[actuated], 1e-5)
    assert np.max(np.abs(Bd - inputs)) < 1e-8 * np.max(np.abs(inputs))


def test_solo12_derivatives_match_pinocchio(cache_dir):
    path = robodyn.example_robot_data("solo_description/robots/solo12.urdf")
    robot = robodyn.load(path, cache_dir=cache_dir, base="floating", derivatives="yes")
    model = pinocchio.buildModelFromUrdf(str(path), pinocchio.JointModelFreeFlyer())
    data = model.createData()
    order = list(range(6)) + [model.joints[model.getJointId(name)].idx_v for name in robot.joint_names]
    mapped = np.ix_(order, order)

    def pin(x):
        out = np.zeros(model.nv)
        out[order] = x
        return out

    worst = {}
    for seed in range(5):
        q, v, a, tau = _state(robot, 10 + seed)
        q_pin = q.copy()  # Solo12's joints are all revolute with limits: one coordinate each, same values
        q_pin[7:] = 0.0
        for name, value in zip(robot.joint_names, q[7:]):
            q_pin[model.joints[model.getJointId(name)].idx_q] = value
        friction = robot.friction(v)
        d_q, d_v, _ = pinocchio.computeRNEADerivatives(model, data, q_pin, pin(v), pin(a))
        ours_q, ours_v = robot.inverse_dynamics_derivatives(q, v, a)
        viscous = _central(robot.friction, v, 1e-6)  # friction's own derivative (Pinocchio leaves friction out)
        for key, ours, theirs in (("rnea_dq", ours_q, d_q), ("rnea_dv", ours_v - viscous, d_v)):
            theirs = np.asarray(theirs)[mapped]
            worst[key] = max(worst.get(key, 0.0), np.max(np.abs(ours - theirs)) / np.max(np.abs(theirs)))
        f_q, f_v, m_inv = robot.forward_dynamics_derivatives(q, v, tau + friction)
        d_q, d_v, minv = pinocchio.computeABADerivatives(model, data, q_pin, pin(v), pin(tau))
        if np.any(viscous):  # ∂q̈/∂v of ours includes −M⁻¹ D; Pinocchio's has no friction
            f_v = f_v + m_inv @ viscous
        for key, ours, theirs in (("aba_dq", f_q, d_q), ("aba_dv", f_v, d_v), ("minv", m_inv, minv)):
            theirs = np.asarray(theirs)[mapped]
            worst[key] = max(worst.get(key, 0.0), np.max(np.abs(ours - theirs)) / np.max(np.abs(theirs)))
    assert max(worst.values()) < 1e-9, worst
