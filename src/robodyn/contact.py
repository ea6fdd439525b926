"""Contacts: constrained forward dynamics, contact forces and impulses at touchdown (docs/floating_base.md).

A contact holds a link frame (by name) to the world: a ``point`` contact its origin (3 rows), a ``surface``
contact its whole placement (6 rows). With Jc the contact Jacobian (``robot.frame_jacobians``, world axes) and
Jc' q' its velocity-product term (``robot.frame_bias_accelerations``), the constrained dynamics is the KKT system

    M q'' + (C q' + g + friction) = tau + Jc^T lambda
    Jc q'' = -(Jc' q' + kd Jc q' + kp e(q))

where lambda are the contact forces (world axes; a surface contact's force, then moment about its origin) and the
second line is the constraint's second derivative with Baumgarte's terms (Baumgarte 1972): kd and kp pull a drifting
contact back to its anchor, e the position (and orientation) error from the anchor. The system is solved with one
Cholesky factorisation of M and one of the contact space's inverse inertia Jc M^-1 Jc^T (the Delassus matrix), no
explicit inverse; ``damping`` regularises redundant contacts (four surface contacts of a quadruped over-constrain it).

Impulses at touchdown: the post-impact velocity v+ with Jc v+ = -e Jc v- (restitution e, 0 by default: a plastic
impact) and M (v+ - v-) = Jc^T Lambda, Lambda the contact impulses.

These are bilateral contacts: forces may pull. ``ContactSolution.unilateral_violations`` reports where a normal
force would pull or leave its friction cone, which a standing or walking controller must avoid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

__all__ = ["Contact", "ContactDynamics", "ContactSolution", "CONTACT_KINDS"]

#: Rows of each kind of contact: a point's position, a surface's position and orientation.
CONTACT_KINDS = {"point": 3, "surface": 6}


@dataclass(frozen=True)
class Contact:
    """One contact: a link frame of the robot (``robot.frame_names``) held by the world."""

    frame: str
    kind: str = "point"

    def __post_init__(self):
        if not isinstance(self.frame, str) or not self.frame:
            raise TypeError(f"contact frame: expected a link name, got {self.frame!r}")
        if self.kind not in CONTACT_KINDS:
            raise ValueError(f"contact {self.frame!r}: kind must be one of {', '.join(CONTACT_KINDS)}, got {self.kind!r}")

    @property
    def rows(self) -> int:
        return CONTACT_KINDS[self.kind]


@dataclass(frozen=True)
class ContactSolution:
    """Accelerations and contact forces of the constrained dynamics at one state."""

    qdd: np.ndarray  # (n,)
    forces: np.ndarray  # (rows,): per contact its force (and moment), world axes, in the contacts' order
    contacts: tuple[Contact, ...]

    def force(self, frame: str) -> np.ndarray:
        """The force (point) or wrench (surface: force, then moment) at one contact."""
        start = 0
        for contact in self.contacts:
            if contact.frame == frame:
                return self.forces[start:start + contact.rows].copy()
            start += contact.rows
        raise KeyError(f"no contact at {frame!r}; contacts: {', '.join(c.frame for c in self.contacts)}")

    def unilateral_violations(self, friction: float = 1.0, normal=(0.0, 0.0, 1.0)) -> list[str]:
        """The contacts whose force pulls (negative along ``normal``) or leaves the friction cone |f_t| <= mu f_n."""
        normal = np.asarray(normal, dtype=float) / np.linalg.norm(normal)
        problems, start = [], 0
        for contact in self.contacts:
            force = self.forces[start:start + 3]
            f_n = float(force @ normal)
            f_t = float(np.linalg.norm(force - f_n * normal))
            if f_n < 0:
                problems.append(f"{contact.frame}: pulls ({f_n:.3g} N along the normal)")
            elif f_t > friction * f_n:
                problems.append(f"{contact.frame}: slips (tangential {f_t:.3g} N > {friction:g} x {f_n:.3g} N)")
            start += contact.rows
        return problems


def _contacts(robot, contacts) -> tuple[Contact, ...]:
    if isinstance(contacts, (str, Contact)):
        contacts = [contacts]
    out = tuple(c if isinstance(c, Contact) else Contact(c) for c in contacts)
    if not out:
        raise ValueError("contacts: give at least one contact frame")
    names = [c.frame for c in out]
    if len(set(names)) != len(names):
        raise ValueError(f"contacts: each frame at most once, got {names}")
    for contact in out:
        robot.frame_index(contact.frame)  # KeyError with suggestions for a wrong name
    return out


def _log3(rotation: np.ndarray) -> np.ndarray:
    """The rotation vector of a rotation matrix (angle below π)."""
    from .floating_base import log_se3

    return log_se3(rotation, np.zeros(3))[3:]


class ContactDynamics:
    """Constrained dynamics of ``robot`` with ``contacts`` (frame names or ``Contact``; a point contact by
    default). ``stiffness`` kp [1/s²] and ``damping_rate`` kd [1/s] are Baumgarte's gains (default kd = 2 sqrt(kp):
    critically damped; kp = 0 holds velocities only). ``damping`` regularises the Delassus matrix (redundant
    contacts; 0 refuses them with an error)."""

    def __init__(self, robot, contacts, stiffness: float = 0.0, damping_rate: float | None = None,
                 damping: float = 0.0):
        self.robot = robot
        self.contacts = _contacts(robot, contacts)
        self._indices = [robot.frame_index(c.frame) for c in self.contacts]
        for name, value in (("stiffness", stiffness), ("damping", damping)):
            if not np.isfinite(value) or value < 0:
                raise ValueError(f"{name}: expected a finite number >= 0, got {value!r}")
        self.stiffness = float(stiffness)
        self.damping_rate = 2.0 * np.sqrt(self.stiffness) if damping_rate is None else float(damping_rate)
        if not np.isfinite(self.damping_rate) or self.damping_rate < 0:
            raise ValueError(f"damping_rate: expected a finite number >= 0, got {damping_rate!r}")
        self.damping = float(damping)
        self.rows = sum(c.rows for c in self.contacts)
        self.anchors: list[np.ndarray] | None = None

    # -- kinematics of the contact set --------------------------------------------------------------

    def jacobian(self, q) -> np.ndarray:
        """Jc (rows x n): the contacts' Jacobians stacked (a point contact's linear rows only)."""
        jacobians = self.robot.frame_jacobians(q)
        return np.vstack([jacobians[i, :c.rows, :] for i, c in zip(self._indices, self.contacts)])

    def bias(self, q, v) -> np.ndarray:
        """Jc' v (rows,)."""
        bias = self.robot.frame_bias_accelerations(q, v)
        return np.concatenate([bias[i, :c.rows] for i, c in zip(self._indices, self.contacts)])

    def anchor(self, q) -> None:
        """Hold each contact where it is at q: the Baumgarte position term pulls it back there."""
        placements = self.robot.frame_placements(q)
        self.anchors = [placements[i].copy() for i in self._indices]

    def error(self, q) -> np.ndarray:
        """e(q): each contact's displacement from its anchor (world), and a surface's rotation vector."""
        if self.anchors is None:
            return np.zeros(self.rows)
        placements = self.robot.frame_placements(q)
        parts = []
        for i, contact, anchor in zip(self._indices, self.contacts, self.anchors):
            pose = placements[i]
            parts.append(pose[:3, 3] - anchor[:3, 3])
            if contact.rows == 6:
                parts.append(anchor[:3, :3] @ _log3(anchor[:3, :3].T @ pose[:3, :3]))
        return np.concatenate(parts)

    # -- dynamics -----------------------------------------------------------------------------------

    def forward_dynamics(self, q, v, tau) -> ContactSolution:
        """q'' and the contact forces under torques tau (n,) with every contact held (Baumgarte-stabilised
        about the anchors set by ``anchor``, velocities only when none are set)."""
        q, v, tau = (np.asarray(x, dtype=float) for x in (q, v, tau))
        J, factor, minv_jt, delassus = self._factorise(q)
        gamma = self.bias(q, v) + self.damping_rate * (J @ v)
        if self.stiffness:
            gamma = gamma + self.stiffness * self.error(q)
        free = scipy.linalg.cho_solve(factor, tau - self.robot.nonlinear_effects(q, v))
        forces = -scipy.linalg.cho_solve(delassus, J @ free + gamma)
        return ContactSolution(free + minv_jt @ forces, forces, self.contacts)

    def impulse(self, q, v, restitution: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """(v+, impulses) at touchdown: Jc v+ = -restitution Jc v-, M (v+ - v-) = Jc^T impulses."""
        if not 0.0 <= restitution <= 1.0:
            raise ValueError(f"restitution: expected a number in [0, 1], got {restitution!r}")
        q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
        J, _, minv_jt, delassus = self._factorise(q)
        impulses = scipy.linalg.cho_solve(delassus, -(1.0 + restitution) * (J @ v))
        return v + minv_jt @ impulses, impulses

    def _factorise(self, q):
        """(Jc, Cholesky of M, M⁻¹ Jcᵀ, Cholesky of the (damped) Delassus matrix Jc M⁻¹ Jcᵀ) at q."""
        J = self.jacobian(q)
        factor = _cholesky(self.robot.M(q), "the mass matrix")
        minv_jt = scipy.linalg.cho_solve(factor, J.T)
        delassus = J @ minv_jt
        if self.damping:
            delassus = delassus + self.damping * np.eye(self.rows)
        return J, factor, minv_jt, _cholesky(delassus, "the contact space's inverse inertia J M^-1 J^T (redundant "
                                                       "contacts? pass damping > 0)")


def _cholesky(matrix: np.ndarray, what: str):
    try:
        return scipy.linalg.cho_factor(matrix)
    except np.linalg.LinAlgError:
        raise ValueError(f"{what} is not positive definite at this state") from None
