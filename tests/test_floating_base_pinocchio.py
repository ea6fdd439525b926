"""Floating-base dynamics against Pinocchio's free flyer (issue 16, point 3), on three robots of example-robot-data:
a quadruped (Solo12), a humanoid (Talos, reduced model) and a mobile manipulator (TIAGo). Joint order is mapped by
name, TIAGo's continuous wheels through Pinocchio's (cos, sin) coordinates. Compared at random states, 1e-9
relative: M, C, g, the nonlinear effects, RNEA, ABA, kinetic and potential energy; and the identities Ṁ − 2C skew
(Ṁ by differences along the exponential map) and ID∘FD = identity.

Pinocchio (package ``pin``) and example-robot-data come with the test extra: missing is a failure, not a skip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio
import pytest

import robodyn

TOLERANCE = 1e-9
STATES = 20

ROBOTS = {
    "solo12": ("solo_description/robots/solo12.urdf", {}),
    "talos": ("talos_data/robots/talos_reduced.urdf", {}),
    "tiago": ("tiago_description/robots/tiago_no_hand.urdf", {"accept_invalid_inertia": True}),  # its antennas
}


def _urdf(relative: str) -> Path:
    try:
        return robodyn.example_robot_data(relative)
    except FileNotFoundError as error:
        pytest.fail(f"{error}; the test extra installs it: pip install '.[test]'")


class Pair:
    """Our robot and Pinocchio's free-flyer model, with the maps between their coordinates."""

    def __init__(self, robot, model):
        self.robot, self.model, self.data = robot, model, model.createData()
        self.velocity = list(range(6))  # our velocity coordinate k is Pinocchio's self.velocity[k]
        self.joints = []  # per joint of ours: Pinocchio's joint model
        for name in robot.joint_names:
            joint = model.joints[model.getJointId(name)]
            self.joints.append(joint)
            self.velocity.append(joint.idx_v)
        assert sorted(self.velocity) == list(range(model.nv))

    def pin_q(self, q):
        """Pinocchio's configuration of our q (continuous joints as cos, sin)."""
        out = np.zeros(self.model.nq)
        out[:7] = q[:7]
        for joint, value in zip(self.joints, q[7:]):
            if joint.nq == 2:
                out[joint.idx_q:joint.idx_q + 2] = np.cos(value), np.sin(value)
            else:
                out[joint.idx_q] = value
        return out

    def pin_v(self, v):
        out = np.zeros(self.model.nv)
        out[self.velocity] = v
        return out

    def ours_v(self, v_pin):
        return np.asarray(v_pin)[self.velocity]

    def ours_m(self, m_pin):
        return np.asarray(m_pin)[np.ix_(self.velocity, self.velocity)]

    def states(self, count, seed):
        rng = np.random.default_rng(seed)
        n = self.robot.n
        for _ in range(count):
            q = self.robot.neutral()
            q[:3] = rng.uniform(-1.0, 1.0, 3)
            quaternion = rng.normal(size=4)
            q[3:7] = quaternion / np.linalg.norm(quaternion)
            q[7:] = rng.uniform(-1.0, 1.0, n - 6)
            yield q, rng.uniform(-2.0, 2.0, n), rng.uniform(-5.0, 5.0, n), rng.uniform(-20.0, 20.0, n)


@pytest.fixture(scope="module", params=list(ROBOTS), ids=list(ROBOTS))
def pair(request, cache_dir):
    relative, options = ROBOTS[request.param]
    path = _urdf(relative)
    with pytest.warns() if options else _no_warning():
        robot = robodyn.load(path, cache_dir=cache_dir, base="floating", **options)
    model = pinocchio.buildModelFromUrdf(str(path), pinocchio.JointModelFreeFlyer())
    assert robot.is_floating_base and robot.nq == robot.n + 1 and robot.n == model.nv
    return Pair(robot, model)


class _no_warning:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _relative(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) / max(float(np.max(np.abs(b))), 1e-300)


def test_dynamics_agree_with_pinocchio(pair):
    robot, model, data = pair.robot, pair.model, pair.data
    worst = dict.fromkeys(("M", "C", "g", "nle", "rnea", "aba", "kinetic", "potential"), 0.0)
    for q, v, a, tau in pair.states(STATES, 0):
        qp, vp, ap = pair.pin_q(q), pair.pin_v(v), pair.pin_v(a)
        friction = robot.friction(v)  # the URDF's joint damping; Pinocchio's algorithms leave it out
        assert np.all(friction[:6] == 0.0)
        M = pinocchio.crba(model, data, qp)
        M = np.triu(M) + np.triu(M, 1).T
        worst["M"] = max(worst["M"], _relative(robot.M(q), pair.ours_m(M)))
        worst["C"] = max(worst["C"], _relative(robot.C(q, v), pair.ours_m(pinocchio.computeCoriolisMatrix(model, data, qp, vp))))
        worst["g"] = max(worst["g"], _relative(robot.g(q), pair.ours_v(pinocchio.computeGeneralizedGravity(model, data, qp))))
        worst["nle"] = max(worst["nle"], _relative(robot.nonlinear_effects(q, v) - friction,
                                                   pair.ours_v(pinocchio.nonLinearEffects(model, data, qp, vp))))
        worst["rnea"] = max(worst["rnea"], _relative(robot.inverse_dynamics(q, v, a) - friction,
                                                     pair.ours_v(pinocchio.rnea(model, data, qp, vp, ap))))
        worst["aba"] = max(worst["aba"], _relative(robot.forward_dynamics(q, v, tau + friction),
                                                   pair.ours_v(pinocchio.aba(model, data, qp, vp, pair.pin_v(tau)))))
        worst["kinetic"] = max(worst["kinetic"], _relative(robot.kinetic_energy(q, v),
                                                           pinocchio.computeKineticEnergy(model, data, qp, vp)))
        worst["potential"] = max(worst["potential"], _relative(robot.potential_energy(q),
                                                               pinocchio.computePotentialEnergy(model, data, qp)))
    assert max(worst.values()) < TOLERANCE, worst


def test_identities_on_the_configuration_manifold(pair):
    """Ṁ − 2C skew, with Ṁ by central differences along integrate(q, ±ε v); ID∘FD = identity; the base rows of
    the inverse dynamics are the wrench the base needs (zero torque there makes FD the free motion)."""
    robot = pair.robot
    eps = 1e-6
    for q, v, a, tau in pair.states(5, 1):
        M_dot = (robot.M(robot.integrate(q, v, eps)) - robot.M(robot.integrate(q, v, -eps))) / (2 * eps)
        N = M_dot - 2 * robot.C(q, v)
        assert np.max(np.abs(N + N.T)) < 1e-6 * max(1.0, np.max(np.abs(M_dot))), np.max(np.abs(N + N.T))
        tau = robot.inverse_dynamics(q, v, a)
        np.testing.assert_allclose(robot.forward_dynamics(q, v, tau), a, rtol=0, atol=1e-9 * np.max(np.abs(a)) * 10)
        free = tau.copy()
        free[:6] = 0.0
        np.testing.assert_allclose(robot.inverse_dynamics(q, v, robot.forward_dynamics(q, v, free))[:6], 0.0,
                                   atol=1e-9 * max(1.0, np.max(np.abs(tau))))


def test_neutral_integrate_difference_match_pinocchio(pair):
    robot, model = pair.robot, pair.model
    np.testing.assert_array_equal(pair.pin_q(robot.neutral()), pinocchio.neutral(model))
    for q, v, _, _ in pair.states(5, 2):
        reached = robot.integrate(q, v, 0.1)
        np.testing.assert_allclose(pair.pin_q(reached), pinocchio.integrate(model, pair.pin_q(q), pair.pin_v(0.1 * v)),
                                   atol=1e-12)
        np.testing.assert_allclose(robot.difference(q, reached), 0.1 * v, atol=1e-12)


def test_a_non_unit_quaternion_is_refused_by_every_routine(pair):
    robot = pair.robot
    q, v, a, _ = next(pair.states(1, 3))
    bad = q.copy()
    bad[3:7] *= 1.01
    for call in (lambda x: robot.M(x), lambda x: robot.g(x), lambda x: robot.inverse_dynamics(x, v, a),
                 lambda x: robot.C(np.stack([q, x]), np.stack([v, v]))):
        with pytest.raises(ValueError, match="unit norm"):
            call(bad)
    within = q.copy()
    within[3:7] *= 1 + 5e-7  # inside the documented tolerance: accepted
    robot.M(within)


def test_frames_center_of_mass_and_centroidal_momentum_agree_with_pinocchio(pair):
    """Every link frame by name: placement, Jacobian (LOCAL_WORLD_ALIGNED and LOCAL) and J̇v (classical
    acceleration at q̈ = 0); the centre of mass and its Jacobian; Ag and Ȧg v (computeCentroidalMomentumTimeVariation
    at a = 0)."""
    robot, model, data = pair.robot, pair.model, pair.data
    frames = [name for name in robot.frame_names if model.existFrame(name)]
    assert len(frames) == len(robot.frame_names)
    worst = dict.fromkeys(("placement", "jacobian", "local", "bias", "com", "com_jacobian", "Ag", "dAg_v"), 0.0)
    for q, v, _, _ in pair.states(5, 4):
        qp, vp = pair.pin_q(q), pair.pin_v(v)
        pinocchio.forwardKinematics(model, data, qp, vp, np.zeros(model.nv))
        pinocchio.updateFramePlacements(model, data)
        pinocchio.computeJointJacobians(model, data, qp)
        placements, jacobians = robot.frame_placements(q), robot.frame_jacobians(q)
        biases = robot.frame_bias_accelerations(q, v)
        for index, name in enumerate(frames):
            fid = model.getFrameId(name)
            worst["placement"] = max(worst["placement"], _relative(placements[index], data.oMf[fid].homogeneous))
            J = pinocchio.getFrameJacobian(model, data, fid, pinocchio.LOCAL_WORLD_ALIGNED)
            worst["jacobian"] = max(worst["jacobian"], _relative(jacobians[index], J[:, pair.velocity]))
            J_local = pinocchio.getFrameJacobian(model, data, fid, pinocchio.LOCAL)
            worst["local"] = max(worst["local"], _relative(robot.frame_jacobian(q, name, "local"),
                                                           J_local[:, pair.velocity]))
            a = pinocchio.getFrameClassicalAcceleration(model, data, fid, pinocchio.LOCAL_WORLD_ALIGNED)
            worst["bias"] = max(worst["bias"], _relative(biases[index], np.concatenate([a.linear, a.angular])))
        worst["com"] = max(worst["com"], _relative(robot.center_of_mass(q), pinocchio.centerOfMass(model, data, qp)))
        worst["com_jacobian"] = max(worst["com_jacobian"], _relative(
            robot.center_of_mass_jacobian(q), pinocchio.jacobianCenterOfMass(model, data, qp)[:, pair.velocity]))
        Ag = pinocchio.computeCentroidalMap(model, data, qp)
        worst["Ag"] = max(worst["Ag"], _relative(robot.centroidal_momentum_matrix(q), Ag[:, pair.velocity]))
        pinocchio.computeCentroidalMomentumTimeVariation(model, data, qp, vp, np.zeros(model.nv))
        worst["dAg_v"] = max(worst["dAg_v"], _relative(robot.centroidal_momentum_bias(q, v),
                                                       np.concatenate([data.dhg.linear, data.dhg.angular])))
    assert max(worst.values()) < TOLERANCE, worst
