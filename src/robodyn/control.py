"""Joint-space controllers: tau = controller(t, q, qd).

A controller is any callable ``tau = f(t, q, qd)`` returning n joint torques.
The built-in laws below are evaluated in C (robodyn_sim.c): called from Python
they cost about a microsecond, and inside ``robodyn.simulate`` the whole
closed loop runs in C without the GIL. With e = q_r - q and ė = q̇_r - q̇ for a
reference (q_r, q̇_r, q̈_r) and diagonal gains:

=================  ==========================================================
``PD``             τ = Kp e + Kd ė
``PDGravity``      τ = Kp e + Kd ė + ĝ(q)
``ComputedTorque`` τ = M̂(q) (q̈_r + Kd ė + Kp e) + Ĉ(q, q̇) q̇ + ĝ(q) + f̂(q̇)
``SlotineLi``      v = q̇_r + Λ e, a = q̈_r + Λ ė, s = q̇ − v,
                   τ = M̂(q) a + Ĉ(q, q̇) v + ĝ(q) + f̂(q̇) − K s
``NoControl``      τ = 0 (free motion)
=================  ==========================================================

``AdaptiveSlotineLi`` (Python, per tick) is Slotine-Li on the base-parameter regressor with the
estimate θ̂ adapted online: τ = Y(q, q̇, q̇r, q̈r) θ̂ − K_D s, θ̂̇ = −Γ Yᵀ s.

Hats are the controller's *model*: a ``robodyn.Robot`` with its own parameter
values, so a deliberately wrong model is ``model = robot.copy()`` with a changed
parameter (or another description with the same joints). Slotine-Li's
stability proof uses the skew-symmetry of Ṁ − 2C, which the generated C has.

Default gains (``omega`` rad/s, damping ``zeta``; ``M̂ii`` is the diagonal of
M̂ at the reference's starting position, so each joint gets the same bandwidth):

* PD, PD + gravity: Kp = ω² M̂ii, Kd = 2 ζ ω M̂ii (PD alone leaves the
  steady-state error Kp⁻¹ g(q); adding gravity removes it at rest);
* computed torque: Kp = ω², Kd = 2 ζ ω (error dynamics ë + Kd ė + Kp e = 0);
* Slotine-Li: Λ = ω, K = ω M̂ii (a double pole near −ω with the exact model).

``tau_limit`` (optional, per joint) saturates the output symmetrically.
"""

from __future__ import annotations

import numpy as np

from .references import Hold, Reference

__all__ = ["Controller", "BuiltinController", "NoControl", "PD", "PDGravity", "ComputedTorque", "SlotineLi",
           "AdaptiveSlotineLi", "FunctionController", "DEFAULT_OMEGA", "DEFAULT_ZETA"]

DEFAULT_OMEGA = 20.0
DEFAULT_ZETA = 1.0


class Controller:
    """Interface: ``__call__(t, q, qd) -> tau`` (shape (n,)). ``reference`` may be None."""

    reference: Reference | None = None

    def __call__(self, t: float, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        raise NotImplementedError


def _gain(value, name: str, n: int) -> np.ndarray:
    array = np.array(value, dtype=np.float64, ndmin=1)
    if array.ndim != 1 or array.shape[0] not in (1, n):
        raise ValueError(f"{name}: expected a scalar or {n} values, got shape {np.shape(value)}")
    array = np.ascontiguousarray(np.broadcast_to(array, (n,)), dtype=np.float64)
    if not np.all(np.isfinite(array)) or np.any(array < 0.0):
        raise ValueError(f"{name}: gains must be finite and non-negative, got {array}")
    array.setflags(write=False)
    return array


def _passive_joints(model) -> list[int]:
    """The model's coordinates without a motor (a constrained closed chain's passive joints are handled by its
    multiplier model instead)."""
    if not getattr(model, "is_underactuated", False) or getattr(model, "is_constrained", False):
        return []
    return list(model.passive)


class BuiltinController(Controller):
    """A control law evaluated in C, bound to a model and a reference.

    Gains, reference and model are fixed when the law is built (read-only attributes):
    build a new controller to change them. Model *parameter values* stay live. ``law_arrays``: the
    further arrays some laws take (``state-feedback``: ``gain`` and ``tau_ref``, see robodyn.lqr).
    """

    law: str = ""

    def __init__(self, model, reference: Reference | None, kp, kd, tau_limit=None, friction: str = "measured",
                 **law_arrays):
        if friction not in ("measured", "reference"):
            raise ValueError(f"friction: expected 'measured' or 'reference', got {friction!r}")
        n = model.n
        if reference is None:
            reference = Hold(np.zeros(n))
        if reference.n != n:
            raise ValueError(f"reference has {reference.n} joints, the model {n}")
        self._model = model
        self._reference = reference
        self._kp = None if kp is None else _gain(kp, "kp", n)  # None: a law without diagonal gains
        self._kd = None if kd is None else _gain(kd, "kd", n)
        self._tau_limit = None if tau_limit is None else _gain(tau_limit, "tau_limit", n)
        self._friction = friction
        self._passive = _passive_joints(model)
        self._law = model._control_law(self.law, kp=self._kp, kd=self._kd, tau_limit=self._tau_limit,
                                                friction_at_reference=friction == "reference",
                                                **reference.c_arguments(), **law_arrays)

    model = property(lambda self: self._model, doc="The robot whose model terms the law uses.")
    reference = property(lambda self: self._reference, doc="The tracked reference (None for NoControl).")
    kp = property(lambda self: self._kp, doc="First gain vector (Kp; Λ for Slotine-Li).")
    kd = property(lambda self: self._kd, doc="Second gain vector (Kd; K for Slotine-Li).")
    tau_limit = property(lambda self: self._tau_limit, doc="Per-joint torque saturation, or None.")
    friction = property(lambda self: self._friction, doc='Where friction is compensated: "measured" or "reference".')

    def __call__(self, t, q, qd, out=None):
        """Torque at time t for the measured state; ``out`` receives it if given. A passive joint of the model
        gets zero (the law's torque there has no motor to apply it; the compiled loop drops it too)."""
        tau = self._law(t, q, qd, out)
        if self._passive:
            tau[self._passive] = 0.0
        return tau

    def capsule(self):
        """The compiled law, for a robot module's ``simulate`` (keep this object alive meanwhile)."""
        return self._law.capsule()

    @staticmethod
    def _inertia_diagonal(model, reference: Reference | None) -> np.ndarray:
        q = np.zeros(model.n) if reference is None else np.ascontiguousarray(reference.evaluate(0.0)[0])
        return np.diag(model.M(q)).copy()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(model={self.model.name!r}, reference={type(self.reference).__name__}, "
                f"kp={self.kp}, kd={self.kd})")


class NoControl(BuiltinController):
    """τ = 0: the robot moves freely under gravity, friction and any disturbance."""

    law = "none"

    def __init__(self, model):
        super().__init__(model, None, 0.0, 0.0)
        self._reference = None  # nothing is tracked


class PD(BuiltinController):
    """τ = Kp e + Kd ė. Defaults: Kp = ω² M̂ii, Kd = 2 ζ ω M̂ii."""

    law = "pd"

    def __init__(self, model, reference: Reference | None = None, kp=None, kd=None, *,
                 omega: float = DEFAULT_OMEGA, zeta: float = DEFAULT_ZETA, tau_limit=None):
        if kp is None or kd is None:
            diagonal = self._inertia_diagonal(model, reference)
            kp = omega**2 * diagonal if kp is None else kp
            kd = 2.0 * zeta * omega * diagonal if kd is None else kd
        super().__init__(model, reference, kp, kd, tau_limit)


class PDGravity(PD):
    """τ = Kp e + Kd ė + ĝ(q). Defaults as for PD."""

    law = "pd-gravity"


class ComputedTorque(BuiltinController):
    """τ = M̂ (q̈_r + Kd ė + Kp e) + Ĉ q̇ + ĝ + f̂(q̇) (one inverse-dynamics call). Defaults: Kp = ω², Kd = 2 ζ ω.

    ``friction="reference"`` evaluates f̂ at q̇_r instead of the measured q̇: with Coulomb friction
    the measured velocity's sign chatters while a joint is nearly at rest, and the compensation
    with it; the plan's sign does not. The viscous part then differs by Fv ė, extra damping.
    """

    law = "computed-torque"

    def __init__(self, model, reference: Reference | None = None, kp=None, kd=None, *,
                 omega: float = DEFAULT_OMEGA, zeta: float = DEFAULT_ZETA, tau_limit=None, friction="measured"):
        kp = omega**2 if kp is None else kp
        kd = 2.0 * zeta * omega if kd is None else kd
        super().__init__(model, reference, kp, kd, tau_limit, friction)


class SlotineLi(BuiltinController):
    """Passivity-based: τ = M̂ a + Ĉ v + ĝ + f̂ − K s with v = q̇_r + Λ e, a = q̈_r + Λ ė, s = q̇ − v.

    ``lam`` is Λ (1/s), ``k`` is K (N m s/rad). Defaults: Λ = ω, K = ω M̂ii; with the exact model
    M ṡ + (C + K) s = 0 and ė + Λ e = −s, so each joint's error decays with a double pole near −ω.
    ``friction`` as for ComputedTorque.
    """

    law = "slotine-li"

    def __init__(self, model, reference: Reference | None = None, lam=None, k=None, *,
                 omega: float = DEFAULT_OMEGA, tau_limit=None, friction="measured"):
        lam = omega if lam is None else lam
        if k is None:
            k = omega * self._inertia_diagonal(model, reference)
        super().__init__(model, reference, lam, k, tau_limit, friction)

    @property
    def lam(self) -> np.ndarray:
        return self.kp

    @property
    def k(self) -> np.ndarray:
        return self.kd


class AdaptiveSlotineLi(Controller):
    """Adaptive Slotine-Li control (Slotine & Li 1987) on the model's base parameters.

    With q̃ = q − q_d for the reference (q_d, q̇_d, q̈_d) and diagonal gains Λ, K_D:

        q̇r = q̇_d − Λ q̃,   q̈r = q̈_d − Λ q̃̇,   s = q̇ − q̇r = q̃̇ + Λ q̃,
        τ = Y(q, q̇, q̇r, q̈r) θ̂ − K_D s,        θ̂̇ = −Γ Yᵀ s.

    Y is ``robot.slotine_li_regressor`` (Christoffel C, friction at the measured q̇): Y θ = M q̈r +
    C q̇r + g + Fv q̇ + Fs sgn(q̇) for the base parameters θ (``robot.base_parameters()``, names
    ``base_parameter_names``). With the plant's true θ the loop is M ṡ + (C + K_D) s = Y θ̃
    (θ̃ = θ̂ − θ), and V = ½ sᵀ M s + ½ θ̃ᵀ Γ⁻¹ θ̃ has V̇ = −sᵀ K_D s ≤ 0 (Ṁ − 2C skew): s → 0, so
    q̃ → 0; θ̂ → θ when the reference is persistently exciting (e.g. a sum of sines per joint with
    incommensurate frequencies, or an optimised Fourier excitation).

    ``robot`` is the controller's model: its regressor, and by default θ̂'s start. The plant may be
    another robot object with other parameter values (``plant = robot.copy()``, then change
    ``plant.params``). ``reference``: a Reference, a FourierTrajectory or any object whose
    ``evaluate(t)`` gives (q, q̇, q̈) of shape (n,) for a scalar t and (N, n) for N times.
    ``theta0``: θ̂ at the start of a run; default ``robot.base_parameters()`` at construction, with
    which ``Gamma=0`` is the built-in ``SlotineLi`` (friction="measured") with Λ and K = K_D.

    Update: θ̂ is held over each control period and changes at the ticks, by the time dt between
    calls (a discrete-time law; the plant holds the torque over the period):

    * ``update="euler"`` (default), explicit Euler: θ̂ₖ = θ̂ₖ₋₁ − dt Γ Yₖ₋₁ᵀ sₖ₋₁ (the torque at
      tick k uses the data up to tick k − 1);
    * ``update="trapezoid"``: θ̂ₖ = θ̂ₖ₋₁ − dt/2 Γ (Yₖ₋₁ᵀ sₖ₋₁ + Yₖᵀ sₖ), second order and still
      causal (Yₖ and sₖ do not depend on θ̂ₖ).

    The zero-order hold of the torque leaves a tracking error of order T (the period) that θ̂
    partly absorbs: the estimate's bias shrinks with T (about proportionally), the poorly excited
    parameters (friction) most affected.

    Gains. Λ (1/s) is the bandwidth of q̃ given s (q̃ = s / (p + Λ)); K_D (N m s/rad) damps s, and
    K_D ≈ ω M̂ᵢᵢ as for SlotineLi puts ṡ's pole near −ω (take ω ≥ Λ). Γ (a scalar, b values for a
    diagonal, or a symmetric positive semi-definite (b, b) matrix) sets the adaptation speed. Near
    convergence s ≈ K_D⁻¹ Y θ̃, so θ̃̇ ≈ −Γ R θ̃ with R = mean(Yᵀ K_D⁻¹ Y) along the reference:
    ``suggest_gamma(robot, reference, Kd, time_constant)`` returns Γ = R⁻¹/τₐ, which gives every
    excited direction the time constant τₐ (a diagonal Γ leaves the directions in which parameters
    act alike far slower). Keep τₐ several times 1/Λ and far above the period (the update is
    unstable when dt Γ R is not small); a shorter τₐ learns faster but follows disturbances and
    unmodelled effects more (no projection or leakage here).

    A call at a time not after the previous call's starts a new run: θ̂ returns to ``theta0`` and the
    history is cleared (``reset(theta0=controller.theta)`` beforehand keeps what was learnt).
    ``estimates`` (θ̂ used at each tick, (ticks, b)) and ``times`` record the run. The torque
    returned is the controller's read-only buffer, overwritten by the next call (``out=`` writes
    elsewhere). On a regular time grid (as the harness calls it) the reference is evaluated in
    blocks of ``block`` ticks, so a tick allocates no array data (only NumPy views).

    Example::

        rr = robodyn.load("robots/rr.yaml")                  # the model
        plant = rr.copy(); plant.params["m2"] = 75.0         # the true robot: a payload the model lacks
        ref = robodyn.Sine([0.0, 0.0], [0.8, 0.6], [0.23, 0.37])
        kd = [2900.0, 450.0]                                 # about 20 rad/s times M̂ᵢᵢ
        gamma = robodyn.AdaptiveSlotineLi.suggest_gamma(rr, ref, kd, time_constant=1.0)
        ctrl = robodyn.AdaptiveSlotineLi(rr, ref, Lambda=10.0, Kd=kd, Gamma=gamma)
        q0, qd0, _ = ref.evaluate(0.0)
        run = robodyn.simulate(plant, ctrl, duration=20.0, rate=500.0, q0=q0, qd0=qd0)
        abs(run.tracking_error[-2500:]).max()                # 6e-4 rad in the last 5 s (0.015 early)
        ctrl.estimates[-1], plant.base_parameters()          # θ̂ at the end, the true θ

    One sine per joint makes the tracking error converge but not θ̂ (ZZ1R ends at −88 for −102.5):
    θ̂ → θ needs a persistently exciting reference, e.g. three sines of incommensurate frequencies
    per joint (tests/test_adaptive.py: inertial base parameters within 0.3 % after 15 s).
    """

    UPDATES = ("euler", "trapezoid")

    def __init__(self, robot, reference, *, Lambda, Kd, Gamma, theta0=None, update: str = "euler",
                 block: int = 256):
        n = robot.n
        names = tuple(robot.base_parameter_names)
        b = len(names)
        if reference is None:
            reference = Hold(np.zeros(n))
        if not callable(getattr(reference, "evaluate", None)):
            raise TypeError(f"reference: expected an object with evaluate(t) -> (q, qd, qdd), got "
                            f"{type(reference).__name__}")
        start = [np.asarray(value, dtype=np.float64) for value in reference.evaluate(0.0)]
        if len(start) != 3 or any(value.shape != (n,) for value in start):
            raise ValueError(f"reference: evaluate(0) must give q, qd, qdd of shape ({n},) each")
        if update not in self.UPDATES:
            raise ValueError(f"update: expected one of {', '.join(self.UPDATES)}, got {update!r}")
        if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or not 1 <= block <= 1_000_000:
            raise ValueError(f"block: expected an integer from 1 to 1000000, got {block!r}")
        self._model, self._reference, self._names, self._update = robot, reference, names, update
        self._trapezoid = update == "trapezoid"
        self._lambda = _gain(Lambda, "Lambda", n)
        self._kd = _gain(Kd, "Kd", n)
        self._gamma, self._gamma_diagonal = _adaptation_gain(Gamma, b)
        self._theta0 = _estimate(robot.base_parameters() if theta0 is None else theta0, "theta0", b)
        self._block = int(block)
        self._n, self._b = n, b
        self._regressor = robot.slotine_li_regressor
        # Everything a tick writes, allocated once; rows of the (2, n) buffers are contiguous views.
        errors, shifted, references = np.zeros((2, n)), np.zeros((2, n)), np.zeros((2, n))
        self._tau = np.zeros(n)
        self._tau_view = self._tau.view()
        self._tau_view.flags.writeable = False
        self._theta = self._theta0.copy()
        self._buffers = (errors, errors[0], errors[1], shifted, references, references[0], references[1],
                         np.zeros(n), np.zeros(n), np.zeros((n, b)), self._lambda, self._kd, self._theta)
        self._g, self._g_previous, self._step = np.zeros(b), np.zeros(b), np.zeros(b)
        self._scaled_gamma, self._scaled_dt = self._gamma, None
        self._reference_now = np.zeros((3, n))
        self.reset()

    model = property(lambda self: self._model, doc="The robot whose regressor the law uses.")
    reference = property(lambda self: self._reference, doc="The tracked reference.")
    Lambda = property(lambda self: self._lambda, doc="Λ per joint (1/s).")
    Kd = property(lambda self: self._kd, doc="K_D per joint (N m s/rad).")
    Gamma = property(lambda self: self._gamma, doc="Γ: b values (its diagonal) or a (b, b) matrix.")
    theta0 = property(lambda self: self._theta0, doc="θ̂ at the start of a run.")
    update = property(lambda self: self._update, doc='"euler" or "trapezoid" (see the class docstring).')
    base_parameter_names = property(lambda self: self._names, doc="Names of θ̂'s entries (the model's).")

    @property
    def theta(self) -> np.ndarray:
        """The current estimate θ̂ (a copy)."""
        return self._theta.copy()

    @property
    def estimates(self) -> np.ndarray:
        """θ̂ used at each tick of the run so far, shape (ticks, b) (a copy)."""
        return self._history[:self._count].copy()

    @property
    def times(self) -> np.ndarray:
        """The time of each tick of the run so far (a copy)."""
        return self._times[:self._count].copy()

    def reset(self, theta0=None) -> None:
        """Start a new run: θ̂ = ``theta0`` (given, else the current ``theta0``), empty history."""
        if theta0 is not None:
            self._theta0 = _estimate(theta0, "theta0", self._b)
        self._theta[:] = self._theta0
        self._count = 0
        self._history = np.empty((1024, self._b))
        self._times = np.empty(1024)
        self._last = -np.inf  # the time of the last call
        self._grid = None  # (t0, dt) once two calls have fixed the time grid
        self._rows = None  # the reference on a block of the grid: (times (a list), values (block, 3, n))
        self._row = 0

    # -- the law -----------------------------------------------------------------------------
    def __call__(self, t, q, qd, out=None):
        """Torque at time t for the measured state; records θ̂ and advances it (class docstring)."""
        n = self._n
        if type(q) is not np.ndarray or q.dtype != np.float64 or q.shape != (n,) or not q.flags.c_contiguous:
            q = _measured(q, "q", n)
        if type(qd) is not np.ndarray or qd.dtype != np.float64 or qd.shape != (n,) or not qd.flags.c_contiguous:
            qd = _measured(qd, "qd", n)
        count, times = self._count, self._times
        if count and not t > self._last:
            self.reset()
            count, times = 0, self._times
        errors, e, ed, shifted, references, qdr, qddr, s, tmp, Y, lam, kd, theta = self._buffers
        row = self._reference_at(t, count)  # (3, n): q_d, qd_d, qdd_d
        np.subtract(q, row[0], e)
        np.subtract(qd, row[1], ed)
        np.multiply(lam, errors, shifted)  # Λ q̃, Λ q̃̇
        np.subtract(row[1:], shifted, references)  # q̇r, q̈r
        np.subtract(qd, qdr, s)
        self._regressor(q, qd, qdr, qddr, out=Y)
        g, g_previous, step = self._g, self._g_previous, self._step
        np.dot(s, Y, g)  # Yᵀ s
        if count:
            dt = t - self._last
            if dt != self._scaled_dt:
                self._scaled_gamma, self._scaled_dt = self._gamma * (0.5 * dt if self._trapezoid else dt), dt
            if self._trapezoid:
                np.add(g_previous, g, g_previous)
            if self._gamma_diagonal:
                np.multiply(self._scaled_gamma, g_previous, step)
            else:
                np.dot(self._scaled_gamma, g_previous, step)
            np.subtract(theta, step, theta)
        self._g, self._g_previous = g_previous, g
        if count == times.shape[0]:
            self._history = np.concatenate((self._history, np.empty_like(self._history)))
            self._times = times = np.concatenate((times, np.empty_like(times)))
        self._history[count] = theta
        times[count] = self._last = t
        self._count = count + 1
        tau = self._tau if out is None else out
        np.dot(Y, theta, tau)
        np.multiply(kd, s, tmp)
        np.subtract(tau, tmp, tau)
        return self._tau_view if out is None else out

    def _reference_at(self, t: float, count: int) -> np.ndarray:
        """The reference at t, (3, n): a row of the current block when t is on the grid, else evaluated."""
        rows, row = self._rows, self._row
        if rows is not None and row < self._block and rows[0][row] == t:
            self._row = row + 1
            return rows[1][row]
        if count == 1:
            self._grid = (self._last, t - self._last)
        self._rows = None
        if self._grid is not None:
            t0, dt = self._grid
            k = round((t - t0) / dt)
            if t0 + k * dt == t:  # on the grid: the harness's t = k T
                times = t0 + (k + np.arange(self._block)) * dt
                values = np.stack([np.asarray(v, dtype=np.float64) for v in self._reference.evaluate(times)],
                                  axis=1)
                if values.shape == (self._block, 3, self._n) and times[0] == t and np.all(np.isfinite(values)):
                    self._rows, self._row = (times.tolist(), values), 1
                    return values[0]
        now = self._reference_now
        for i, value in enumerate(self._reference.evaluate(t)):
            now[i] = value
        return now

    # -- analysis and tuning ------------------------------------------------------------------
    def lyapunov(self, trajectory, theta_true, robot=None) -> np.ndarray:
        """V = ½ sᵀ M s + ½ θ̃ᵀ Γ⁻¹ θ̃ at each sample of ``trajectory`` (this controller's last run,
        still in ``estimates``), with M of ``robot`` (default the trajectory's plant) and θ̃ = θ̂ −
        ``theta_true``; Γ must be invertible. With the exact model structure V is non-increasing
        up to the discretisation (continuous time: V̇ = −sᵀ K_D s)."""
        robot = robot if robot is not None else trajectory.robot
        t = np.asarray(trajectory.t)
        if self._count != t.shape[0] or not np.array_equal(self._times[:self._count], t):
            raise ValueError("trajectory: not the run recorded in this controller's history")
        q_d, qd_d, _ = (np.asarray(v) for v in self._reference.evaluate(t))
        s = trajectory.qd - qd_d + self._lambda * (trajectory.q - q_d)
        M = robot.M(np.ascontiguousarray(trajectory.q))
        error = self.estimates - _estimate(theta_true, "theta_true", self._b)
        gamma = np.diag(self._gamma) if self._gamma_diagonal else self._gamma
        weighted = np.linalg.solve(gamma, error.T).T
        return 0.5 * np.einsum("ki,kij,kj->k", s, M, s) + 0.5 * np.einsum("ki,ki->k", error, weighted)

    @staticmethod
    def suggest_gamma(robot, reference, Kd, time_constant: float, *, diagonal: bool = False,
                      duration: float | None = None, samples: int = 400) -> np.ndarray:
        """Γ for the adaptation time constant ``time_constant`` (τₐ, s) along ``reference``.

        Near convergence (ṡ small against K_D s) s ≈ K_D⁻¹ Y θ̃, so θ̃̇ ≈ −Γ R θ̃ with R the mean of
        Yᵀ K_D⁻¹ Y over the reference (Y at q = q_d, q̇ = q̇r = q̇_d, q̈r = q̈_d). The default is the
        matrix Γ = R⁺/τₐ: every excited direction of θ̃ decays with τₐ (R⁺ the pseudo-inverse of R
        scaled to a unit diagonal; directions the reference does not excite are not adapted).
        ``diagonal=True`` gives Γᵢ = 1/(τₐ Rᵢᵢ): τₐ per parameter alone, but much slower in the
        directions where parameters act alike. ``duration`` (default the reference's
        ``measuring_time``, else 20 s) and ``samples`` choose the points.
        """
        if isinstance(time_constant, bool) or not (isinstance(time_constant, (int, float, np.integer, np.floating))
                                                   and 0.0 < time_constant < np.inf):
            raise ValueError(f"time_constant: expected a positive number of seconds, got {time_constant!r}")
        if duration is None:
            duration = float(getattr(reference, "measuring_time", 20.0))
        t = np.linspace(0.0, duration, int(samples), endpoint=False)
        q, qd, qdd = (np.ascontiguousarray(v, dtype=np.float64) for v in reference.evaluate(t))
        Y = robot.slotine_li_regressor(q, qd, qd, qdd)
        kd = _gain(Kd, "Kd", robot.n)
        if not np.all(kd > 0.0):
            raise ValueError(f"Kd: must be positive to suggest Γ, got {kd}")
        R = np.einsum("kia,i,kib->ab", Y, 1.0 / kd, Y) / len(t)
        scale = np.sqrt(np.diag(R))
        excited = scale > 1e-6 * np.max(scale, initial=0.0)
        inverse = np.zeros_like(scale)
        inverse[excited] = 1.0 / scale[excited]
        if diagonal:
            return inverse**2 / time_constant
        gamma = np.linalg.pinv(R * np.outer(inverse, inverse), rcond=1e-10, hermitian=True)
        gamma *= np.outer(inverse, inverse) / time_constant
        return 0.5 * (gamma + gamma.T)


def _adaptation_gain(value, b: int) -> tuple[np.ndarray, bool]:
    """Γ as (b values, True) for a scalar or a diagonal, or ((b, b) matrix, False)."""
    gamma = np.array(value, dtype=np.float64)
    if gamma.ndim != 2:
        return _gain(value, "Gamma", b), True
    if gamma.shape != (b, b) or not np.all(np.isfinite(gamma)):
        raise ValueError(f"Gamma: expected a finite ({b}, {b}) matrix, got shape {gamma.shape}")
    if not np.allclose(gamma, gamma.T, rtol=1e-10, atol=0.0):
        raise ValueError("Gamma: the matrix must be symmetric")
    if np.linalg.eigvalsh(gamma)[0] < -1e-10 * max(float(np.abs(gamma).max()), np.finfo(float).tiny):
        raise ValueError("Gamma: the matrix must be positive semi-definite")
    gamma = np.ascontiguousarray(gamma)
    gamma.setflags(write=False)
    return gamma, False


def _estimate(value, name: str, b: int) -> np.ndarray:
    theta = np.array(value, dtype=np.float64)
    if theta.shape != (b,) or not np.all(np.isfinite(theta)):
        raise ValueError(f"{name}: expected {b} finite base parameters, got shape {theta.shape}")
    theta.setflags(write=False)
    return theta


def _measured(value, name: str, n: int) -> np.ndarray:
    array = np.ascontiguousarray(value, dtype=np.float64)
    if array.shape != (n,) or not np.all(np.isfinite(array)):
        raise ValueError(f"{name}: expected {n} finite values, got shape {array.shape}")
    return array

class FunctionController(Controller):
    """Wrap a Python callable ``tau = f(t, q, qd)``; runs in Python at every control tick."""

    def __init__(self, function, reference: Reference | None = None):
        if not callable(function):
            raise TypeError(f"controller: expected a callable tau = f(t, q, qd), got {type(function).__name__}")
        self.function = function
        self.reference = reference

    def __call__(self, t, q, qd):
        return self.function(t, q, qd)

    def __repr__(self) -> str:
        return f"FunctionController({self.function!r})"


BUILTIN = {"none": NoControl, "pd": PD, "pd-gravity": PDGravity, "computed-torque": ComputedTorque,
           "slotine-li": SlotineLi}


class ZeroTorque(Controller):
    """No torque at all, in Python: free motion of a robot whose module has no compiled control laws (a
    closed chain simulated with multipliers)."""

    law = "none"

    def __init__(self, n: int):
        self.n = int(n)

    def __call__(self, t, q, qd):
        return np.zeros(self.n)

    def __repr__(self) -> str:
        return f"ZeroTorque({self.n})"
