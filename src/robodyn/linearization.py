"""Forward-dynamics derivatives and linearisation, from the compiled inverse-dynamics derivatives.

The forward dynamics q̈ = FD(q, q̇, τ) solves ID(q, q̇, q̈) = τ. Differentiating that identity,

    ∂ID/∂q + M ∂q̈/∂q = 0,   ∂ID/∂q̇ + M ∂q̈/∂q̇ = 0,   M ∂q̈/∂τ = I,

so one factorisation of M gives all three from ∂ID/∂q, ∂ID/∂q̇ at (q, q̇, FD(q, q̇, τ)): no symbolic
inverse is differentiated. The compiled routine ``forward_dynamics_derivatives`` does exactly that in C (the
sparse L^T D L factorisation of forward dynamics).

``linearize(robot, q, qd, tau)`` is the continuous state-space model of x = (q, q̇) with the motor torques u
as inputs (τ = S u, S = ``robot.actuation_matrix``: a passive joint has no column):
ẋ ≈ A (x − x0) + B (u − u0), A = [[0, I], [∂q̈/∂q, ∂q̈/∂q̇]], B = [[0], [M⁻¹ S]]. With ``dt`` it is the exact
Jacobian of one step of the harness's RK4 (the chain rule through its four stages, the torque held over the
step), so a discrete-time controller or estimator designed on it matches the simulation.

Friction: Coulomb friction fc sgn(q̇) has the derivative zero (taken as zero at q̇ = 0 too, where it does not
exist); viscous friction contributes −M⁻¹ D to ∂q̈/∂q̇.

Parameters: τ is linear in the dynamic parameters π (masses, first and second moments, friction, rotor
inertias; ``robot.dynamic_parameter_names``), so ∂τ/∂π is the compiled regressor Y(q, q̇, q̈), and
``forward_dynamics_parameter_derivatives`` gives ∂q̈/∂π = −M⁻¹ Y(q, q̇, FD(q, q̇, τ)) from the same identity.
"""

from __future__ import annotations

import numpy as np

__all__ = ["forward_dynamics_derivatives", "forward_dynamics_parameter_derivatives", "linearize", "joint_torque"]


def forward_dynamics_derivatives(robot, q, qd, tau) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(∂q̈/∂q, ∂q̈/∂q̇, ∂q̈/∂τ = M⁻¹) at one state; Coulomb friction's derivative is taken as zero. The
    compiled routine ``robot.forward_dynamics_derivatives`` (the formula above, one factorisation of M in C)."""
    q, qd, tau = (np.ascontiguousarray(v, dtype=float) for v in (q, qd, tau))
    return robot.forward_dynamics_derivatives(q, qd, tau)


def forward_dynamics_parameter_derivatives(robot, q, qd, tau) -> np.ndarray:
    """∂q̈/∂π (n x p) at one state, for the dynamic parameters π = ``robot.dynamic_parameters()`` (columns in
    ``robot.dynamic_parameter_names`` order): −M⁻¹ Y(q, q̇, q̈) with q̈ = FD(q, q̇, τ). (∂τ/∂π is
    ``robot.regressor(q, qd, qdd)`` itself.)"""
    from scipy.linalg import cho_factor, cho_solve

    if "regressor" not in robot.routine_names:
        raise AttributeError(f"robot {robot.name!r} has no regressor (closed chains have none yet): no parameter "
                             "derivatives")
    q, qd, tau = (np.ascontiguousarray(v, dtype=float) for v in (q, qd, tau))
    qdd = robot.forward_dynamics(q, qd, tau)
    return -cho_solve(cho_factor(robot.M(q)), robot.regressor(q, qd, qdd))


def joint_torque(robot, tau) -> np.ndarray:
    """The n joint torques for ``tau`` given per joint (n values, zero on passive joints up to round-off, e.g.
    g(q) at an equilibrium) or per motor (``robot.n_actuated`` values, in the order of ``robot.actuated``)."""
    tau = np.ascontiguousarray(tau, dtype=float)
    actuated = list(robot.actuated)
    if tau.shape == (robot.n,):
        tolerance = 1e-9 * (1.0 + float(np.max(np.abs(tau))))
        passive = [i for i in robot.passive if not abs(tau[i]) <= tolerance]
        if passive:
            names = ", ".join(f"{robot.joint_names[i]} ({tau[i]:.6g})" for i in passive)
            raise ValueError(f"tau: {names} has no motor (a passive joint): give 0 there, or the "
                             f"{robot.n_actuated} motor torques only")
        return tau
    if tau.shape == (len(actuated),):
        full = np.zeros(robot.n)
        full[actuated] = tau
        return full
    raise ValueError(f"tau: expected {robot.n} joint torques or {len(actuated)} motor torques, got shape {tau.shape}")


def _continuous(robot, q, qd, tau):
    n = q.size
    d_q, d_qd, m_inv = forward_dynamics_derivatives(robot, q, qd, tau)
    A = np.zeros((2 * n, 2 * n))
    A[:n, n:] = np.eye(n)
    A[n:, :n], A[n:, n:] = d_q, d_qd
    B = np.zeros((2 * n, robot.n_actuated))
    B[n:, :] = m_inv[:, list(robot.actuated)]
    return A, B


def linearize(robot, q, qd, tau, dt: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(A, B) of the state-space model of x = (q, q̇) about (q, q̇, τ): continuous (ẋ = A x + B u), or with
    ``dt`` the exact Jacobians of one RK4 step x_{k+1} = Φ(x_k, u_k) of length ``dt`` (u held). B has a column
    per motor (``robot.actuated``); ``tau`` is given per joint or per motor (see ``joint_torque``)."""
    if getattr(robot, "is_constrained", False):
        raise ValueError(f"{robot.name} has no closed-form reduced model: its multiplier model "
                         "(robodyn.closed_chain.ConstrainedDynamics) has no linearisation yet")
    if getattr(robot, "is_floating_base", False):
        raise ValueError(f"{robot.name} has a floating base: its derivatives on the configuration manifold are not "
                         "built yet (docs/floating_base.md)")
    q, qd = (np.ascontiguousarray(v, dtype=float) for v in (q, qd))
    tau = joint_torque(robot, tau)
    n = q.size
    if dt is None:
        return _continuous(robot, q, qd, tau)
    if isinstance(dt, bool) or not (isinstance(dt, (int, float, np.floating)) and 0.0 < dt < np.inf):
        raise ValueError(f"dt must be a positive, finite number of seconds, got {dt!r}")

    def f(x):
        return np.concatenate((x[n:], robot.forward_dynamics(x[:n], x[n:], tau)))

    def jacobians(x):
        return _continuous(robot, np.ascontiguousarray(x[:n]), np.ascontiguousarray(x[n:]), tau)

    x = np.concatenate((q, qd))
    identity = np.eye(2 * n)
    # k_i = f(x + c_i dt k_{i-1}); dk_i/dx = A_i (I + c_i dt dk_{i-1}/dx), dk_i/du = A_i c_i dt dk_{i-1}/du + B_i
    k1 = f(x)
    A1, B1 = jacobians(x)
    K1x, K1u = A1, B1
    x2 = x + 0.5 * dt * k1
    A2, B2 = jacobians(x2)
    K2x, K2u = A2 @ (identity + 0.5 * dt * K1x), A2 @ (0.5 * dt * K1u) + B2
    k2 = f(x2)
    x3 = x + 0.5 * dt * k2
    A3, B3 = jacobians(x3)
    K3x, K3u = A3 @ (identity + 0.5 * dt * K2x), A3 @ (0.5 * dt * K2u) + B3
    k3 = f(x3)
    x4 = x + dt * k3
    A4, B4 = jacobians(x4)
    K4x, K4u = A4 @ (identity + dt * K3x), A4 @ (dt * K3u) + B4
    Ad = identity + dt / 6.0 * (K1x + 2.0 * K2x + 2.0 * K3x + K4x)
    Bd = dt / 6.0 * (K1u + 2.0 * K2u + 2.0 * K3u + K4u)
    return Ad, Bd
