"""Configuration space of a floating-base robot, in Pinocchio's free-flyer convention (docs/floating_base.md).

A robot whose root moves freely has

* configuration q = (p, Q, q_J), nq = n + 7: the base position p in the world frame, the base orientation as a
  unit quaternion Q = (x, y, z, w) (the rotation from base to world), then the n joint positions;
* velocity v = (ν, ω, q̇_J), nv = n + 6: the base's linear velocity ν and angular velocity ω, both expressed
  in the base frame, then the joint velocities.

The base pose is the rigid transform T = (R(Q), p), and a velocity moves it on the right: over a time t,
T(t) = T · exp(t (ν, ω)) with exp the exponential map of SE(3), so that ``integrate`` is exact for a
constant base twist. ``difference`` is its inverse: the constant v that moves q0 to q1 in unit time,
v = log(T0⁻¹ T1) for the base and q1 − q0 for the joints. Both agree with ``pinocchio.integrate`` and
``pinocchio.difference`` on a model built with ``JointModelFreeFlyer`` whose joints are revolute or
prismatic.

Every configuration given to these functions is checked: finite, of length n + 7, and with a quaternion of
unit norm within ``QUATERNION_TOLERANCE`` (``normalize`` repairs one that has drifted further). Arrays of
shape (N, nq) and (N, nv) are batches.
"""

from __future__ import annotations

import math

import numpy as np

from ._arrays import finite_number, float_array

__all__ = ["QUATERNION_TOLERANCE", "BASE_CONFIGURATION", "BASE_VELOCITY", "neutral", "integrate", "difference",
           "normalize", "check_configuration", "base_pose", "exp_se3", "log_se3"]

#: | |Q| − 1 | allowed on input: a hand-written quaternion (0.7071, ...) passes, a corrupted one does not.
QUATERNION_TOLERANCE = 1e-6
BASE_CONFIGURATION = 7  # p (3) and Q (4)
BASE_VELOCITY = 6  # ν (3) and ω (3)
_SERIES_ANGLE = 1e-2  # below this rotation angle, series replace the closed forms that cancel


def _array(value, name: str, width: int | None) -> np.ndarray:
    array = float_array(value, name, ndmin=1)
    if array.ndim not in (1, 2) or (width is not None and array.shape[-1] != width):
        expected = "(nq,) or (N, nq)" if width is None else f"({width},) or (N, {width})"
        raise ValueError(f"{name}: expected shape {expected}, got {np.shape(value)}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name}: must be finite")
    return array


def check_configuration(q, name: str = "q", joints: int | None = None) -> np.ndarray:
    """q as a float array (a copy), after checking its length (``joints`` + 7 when given, at least 7) and its
    quaternion's norm (within QUATERNION_TOLERANCE of 1)."""
    q = _array(q, name, None if joints is None else joints + BASE_CONFIGURATION)
    if q.shape[-1] < BASE_CONFIGURATION:
        raise ValueError(f"{name}: a floating-base configuration has at least 7 values (position, quaternion), "
                         f"got {q.shape[-1]}")
    norm = np.linalg.norm(q[..., 3:7], axis=-1)
    worst = float(np.max(np.abs(norm - 1.0)))
    if worst > QUATERNION_TOLERANCE:
        raise ValueError(f"{name}: the base quaternion q[3:7] (x, y, z, w) must have unit norm (within "
                         f"{QUATERNION_TOLERANCE:g}); its norm is off by {worst:.3g} — "
                         "robodyn.floating_base.normalize(q) rescales it")
    return q


def neutral(joints: int) -> np.ndarray:
    """The neutral configuration: base at the origin, identity orientation (0, 0, 0, 1), joints at zero."""
    if isinstance(joints, bool) or not isinstance(joints, (int, np.integer)) or joints < 0:
        raise ValueError(f"joints: expected a non-negative integer, got {joints!r}")
    q = np.zeros(joints + BASE_CONFIGURATION)
    q[6] = 1.0
    return q


def normalize(q) -> np.ndarray:
    """q with its quaternion rescaled to unit norm (a new array); a zero quaternion is an error."""
    q = _array(q, "q", None)
    norm = np.linalg.norm(q[..., 3:7], axis=-1, keepdims=True)
    if np.any(norm < 1e-12):
        raise ValueError("q: the base quaternion q[3:7] is zero: it has no direction to normalise")
    q[..., 3:7] /= norm
    return q


def _hat(w: np.ndarray) -> np.ndarray:
    """[w]x for w of shape (..., 3)."""
    zero = np.zeros(w.shape[:-1])
    x, y, z = w[..., 0], w[..., 1], w[..., 2]
    return np.stack([np.stack([zero, -z, y], -1), np.stack([z, zero, -x], -1), np.stack([-y, x, zero], -1)], -2)


def _rotation(quaternion: np.ndarray) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    return Rotation.from_quat(quaternion.reshape(-1, 4)).as_matrix().reshape(quaternion.shape[:-1] + (3, 3))


def _quaternion(rotation: np.ndarray) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    return Rotation.from_matrix(rotation.reshape(-1, 3, 3)).as_quat().reshape(rotation.shape[:-2] + (4,))


def _coefficients(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sin θ / θ, (1 − cos θ) / θ², (θ − sin θ) / θ³) without cancellation: the first two through sinc and the
    half angle (1 − cos θ = 2 sin²(θ/2)), the third by its series below SERIES_ANGLE."""
    a = np.sinc(theta / np.pi)
    b = 0.5 * np.sinc(theta / (2.0 * np.pi)) ** 2
    small = theta < _SERIES_ANGLE
    safe = np.where(small, 1.0, theta)
    t2 = theta * theta
    c = np.where(small, 1.0 / 6.0 - t2 / 120.0 + t2 * t2 / 5040.0 - t2**3 / 362880.0,
                 (safe - np.sin(safe)) / safe**3)
    return a, b, c


def exp_se3(twist) -> tuple[np.ndarray, np.ndarray]:
    """(R, p) = exp((ν, ω)) for twists of shape (..., 6), linear part first (Pinocchio's Motion order)."""
    twist = np.asarray(twist, dtype=float)
    nu, omega = twist[..., :3], twist[..., 3:]
    theta = np.linalg.norm(omega, axis=-1)
    a, b, c = _coefficients(theta)
    hat = _hat(omega)
    hat2 = hat @ hat
    identity = np.broadcast_to(np.eye(3), hat.shape)
    rotation = identity + a[..., None, None] * hat + b[..., None, None] * hat2
    left_jacobian = identity + b[..., None, None] * hat + c[..., None, None] * hat2
    return rotation, np.einsum("...ij,...j->...i", left_jacobian, nu)


def log_se3(rotation, position) -> np.ndarray:
    """The twist (ν, ω) with exp((ν, ω)) = (R, p): the inverse of ``exp_se3`` (rotation angle below π)."""
    from scipy.spatial.transform import Rotation

    rotation = np.asarray(rotation, dtype=float)
    omega = Rotation.from_matrix(rotation.reshape(-1, 3, 3)).as_rotvec().reshape(rotation.shape[:-2] + (3,))
    theta = np.linalg.norm(omega, axis=-1)
    a, b, _ = _coefficients(theta)
    small = theta < _SERIES_ANGLE
    safe = np.where(small, 1.0, theta)
    t2 = theta * theta
    # V⁻¹ = I − ½[ω]x + (1 − a / (2b)) / θ² [ω]x², the last coefficient by its series near zero
    d = np.where(small, 1.0 / 12.0 + t2 / 720.0 + t2 * t2 / 30240.0 + t2**3 / 1209600.0,
                 (1.0 - a / (2.0 * b)) / safe**2)
    hat = _hat(omega)
    inverse = np.broadcast_to(np.eye(3), hat.shape) - 0.5 * hat + d[..., None, None] * (hat @ hat)
    nu = np.einsum("...ij,...j->...i", inverse, np.asarray(position, dtype=float))
    return np.concatenate([nu, omega], axis=-1)


def base_pose(q) -> tuple[np.ndarray, np.ndarray]:
    """(R, p) of the base in the world frame for configurations q (checked)."""
    q = check_configuration(q)
    return _rotation(q[..., 3:7]), q[..., :3].copy()


def integrate(q, v, dt: float = 1.0) -> np.ndarray:
    """The configuration reached from q by moving at the constant velocity v for dt: base T · exp(dt (ν, ω)),
    joints q_J + dt q̇_J. Pinocchio's ``integrate(model, q, v * dt)``."""
    q = check_configuration(q)
    v = _array(v, "v", q.shape[-1] - 1)
    step = v * finite_number(dt, "dt")
    if q.ndim == 1 and step.ndim == 1:
        return _integrate_one(q, step)
    rotation, position = _rotation(q[..., 3:7]), q[..., :3]
    delta_rotation, delta_position = exp_se3(step[..., :6])
    out = np.empty(np.broadcast_shapes(q.shape, step[..., :1].shape[:-1] + (q.shape[-1],)))
    out[..., :3] = position + np.einsum("...ij,...j->...i", rotation, delta_position)
    quaternion = _quaternion(rotation @ delta_rotation)
    # keep the hemisphere of the input quaternion (q and −q are the same rotation): no jumps along a path
    sign = np.where(np.sum(quaternion * q[..., 3:7], axis=-1, keepdims=True) < 0.0, -1.0, 1.0)
    out[..., 3:7] = quaternion * sign
    out[..., 7:] = q[..., 7:] + step[..., 6:]
    return out


def _integrate_one(q: np.ndarray, step: np.ndarray) -> np.ndarray:
    """``integrate`` of one configuration (a simulation's stage): the quaternion times exp(ω/2), no matrices;
    it agrees with the batch path to rounding."""
    x, y, z, w = q[3:7]
    wx, wy, wz = step[3:6]
    theta = math.sqrt(wx * wx + wy * wy + wz * wz)
    if theta < _SERIES_ANGLE:  # the series of _coefficients
        t2 = theta * theta
        c = 1.0 / 6.0 - t2 / 120.0 + t2 * t2 / 5040.0 - t2**3 / 362880.0
    else:
        c = (theta - math.sin(theta)) / theta**3
    sine_half = math.sin(0.5 * theta) / (0.5 * theta) if theta > 0.0 else 1.0
    b = 0.5 * sine_half * sine_half  # (1 − cos θ) / θ² by the half angle
    half = 0.5 * sine_half  # sin(θ/2) / θ
    dx, dy, dz, dw = half * wx, half * wy, half * wz, math.cos(0.5 * theta)
    quaternion = np.array([w * dx + x * dw + y * dz - z * dy, w * dy - x * dz + y * dw + z * dx,
                           w * dz + x * dy - y * dx + z * dw, w * dw - x * dx - y * dy - z * dz])
    quaternion /= math.sqrt(float(quaternion @ quaternion))
    if float(quaternion @ q[3:7]) < 0.0:  # keep the input's hemisphere, as the batch path
        quaternion = -quaternion
    vx, vy, vz = step[:3]
    cx, cy, cz = wy * vz - wz * vy, wz * vx - wx * vz, wx * vy - wy * vx  # ω × ν
    ex, ey, ez = wy * cz - wz * cy, wz * cx - wx * cz, wx * cy - wy * cx  # ω × (ω × ν)
    delta = np.array([vx + b * cx + c * ex, vy + b * cy + c * ey, vz + b * cz + c * ez])  # V(ω) ν
    rotation = _rotation_one(x, y, z, w)
    out = np.empty_like(q)
    out[:3] = q[:3] + rotation @ delta
    out[3:7] = quaternion
    out[7:] = q[7:] + step[6:]
    return out


def _rotation_one(x: float, y: float, z: float, w: float) -> np.ndarray:
    """The rotation matrix of one unit quaternion."""
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def difference(q0, q1) -> np.ndarray:
    """The velocity v that ``integrate`` turns q0 into q1 with in unit time: log(T0⁻¹ T1) for the base (in the
    base frame at q0), q1_J − q0_J for the joints. Pinocchio's ``difference(model, q0, q1)``."""
    q0 = check_configuration(q0, "q0")
    q1 = check_configuration(q1, "q1", q0.shape[-1] - BASE_CONFIGURATION)
    r0, r1 = _rotation(q0[..., 3:7]), _rotation(q1[..., 3:7])
    relative_rotation = np.swapaxes(r0, -1, -2) @ r1
    relative_position = np.einsum("...ji,...j->...i", r0, q1[..., :3] - q0[..., :3])
    base = log_se3(relative_rotation, relative_position)
    return np.concatenate([base, q1[..., 7:] - q0[..., 7:]], axis=-1)
