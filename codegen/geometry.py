"""Homogeneous transforms as exact SymPy matrices."""

from __future__ import annotations

import math

import sympy as sp

#: The --exact-angles tolerance (radians): a constant angle this close to a multiple of pi/2 is taken as it.
QUARTER_TURN_TOLERANCE = 1e-9


def rot_x(angle) -> sp.Matrix:
    c, s = sp.cos(angle), sp.sin(angle)
    return sp.Matrix([[1, 0, 0], [0, c, -s], [0, s, c]])


def rot_y(angle) -> sp.Matrix:
    c, s = sp.cos(angle), sp.sin(angle)
    return sp.Matrix([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def rot_z(angle) -> sp.Matrix:
    c, s = sp.cos(angle), sp.sin(angle)
    return sp.Matrix([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def rot_axis(axis: sp.Matrix, angle) -> sp.Matrix:
    """Rotation about a unit axis (Rodrigues); exact for the coordinate axes."""
    x, y, z = (sp.nsimplify(a) if a.is_Float else a for a in axis)
    if (x, y, z) == (1, 0, 0):
        return rot_x(angle)
    if (x, y, z) == (0, 1, 0):
        return rot_y(angle)
    if (x, y, z) == (0, 0, 1):
        return rot_z(angle)
    if (x, y, z) == (-1, 0, 0):
        return rot_x(-angle)
    if (x, y, z) == (0, -1, 0):
        return rot_y(-angle)
    if (x, y, z) == (0, 0, -1):
        return rot_z(-angle)
    k = sp.Matrix([[0, -z, y], [z, 0, -x], [-y, x, 0]])
    return sp.eye(3) + sp.sin(angle) * k + (1 - sp.cos(angle)) * (k * k)


def rpy(roll, pitch, yaw) -> sp.Matrix:
    """URDF convention: fixed-axis roll about x, then pitch about y, then yaw about z."""
    return rot_z(yaw) * rot_y(pitch) * rot_x(roll)


def nearest_quarter_turn(angle, tolerance: float = QUARTER_TURN_TOLERANCE) -> sp.Expr | None:
    """k pi/2 (0 for k = 0) when the constant ``angle`` is within ``tolerance`` of it, else None (also for
    an angle that depends on parameters). The distance is evaluated with enough digits for the angle's
    magnitude, so an angle of 1e6 rad is judged as precisely as one of 1 rad."""
    if not isinstance(angle, sp.Basic) or angle.free_symbols or not angle.is_number:
        return None
    rough = sp.N(angle, 15)
    if not (rough.is_Number and rough.is_real) or not math.isfinite(float(rough)):
        return None
    value = float(rough)
    digits = 30 + max(0, int(math.log10(abs(value) + 1)))
    k = int(sp.Integer(sp.N(angle / (sp.pi / 2), digits).round()))
    nearest = sp.Integer(k) * sp.pi / 2
    if abs(float(sp.N(angle - nearest, digits))) <= tolerance:
        return nearest
    return None


def snap_quarter_turn(angle, tolerance: float = QUARTER_TURN_TOLERANCE) -> sp.Expr:
    """``nearest_quarter_turn(angle)`` if there is one, else ``angle`` unchanged."""
    nearest = nearest_quarter_turn(angle, tolerance)
    return angle if nearest is None else nearest


def homogeneous(rotation: sp.Matrix | None = None, translation=None) -> sp.Matrix:
    t = sp.eye(4)
    if rotation is not None:
        t[:3, :3] = rotation
    if translation is not None:
        t[:3, 3] = sp.Matrix(translation)
    return t


def screw(kind: str, axis: sp.Matrix, value) -> sp.Matrix:
    """Motion of a joint: rotation about or translation along ``axis``."""
    if kind == "revolute":
        return homogeneous(rot_axis(axis, value))
    return homogeneous(None, axis * value)


def dh_standard(a, alpha, d, theta) -> tuple[sp.Matrix, sp.Matrix]:
    """Split Rz(theta) Tz(d) Tx(a) Rx(alpha) into joint placement and successor.

    The variable part (theta or d) is added by ``screw`` about z; here theta and
    d are the constant parts, which commute with the joint motion along z.
    """
    placement = homogeneous(rot_z(theta), [0, 0, d])
    successor = homogeneous(rot_x(alpha), [a, 0, 0])
    return placement, successor


def dh_modified(a, alpha, d, theta) -> tuple[sp.Matrix, sp.Matrix]:
    """Craig's convention: Rx(alpha) Tx(a) Rz(theta) Tz(d)."""
    placement = homogeneous(rot_x(alpha), [a, 0, 0]) * homogeneous(rot_z(theta), [0, 0, d])
    return placement, sp.eye(4)


AXIS_DIGITS = 30  # precision of an axis that cannot be normalised exactly


def unit_vector(components: list[sp.Expr], norm_squared: sp.Expr) -> list[sp.Expr]:
    """The unit vector, without ``simplify`` (unbounded on nested radicals and trigonometric constants):
    exact when the squared norm is a rational of small terms (after expanding a small expression) or
    already 1 to 40 digits; otherwise 30-digit floats, as the URDF front end bakes constants. (An exact
    sqrt of a rational with large terms, such as 1 + 6.12e-17², from an exporter's rounding noise,
    would leave sqrt of an integer beyond any machine integer in the model.)"""
    if not isinstance(norm_squared, sp.Rational) and sp.count_ops(norm_squared) <= 60:
        norm_squared = sp.expand(norm_squared)
    if isinstance(norm_squared, sp.Rational) and max(abs(norm_squared.p), norm_squared.q) < 10 ** 12:
        try:
            norm = sp.sqrt(norm_squared)
            return [c / norm for c in components]
        except ValueError:  # SymPy 1.14's factor cache can fail on large integers
            pass
    if abs(sp.N(norm_squared - 1, 40)) < sp.Float("1e-35"):
        return components
    norm = sp.sqrt(norm_squared.evalf(AXIS_DIGITS + 10))  # a float: no factoring of a large rational
    return [(c / norm).evalf(AXIS_DIGITS) for c in components]


def quaternion_rotation(x, y, z, w) -> sp.Matrix:
    """Rotation matrix of the unit quaternion (x, y, z, w) (Eigen's and Pinocchio's order), quadratic in it."""
    return sp.Matrix([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                      [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                      [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
