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
           "FunctionController", "DEFAULT_OMEGA", "DEFAULT_ZETA"]

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


class BuiltinController(Controller):
    """A control law evaluated in C, bound to a model and a reference.

    Gains, reference and model are fixed when the law is built (read-only attributes):
    build a new controller to change them. Model *parameter values* stay live.
    """

    law: str = ""

    def __init__(self, model, reference: Reference | None, kp, kd, tau_limit=None, friction: str = "measured"):
        if friction not in ("measured", "reference"):
            raise ValueError(f"friction: expected 'measured' or 'reference', got {friction!r}")
        n = model.n
        if reference is None:
            reference = Hold(np.zeros(n))
        if reference.n != n:
            raise ValueError(f"reference has {reference.n} joints, the model {n}")
        self._model = model
        self._reference = reference
        self._kp = _gain(kp, "kp", n)
        self._kd = _gain(kd, "kd", n)
        self._tau_limit = None if tau_limit is None else _gain(tau_limit, "tau_limit", n)
        self._friction = friction
        self._law = model._control_law(self.law, kp=self._kp, kd=self._kd, tau_limit=self._tau_limit,
                                                friction_at_reference=friction == "reference",
                                                **reference.c_arguments())

    model = property(lambda self: self._model, doc="The robot whose model terms the law uses.")
    reference = property(lambda self: self._reference, doc="The tracked reference (None for NoControl).")
    kp = property(lambda self: self._kp, doc="First gain vector (Kp; Λ for Slotine-Li).")
    kd = property(lambda self: self._kd, doc="Second gain vector (Kd; K for Slotine-Li).")
    tau_limit = property(lambda self: self._tau_limit, doc="Per-joint torque saturation, or None.")
    friction = property(lambda self: self._friction, doc='Where friction is compensated: "measured" or "reference".')

    def __call__(self, t, q, qd, out=None):
        """Torque at time t for the measured state; ``out`` receives it if given."""
        return self._law(t, q, qd, out)

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
