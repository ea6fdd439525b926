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

from ._arrays import float_array

__all__ = ["forward_dynamics_derivatives", "forward_dynamics_parameter_derivatives", "linearize", "joint_torque"]


def forward_dynamics_derivatives(robot, q, qd, tau) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(∂q̈/∂q, ∂q̈/∂q̇, ∂q̈/∂τ = M⁻¹) at one state; Coulomb friction's derivative is taken as zero. The
    compiled routine ``robot.forward_dynamics_derivatives`` (the formula above, one factorisation of M in C)."""
    q, qd, tau = (float_array(v, name) for v, name in ((q, "q"), (qd, "qd"), (tau, "tau")))
    return robot.forward_dynamics_derivatives(q, qd, tau)


def forward_dynamics_parameter_derivatives(robot, q, qd, tau) -> np.ndarray:
    """∂q̈/∂π (n x p) at one state, for the dynamic parameters π = ``robot.dynamic_parameters()`` (columns in
    ``robot.dynamic_parameter_names`` order): −M⁻¹ Y(q, q̇, q̈) with q̈ = FD(q, q̇, τ). (∂τ/∂π is
    ``robot.regressor(q, qd, qdd)`` itself.)"""
    from scipy.linalg import cho_factor, cho_solve

    if "regressor" not in robot.routine_names:
        raise AttributeError(f"robot {robot.name!r} has no regressor (closed chains have none yet): no parameter "
                             "derivatives")
    q, qd, tau = (float_array(v, name) for v, name in ((q, "q"), (qd, "qd"), (tau, "tau")))
    qdd = robot.forward_dynamics(q, qd, tau)
    return -cho_solve(cho_factor(robot.M(q)), robot.regressor(q, qd, qdd))


def joint_torque(robot, tau) -> np.ndarray:
    """The n joint torques for ``tau`` given per joint (n values, zero on passive joints up to round-off, e.g.
    g(q) at an equilibrium) or per motor (``robot.n_actuated`` values, in the order of ``robot.actuated``)."""
    tau = float_array(tau, "tau")
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


def _step_length(dt):
    if dt is not None and (isinstance(dt, bool) or not (isinstance(dt, (int, float, np.floating)) and 0.0 < dt < np.inf)):
        raise ValueError(f"dt must be a positive, finite number of seconds, got {dt!r}")
    return None if dt is None else float(dt)


def _require_derivatives(robot) -> None:
    if "forward_dynamics_derivatives" not in robot.routine_names:
        floating = getattr(robot, "is_floating_base", False)
        raise ValueError(f"{robot.name} was built without its derivative routines"
                         + (" (a floating base builds them on request)" if floating else "")
                         + ": load it with derivatives='yes' (command line: --derivatives yes)")


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
    _require_derivatives(robot)
    if getattr(robot, "is_floating_base", False):
        return _linearize_floating(robot, q, qd, tau, _step_length(dt))
    q, qd = float_array(q, "q"), float_array(qd, "qd")
    tau = joint_torque(robot, tau)
    n = q.size
    dt = _step_length(dt)
    if dt is None:
        return _continuous(robot, q, qd, tau)

    def staged(x):  # an RK4 stage's state, which a step far too long for the motion takes beyond the doubles
        if not np.all(np.isfinite(x)):
            raise ValueError(f"dt={dt:g} s: an intermediate state of the RK4 step is not finite (the step is far "
                             "too long for the motion at this state); use a shorter dt")
        return x

    def f(x):
        x = staged(x)
        return np.concatenate((x[n:], robot.forward_dynamics(x[:n], x[n:], tau)))

    def jacobians(x):
        x = staged(x)
        return _continuous(robot, np.ascontiguousarray(x[:n]), np.ascontiguousarray(x[n:]), tau)

    x = np.concatenate((q, qd))
    identity = np.eye(2 * n)
    with np.errstate(over="ignore", invalid="ignore"):  # a stage beyond the doubles is refused by staged()
        Ad, Bd = _rk4_jacobians(f, jacobians, x, identity, dt)
    if not (np.all(np.isfinite(Ad)) and np.all(np.isfinite(Bd))):
        raise ValueError(f"dt={dt:g} s: the step's Jacobians are not finite (the step is far too long for the motion "
                         "at this state); use a shorter dt")
    return Ad, Bd


def _rk4_jacobians(f, jacobians, x, identity, dt):
    """(∂Φ/∂x, ∂Φ/∂u) of one RK4 step Φ of length dt, from the stages' f and their Jacobians (A_i, B_i)."""
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


# -- floating bases: the state (q, v) on SE(3) x R^n, linearised in the chart q = q0 ⊕ δ (robot.integrate) -----


def _ad(twist: np.ndarray) -> np.ndarray:
    """ad_ξ on se(3) for twists ordered (linear ν, angular ω): [[ω×, ν×], [0, ω×]] (ad_ξ η = [ξ, η])."""
    out = np.zeros((6, 6))
    nu, omega = twist[:3], twist[3:]
    hat_omega = np.array([[0.0, -omega[2], omega[1]], [omega[2], 0.0, -omega[0]], [-omega[1], omega[0], 0.0]])
    out[:3, :3] = out[3:, 3:] = hat_omega
    out[:3, 3:] = np.array([[0.0, -nu[2], nu[1]], [nu[2], 0.0, -nu[0]], [-nu[1], nu[0], 0.0]])
    return out


def _right_jacobian(omega: np.ndarray) -> np.ndarray:
    """J_r(Ω) = Σ (−ad_Ω)^k / (k+1)! of SE(3): q ⊕ (Ω + η) = (q ⊕ Ω) ⊕ (J_r(Ω) η) to first order in η (SciPy's
    expm of the block matrix [[−ad_Ω, I], [0, 0]], whose upper-right block is that series)."""
    from scipy.linalg import expm

    block = np.zeros((12, 12))
    block[:6, :6] = -_ad(omega)
    block[:6, 6:] = np.eye(6)
    return expm(block)[:6, 6:]


def _adjoint_inverse_exp(omega: np.ndarray) -> np.ndarray:
    """Ad_{exp(−Ω)} = expm(−ad_Ω): moves a tangent vector at q to q ⊕ Ω (q ⊕ δ ⊕ Ω = q ⊕ Ω ⊕ Ad_{exp(−Ω)} δ)."""
    from scipy.linalg import expm

    return expm(-_ad(omega))


def _on_base(block: np.ndarray, n: int) -> np.ndarray:
    """The n × n identity with ``block`` (6 × 6) on the base's coordinates: a map of the tangent space that
    moves only the base's part."""
    out = np.eye(n)
    out[:6, :6] = block
    return out


def _floating_continuous(robot, q, v, tau):
    """(A, B) of ẋ = f(x) in the chart δ = difference(q0, q) about q0: δ̇ = dexp⁻¹(v) = v + ½ [δ, v] + …, so
    ∂δ̇/∂δ = −½ ad_v on the base (zero on the joints) and ∂δ̇/∂v = I; v̇ = FD(q0 ⊕ δ, v, τ)."""
    n = v.size
    d_q, d_v, m_inv = robot.forward_dynamics_derivatives(q, v, tau)
    A = np.zeros((2 * n, 2 * n))
    A[:6, :6] = -0.5 * _ad(v[:6])
    A[:n, n:] = np.eye(n)
    A[n:, :n], A[n:, n:] = d_q, d_v
    return A, m_inv


def _dexp_inverse(omega: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(k, ∂k/∂Ω, ∂k/∂v) of the stepper's rate k = v + ½ [Ω, v] + 1/12 [Ω, [Ω, v]] on the base (the joints: k = v)."""
    n = v.size
    k, d_omega, d_v = v.copy(), np.zeros((n, n)), np.eye(n)
    ad_omega = _ad(omega[:6])
    first = ad_omega @ v[:6]
    k[:6] += 0.5 * first + ad_omega @ first / 12.0
    # ∂/∂Ω: ½ [η, v] + 1/12 ([η, [Ω, v]] + [Ω, [η, v]]) = −½ ad_v η − 1/12 (ad_{[Ω,v]} η + ad_Ω ad_v η)
    ad_v = _ad(v[:6])
    d_omega[:6, :6] = -0.5 * ad_v - (_ad(first) + ad_omega @ ad_v) / 12.0
    d_v[:6, :6] += 0.5 * ad_omega + ad_omega @ ad_omega / 12.0
    return k, d_omega, d_v


def _linearize_floating(robot, q, v, tau, dt):
    """Continuous: (A, B) in the chart about q. With ``dt``: the Jacobians of one step of the harness's RKMK4
    (robodyn.floating_step) with the torque held, the error of x_k in the chart about q_k and that of x_{k+1} in the
    chart about the nominal next configuration: δ_{k+1} = difference(Φ(x̄), Φ(x̄ ⊕ δ)), to first order."""
    q = robot._positions(q, "q")
    v = robot._velocities(v, "qd")
    tau = joint_torque(robot, tau)
    n = v.size
    actuated = list(robot.actuated)
    if dt is None:
        A, m_inv = _floating_continuous(robot, q, v, tau)
        B = np.zeros((2 * n, len(actuated)))
        B[n:, :] = m_inv[:, actuated]
        return A, B

    def acceleration(omega, velocity):
        """(v̇ at q ⊕ Ω, ∂v̇/∂δ (δ moves the step's start q), ∂v̇/∂Ω, ∂v̇/∂velocity, ∂v̇/∂τ = M⁻¹)."""
        point = robot.integrate(q, omega)
        a = robot.forward_dynamics(point, velocity, tau)
        d_q, d_v, m_inv = robot.forward_dynamics_derivatives(point, velocity, tau)
        return (a, d_q @ _on_base(_adjoint_inverse_exp(omega[:6]), n), d_q @ _on_base(_right_jacobian(omega[:6]), n),
                d_v, m_inv)

    # Stages as in ManifoldStepper.step; each quantity carries its Jacobians w.r.t. x = (δ, v) and τ.
    identity, zero = np.eye(n), np.zeros((n, n))
    m = len(actuated)

    def select(matrix):
        return matrix[:, actuated]

    # stage 1 at Ω = 0
    a1, a1_delta, _, a1_v, m1 = acceleration(np.zeros(n), v)
    a1_x, a1_u = np.hstack([a1_delta, a1_v]), select(m1)
    k1, k1_x, k1_u = v, np.hstack([zero, identity]), np.zeros((n, m))
    stages_k, stages_a = [(k1, k1_x, k1_u)], [(a1, a1_x, a1_u)]
    for c in (0.5, 0.5, 1.0):
        k_prev, kx_prev, ku_prev = stages_k[-1]
        a_prev, ax_prev, au_prev = stages_a[-1]
        omega, omega_x, omega_u = c * dt * k_prev, c * dt * kx_prev, c * dt * ku_prev
        velocity = v + c * dt * a_prev
        velocity_x = np.hstack([zero, identity]) + c * dt * ax_prev
        velocity_u = c * dt * au_prev
        k, k_omega, k_v = _dexp_inverse(omega, velocity)
        stages_k.append((k, k_omega @ omega_x + k_v @ velocity_x, k_omega @ omega_u + k_v @ velocity_u))
        a, a_delta, a_omega, a_v, m_stage = acceleration(omega, velocity)
        a_x = np.hstack([a_delta, zero]) + a_omega @ omega_x + a_v @ velocity_x
        a_u = a_omega @ omega_u + a_v @ velocity_u + select(m_stage)
        stages_a.append((a, a_x, a_u))
    weights = (1.0, 2.0, 2.0, 1.0)
    omega = dt / 6.0 * sum(w * k for w, (k, _, _) in zip(weights, stages_k))
    omega_x = dt / 6.0 * sum(w * kx for w, (_, kx, _) in zip(weights, stages_k))
    omega_u = dt / 6.0 * sum(w * ku for w, (_, _, ku) in zip(weights, stages_k))
    v_x = np.hstack([zero, identity]) + dt / 6.0 * sum(w * ax for w, (_, ax, _) in zip(weights, stages_a))
    v_u = dt / 6.0 * sum(w * au for w, (_, _, au) in zip(weights, stages_a))
    # q_{k+1} = (q ⊕ δ) ⊕ Ω(δ, v): in the chart about q ⊕ Ω̄, δ_{k+1} = Ad_{exp(−Ω̄)} δ + J_r(Ω̄) ΔΩ.
    to_next, along = _on_base(_adjoint_inverse_exp(omega[:6]), n), _on_base(_right_jacobian(omega[:6]), n)
    Ad = np.zeros((2 * n, 2 * n))
    Ad[:n] = np.hstack([to_next, zero]) + along @ omega_x
    Ad[n:] = v_x
    Bd = np.vstack([along @ omega_u, v_u])
    return Ad, Bd
