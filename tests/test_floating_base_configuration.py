"""The floating base's configuration space (issue 16, point 2): Pinocchio's free-flyer convention. Oracles:
pinocchio.neutral / integrate / difference on Solo12 built with JointModelFreeFlyer, closed forms of the
SE(3) maps, integrate and difference inverse of each other, and one clear error per bad input."""

from __future__ import annotations

import numpy as np
import pytest

import robodyn
from robodyn import floating_base as fb

pinocchio = pytest.importorskip("pinocchio")


def _solo12():
    try:
        path = robodyn.example_robot_data("solo_description/robots/solo12.urdf")
    except FileNotFoundError as error:
        pytest.skip(str(error))
    return pinocchio.buildModelFromUrdf(str(path), pinocchio.JointModelFreeFlyer())


def _random_configuration(rng, joints, count=None):
    shape = (joints + 7,) if count is None else (count, joints + 7)
    q = rng.uniform(-1.0, 1.0, shape)
    q[..., 3:7] /= np.linalg.norm(q[..., 3:7], axis=-1, keepdims=True)
    return q


def test_integrate_difference_and_neutral_agree_with_pinocchio():
    model = _solo12()
    joints = model.nv - 6
    assert model.nq == joints + 7
    np.testing.assert_array_equal(fb.neutral(joints), pinocchio.neutral(model))
    rng = np.random.default_rng(0)
    worst_integrate = worst_difference = 0.0
    for _ in range(200):
        q0, q1 = _random_configuration(rng, joints), _random_configuration(rng, joints)
        v = rng.uniform(-3.0, 3.0, model.nv)
        dt = rng.uniform(0.01, 1.0)
        ours, theirs = fb.integrate(q0, v, dt), pinocchio.integrate(model, q0, v * dt)
        theirs = theirs if np.dot(theirs[3:7], ours[3:7]) > 0 else np.concatenate([theirs[:3], -theirs[3:7], theirs[7:]])
        worst_integrate = max(worst_integrate, float(np.max(np.abs(ours - theirs))))
        worst_difference = max(worst_difference, float(np.max(np.abs(fb.difference(q0, q1)
                                                                      - pinocchio.difference(model, q0, q1)))))
    assert worst_integrate < 1e-12 and worst_difference < 1e-11, (worst_integrate, worst_difference)


def test_integrate_and_difference_are_inverse_and_batched():
    rng = np.random.default_rng(1)
    q0, q1 = _random_configuration(rng, 5, 50), _random_configuration(rng, 5, 50)
    v = fb.difference(q0, q1)
    reached = fb.integrate(q0, v)
    same_rotation = np.abs(np.sum(reached[:, 3:7] * q1[:, 3:7], axis=1))
    np.testing.assert_allclose(same_rotation, 1.0, atol=1e-12)
    np.testing.assert_allclose(reached[:, :3], q1[:, :3], atol=1e-12)
    np.testing.assert_allclose(reached[:, 7:], q1[:, 7:], atol=1e-12)
    velocity = rng.uniform(-2, 2, (50, 11))
    np.testing.assert_allclose(fb.difference(q0, fb.integrate(q0, velocity, 0.3)), 0.3 * velocity, atol=1e-11)
    for k in range(3):  # the batch is the loop of single calls
        np.testing.assert_allclose(fb.integrate(q0[k], velocity[k], 0.3), fb.integrate(q0, velocity, 0.3)[k],
                                       rtol=0, atol=1e-14)


def test_small_rotations_use_the_series_without_loss():
    """Near ω = 0 the closed forms cancel; sinc, the half angle and series keep full precision on both sides of
    the switch (log ∘ exp = id, and the rotation against SciPy's rotation-vector map)."""
    q = fb.neutral(0)
    np.testing.assert_array_equal(fb.integrate(q, [1.0, 2.0, 3.0, 0, 0, 0]), [1, 2, 3, 0, 0, 0, 1])
    for angle in (1e-9, 1e-6, 1e-4, 0.99e-2, 1.01e-2, 0.5, 2.5):  # |ω| = 1.15 angle < π
        twist = np.array([0.3, -0.2, 0.5, angle, -0.5 * angle, 0.25 * angle])
        rotation, position = fb.exp_se3(twist)
        np.testing.assert_allclose(fb.log_se3(rotation, position), twist, rtol=1e-9, atol=1e-15)
        # exp(ω) from the rotation-vector route (SciPy) as the independent value
        from scipy.spatial.transform import Rotation

        np.testing.assert_allclose(rotation, Rotation.from_rotvec(twist[3:]).as_matrix(), atol=1e-15)


def test_a_constant_twist_is_integrated_exactly():
    """T(t) = T0 exp(t ξ) is a one-parameter group: ten steps of dt equal one step of 10 dt."""
    rng = np.random.default_rng(2)
    q = _random_configuration(rng, 2)
    v = rng.uniform(-2, 2, 8)
    stepped = q
    for _ in range(10):
        stepped = fb.integrate(stepped, v, 0.05)
    np.testing.assert_allclose(stepped, fb.integrate(q, v, 0.5), atol=1e-13)


@pytest.mark.parametrize("q, message", [
    ([0, 0, 0, 0, 0, 0, 2.0], "unit norm"), ([0, 0, 0, 0, 0, 0.70710, 0.70710], "unit norm"),
    ([0, 0, 0, 0, 0, 1], "at least 7"), ([0, 0, np.nan, 0, 0, 0, 1], "finite"), ([[[0.0] * 7]], "shape"),
])
def test_bad_configurations_are_one_clear_error(q, message):
    with pytest.raises(ValueError, match=message):
        fb.integrate(q, np.zeros(max(np.shape(q)[-1] - 1, 1)))


def test_hand_written_quaternions_pass_and_normalize_repairs_drift():
    fb.check_configuration([0, 0, 0, 0, 0, 0.7071068, 0.7071068])  # rounded to 7 digits: within the tolerance
    drifted = np.array([1.0, 2.0, 3.0, 0.0, 0.0, 0.6, 0.9])
    repaired = fb.normalize(drifted)
    assert abs(np.linalg.norm(repaired[3:7]) - 1.0) < 1e-15 and np.all(repaired[:3] == drifted[:3])
    with pytest.raises(ValueError, match="zero"):
        fb.normalize([0, 0, 0, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="v: expected shape"):
        fb.integrate(fb.neutral(2), np.zeros(9))
    with pytest.raises(ValueError, match="dt"):
        fb.integrate(fb.neutral(2), np.zeros(8), float("nan"))
    with pytest.raises(ValueError, match="joints"):
        fb.neutral(-1)
