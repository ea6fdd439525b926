"""Independent references for two planar closed-chain mechanisms (NumPy only, no robodyn code).

Written as oracles for issue 12: the generated closed-chain models will be tested against them.
Nothing here is copied from the lecture notes (shared/seeds/004_*); every formula below is checked by
residuals and finite differences in tests/test_closed_chain_reference.py.

Mechanisms
----------
Both are a single planar loop of the same shape: two *anchors* C1(q1), C2(q2), each moved by one actuated
joint, and two massless distal links of length L from the anchors to a common point P = (x, y) (the end
effector), joined there by a revolute joint.

* ``Biglide``: C_i = (∓d/2, q_i) (prismatic feet sliding along y), L = l. Point masses: mf at each foot,
  mp at P. No gravity in the plane by default.
* ``FiveBar``: C_i = O_i + L1 (cos q_i, sin q_i) with O_i = (∓0.1, 0) (the elbows, q_i measured from +x),
  L = L2. Point masses: m_elbow at each elbow, m_end at P. Gravity 9.81 along -y.

Conventions (shared by both)
----------------------------
* Loop equations: h_i(ξ, qa) = |P − C_i(q_i)|² − L² = 0, i = 1, 2, with ξ = (x, y).
* First order: A ξ̇ + B q̇a = 0 with A = ∂h/∂ξ (2x2, rows 2 (P − C_i)ᵀ) and B = ∂h/∂qa (diagonal,
  B_ii = −2 (P − C_i)·∂C_i/∂q_i). J = −A⁻¹B so that ξ̇ = J q̇a.
* Second order: ξ̈ = J q̈a + b with b = J̇ q̇a = −A⁻¹ k, k_i = 2|Ṗ − Ċ_i|² − 2 (P − C_i)·C_i'' q̇_i²
  (C_i'' = ∂²C_i/∂q_i²). J̇ = −A⁻¹(Ȧ J + Ḃ).
* Type-2 (parallel) singularity: det A = 0; type-1 (serial) singularity: det B = 0. Normalised measures
  det A / (4 L²) = sin(angle from distal link 1 to distal link 2) ∈ [−1, 1] and
  det B / (4 L² |C_1'| |C_2'|) = product over the legs of cos(angle between distal link i and the
  direction anchor i moves): sin φ1 sin φ2 for the biglide, sin θ1 sin θ2 for the five-bar.
* Assembly mode ω = sign(det A) = sign of cross(C2 − C1, P − C1): ω = +1 when P lies to the left of the
  directed line from anchor 1 to anchor 2 (for the biglide, whose feet line always goes left to right,
  that is *above* the feet line: y > the line's height at x). ``dgm(qa, mode=ω)``.
* Working mode σ_i = sign(B_ii), one per leg; ``igm(xi, mode=(σ1, σ2))``.
  Biglide: B_ii = 2 (q_i − y), so σ_i = +1 when foot i is *above* the platform point.
  Five-bar: B_ii = 2 cross(P − O_i, C_i − O_i), so σ_i = +1 when elbow i lies counter-clockwise from the
  ray O_i→P (to its left).
  Crossing a type-1 singularity flips a σ_i; crossing a type-2 singularity flips ω.
* Passive joints: biglide φ_i = absolute angle of leg i from +x (the foot does not rotate, so it is the
  joint angle of the revolute at the foot); five-bar θ_i = ψ_i − q_i, the elbow joint angle, ψ_i being
  the absolute angle of distal link i. ``Jp``: (φ̇ or θ̇) = Jp q̇a.

Dynamics in actuated coordinates (virtual work with massless distal links): every point mass m_k at
position p_k(qa) contributes m_k J_kᵀJ_k to M, m_k J_kᵀ b_k to c = C q̇a and −m_k J_kᵀ g to the gravity
vector, where J_k, b_k are its Jacobian and J̇_k q̇a. For the biglide this is the notes' form
M = mf I + mp JᵀJ, c = mp Jᵀ b; C = m_end Jᵀ J̇ (+ anchor terms, zero for both mechanisms) keeps Ṁ − 2C
skew-symmetric. τ = M q̈a + c + g.

Independent multiplier (KKT) model: ``NaturalKKT`` in redundant coordinates z with a constant diagonal
mass matrix, constraints h(z) = 0, their Jacobian H and Ḣż; biglide z = (q1, q2, x, y) (two constraints),
five-bar z = (E1, E2, P) ∈ R⁶ (four constraints: the two proximal lengths and the two distal lengths).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def rot90(v):
    """Rotation by +90° of a 2-vector (or of the last axis of an array)."""
    v = np.asarray(v, dtype=float)
    return np.stack([-v[..., 1], v[..., 0]], axis=-1)


def cross2(a, b):
    """z component of the cross product of two plane vectors."""
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def circle_pair(c1, c2, radius, mode):
    """The intersection of two circles of the same radius centred on c1, c2 that lies on side ``mode``
    (+1 left, -1 right) of the directed line c1 → c2. ValueError when the circles do not meet."""
    c1, c2 = np.asarray(c1, float), np.asarray(c2, float)
    e = c2 - c1
    s = np.hypot(e[0], e[1])
    half = 0.5 * s
    if not 0.0 < half <= radius:
        raise ValueError(f"cannot assemble: anchors {s:.6g} apart, reach {2 * radius:.6g}")
    height = np.sqrt(radius * radius - half * half)
    return 0.5 * (c1 + c2) + mode * height * rot90(e) / s


class _PlanarLoop:
    """Shared kinematics of the one-loop mechanisms (see module docstring). Subclasses give
    ``anchor(qa) -> (2, 2)``, ``anchor_d(qa)`` (∂C_i/∂q_i as rows), ``anchor_dd(qa)`` (∂²C_i/∂q_i²),
    ``L`` (distal length), ``m_anchor``, ``m_end``, ``gravity`` (2-vector acceleration)."""

    L: float
    m_anchor: float
    m_end: float
    gravity: np.ndarray

    # ---- geometry -----------------------------------------------------------------------------
    def dgm(self, qa, mode=1):
        """End-effector point ξ = (x, y) in assembly mode ``mode`` (±1, see module docstring)."""
        C = self.anchor(qa)
        return circle_pair(C[0], C[1], self.L, mode)

    def loop_residual(self, qa, xi):
        """h(ξ, qa): zero when the loop is closed."""
        r = np.asarray(xi, float) - self.anchor(qa)
        return np.sum(r * r, axis=1) - self.L ** 2

    def assembly_mode(self, qa, xi):
        return int(np.sign(np.linalg.det(self.A(qa, xi))))

    def working_mode(self, qa, xi):
        return tuple(int(s) for s in np.sign(np.diag(self.B(qa, xi))))

    # ---- first order --------------------------------------------------------------------------
    def A(self, qa, xi):
        """∂h/∂ξ."""
        return 2.0 * (np.asarray(xi, float) - self.anchor(qa))

    def B(self, qa, xi):
        """∂h/∂qa (diagonal)."""
        r = np.asarray(xi, float) - self.anchor(qa)
        return np.diag(-2.0 * np.sum(r * self.anchor_d(qa), axis=1))

    def J(self, qa, xi):
        """ξ̇ = J q̇a, J = −A⁻¹B."""
        return -np.linalg.solve(self.A(qa, xi), self.B(qa, xi))

    def A_dot(self, qa, qad, xi):
        xid = self.J(qa, xi) @ qad
        return 2.0 * (xid - self.anchor_d(qa) * np.asarray(qad, float)[:, None])

    def B_dot(self, qa, qad, xi):
        qad = np.asarray(qad, float)
        r = np.asarray(xi, float) - self.anchor(qa)
        rd = self.J(qa, xi) @ qad - self.anchor_d(qa) * qad[:, None]
        Cd, Cdd = self.anchor_d(qa), self.anchor_dd(qa)
        return np.diag(-2.0 * (np.sum(rd * Cd, axis=1) + np.sum(r * Cdd, axis=1) * qad))

    def J_dot(self, qa, qad, xi):
        """J̇ = −A⁻¹(Ȧ J + Ḃ)."""
        return -np.linalg.solve(self.A(qa, xi),
                                self.A_dot(qa, qad, xi) @ self.J(qa, xi) + self.B_dot(qa, qad, xi))

    def b(self, qa, qad, xi):
        """J̇ q̇a, from the second derivative of the loop equations."""
        qad = np.asarray(qad, float)
        r = np.asarray(xi, float) - self.anchor(qa)
        rd = self.J(qa, xi) @ qad - self.anchor_d(qa) * qad[:, None]
        k = 2.0 * np.sum(rd * rd, axis=1) - 2.0 * np.sum(r * self.anchor_dd(qa), axis=1) * qad ** 2
        return -np.linalg.solve(self.A(qa, xi), k)

    # ---- singularities ------------------------------------------------------------------------
    def det_A(self, qa, xi):
        return float(np.linalg.det(self.A(qa, xi)))

    def det_B(self, qa, xi):
        return float(np.linalg.det(self.B(qa, xi)))

    def type2_measure(self, qa, xi):
        """det A / (4 L²) = sin of the angle between the distal links; 0 on the type-2 locus."""
        return self.det_A(qa, xi) / (4.0 * self.L ** 2)

    def type1_measure(self, qa, xi):
        """det B normalised to [−1, 1]; 0 on the type-1 locus."""
        n = np.linalg.norm(self.anchor_d(qa), axis=1)
        return self.det_B(qa, xi) / (4.0 * self.L ** 2 * n[0] * n[1])

    # ---- reduced dynamics (actuated coordinates) ----------------------------------------------
    def _points(self, qa, qad, xi):
        """(mass, Jacobian 2x2, J̇q̇a) of every point mass."""
        qad = np.asarray(qad, float)
        Cd, Cdd = self.anchor_d(qa), self.anchor_dd(qa)
        out = []
        for i in range(2):
            Ji = np.zeros((2, 2))
            Ji[:, i] = Cd[i]
            out.append((self.m_anchor, Ji, Cdd[i] * qad[i] ** 2))
        out.append((self.m_end, self.J(qa, xi), self.b(qa, qad, xi)))
        return out

    def mass_matrix(self, qa, mode=1):
        xi = self.dgm(qa, mode)
        return sum(m * Jk.T @ Jk for m, Jk, _ in self._points(qa, np.zeros(2), xi))

    def coriolis_vector(self, qa, qad, mode=1):
        """c = C q̇a."""
        xi = self.dgm(qa, mode)
        return sum(m * Jk.T @ bk for m, Jk, bk in self._points(qa, qad, xi))

    def coriolis_matrix(self, qa, qad, mode=1):
        """C with c = C q̇a and Ṁ − 2C skew: Σ m_k J_kᵀ J̇_k."""
        xi = self.dgm(qa, mode)
        qad = np.asarray(qad, float)
        J = self.J(qa, xi)
        C = self.m_end * J.T @ self.J_dot(qa, qad, xi)
        Cd, Cdd = self.anchor_d(qa), self.anchor_dd(qa)
        for i in range(2):
            C[i, i] += self.m_anchor * (Cd[i] @ Cdd[i]) * qad[i]
        return C

    def gravity_vector(self, qa, mode=1):
        xi = self.dgm(qa, mode)
        return -sum(m * Jk.T @ self.gravity for m, Jk, _ in self._points(qa, np.zeros(2), xi))

    def inverse_dynamics(self, qa, qad, qadd, mode=1):
        return (self.mass_matrix(qa, mode) @ qadd + self.coriolis_vector(qa, qad, mode)
                + self.gravity_vector(qa, mode))

    def forward_dynamics(self, qa, qad, tau, mode=1):
        rhs = np.asarray(tau, float) - self.coriolis_vector(qa, qad, mode) - self.gravity_vector(qa, mode)
        return np.linalg.solve(self.mass_matrix(qa, mode), rhs)

    def kinetic_energy(self, qa, qad, mode=1):
        return 0.5 * qad @ self.mass_matrix(qa, mode) @ qad

    def potential_energy(self, qa, mode=1):
        xi = self.dgm(qa, mode)
        pts = list(self.anchor(qa)) + [xi]
        masses = [self.m_anchor, self.m_anchor, self.m_end]
        return -sum(m * (self.gravity @ p) for m, p in zip(masses, pts))


@dataclass
class Biglide(_PlanarLoop):
    """The notes' biglide: feet at x = ∓d/2 sliding along y (q1, q2), legs of length l to P."""

    d: float = 0.4
    l: float = 0.3606
    mp: float = 3.0
    mf: float = 1.0
    gravity: np.ndarray = None

    def __post_init__(self):
        if self.gravity is None:
            self.gravity = np.zeros(2)
        self.gravity = np.asarray(self.gravity, float)

    L = property(lambda self: self.l)
    m_anchor = property(lambda self: self.mf)
    m_end = property(lambda self: self.mp)

    def anchor(self, qa):
        q1, q2 = qa
        return np.array([[-self.d / 2, q1], [self.d / 2, q2]], dtype=float)

    def anchor_d(self, qa):
        return np.array([[0.0, 1.0], [0.0, 1.0]])

    def anchor_dd(self, qa):
        return np.zeros((2, 2))

    def igm(self, xi, mode=(1, 1)):
        """(q1, q2) for the working mode (σ1, σ2): q_i = y + σ_i √(l² − (x − x_i)²), x_i = ∓d/2."""
        x, y = xi
        out = []
        for xi_foot, s in zip((-self.d / 2, self.d / 2), mode):
            rad = self.l ** 2 - (x - xi_foot) ** 2
            if rad < -1e-12 * self.l ** 2:
                raise ValueError(f"point {xi} out of reach of the foot at x = {xi_foot}")
            out.append(y + s * np.sqrt(max(rad, 0.0)))
        return np.array(out)

    def passive(self, qa, xi):
        """Leg angles φ_i from +x (the foot joints' angles)."""
        r = np.asarray(xi, float) - self.anchor(qa)
        return np.arctan2(r[:, 1], r[:, 0])

    def passive_loop_residual(self, qa, phi):
        """Loop written in the joint variables: A1 + l u(φ1) − A2 − l u(φ2) (2-vector)."""
        C = self.anchor(qa)
        u = np.stack([np.cos(phi), np.sin(phi)], axis=1)
        return C[0] + self.l * u[0] - C[1] - self.l * u[1]

    def A_passive(self, qa, phi):
        """∂(passive loop)/∂φ."""
        v = self.l * rot90(np.stack([np.cos(phi), np.sin(phi)], axis=1))
        return np.stack([v[0], -v[1]], axis=1)

    def B_passive(self, qa, phi):
        """∂(passive loop)/∂qa."""
        return np.array([[0.0, 0.0], [1.0, -1.0]])

    def Jp(self, qa, xi):
        """φ̇ = Jp q̇a, from P = A_i + l u(φ_i): φ̇_i = u_i'·(ξ̇ − q̇_i ŷ) / l."""
        phi = self.passive(qa, xi)
        v = rot90(np.stack([np.cos(phi), np.sin(phi)], axis=1))
        J = self.J(qa, xi)
        return (v @ J - np.diag(v[:, 1])) / self.l

    def type2_gap(self):
        """|q1 − q2| on the type-2 locus (legs aligned, P at the feet's midpoint)."""
        return np.sqrt(4 * self.l ** 2 - self.d ** 2)

    def type1_gap(self):
        """|q1 − q2| on the type-1 locus (one leg horizontal, P at x = ±(l − d/2)); needs 2l > d."""
        return np.sqrt(2 * self.l * self.d - self.d ** 2)

    # the notes' closed forms, written out (the generic point-mass sum gives the same)
    def notes_mass_matrix(self, qa, mode=1):
        J = self.J(qa, self.dgm(qa, mode))
        return self.mf * np.eye(2) + self.mp * J.T @ J

    def notes_coriolis_vector(self, qa, qad, mode=1):
        xi = self.dgm(qa, mode)
        return self.mp * self.J(qa, xi).T @ self.b(qa, qad, xi)


@dataclass
class FiveBar(_PlanarLoop):
    """Planar 5R in a vertical plane: base joints at (∓a, 0), proximal L1 with m_elbow at the elbow,
    massless distal L2, m_end at the end effector."""

    a: float = 0.1
    L1: float = 0.2
    L2: float = 0.3
    m_elbow: float = 0.5
    m_ee: float = 1.0
    g0: float = 9.81

    L = property(lambda self: self.L2)
    m_anchor = property(lambda self: self.m_elbow)
    m_end = property(lambda self: self.m_ee)
    gravity = property(lambda self: np.array([0.0, -self.g0]))

    def base(self):
        return np.array([[-self.a, 0.0], [self.a, 0.0]])

    def anchor(self, qa):
        qa = np.asarray(qa, float)
        return self.base() + self.L1 * np.stack([np.cos(qa), np.sin(qa)], axis=1)

    def anchor_d(self, qa):
        qa = np.asarray(qa, float)
        return self.L1 * np.stack([-np.sin(qa), np.cos(qa)], axis=1)

    def anchor_dd(self, qa):
        qa = np.asarray(qa, float)
        return -self.L1 * np.stack([np.cos(qa), np.sin(qa)], axis=1)

    def igm(self, xi, mode=(1, 1)):
        """(q1, q2) in (−π, π] for the working mode (σ1, σ2): q_i = atan2(P − O_i) + σ_i β_i with
        cos β_i = (L1² + r_i² − L2²) / (2 L1 r_i), r_i = |P − O_i|."""
        out = []
        for O, s in zip(self.base(), mode):
            r = np.asarray(xi, float) - O
            rn = np.hypot(*r)
            cb = (self.L1 ** 2 + rn ** 2 - self.L2 ** 2) / (2 * self.L1 * rn)
            if abs(cb) > 1 + 1e-12:
                raise ValueError(f"point {xi} out of reach of the arm at {O}")
            q = np.arctan2(r[1], r[0]) + s * np.arccos(np.clip(cb, -1.0, 1.0))
            out.append(np.angle(np.exp(1j * q)))
        return np.array(out)

    def distal_angles(self, qa, xi):
        r = np.asarray(xi, float) - self.anchor(qa)
        return np.arctan2(r[:, 1], r[:, 0])

    def passive(self, qa, xi):
        """Elbow joint angles θ_i = ψ_i − q_i in (−π, π]."""
        return np.angle(np.exp(1j * (self.distal_angles(qa, xi) - np.asarray(qa, float))))

    def Jp(self, qa, xi):
        """θ̇ = Jp q̇a: ψ̇_i = w_i·(ξ̇ − Ė_i)/L2 with w_i ⊥ the distal link, θ̇_i = ψ̇_i − q̇_i."""
        psi = self.distal_angles(qa, xi)
        w = rot90(np.stack([np.cos(psi), np.sin(psi)], axis=1))
        Cd = self.anchor_d(qa)
        J = self.J(qa, xi)
        return (w @ J - np.diag(np.sum(w * Cd, axis=1))) / self.L2 - np.eye(2)


# --------------------------------------------------------------------------------------------------
# Independent multiplier model
# --------------------------------------------------------------------------------------------------
class NaturalKKT:
    """Constrained dynamics in redundant coordinates z: M z̈ + Hᵀλ = Sᵀτ + Q, H z̈ = −Ḣż, with a
    constant diagonal M; the actuated velocities are q̇a = S ż (S constant or a function of z)."""

    def __init__(self, masses, h, H, Hdot_zdot, S, Q):
        self.masses = np.asarray(masses, float)
        self.h, self.H, self.Hdot_zdot, self.S, self.Q = h, H, Hdot_zdot, S, Q

    def velocity(self, z, qad):
        """The ż that satisfies H ż = 0 and S ż = q̇a."""
        K = np.vstack([self.H(z), self.S(z)])
        rhs = np.concatenate([np.zeros(K.shape[0] - 2), qad])
        return np.linalg.lstsq(K, rhs, rcond=None)[0]

    def forward(self, z, zd, tau):
        """(z̈, λ)."""
        n = z.size
        H = self.H(z)
        m = H.shape[0]
        K = np.zeros((n + m, n + m))
        K[:n, :n] = np.diag(self.masses)
        K[:n, n:] = H.T
        K[n:, :n] = H
        rhs = np.concatenate([self.S(z).T @ tau + self.Q(z), -self.Hdot_zdot(z, zd)])
        sol = np.linalg.solve(K, rhs)
        return sol[:n], sol[n:]

    def actuated_acceleration(self, z, zd, tau):
        return self.S(z) @ self.forward(z, zd, tau)[0]

    def inverse(self, z, zd, qadd):
        """τ: unknowns (z̈, λ, τ) from the dynamics, the constraint accelerations and S z̈ = q̈a
        (no velocity term: Ṡż = 0 for both mechanisms; for the five-bar it is cross(Ė_i, Ė_i)/L1²)."""
        n = z.size
        H, S = self.H(z), self.S(z)
        m, p = H.shape[0], S.shape[0]
        K = np.zeros((n + m + p, n + m + p))
        K[:n, :n] = np.diag(self.masses)
        K[:n, n:n + m] = H.T
        K[:n, n + m:] = -S.T
        K[n:n + m, :n] = H
        K[n + m:, :n] = S
        rhs = np.concatenate([self.Q(z), -self.Hdot_zdot(z, zd), qadd])
        return np.linalg.solve(K, rhs)[n + m:]


def biglide_kkt(bg: Biglide) -> NaturalKKT:
    """z = (q1, q2, x, y); h_i = |P − foot_i|² − l²."""
    xs = np.array([-bg.d / 2, bg.d / 2])

    def rel(z):
        return np.stack([z[2] - xs, z[3] - z[:2]], axis=1)      # P − foot_i

    def h(z):
        r = rel(z)
        return np.sum(r * r, axis=1) - bg.l ** 2

    def H(z):
        r = rel(z)
        return np.array([[-2 * r[0, 1], 0.0, 2 * r[0, 0], 2 * r[0, 1]],
                         [0.0, -2 * r[1, 1], 2 * r[1, 0], 2 * r[1, 1]]])

    def Hdot_zdot(z, zd):
        rd = np.stack([np.full(2, zd[2]), zd[3] - zd[:2]], axis=1)
        return 2 * np.sum(rd * rd, axis=1)

    S = np.hstack([np.eye(2), np.zeros((2, 2))])
    g = np.asarray(bg.gravity, float)
    return NaturalKKT([bg.mf, bg.mf, bg.mp, bg.mp], h, H, Hdot_zdot, lambda z: S,
                      lambda z: np.concatenate([bg.mf * g[1] * np.ones(2), bg.mp * g]))


def biglide_state(bg: Biglide, qa, mode):
    return np.concatenate([qa, bg.dgm(qa, mode)])


def fivebar_kkt(fb: FiveBar) -> NaturalKKT:
    """z = (E1, E2, P) ∈ R⁶; h = (|E_i − O_i|² − L1², |P − E_i|² − L2²); a torque τ_i at base joint i is
    the force τ_i ⊥(E_i − O_i)/L1² on E_i, and q̈_i = cross(E_i − O_i, Ë_i)/L1² (so S is that row)."""
    O = fb.base()

    def parts(z):
        return z[0:2], z[2:4], z[4:6]

    def h(z):
        E1, E2, P = parts(z)
        return np.array([np.sum((E1 - O[0]) ** 2) - fb.L1 ** 2, np.sum((E2 - O[1]) ** 2) - fb.L1 ** 2,
                         np.sum((P - E1) ** 2) - fb.L2 ** 2, np.sum((P - E2) ** 2) - fb.L2 ** 2])

    def H(z):
        E1, E2, P = parts(z)
        K = np.zeros((4, 6))
        K[0, 0:2] = 2 * (E1 - O[0])
        K[1, 2:4] = 2 * (E2 - O[1])
        K[2, 0:2], K[2, 4:6] = -2 * (P - E1), 2 * (P - E1)
        K[3, 2:4], K[3, 4:6] = -2 * (P - E2), 2 * (P - E2)
        return K

    def Hdot_zdot(z, zd):
        E1d, E2d, Pd = parts(zd)
        return 2 * np.array([E1d @ E1d, E2d @ E2d, (Pd - E1d) @ (Pd - E1d), (Pd - E2d) @ (Pd - E2d)])

    def S(z):
        E1, E2, _ = parts(z)
        K = np.zeros((2, 6))
        K[0, 0:2] = rot90(E1 - O[0]) / fb.L1 ** 2
        K[1, 2:4] = rot90(E2 - O[1]) / fb.L1 ** 2
        return K

    g = fb.gravity
    return NaturalKKT([fb.m_elbow] * 4 + [fb.m_end] * 2, h, H, Hdot_zdot, S,
                      lambda z: np.concatenate([fb.m_elbow * g, fb.m_elbow * g, fb.m_end * g]))


def fivebar_state(fb: FiveBar, qa, mode):
    return np.concatenate([fb.anchor(qa).ravel(), fb.dgm(qa, mode)])


# --------------------------------------------------------------------------------------------------
# Pinocchio cross-library model
# --------------------------------------------------------------------------------------------------
def biglide_pinocchio(bg: Biglide, leg_inertia=1e-12, split_platform=False):
    """(model, constraint model) of the biglide cut at P: two trees PY (foot, mf) → RZ (leg), closed by a
    3-D point contact between the two leg tips. q = v = (q1, φ1, q2, φ2).

    Each leg gets mass and rotational inertia ``leg_inertia`` (Pinocchio's solver fails on exactly
    massless legs). The platform point mass mp rides on leg 1's tip, or with ``split_platform`` half on
    each tip: a point mass has no rotational inertia of its own, so a point mass on the leg's tip is
    exactly the platform behind an ideal revolute joint, and with the split the legs need no fictitious
    inertia at all (``leg_inertia=0``): the same mechanism, exactly, and a well-conditioned KKT."""
    import pinocchio as pin

    model = pin.Model()
    model.gravity = pin.Motion(np.array([*bg.gravity, 0.0]), np.zeros(3))
    foot = pin.Inertia(bg.mf, np.zeros(3), np.zeros((3, 3)))
    tip = pin.SE3(np.eye(3), np.array([bg.l, 0.0, 0.0]))
    share = (0.5 * bg.mp, 0.5 * bg.mp) if split_platform else (bg.mp, 0.0)
    legs = []
    for k, x0 in enumerate((-bg.d / 2, bg.d / 2)):
        jf = model.addJoint(0, pin.JointModelPY(), pin.SE3(np.eye(3), np.array([x0, 0.0, 0.0])), f"q{k + 1}")
        model.appendBodyToJoint(jf, foot, pin.SE3.Identity())
        jl = model.addJoint(jf, pin.JointModelRZ(), pin.SE3.Identity(), f"phi{k + 1}")
        leg = pin.Inertia(leg_inertia, np.array([bg.l / 2, 0, 0]), leg_inertia * np.eye(3))
        leg += pin.Inertia(share[k], tip.translation, np.zeros((3, 3)))
        model.appendBodyToJoint(jl, leg, pin.SE3.Identity())
        legs.append(jl)
    cm = pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, model, legs[0], tip, legs[1], tip,
                                  pin.ReferenceFrame.LOCAL)
    return model, cm


def biglide_pinocchio_qdd(bg: Biglide, qa, qad, tau, mode, leg_inertia=1e-12, split_platform=False,
                          mu=1e-12):
    """q̈a of the Pinocchio model (proximal constraint dynamics, ``constraintDynamics``) at the
    consistent state (qa, q̇a) of assembly mode ``mode``."""
    import pinocchio as pin

    model, cm = biglide_pinocchio(bg, leg_inertia, split_platform)
    data = model.createData()
    cms = pin.StdVec_RigidConstraintModel()
    cms.append(cm)
    cds = pin.StdVec_RigidConstraintData()
    cds.append(cm.createData())
    pin.initConstraintDynamics(model, data, cms, cds)
    xi = bg.dgm(qa, mode)
    phi = bg.passive(qa, xi)
    phid = bg.Jp(qa, xi) @ qad
    q = np.array([qa[0], phi[0], qa[1], phi[1]])
    v = np.array([qad[0], phid[0], qad[1], phid[1]])
    t = np.array([tau[0], 0.0, tau[1], 0.0])
    a = pin.constraintDynamics(model, data, q, v, t, cms, cds, pin.ProximalSettings(1e-14, mu, 200))
    return a[[0, 2]]
