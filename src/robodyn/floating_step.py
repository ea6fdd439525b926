"""Integration on the configuration manifold: floating bases and contacts (robodyn.simulation uses it).

A floating base's configuration lives on SE(3) × Rⁿ, its velocity v (base-frame twist, joint rates) in the tangent
space. "rk4" is the Runge-Kutta-Munthe-Kaas method of order 4 (Munthe-Kaas 1998): each stage's configuration is
q ⊕ Ω (the exponential map, ``robot.integrate``), and the base part of Ω evolves by Ω' = dexp⁻¹_{-Ω}(v) =
v + ½ [Ω, v] + 1/12 [Ω, [Ω, v]] (truncated where it no longer changes the order), so the quaternion stays unit and
the step is fourth-order accurate. "semi-implicit-euler" updates v, then moves q with the new v (first order,
symplectic). Accelerations are the free forward dynamics, or the contact-constrained ones (robodyn.contact) with
the contacts anchored where the run starts.

A floating base without contacts is simulated by the compiled twin of this class (``rd_step`` in
native/robodyn_sim.c, the same arithmetic: tests/test_floating_base_compiled_step.py holds them equal to 1e-13);
ManifoldStepper serves contacts, and is the reference.
"""

from __future__ import annotations

import numpy as np

from .contact import ContactDynamics

#: The integrators a floating base or a contact set supports.
MANIFOLD_INTEGRATORS = ("rk4", "semi-implicit-euler")


def _bracket(omega: np.ndarray, v: np.ndarray) -> np.ndarray:
    """[Ω, v] = ad_Ω v on se(3), twists as (linear, angular)."""
    return np.concatenate([np.cross(omega[3:], v[:3]) + np.cross(omega[:3], v[3:]), np.cross(omega[3:], v[3:])])


def check_integrator(robot, integrator: str) -> None:
    """Refuse an integrator a floating base or contacts do not support (only MANIFOLD_INTEGRATORS)."""
    if integrator not in MANIFOLD_INTEGRATORS:
        what = "a floating base" if getattr(robot, "is_floating_base", False) else "contacts"
        raise ValueError(f"{robot.name}: {what} integrate with {' or '.join(MANIFOLD_INTEGRATORS)}, "
                         f"got {integrator!r}")


class ManifoldStepper:
    def __init__(self, robot, integrator: str, contacts=None):
        check_integrator(robot, integrator)
        self.robot = robot
        self.integrator = integrator
        self.floating = bool(getattr(robot, "is_floating_base", False))
        if contacts is not None and not isinstance(contacts, ContactDynamics):
            contacts = ContactDynamics(robot, contacts, stiffness=DEFAULT_STIFFNESS)
        self.contacts = contacts
        self.last_acceleration: np.ndarray | None = None
        self.last_forces: np.ndarray | None = None

    def start(self, q: np.ndarray) -> np.ndarray:
        """Check the initial configuration and anchor the contacts there."""
        q = self.robot._positions(q, "q0") if self.floating else q
        if self.contacts is not None and self.contacts.anchors is None:
            self.contacts.anchor(q)
        return q

    def acceleration(self, q, v, tau, h) -> tuple[np.ndarray, np.ndarray | None]:
        """(q'', the contact forces or None) at one state."""
        if self.contacts is None:
            return self.robot.forward_dynamics(q, v, tau, h), None
        if h is not None:
            tau = tau + self.robot.jacobian(q).T @ h
        solution = self.contacts.forward_dynamics(q, v, tau)
        return solution.qdd, solution.forces

    def _move(self, q, omega):
        if self.floating:
            return self.robot.integrate(q, omega)
        return q + omega

    def _rate(self, omega, v):
        """Ω' for the local coordinates Ω of the configuration: dexp⁻¹ on the base's twist, v on the joints."""
        if not self.floating:
            return v
        base = omega[:6]
        first = _bracket(base, v[:6])
        out = v.copy()
        out[:6] += 0.5 * first + _bracket(base, first) / 12.0
        return out

    def step(self, q, v, tau, h, dt: float):
        """One step of dt from (q, v); ``last_acceleration`` and ``last_forces`` are those at its start."""
        a1, self.last_forces = self.acceleration(q, v, tau, h)
        self.last_acceleration = a1
        if self.integrator == "semi-implicit-euler":
            v_next = v + dt * a1
            self._check(v_next, dt)
            return self._move(q, dt * v_next), v_next
        k1 = v
        omega = 0.5 * dt * k1
        v2 = v + 0.5 * dt * a1
        k2 = self._rate(omega, v2)
        a2 = self.acceleration(self._move(q, omega), v2, tau, h)[0]
        omega = 0.5 * dt * k2
        v3 = v + 0.5 * dt * a2
        k3 = self._rate(omega, v3)
        a3 = self.acceleration(self._move(q, omega), v3, tau, h)[0]
        omega = dt * k3
        v4 = v + dt * a3
        k4 = self._rate(omega, v4)
        a4 = self.acceleration(self._move(q, omega), v4, tau, h)[0]
        v_next = v + dt / 6.0 * (a1 + 2.0 * a2 + 2.0 * a3 + a4)
        self._check(v_next, dt)
        return self._move(q, dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)), v_next

    def _check(self, v, dt: float) -> None:
        """A step that diverged (the step outran a fast mode: stiff damping, light links) stops the run with
        advice rather than a NaN deep in a later routine."""
        if not np.all(np.isfinite(v)) or float(np.max(np.abs(v))) > DIVERGED:
            raise FloatingPointError(f"{self.robot.name}: the integration diverged (a velocity reached "
                                     f"{float(np.max(np.abs(v))):.3g}) with steps of {dt:g} s; the model has modes "
                                     "faster than that (stiff joint damping, light links): use more substeps")

#: Beyond this speed (rad/s or m/s) a run has diverged (RD_DIVERGED in native/robodyn_sim.h: the same).
DIVERGED = 1e6

#: Baumgarte stiffness [1/s²] of contacts given by name to the simulation (critically damped): a drift of the
#: contact points decays within about 0.1 s.
DEFAULT_STIFFNESS = 400.0
