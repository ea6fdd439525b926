"""Contacts (issue 16, point 4): constrained forward dynamics and impulses against Pinocchio's forwardDynamics and
impulseDynamics (KKT systems on its own M, frame Jacobians and classical accelerations) on Solo12 (four point feet)
and Talos (two surface feet), 1e-9 relative; the constraint holds (J q'' + J' q' = 0), the equations of motion
hold with the contact forces, Baumgarte's terms pull a drifted contact back, and bad contact sets get clear errors."""

from __future__ import annotations

import numpy as np
import pinocchio
import pytest

import robodyn
from robodyn.contact import Contact, ContactDynamics
from test_floating_base_pinocchio import ROBOTS, Pair, _relative, _urdf

TOLERANCE = 1e-9
FEET = {"solo12": [Contact(name) for name in ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")],
        "talos": [Contact(name, "surface") for name in ("leg_left_6_link", "leg_right_6_link")]}


@pytest.fixture(scope="module", params=list(FEET), ids=list(FEET))
def setup(request, cache_dir):
    relative, options = ROBOTS[request.param]
    path = _urdf(relative)
    robot = robodyn.load(path, cache_dir=cache_dir, base="floating", **options)
    model = pinocchio.buildModelFromUrdf(str(path), pinocchio.JointModelFreeFlyer())
    return Pair(robot, model), FEET[request.param]


def _pinocchio_contact_terms(pair, contacts, q, v):
    model, data = pair.model, pair.data
    qp, vp = pair.pin_q(q), pair.pin_v(v)
    pinocchio.computeJointJacobians(model, data, qp)
    pinocchio.forwardKinematics(model, data, qp, vp, np.zeros(model.nv))
    pinocchio.updateFramePlacements(model, data)
    rows, drift = [], []
    for contact in contacts:
        fid = model.getFrameId(contact.frame)
        J = pinocchio.getFrameJacobian(model, data, fid, pinocchio.LOCAL_WORLD_ALIGNED)
        a = pinocchio.getFrameClassicalAcceleration(model, data, fid, pinocchio.LOCAL_WORLD_ALIGNED)
        rows.append(J[:contact.rows])
        drift.append(np.concatenate([a.linear, a.angular])[:contact.rows])
    return np.vstack(rows), np.concatenate(drift)


def test_constrained_dynamics_and_impulses_agree_with_pinocchio(setup):
    pair, contacts = setup
    robot, model, data = pair.robot, pair.model, pair.data
    dynamics = ContactDynamics(robot, contacts)
    worst = dict.fromkeys(("qdd", "forces", "v_after", "impulses"), 0.0)
    for q, v, _, tau in pair.states(5, 7):
        tau[:6] = 0.0  # the base has no motor
        J, drift = _pinocchio_contact_terms(pair, contacts, q, v)
        friction = robot.friction(v)
        ours = dynamics.forward_dynamics(q, v, tau + friction)  # Pinocchio leaves the URDF damping out
        theirs = pinocchio.forwardDynamics(model, data, pair.pin_q(q), pair.pin_v(v), pair.pin_v(tau), J, drift)
        worst["qdd"] = max(worst["qdd"], _relative(ours.qdd, pair.ours_v(theirs)))
        worst["forces"] = max(worst["forces"], _relative(ours.forces, data.lambda_c))
        v_after, impulses = dynamics.impulse(q, v)
        theirs = pinocchio.impulseDynamics(model, data, pair.pin_q(q), pair.pin_v(v), J)
        worst["v_after"] = max(worst["v_after"], _relative(v_after, pair.ours_v(theirs)))
        worst["impulses"] = max(worst["impulses"], _relative(impulses, data.impulse_c))
    assert max(worst.values()) < TOLERANCE, worst


def test_constraint_and_equations_of_motion_hold(setup):
    pair, contacts = setup
    robot = pair.robot
    dynamics = ContactDynamics(robot, contacts)
    for q, v, _, tau in pair.states(3, 8):
        solution = dynamics.forward_dynamics(q, v, tau)
        J = dynamics.jacobian(q)
        scale = np.max(np.abs(J @ solution.qdd)) + np.max(np.abs(dynamics.bias(q, v)))
        assert np.max(np.abs(J @ solution.qdd + dynamics.bias(q, v))) < 1e-10 * scale
        residual = robot.inverse_dynamics(q, v, solution.qdd) - tau - J.T @ solution.forces
        assert np.max(np.abs(residual)) < 1e-9 * np.max(np.abs(tau))
        v_after, _ = dynamics.impulse(q, v, restitution=0.5)
        np.testing.assert_allclose(J @ v_after, -0.5 * (J @ v), atol=1e-10 * np.max(np.abs(J @ v)))
    first = contacts[0].frame
    assert solution.force(first).shape == (contacts[0].rows,)


def test_baumgarte_terms_pull_a_drifted_contact_back(setup):
    pair, contacts = setup
    robot = pair.robot
    q = robot.neutral()
    dynamics = ContactDynamics(robot, contacts, stiffness=400.0)
    dynamics.anchor(q)
    drifted = robot.integrate(q, np.r_[0.0, 0.0, 0.01, np.zeros(robot.n - 3)])  # the base 1 cm up
    error = dynamics.error(drifted)
    assert np.max(np.abs(error)) > 5e-3
    solution = dynamics.forward_dynamics(drifted, np.zeros(robot.n), np.zeros(robot.n))
    # At rest, J q'' = -kp e: the contacts accelerate back towards their anchors.
    np.testing.assert_allclose(dynamics.jacobian(drifted) @ solution.qdd, -400.0 * error, atol=1e-9)


def test_bad_contact_sets_are_refused(setup):
    pair, contacts = setup
    robot = pair.robot
    with pytest.raises(KeyError, match="no frame named"):
        ContactDynamics(robot, ["no_such_link"])
    with pytest.raises(ValueError, match="at most once"):
        ContactDynamics(robot, [contacts[0].frame, contacts[0].frame])
    with pytest.raises(ValueError, match="kind"):
        Contact(contacts[0].frame, "line")
    with pytest.raises(ValueError, match="at least one"):
        ContactDynamics(robot, [])
