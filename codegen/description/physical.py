"""Is a link's mass and inertia tensor physically possible? One check for both front ends.

A rigid body's inertia tensor about its centre of mass is symmetric positive semi-definite and
its principal moments a <= b <= c obey the triangle inequality a + b >= c (each moment is a
sum of two of the body's second moments of mass, which are non-negative). Real descriptions
print their tensors rounded, and exporters leave floating-point noise on tensors that should be
zero, so each inequality is checked within a tolerance that scales with the tensor:

    tolerance = RELATIVE_TOLERANCE * (largest principal moment) + mass * NOISE_LENGTH**2 + ABSOLUTE_TOLERANCE

* ``RELATIVE_TOLERANCE`` (1e-5) covers printing every entry with 6 significant digits (``%g``):
  each entry is then off by at most 5e-7 of the largest, each principal moment by at most
  1.5e-6 of it, and a + b - c by 4.5e-6 of it;
* ``mass * NOISE_LENGTH**2`` (NOISE_LENGTH = 1 µm) is the inertia of the body's mass spread over a
  micrometre: noise on a point mass's zero tensor (iCub prints 1.1e-18 kg m² on a 1.26 kg link)
  passes, a real body's tensor is never that small;
* ``ABSOLUTE_TOLERANCE`` (1e-18 kg m²) does the same for massless links.

A tensor outside the tolerance is an error naming the link, the inequality and its numbers; the
caller may accept it anyway (``accept_invalid_inertia``) with a warning instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RELATIVE_TOLERANCE = 1e-5
NOISE_LENGTH = 1e-6  # m
ABSOLUTE_TOLERANCE = 1e-18  # kg m^2


@dataclass(frozen=True)
class Violation:
    """One broken inequality: ``message`` says which, with the numbers."""

    inequality: str  # "mass >= 0", "positive semi-definite", "triangle inequality"
    message: str
    excess: float  # by how much it is broken (kg, or kg m^2)
    tolerance: float


def inertia_tolerance(moments: np.ndarray, mass: float | None) -> float:
    """The tolerance of the checks for a tensor with these principal moments and this mass."""
    scale = float(np.abs(moments).max()) if moments.size else 0.0
    return RELATIVE_TOLERANCE * scale + max(mass or 0.0, 0.0) * NOISE_LENGTH**2 + ABSOLUTE_TOLERANCE


def check_mass_properties(mass: float | None, inertia, planar: bool = False) -> list[Violation]:
    """The violated inequalities of a body (empty: physically possible within tolerance).

    ``inertia`` is the 3x3 tensor about the centre of mass (any axes); ``mass`` may be None when
    unknown. ``planar``: only Izz is meaningful (a link that turns about z only), which must not
    be negative."""
    values = np.asarray(inertia, dtype=float)
    violations = []
    if mass is not None and not mass >= 0:
        violations.append(Violation("mass >= 0", f"mass must not be negative (got {mass:g} kg)", -mass, 0.0))
    if planar:
        izz = float(values[2, 2])
        tolerance = inertia_tolerance(np.array([izz]), mass)
        if izz < -tolerance:
            violations.append(Violation("Izz >= 0", f"Izz must not be negative (got {izz:.6g} kg m^2)",
                                        -izz, tolerance))
        return violations
    if not np.all(np.isfinite(values)):
        violations.append(Violation("finite", "inertia tensor has a non-finite entry", float("inf"), 0.0))
        return violations
    symmetric = (values + values.T) / 2
    moments = np.linalg.eigvalsh(symmetric)  # ascending
    a, b, c = (float(m) for m in moments)
    tolerance = inertia_tolerance(moments, mass)
    listing = f"principal moments {a:.6g}, {b:.6g}, {c:.6g} kg m^2"
    if a < -tolerance:
        violations.append(Violation(
            "positive semi-definite",
            f"inertia tensor is not positive semi-definite: smallest principal moment {a:.6g} < 0 "
            f"({listing}; tolerance {tolerance:.3g})", -a, tolerance))
    if a + b < c - tolerance:
        violations.append(Violation(
            "triangle inequality",
            f"inertia tensor violates the triangle inequality I1 + I2 >= I3 of its principal moments: "
            f"{a:.6g} + {b:.6g} = {a + b:.6g} < {c:.6g} (short by {c - a - b:.3g}, tolerance {tolerance:.3g}); "
            "no real body has these moments", c - a - b, tolerance))
    return violations


def describe_violations(violations: list[Violation]) -> str:
    """One message for a body's violations."""
    return "; ".join(v.message for v in violations)
