"""Linear-quadratic regulators on the linearised dynamics (robodyn.linearization).

State x = (q, q̇), inputs u = the motor torques (τ = S u, S = ``robot.actuation_matrix``: a passive joint gets
no input). About a point (x₀, u₀) the dynamics are δẋ ≈ A δx + B δu, or over one control period dt the exact
RK4 step δx⁺ ≈ A_d δx + B_d δu (``robot.linearize``).

``LQR`` — infinite horizon, about an equilibrium (q₀, q̇ = 0, u₀ holding it):

* continuous: minimise ∫ δxᵀQδx + δuᵀRδu dt; P solves the algebraic Riccati equation
  (``scipy.linalg.solve_continuous_are``), K = R⁻¹BᵀP;
* discrete (``dt``): minimise Σ δx_kᵀQδx_k + δu_kᵀRδu_k over the harness's own steps (torque held over a
  period, RK4): ``solve_discrete_are`` on (A_d, B_d), K = (R + B_dᵀPB_d)⁻¹B_dᵀPA_d.

The law u = u₀ − K (x − x₀) runs in C (``state-feedback``), inside the harness's compiled loop.

``TimeVaryingLQR`` — tracks a nominal trajectory (x_k, u_k), k = 0..N, sampled at the control period: the
discrete Riccati recursion runs backward along it, P_N = Q_f,
K_k = (R + B_kᵀP_{k+1}B_k)⁻¹ B_kᵀP_{k+1}A_k, P_k = Q + A_kᵀP_{k+1}(A_k − B_k K_k), with (A_k, B_k) the
exact step Jacobians at the nominal samples; u = u_k − K_k (x − x_k) at tick k (evaluated in Python). The
nominal must be a solution of the model's dynamics under the harness's integrator — a simulated run is.

``region_of_attraction`` estimates where an LQR's closed loop (saturation included) converges: the largest
level set {V(x) < ρ} of the linear closed loop's Lyapunov function V = δxᵀPδx in which the *nonlinear*
V̇ is negative at every sampled state (a sampled estimate, not a proof).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .control import BuiltinController, Controller, _gain
from .linearization import joint_torque
from .references import Hold

__all__ = ["LQR", "TimeVaryingLQR", "RegionOfAttraction", "region_of_attraction", "equilibrium_torque"]

EQUILIBRIUM_TOLERANCE = 1e-8  # |q̈| at (q₀, 0, u₀), relative to 1 + |q̈ under gravity alone|


def _weight(value, name: str, size: int, default: float = 1.0) -> np.ndarray:
    """A symmetric positive semi-definite (size x size) weight: None (default · I), a scalar, a diagonal or a
    matrix."""
    if value is None:
        return default * np.eye(size)
    array = np.array(value, dtype=float)
    if array.ndim == 0 or (array.ndim == 1 and array.shape[0] in (1, size)):
        array = np.diag(np.broadcast_to(array.reshape(-1), (size,)))
    if array.shape != (size, size):
        raise ValueError(f"{name}: expected a scalar, {size} diagonal values or a {size}x{size} matrix, got shape "
                         f"{np.shape(value)}")
    if not np.all(np.isfinite(array)) or not np.allclose(array, array.T, rtol=0.0, atol=1e-12 * np.abs(array).max()):
        raise ValueError(f"{name}: must be finite and symmetric")
    return 0.5 * array + 0.5 * array.T  # (no overflow for entries near the largest double)


def _check_weights(Q: np.ndarray, R: np.ndarray) -> None:
    if np.linalg.eigvalsh(Q).min() < -1e-12 * max(1.0, np.abs(Q).max()):
        raise ValueError("Q: must be positive semi-definite")
    if np.linalg.eigvalsh(R).min() <= 0.0:
        raise ValueError("R: must be positive definite")


def equilibrium_torque(robot, q0) -> np.ndarray:
    """The motor torques u₀ (``robot.n_actuated`` values) that hold the robot at rest at q₀: τ = g(q₀) (and the
    friction at rest). Raises ValueError when a passive joint would need a torque: q₀ is then no equilibrium."""
    q0 = np.ascontiguousarray(q0, dtype=float)
    if q0.shape != (robot.n,) or not np.all(np.isfinite(q0)):
        raise ValueError(f"q0: expected {robot.n} finite joint positions, got {q0!r}")
    tau = robot.inverse_dynamics(q0, np.zeros(robot.n), np.zeros(robot.n))
    scale = 1.0 + float(np.max(np.abs(tau)))
    unbalanced = [i for i in robot.passive if abs(tau[i]) > EQUILIBRIUM_TOLERANCE * scale]
    if unbalanced:
        names = ", ".join(f"{robot.joint_names[i]} ({tau[i]:.3g})" for i in unbalanced)
        raise ValueError(f"q0 is not an equilibrium of {robot.name}: the passive joint {names} needs a torque to "
                         "stay at rest, and it has no motor")
    return tau[list(robot.actuated)].copy()


def _motor_limit(robot, tau_limit):
    """``tau_limit`` per joint as given, or per motor spread over the joints (no limit on passive ones)."""
    if tau_limit is None:
        return None
    array = np.array(tau_limit, dtype=float, ndmin=1)
    if array.shape == (robot.n_actuated,) and robot.is_underactuated:
        per_joint = np.full(robot.n, np.finfo(float).max)
        per_joint[list(robot.actuated)] = array
        return per_joint
    return array


class LQR(BuiltinController):
    """Infinite-horizon LQR about the equilibrium (q0, q̇ = 0), evaluated in C: u = u₀ − K (x − x₀), τ = S u.

    ``Q`` (2n x 2n, on δx = (δq, δq̇)) and ``R`` (n_actuated square): None is the identity, a scalar or a
    vector a diagonal. ``dt``: design on the exact discrete-time model of the harness at that period (use
    the harness's period); None: continuous Riccati. ``u0``: the motor torques at the equilibrium (default
    ``equilibrium_torque``: gravity at q0). ``tau_limit``: symmetric saturation per joint (n values) or per
    motor.

    Attributes: ``K`` (n_actuated x 2n), ``P`` (the Riccati solution), ``A``, ``B`` (the model it was
    designed on), ``q0``, ``u0``, ``closed_loop_eigenvalues`` (of A − BK: continuous, or the discrete map's).
    """

    law = "state-feedback"

    def __init__(self, model, q0, *, Q=None, R=None, dt: float | None = None, u0=None, tau_limit=None):
        from scipy.linalg import solve_continuous_are, solve_discrete_are

        n, m = model.n, model.n_actuated
        self.q0 = np.ascontiguousarray(q0, dtype=float).copy()
        if self.q0.shape != (n,) or not np.all(np.isfinite(self.q0)):
            raise ValueError(f"q0: expected {n} finite joint positions, got {q0!r}")
        if u0 is None:
            self.u0 = equilibrium_torque(model, self.q0)
        else:  # per joint or per motor; kept per motor
            self.u0 = joint_torque(model, np.array(u0, dtype=float, ndmin=1))[list(model.actuated)]
        tau0 = joint_torque(model, self.u0)
        if u0 is not None:
            qdd = model.forward_dynamics(self.q0, np.zeros(n), tau0)
            gravity = model.forward_dynamics(self.q0, np.zeros(n), np.zeros(n))
            if not np.max(np.abs(qdd)) <= EQUILIBRIUM_TOLERANCE * (1.0 + np.max(np.abs(gravity))):
                raise ValueError(f"(q0, u0) is not an equilibrium of {model.name}: the accelerations there are "
                                 f"{np.array2string(qdd, precision=3)}")
        self.Q, self.R = _weight(Q, "Q", 2 * n), _weight(R, "R", m)
        _check_weights(self.Q, self.R)
        self.dt = dt
        self.A, self.B = model.linearize(self.q0, np.zeros(n), tau0, dt)
        try:
            if dt is None:
                self.P = solve_continuous_are(self.A, self.B, self.Q, self.R)
                self.K = np.linalg.solve(self.R, self.B.T @ self.P)
            else:
                self.P = solve_discrete_are(self.A, self.B, self.Q, self.R)
                self.K = np.linalg.solve(self.R + self.B.T @ self.P @ self.B, self.B.T @ self.P @ self.A)
        except (np.linalg.LinAlgError, ValueError) as error:
            raise ValueError(f"no stabilising LQR for {model.name} at q0 = {self.q0}: {error} (is the linearisation "
                             "stabilisable from the motors, and (A, Q) detectable?)") from None
        self.closed_loop_eigenvalues = np.linalg.eigvals(self.A - self.B @ self.K)
        self.gain = model.actuation_matrix @ self.K  # n x 2n: zero rows on passive joints
        self.gain.setflags(write=False)
        super().__init__(model, Hold(self.q0), None, None, _motor_limit(model, tau_limit), gain=self.gain,
                         tau_ref=tau0)

    def motor_torque(self, q, qd) -> np.ndarray:
        """u for states of shape (n,) or (N, n), in numpy (the same law as the compiled one, saturation
        included)."""
        x = np.concatenate((np.asarray(q, dtype=float) - self.q0, np.asarray(qd, dtype=float)), axis=-1)
        u = self.u0 - x @ self.K.T
        if self._tau_limit is not None:
            limit = self._tau_limit[list(self._model.actuated)]
            u = np.clip(u, -limit, limit)
        return u

    def __repr__(self) -> str:
        kind = "continuous" if self.dt is None else f"discrete, dt={self.dt:g} s"
        return f"LQR(model={self.model.name!r}, q0={self.q0}, {kind})"


class TimeVaryingLQR(Controller):
    """Tracks a nominal trajectory with the discrete-time Riccati recursion along it (module docstring).

    ``nominal``: a ``Trajectory`` (a run of the harness: its t, q, qd and tau) or a tuple (t, q, qd, tau) with
    t evenly spaced by the control period and tau per joint (zero on passive joints) or per motor. ``Q``,
    ``R`` as for LQR, ``Qf`` the final weight: by default the infinite-horizon (discrete) Riccati solution at
    the last sample, so that a trajectory ending at rest hands over to the LQR there (Q when that has no
    stabilising solution). After the last sample the last gain holds the last state.

    Attributes: ``K`` (N + 1, n_actuated, 2n), ``P`` (N + 1, 2n, 2n), ``t``, ``x`` (N + 1, 2n), ``u``
    (N + 1, n_actuated), ``dt``.
    """

    def __init__(self, model, nominal, *, Q=None, R=None, Qf=None, tau_limit=None):
        n, m = model.n, model.n_actuated
        if hasattr(nominal, "qd"):  # a Trajectory
            t, q, qd, tau = nominal.t, nominal.q, nominal.qd, nominal.tau
        else:
            t, q, qd, tau = nominal
        t = np.asarray(t, dtype=float)
        q, qd = np.asarray(q, dtype=float), np.asarray(qd, dtype=float)
        tau = np.asarray(tau, dtype=float)
        rows = t.shape[0] if t.ndim == 1 else 0
        if rows < 2 or q.shape != (rows, n) or qd.shape != (rows, n) or tau.shape not in ((rows, n), (rows, m)):
            raise ValueError(f"nominal: expected t (N + 1,), q and qd (N + 1, {n}) and tau (N + 1, {n} or {m}) "
                             f"with N >= 1, got shapes {t.shape}, {q.shape}, {qd.shape}, {tau.shape}")
        if not all(np.all(np.isfinite(a)) for a in (t, q, qd, tau)):
            raise ValueError("nominal: must be finite")
        dt = float(t[1] - t[0])
        if not dt > 0.0 or not np.allclose(np.diff(t), dt, rtol=1e-9, atol=0.0):
            raise ValueError("nominal: t must be evenly spaced and increasing (one sample per control period)")
        self.t, self.dt = t - t[0], dt
        self.u = np.array([joint_torque(model, row)[list(model.actuated)] for row in tau])
        self.x = np.hstack((q, qd))
        self.Q, self.R = _weight(Q, "Q", 2 * n), _weight(R, "R", m)
        _check_weights(self.Q, self.R)
        self.Qf = self._final_weight(model, q[-1], qd[-1], self.u[-1], dt) if Qf is None else _weight(Qf, "Qf", 2 * n)
        _check_weights(self.Qf, self.R)
        self._model = model
        self._selection = model.actuation_matrix
        limit = _motor_limit(model, tau_limit)
        self._tau_limit = None if limit is None else _gain(limit, "tau_limit", n)
        self.K = np.empty((rows, m, 2 * n))
        self.P = np.empty((rows, 2 * n, 2 * n))
        for k in range(rows - 1, -1, -1):  # the last sample looks one step past the end, at Qf
            A, B = model.linearize(q[k], qd[k], self.u[k], dt)
            P_next = self.P[k + 1] if k + 1 < rows else self.Qf
            self.K[k] = np.linalg.solve(self.R + B.T @ P_next @ B, B.T @ P_next @ A)
            P = self.Q + A.T @ P_next @ (A - B @ self.K[k])
            self.P[k] = 0.5 * (P + P.T)

    def _final_weight(self, model, q, qd, u, dt) -> np.ndarray:
        from scipy.linalg import solve_discrete_are

        A, B = model.linearize(q, qd, u, dt)
        try:
            P = solve_discrete_are(A, B, self.Q, self.R)
        except (np.linalg.LinAlgError, ValueError):
            return self.Q
        return 0.5 * (P + P.T) if np.all(np.isfinite(P)) else self.Q

    def __call__(self, t, q, qd, out=None):
        k = min(max(int(round(t / self.dt)), 0), self.t.shape[0] - 1)
        x = np.concatenate((q, qd)) - self.x[k]
        tau = self._selection @ (self.u[k] - self.K[k] @ x)
        if self._tau_limit is not None:
            np.clip(tau, -self._tau_limit, self._tau_limit, out=tau)
        if out is not None:
            out[:] = tau
            return out
        return tau


@dataclass(frozen=True)
class RegionOfAttraction:
    """{x : (x − x₀)ᵀ P (x − x₀) < rho}: where the sampled V̇ of the nonlinear closed loop stays negative."""

    x0: np.ndarray
    P: np.ndarray
    rho: float
    samples: int  # states at which V̇ was evaluated
    capped: bool = False  # no sampled state had V̇ ≥ 0 up to the search's bound: rho is that bound, not a failure

    def contains(self, q, qd) -> np.ndarray | bool:
        dx = np.concatenate((np.asarray(q, dtype=float), np.asarray(qd, dtype=float)), axis=-1) - self.x0
        return np.einsum("...i,ij,...j->...", dx, self.P, dx) < self.rho

    def sample(self, count: int, rng: np.random.Generator, fraction: float = 1.0) -> np.ndarray:
        """``count`` states (count, 2n) uniformly distributed inside {V < fraction · rho}."""
        size = self.x0.shape[0]
        directions = rng.standard_normal((count, size))
        directions /= np.linalg.norm(directions, axis=1, keepdims=True)
        radii = rng.random(count) ** (1.0 / size)
        # x = x0 + L^-T (r √(f ρ) d) with P = L Lᵀ: V = f ρ r²
        lower = np.linalg.cholesky(self.P)
        offsets = np.linalg.solve(lower.T, (directions * (radii * np.sqrt(fraction * self.rho))[:, None]).T).T
        return self.x0 + offsets


def region_of_attraction(robot, controller: LQR, *, directions: int = 2000, levels: int = 60,
                         max_level: float | None = None, seed: int = 0) -> RegionOfAttraction:
    """Sampled estimate of the region of attraction of ``controller`` (an LQR) on ``robot`` (the plant, which
    may differ from the controller's model), saturation included.

    V = δxᵀPδx with P the Lyapunov solution of the linear closed loop, AclᵀP + PAcl = −(Q + KᵀRK) (for a
    continuous LQR, its Riccati solution). Along ``directions`` random rays from x₀, V̇ = 2δxᵀP f(x, u(x)) of
    the continuous-time nonlinear closed loop is evaluated at ``levels`` values of V up to ``max_level``;
    ρ is the largest level below the first at which some ray has V̇ ≥ 0 (max_level if none has). Without
    ``max_level``, the level is doubled from a tiny ellipsoid until some ray fails (at most to an ellipsoid
    whose shortest semi-axis is 100 rad or m), and that level is the bound."""
    from scipy.linalg import solve_continuous_lyapunov

    n = robot.n
    A, B = robot.linearize(controller.q0, np.zeros(n), joint_torque(robot, controller.u0))
    closed = A - B @ controller.K
    if np.max(np.linalg.eigvals(closed).real) >= 0.0:
        raise ValueError("the linearised closed loop (continuous time) is not stable: no region of attraction")
    P = solve_continuous_lyapunov(closed.T, -(controller.Q + controller.K.T @ controller.R @ controller.K))
    P = 0.5 * (P + P.T)
    x0 = np.concatenate((controller.q0, np.zeros(n)))
    rng = np.random.default_rng(seed)
    unit = rng.standard_normal((directions, 2 * n))
    unit /= np.sqrt(np.einsum("ki,ij,kj->k", unit, P, unit))[:, None]  # V(unit) = 1
    selection = robot.actuation_matrix
    evaluated = 0

    def decreasing(level: float) -> bool:
        """V̇ < 0 on every ray at V = level."""
        nonlocal evaluated
        evaluated += directions
        dx = unit * np.sqrt(level)
        q, qd = x0[:n] + dx[:, :n], dx[:, n:]
        tau = controller.motor_torque(q, qd) @ selection.T
        with np.errstate(all="ignore"):
            try:
                qdd = robot.forward_dynamics(np.ascontiguousarray(q), np.ascontiguousarray(qd),
                                             np.ascontiguousarray(tau))
            except (ValueError, ArithmeticError):  # M not positive definite out there (a closed chain)
                return False
        vdot = 2.0 * np.einsum("ki,ij,kj->k", dx, P, np.hstack((qd, qdd)))
        return bool(np.all(np.isfinite(vdot)) and np.all(vdot < 0.0))

    if max_level is None:
        unit_level = float(np.linalg.eigvalsh(P).max())  # V = unit_level: the shortest semi-axis is 1
        max_level = 1e-4 * unit_level
        while max_level < 1e4 * unit_level and decreasing(max_level):
            max_level *= 2.0
    rho, previous, capped = max_level, 0.0, True
    for level in max_level * (np.arange(1, levels + 1) / levels) ** 2:  # ascending, denser near x₀
        if not decreasing(level):
            rho, capped = previous, False
            break
        previous = level
    return RegionOfAttraction(x0, P, float(rho), evaluated, capped)
