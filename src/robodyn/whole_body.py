"""Whole-body control of a floating-base robot on contacts: joint PD with gravity compensation.

The base has no motor, so gravity cannot be compensated joint by joint as on an arm: the motors and the contact
forces together must hold it. ``gravity_torques`` finds the joint torques τ and contact forces λ with the smallest
norm such that Sᵀ τ + Jcᵀ λ = g(q) (S selects the motorised joints), a least-squares solve (SciPy) that spreads
the weight over the feet. ``WholeBodyPD`` adds a PD on the joints about a posture:

    τ = τ_g(q) + Kp (q_ref ⊖ q)_joints − Kd q̇_joints

It is a Python controller ``tau = controller(t, q, v)`` for ``robodyn.simulation.simulate``.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from .contact import ContactDynamics

__all__ = ["gravity_torques", "WholeBodyPD"]


def gravity_torques(robot, contacts: ContactDynamics, q) -> tuple[np.ndarray, np.ndarray]:
    """(τ, λ): motor torques (n,: zero on the base and passive joints) and contact forces that balance gravity at
    q with the least squared norm; exact when the contacts can carry the base (four feet, two soles)."""
    q = np.asarray(q, dtype=float)
    actuated = list(robot.actuated)
    gravity = robot.g(q)
    J = contacts.jacobian(q)
    system = np.hstack([np.eye(robot.n)[:, actuated], J.T])
    solution, *_ = scipy.linalg.lstsq(system, gravity)
    tau = np.zeros(robot.n)
    tau[actuated] = solution[:len(actuated)]
    return tau, solution[len(actuated):]


class WholeBodyPD:
    """Joint PD about the posture ``q_ref`` (nq,) with gravity compensation through the ``contacts`` (frame names
    or a ContactDynamics); ``kp``, ``kd`` per motorised joint or one number each. ``tau_limit``: motor saturation."""

    def __init__(self, robot, q_ref, contacts, kp=50.0, kd=2.0, tau_limit=None):
        self.robot = robot
        self.q_ref = robot._positions(q_ref, "q_ref").copy()
        self.contacts = contacts if isinstance(contacts, ContactDynamics) else ContactDynamics(robot, contacts)
        self.actuated = np.array(robot.actuated, dtype=int)
        count = len(self.actuated)
        self.kp = np.broadcast_to(np.asarray(kp, dtype=float), (count,)).copy()
        self.kd = np.broadcast_to(np.asarray(kd, dtype=float), (count,)).copy()
        if np.any(self.kp < 0) or np.any(self.kd < 0) or not np.all(np.isfinite(np.r_[self.kp, self.kd])):
            raise ValueError("kp and kd must be finite and non-negative")
        self.tau_limit = None if tau_limit is None else np.broadcast_to(np.asarray(tau_limit, float), (count,)).copy()
        self.reference = None  # no joint-space reference trajectory (robodyn.simulation reads it)

    def __call__(self, t, q, v) -> np.ndarray:
        tau, _ = gravity_torques(self.robot, self.contacts, q)
        error = self.robot.difference(q, self.q_ref)[self.actuated]
        motors = tau[self.actuated] + self.kp * error - self.kd * np.asarray(v)[self.actuated]
        if self.tau_limit is not None:
            motors = np.clip(motors, -self.tau_limit, self.tau_limit)
        tau[self.actuated] = motors
        return tau
