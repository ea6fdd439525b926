"""Independent recursive Newton-Euler inverse dynamics (NumPy only).

A reference for the generated models: a serial arm of revolute joints given by
a standard DH table, written from the textbook recursion and sharing no code
with codegen/. Everything is computed in base (world) coordinates:

* forward pass: angular velocity and acceleration of every link, linear
  acceleration of its frame origin and centre of mass (gravity enters as an
  upward acceleration of the base);
* backward pass: the force and moment each link needs, accumulated from the
  tip, projected on the joint axis z_{i-1}.

Motors (optional), as in the lecture notes: the rotor of joint i rides on
link i-1, centred on joint i's axis, and spins about z_{i-1} at G_i qd_i
relative to link i-1, so ω_rotor = ω_{i-1} + G_i qd_i z_{i-1}. It is massless
with inertia Jm_i about its spin axis only. Its angular momentum about its
centre is h = Jm (z·ω_rotor) z = Jm s z with s = z·ω_{i-1} + G qd_i, and since
z turns with link i-1, ż = ω_{i-1} × z and

    dh/dt = Jm [(z·ω̇_{i-1} + G qdd_i) z + s ω_{i-1} × z].

This moment must be supplied through link i-1 (bearing reactions plus the
motor torque; no force, the rotor is massless): it joins link i-1's moment
balance, which projects it on joints 1..i-1. Joint i moves the rotor with
partial angular velocity G z_{i-1}, so by virtual work joint i needs in addition
G z·dh/dt = G Jm (z·ω̇_{i-1} + G qdd_i). With ``rotor_coupling=False`` only the
G² Jm qdd_i term is kept, as the Robotics Toolbox's rne does.

Friction: viscous qd + coulomb sgn(qd), joint side, per joint.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np


def dh_transform(a, alpha, d, theta):
    """Standard DH: Rz(theta) Tz(d) Tx(a) Rx(alpha)."""
    ct, st, ca, sa = np.cos(theta), np.sin(theta), np.cos(alpha), np.sin(alpha)
    return np.array([[ct, -st * ca, st * sa, a * ct],
                     [st, ct * ca, -ct * sa, a * st],
                     [0.0, sa, ca, d],
                     [0.0, 0.0, 0.0, 1.0]])


@dataclass
class SerialArm:
    """All revolute; per joint i (0-based): dh[i] = (a, alpha, d, theta_offset),
    mass[i], com[i] (link frame), inertia[i] (3x3 about the COM, link-frame axes)."""

    dh: np.ndarray
    mass: np.ndarray
    com: np.ndarray
    inertia: np.ndarray
    gravity: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))
    Jm: np.ndarray | None = None          # rotor inertia about its axis (motor side)
    G: np.ndarray | None = None           # gear ratio
    viscous: np.ndarray | None = None     # joint side
    coulomb: np.ndarray | None = None     # joint side
    rotor_coupling: bool = True

    @property
    def n(self) -> int:
        return len(self.dh)

    def _per_joint(self, values):
        return np.zeros(self.n) if values is None else np.asarray(values, dtype=float)

    def rnea(self, q, qd, qdd) -> np.ndarray:
        n = self.n
        Jm, G = self._per_joint(self.Jm), self._per_joint(self.G)
        # Frames 0..n in world coordinates.
        T = [np.eye(4)]
        for i in range(n):
            a, alpha, d, offset = self.dh[i]
            T.append(T[-1] @ dh_transform(a, alpha, d, q[i] + offset))
        z = [Ti[:3, 2] for Ti in T]
        o = [Ti[:3, 3] for Ti in T]

        # Forward pass. w[i], wd[i]: link i (w[0] = base); acc[i]: origin of frame i.
        w, wd, acc = [np.zeros(3)], [np.zeros(3)], [-np.asarray(self.gravity, dtype=float)]
        F, N, c = [None] * (n + 1), [None] * (n + 1), [None] * (n + 1)
        for i in range(1, n + 1):
            w.append(w[i - 1] + qd[i - 1] * z[i - 1])
            wd.append(wd[i - 1] + qdd[i - 1] * z[i - 1] + qd[i - 1] * np.cross(w[i - 1], z[i - 1]))
            p = o[i] - o[i - 1]
            acc.append(acc[i - 1] + np.cross(wd[i], p) + np.cross(w[i], np.cross(w[i], p)))
            R = T[i][:3, :3]
            r = R @ self.com[i - 1]
            c[i] = o[i] + r
            a_c = acc[i] + np.cross(wd[i], r) + np.cross(w[i], np.cross(w[i], r))
            I = R @ self.inertia[i - 1] @ R.T
            F[i] = self.mass[i - 1] * a_c
            N[i] = I @ wd[i] + np.cross(w[i], I @ w[i])

        def rotor_moment(i):
            """dh/dt of the rotor of joint i (1-based), which rides on link i-1."""
            s = z[i - 1] @ w[i - 1] + G[i - 1] * qd[i - 1]
            s_dot = z[i - 1] @ wd[i - 1] + G[i - 1] * qdd[i - 1]
            return Jm[i - 1] * (s_dot * z[i - 1] + s * np.cross(w[i - 1], z[i - 1]))

        # Backward pass: f, m = force and moment about o[i-1] that link i..n need.
        tau = np.zeros(n)
        f, m = np.zeros(3), np.zeros(3)
        for i in range(n, 0, -1):
            m = m + np.cross(o[i] - o[i - 1], f)         # move the outer moment from o[i] to o[i-1]
            f = f + F[i]
            m = m + N[i] + np.cross(c[i] - o[i - 1], F[i])
            if self.rotor_coupling and i < n:
                m = m + rotor_moment(i + 1)                # rotor i+1 rides on link i
            tau[i - 1] = z[i - 1] @ m
            if self.rotor_coupling:
                tau[i - 1] += G[i - 1] * z[i - 1] @ rotor_moment(i)
            else:
                tau[i - 1] += G[i - 1] ** 2 * Jm[i - 1] * qdd[i - 1]
        tau += self._per_joint(self.viscous) * qd + self._per_joint(self.coulomb) * np.sign(qd)
        return tau

    def mass_matrix(self, q) -> np.ndarray:
        still = replace(self, gravity=np.zeros(3))
        zero = np.zeros(self.n)
        return np.column_stack([still.rnea(q, zero, e) for e in np.eye(self.n)])

    def gravity_torque(self, q) -> np.ndarray:
        zero = np.zeros(self.n)
        return self.rnea(q, zero, zero)


def rnea(arm: SerialArm, q, qd, qdd) -> np.ndarray:
    """τ = M q̈ + C q̇ + g + Fv q̇ + Fs sgn(q̇)."""
    return arm.rnea(np.asarray(q, float), np.asarray(qd, float), np.asarray(qdd, float))


def mass_matrix(arm: SerialArm, q) -> np.ndarray:
    """Columns: rnea with q̇ = 0, no gravity and q̈ = unit vectors."""
    return arm.mass_matrix(np.asarray(q, float))


def gravity(arm: SerialArm, q) -> np.ndarray:
    """g(q) = rnea(q, 0, 0)."""
    return arm.gravity_torque(np.asarray(q, float))
