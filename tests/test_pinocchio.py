"""Agreement with Pinocchio on real URDF robots (Panda with locked fingers, UR5).

Pinocchio (``pin``) and example-robot-data are installed by the test extra
(``pip install ".[test]"``): a missing one is a failure here, not a skip, so CI
cannot pass without running these comparisons. Compared at 200 random states each:
M, the Coriolis matrix, g, friction (against the URDF's <dynamics> as Pinocchio
reads it), inverse and forward dynamics, the tool pose and Jacobian, to 1e-9
relative; and a closed-loop simulation (computed torque, RK4) against the same
loop built on Pinocchio's RNEA and ABA.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio  # the test extra installs it (package "pin"): an ImportError here is a real failure
import pytest

import robodyn
from conftest import rk4


def _urdf(relative: str) -> Path:
    root = Path(pinocchio.__file__).resolve()
    for parent in root.parents:
        candidate = parent / "cmeel.prefix" / "share" / "example-robot-data" / "robots" / relative
        if candidate.is_file():
            return candidate
    pytest.fail(f"example-robot-data is not installed ({relative} not found next to {root}); "
                "the test extra installs it: pip install '.[test]'")


PANDA = "panda_description/urdf/panda.urdf"
UR5 = "ur_description/urdf/ur5_robot.urdf"
FINGERS = ("panda_finger_joint1", "panda_finger_joint2")
STATES = 200
TOLERANCE = 1e-9


def _pinocchio_model(path: Path, locked: tuple[str, ...]):
    model = pinocchio.buildModelFromUrdf(str(path))
    if locked:
        ids = [model.getJointId(name) for name in locked]
        model = pinocchio.buildReducedModel(model, ids, pinocchio.neutral(model))
    return model


def _relative(a, b):
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)


@pytest.fixture(scope="module", params=[(PANDA, FINGERS), (UR5, ())], ids=["panda", "ur5"])
def pair(request, tmp_path_factory):
    relative, locked = request.param
    path = _urdf(relative)
    robot = robodyn.load(path, cache_dir=tmp_path_factory.mktemp("pin"), lock={name: 0.0 for name in locked})
    model = _pinocchio_model(path, locked)
    assert model.nq == model.nv == robot.n
    assert [model.names[i] for i in range(1, model.njoints)] == list(robot.joint_names)
    return robot, model


def _states(robot, model, count, seed):
    rng = np.random.default_rng(seed)
    lower = np.maximum(model.lowerPositionLimit, -np.pi)
    upper = np.minimum(model.upperPositionLimit, np.pi)
    for _ in range(count):
        yield (rng.uniform(lower, upper), rng.uniform(-2, 2, robot.n), rng.uniform(-5, 5, robot.n),
               rng.uniform(-20, 20, robot.n))


def _pinocchio_friction(model, qd):
    """Joint friction from the URDF's <dynamics damping friction>, as Pinocchio reads it."""
    return model.damping * qd + model.friction * np.sign(qd)


def _tool(model, data, q):
    """Pose and geometric Jacobian (linear, then angular, base axes) of the last joint's frame: the
    default tool frame of a URDF (the last moving joint's link, no offset)."""
    joint = model.njoints - 1
    pinocchio.forwardKinematics(model, data, q)
    pinocchio.computeJointJacobians(model, data, q)
    return (data.oMi[joint].homogeneous.copy(),
            pinocchio.getJointJacobian(model, data, joint, pinocchio.ReferenceFrame.LOCAL_WORLD_ALIGNED).copy())


def test_dynamics_agree_with_pinocchio(pair):
    robot, model = pair
    data = model.createData()
    worst = {"M": 0.0, "C": 0.0, "g": 0.0, "friction": 0.0, "inverse": 0.0, "forward": 0.0, "fk": 0.0,
             "jacobian": 0.0}
    for q, qd, qdd, tau in _states(robot, model, STATES, 0):
        # Friction is compared with the URDF's values, then removed from robodyn's torques with those
        # values, not with robodyn's own friction (which would cancel any error in it).
        friction = _pinocchio_friction(model, qd)
        worst["friction"] = max(worst["friction"], np.abs(robot.friction(qd) - friction).max())
        pose, jacobian = _tool(model, data, q)
        worst["fk"] = max(worst["fk"], np.abs(robot.fk(q) - pose).max())
        worst["jacobian"] = max(worst["jacobian"], _relative(robot.jacobian(q), jacobian))
        M_pin = pinocchio.crba(model, data, q)
        M_pin = np.triu(M_pin) + np.triu(M_pin, 1).T
        worst["M"] = max(worst["M"], _relative(robot.M(q), M_pin))
        worst["C"] = max(worst["C"], _relative(robot.C(q, qd), pinocchio.computeCoriolisMatrix(model, data, q, qd)))
        worst["g"] = max(worst["g"], _relative(robot.g(q), pinocchio.computeGeneralizedGravity(model, data, q)))
        worst["inverse"] = max(worst["inverse"], _relative(robot.inverse_dynamics(q, qd, qdd) - friction,
                                                           pinocchio.rnea(model, data, q, qd, qdd)))
        worst["forward"] = max(worst["forward"], _relative(robot.forward_dynamics(q, qd, tau + friction),
                                                           pinocchio.aba(model, data, q, qd, tau)))
    assert all(error <= TOLERANCE for error in worst.values()), worst
    # The friction comparison is not vacuous: the Panda's URDF has damping 0.003 on every arm joint.
    assert np.any(model.damping != 0) == (robot.name == "panda")


def test_inverse_dynamics_derivatives_agree_with_pinocchio(pair):
    """dtau/dq and dtau/dqd against pinocchio.computeRNEADerivatives (issue 13's oracle, 1e-9 relative); the
    URDF's viscous damping, which Pinocchio's RNEA leaves out, is removed with the URDF's own values."""
    robot, model = pair
    data = model.createData()
    worst = [0.0, 0.0]
    for q, qd, qdd, _ in _states(robot, model, STATES, 1):
        d_q, d_qd, _ = pinocchio.computeRNEADerivatives(model, data, q, qd, qdd)
        ours_q, ours_qd = robot.inverse_dynamics_derivatives(q, qd, qdd)
        worst[0] = max(worst[0], _relative(ours_q, d_q))
        worst[1] = max(worst[1], _relative(ours_qd - np.diag(model.damping), d_qd))
    assert max(worst) <= TOLERANCE, worst


def test_forward_dynamics_derivatives_agree_with_pinocchio(pair):
    """dqdd/dq, dqdd/dqd, dqdd/dtau against pinocchio.computeABADerivatives (1e-9 relative). Pinocchio's ABA
    leaves the URDF's damping D out: at the torque tau - D qd it gives the same qdd, and its dqdd/dqd lacks
    the -M^-1 D that robodyn's includes."""
    robot, model = pair
    data = model.createData()
    worst = [0.0, 0.0, 0.0]
    for q, qd, _, tau in _states(robot, model, STATES // 4, 2):
        d_q, d_qd, m_inv = robot.forward_dynamics_derivatives(q, qd, tau)
        p_q, p_qd, p_tau = pinocchio.computeABADerivatives(model, data, q, qd, tau - model.damping * qd)
        p_tau = np.triu(p_tau) + np.triu(p_tau, 1).T if not np.allclose(p_tau, p_tau.T) else p_tau
        worst[0] = max(worst[0], _relative(d_q, p_q))
        worst[1] = max(worst[1], _relative(d_qd + m_inv @ np.diag(model.damping), p_qd))
        worst[2] = max(worst[2], _relative(m_inv, p_tau))
    assert max(worst) <= TOLERANCE, worst


def test_runtime_inertial_parameters_follow_pinocchio(tmp_path):
    """UR5 with --runtime-parameters: same dynamics at the defaults, and after changing a mass."""
    path = _urdf(UR5)
    robot = robodyn.load(path, cache_dir=tmp_path, runtime_parameters=True)
    model = _pinocchio_model(path, ())
    assert len(robot.params) >= 60 and "wrist_3_link_m" in robot.params
    data = model.createData()
    last = model.njoints - 1
    for scale in (1.0, 3.0):
        robot.params["wrist_3_link_m"] = robot.params.defaults["wrist_3_link_m"] * scale
        original = model.inertias[last]
        model.inertias[last] = pinocchio.Inertia(original.mass * scale,
                                                 original.lever, original.inertia)
        for q, qd, qdd, _ in _states(robot, model, 20, 1):
            M_pin = pinocchio.crba(model, data, q)
            M_pin = np.triu(M_pin) + np.triu(M_pin, 1).T
            assert _relative(robot.M(q), M_pin) <= TOLERANCE
            assert _relative(robot.inverse_dynamics(q, qd, qdd) - _pinocchio_friction(model, qd),
                             pinocchio.rnea(model, data, q, qd, qdd)) <= TOLERANCE
        model.inertias[last] = original


def test_closed_loop_simulation_agrees_with_pinocchio(pair):
    """Computed torque tracking a quintic, RK4 with two steps per 2 ms period: robodyn's compiled
    loop against a NumPy loop whose control law is Pinocchio's RNEA and whose plant is its ABA."""
    robot, model = pair
    data = model.createData()
    rng = np.random.default_rng(4)
    start = rng.uniform(np.maximum(model.lowerPositionLimit, -1.0), np.minimum(model.upperPositionLimit, 1.0))
    reference = robodyn.Quintic(start, start + rng.uniform(-0.3, 0.3, robot.n), duration=0.3)
    controller = robodyn.ComputedTorque(robot.copy(), reference)
    q0 = start + 0.01
    run = robodyn.simulate(robot, controller, duration=0.3, rate=500, q0=q0, substeps=2)

    n = robot.n
    q, qd = q0.copy(), np.zeros(n)
    for k in range(150):
        q_r, qd_r, qdd_r = reference.evaluate(k * 2e-3)
        a = qdd_r + controller.kd * (qd_r - qd) + controller.kp * (q_r - q)
        tau = pinocchio.rnea(model, data, q, qd, a) + _pinocchio_friction(model, qd)
        assert _relative(run.tau[k], tau) < TOLERANCE

        def rhs(state, tau=tau):
            return np.concatenate([state[n:], pinocchio.aba(model, data, state[:n], state[n:],
                                                            tau - _pinocchio_friction(model, state[n:]))])

        state = rk4(rhs, np.concatenate([q, qd]), 1e-3, 2)
        q, qd = state[:n], state[n:]
    np.testing.assert_allclose(run.q[-1], q, rtol=0, atol=1e-10)
    np.testing.assert_allclose(run.qd[-1], qd, rtol=0, atol=1e-9)
    assert np.abs(run.tracking_error[-1]).max() < 1e-3


def _worst_tool_error(robot, model, data, frame: int, count: int, seed: int) -> float:
    """Worst disagreement of the tool pose, its Jacobian and the wrench's torques with Pinocchio's ``frame``."""
    worst = 0.0
    for q, qd, qdd, _ in _states(robot, model, count, seed):
        pinocchio.framesForwardKinematics(model, data, q)
        pinocchio.computeJointJacobians(model, data, q)
        jacobian = pinocchio.getFrameJacobian(model, data, frame, pinocchio.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        worst = max(worst, np.abs(robot.fk(q) - data.oMf[frame].homogeneous).max(),
                    _relative(robot.jacobian(q), jacobian))
        h = np.array([3.0, -1.0, 2.0, 0.4, -0.2, 0.1])
        # tau = ... - J^T h, with h applied at the frame's origin in base axes.
        worst = max(worst, _relative(robot.inverse_dynamics(q, qd, qdd) - robot.inverse_dynamics(q, qd, qdd, h),
                                     jacobian.T @ h))
    return worst


def test_tool_on_a_merged_link_follows_pinocchio_frame(tmp_path):
    """tool="panda_hand": a link merged into link 7 by fixed joints keeps its own frame (pose, Jacobian,
    and the wrench on its origin), as Pinocchio's frame of that link."""
    path = _urdf(PANDA)
    robot = robodyn.load(path, cache_dir=tmp_path, lock={name: 0.0 for name in FINGERS}, tool="panda_hand")
    model = _pinocchio_model(path, FINGERS)
    data = model.createData()
    frame = model.getFrameId("panda_hand")
    worst = _worst_tool_error(robot, model, data, frame, 20, 5)
    assert worst <= TOLERANCE, worst
    assert not np.allclose(data.oMf[frame].homogeneous, data.oMi[model.njoints - 1].homogeneous)


def test_placeholder_limits_do_not_fool_the_selfcheck(tmp_path):
    """double_pendulum.urdf carries exporter placeholder limits (lower = upper = 0): they are dropped,
    and the self-check samples the whole circle instead of the single position q = 0."""
    relative = "double_pendulum_description/urdf/double_pendulum.urdf"
    path = _urdf(relative)
    robot = robodyn.load(path, cache_dir=tmp_path)
    assert robot.selfcheck["passed"]
    assert robot.joint_limits[0]["lower"] is None and robot.joint_limits[0]["upper"] is None  # placeholders dropped
    model = _pinocchio_model(path, ())
    data = model.createData()
    rng = np.random.default_rng(2)
    for _ in range(20):
        q, qd = rng.uniform(-np.pi, np.pi, 2), rng.uniform(-2, 2, 2)
        M_pin = pinocchio.crba(model, data, q)
        assert _relative(robot.M(q), np.triu(M_pin) + np.triu(M_pin, 1).T) <= TOLERANCE
        assert _relative(robot.C(q, qd), pinocchio.computeCoriolisMatrix(model, data, q, qd)) <= TOLERANCE


def test_tool_offset_follows_a_pinocchio_frame_at_that_offset(tmp_path):
    """tool="panda_hand", tool_offset=(x, y, z, roll, pitch, yaw): the tool frame is the hand's frame
    times that fixed offset, as a Pinocchio frame added there (pose, Jacobian, wrench on its origin)."""
    path = _urdf(PANDA)
    offset = (0.01, -0.02, 0.1034, 0.3, -0.2, 0.5)
    robot = robodyn.load(path, cache_dir=tmp_path, lock={name: 0.0 for name in FINGERS}, tool="panda_hand",
                         tool_offset=offset)
    model = _pinocchio_model(path, FINGERS)
    hand = model.frames[model.getFrameId("panda_hand")]
    placement = pinocchio.SE3(pinocchio.rpy.rpyToMatrix(*offset[3:]), np.array(offset[:3]))
    frame = model.addFrame(pinocchio.Frame("tcp", hand.parentJoint, hand.parentFrame, hand.placement * placement,
                                           pinocchio.FrameType.OP_FRAME))
    data = model.createData()
    worst = _worst_tool_error(robot, model, data, frame, 10, 6)
    assert worst <= TOLERANCE, worst
    assert np.abs(data.oMf[frame].translation - data.oMf[model.getFrameId("panda_hand")].translation).max() > 0.05
