"""Passive joints (issue 13): a description's 'actuated' list, the plant that drops the torque written for a
passive joint (compiled loop and Python loop alike), and the linearisation's inputs (one per motor)."""

from __future__ import annotations

import numpy as np
import pytest

import robodyn
from codegen.description.parse import parse_text
from robodyn.control import PD, FunctionController


def test_descriptions_mark_their_passive_joints(load):
    cartpole, acrobot, rr = load("cartpole"), load("acrobot"), load("rr")
    assert (cartpole.actuated, cartpole.passive_joint_names, cartpole.n_actuated) == ((0,), ("pole",), 1)
    assert (acrobot.actuated, acrobot.actuated_joint_names, acrobot.passive_joint_names) == ((1,), ("elbow",),
                                                                                           ("shoulder",))
    assert cartpole.is_underactuated and acrobot.is_underactuated
    assert rr.actuated == (0, 1) and not rr.is_underactuated and rr.passive_joint_names == ()
    np.testing.assert_array_equal(acrobot.actuation_matrix, [[0.0], [1.0]])
    np.testing.assert_array_equal(rr.actuation_matrix, np.eye(2))


def test_listing_every_joint_is_full_actuation_and_order_does_not_matter():
    text = """
name: two
joints:
  - {name: a, type: revolute, axis: [0, 0, 1], link: {mass: 1, com: [1, 0, 0]}}
  - {name: b, type: revolute, axis: [0, 0, 1], origin: {xyz: [1, 0, 0]}, link: {mass: 1, com: [1, 0, 0]}}
  - {name: c, type: revolute, axis: [0, 0, 1], origin: {xyz: [1, 0, 0]}, link: {mass: 1, com: [1, 0, 0]}}
"""
    assert parse_text(text + "actuated: [c, b, a]\n", "two.yaml").actuated is None
    assert parse_text(text + "actuated: [c, a]\n", "two.yaml").actuated == (0, 2)
    assert parse_text(text, "two.yaml").actuated is None


def _pd(robot):
    return PD(robot, robodyn.Hold(np.array([0.5, -0.3])), kp=[40.0, 40.0], kd=[5.0, 5.0])


def test_the_plant_drops_the_torque_on_a_passive_joint(load):
    """A PD law commands both joints; the acrobot's shoulder has no motor. The compiled loop, the Python loop
    and a law that commands zero on the shoulder give the same run, and the recorded torque is the motors'."""
    robot = load("acrobot")
    q0, qd0 = np.array([0.2, 0.1]), np.array([0.0, 0.3])
    law = _pd(robot)
    compiled = robodyn.simulate(robot, law, duration=0.5, q0=q0, qd0=qd0)
    python = robodyn.simulate(robot, FunctionController(lambda t, q, qd: law(t, q, qd)), duration=0.5, q0=q0,
                              qd0=qd0)
    only_elbow = robodyn.simulate(robot, lambda t, q, qd: law(t, q, qd) * [0.0, 1.0], duration=0.5, q0=q0, qd0=qd0)
    assert np.all(compiled.tau[:, 0] == 0.0) and np.all(python.tau[:, 0] == 0.0)
    assert np.max(np.abs(compiled.tau[:, 1])) > 1.0
    np.testing.assert_allclose(compiled.q, only_elbow.q, rtol=0, atol=1e-13)
    np.testing.assert_allclose(python.q, only_elbow.q, rtol=0, atol=1e-13)
    np.testing.assert_allclose(compiled.qdd, only_elbow.qdd, rtol=0, atol=1e-11)
    # what the harness recorded is what moved the robot: M q̈ + C q̇ + g = τ
    k = 100
    residual = robot.inverse_dynamics(compiled.q[k], compiled.qd[k], compiled.qdd[k]) - compiled.tau[k]
    assert np.max(np.abs(residual)) < 1e-10


def test_a_disturbance_still_acts_on_a_passive_joint(load):
    robot = load("cartpole")
    push = np.array([0.0, 0.05])  # on the pole
    free = robodyn.simulate(robot, None, duration=0.2, q0=[0.0, 0.0])
    pushed = robodyn.simulate(robot, None, duration=0.2, q0=[0.0, 0.0], disturbance=push)
    assert np.all(free.q == 0.0) and pushed.q[-1, 1] > 1e-3


def test_linearisation_has_one_input_per_motor(load):
    robot = load("acrobot")
    q, qd = np.array([0.4, -0.2]), np.array([0.5, 1.0])
    tau_full = robot.inverse_dynamics(q, qd, np.array([0.0, 0.0]))
    tau_full[0] = 0.0  # no motor on the shoulder
    A, B = robot.linearize(q, qd, tau_full)
    A_motor, B_motor = robot.linearize(q, qd, tau_full[1:])  # the motor torques alone
    np.testing.assert_array_equal(A, A_motor)
    np.testing.assert_array_equal(B, B_motor)
    assert B.shape == (4, 1)
    np.testing.assert_allclose(B[2:, 0], np.linalg.inv(robot.M(q))[:, 1], rtol=1e-12)
    Ad, Bd = robot.linearize(q, qd, tau_full[1:], dt=1e-3)
    assert Ad.shape == (4, 4) and Bd.shape == (4, 1)
    with pytest.raises(ValueError, match="shoulder .* has no motor"):
        robot.linearize(q, qd, np.array([0.1, 0.0]))
    with pytest.raises(ValueError, match="2 joint torques or 1 motor torques"):
        robot.linearize(q, qd, np.zeros(3))


def test_built_in_laws_give_no_torque_to_a_passive_joint(load):
    robot = load("acrobot")
    law = _pd(robot)
    tau = law(0.0, np.array([0.2, 0.1]), np.zeros(2))
    assert tau[0] == 0.0 and tau[1] != 0.0
    out = np.full(2, 7.0)
    assert law(0.0, np.array([0.2, 0.1]), np.zeros(2), out) is out and out[0] == 0.0
