"""Closed-loop simulation and a control-loop harness.

The loop runs at a fixed control period T. At tick k (t = k T) the harness
reads the plant's state, asks the controller for a torque, and writes it; the
plant holds that torque (plus any disturbance) for one period. A run of
``ticks`` periods records ticks + 1 samples, k = 0..ticks.

* ``Plant`` is the interface a real robot implements: ``read() -> (q, qd)`` and
  ``write(tau)``. ``SimulatedPlant`` implements it with the compiled dynamics.
* ``Harness(plant, controller, rate).run(duration, realtime=...)`` runs the loop as
  fast as possible, or paced to absolute deadlines on the monotonic clock, and
  reports per-tick compute time, wake-up jitter and deadline misses.
* ``simulate(robot, controller, duration=...)`` is the one-call form. With a
  built-in controller and a compiled integrator the whole horizon runs in C
  without the GIL (robodyn_sim.c); a Python callable controller, a solve_ivp
  method or real-time pacing use a Python loop around compiled steps.

Integrators ("euler", "semi-implicit-euler", "rk4") take ``substeps`` fixed steps
per control period; any ``scipy.integrate.solve_ivp`` method name ("RK45",
"DOP853", "Radau", ...) integrates each period adaptively instead. solve_ivp
restarts at every period (the torque jumps there), so its steps never exceed the
period: accurate, but costly at high rates; use a lower ``rate`` for free motion.

Disturbances enter as joint torques added to the controller's, and as a wrench
h on the tool (M q̈ + C q̇ + g + friction = τ + Jᵀ h). Each may be None, a
constant, an array with one row per sample, or a function of time, sampled at
each tick and held over the period.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from .control import BuiltinController, Controller, FunctionController, NoControl, ZeroTorque
from .references import Reference

__all__ = ["Plant", "SimulatedPlant", "Harness", "Trajectory", "LoopStats", "simulate", "INTEGRATORS",
           "SingularityError", "SINGULARITY_MARGIN"]

#: A closed chain's run stops when its normalised type-2 measure (the sine of the angle between its two
#: distal links) falls below this: the reduced model's M grows like 1/measure² there.
SINGULARITY_MARGIN = 1e-3


class SingularityError(ValueError):
    """A closed chain's run reached (or crossed) a type-2 singularity; ``trajectory`` holds the samples
    up to the last one before it (t, q, qd), ``time`` when it happened, ``measure`` the normalised det A
    there and ``distance`` an estimate of the distance to the locus in the actuated coordinates."""

    def __init__(self, message: str, time: float, measure: float, distance: float, t=None, q=None, qd=None):
        super().__init__(message)
        self.time, self.measure, self.distance = time, measure, distance
        self.t, self.q, self.qd = t, q, qd


def _distance_to_locus(robot, q: np.ndarray, qd: np.ndarray) -> float:
    """How far q may move along qd before det A changes sign or the mechanism no longer assembles (inf when
    it does not within 10 times |q| + 1; nan when it does not move)."""
    speed = float(np.linalg.norm(qd)) if np.all(np.isfinite(qd)) else 0.0
    if speed == 0.0:
        return float("nan")
    direction = qd / speed
    sign = np.sign(robot.singularity_measures(q)[0])

    def crossed(s: float) -> bool:
        point = q + s * direction
        return (not np.all(np.isfinite(robot.dgm_modes(point))) or
                np.sign(robot.singularity_measures(point)[0]) != sign)

    low, high = 0.0, 1e-9 * (1.0 + float(np.max(np.abs(q))))
    while not crossed(high):
        low, high = high, 2.0 * high
        if high > 10.0 * (1.0 + float(np.max(np.abs(q)))):
            return float("inf")
    for _ in range(60):
        middle = 0.5 * (low + high)
        low, high = (low, middle) if crossed(middle) else (middle, high)
    return high


def _singularity_check(robot, margin: float, t: np.ndarray, q: np.ndarray, qd: np.ndarray) -> None:
    """Raise SingularityError at the first sample whose normalised |det A| is below ``margin`` (or whose
    state is no longer finite: the mechanism came apart)."""
    finite = np.all(np.isfinite(q), axis=1) & np.all(np.isfinite(qd), axis=1)
    measure = np.full(q.shape[0], np.nan)
    measure[finite] = robot.singularity_measures(q[finite])[:, 2]
    assembled = finite.copy()
    assembled[finite] = np.all(np.isfinite(robot.dgm_modes(q[finite])), axis=(1, 2))
    bad = ~assembled | ~(np.abs(np.nan_to_num(measure, nan=0.0)) > margin)
    if not np.any(bad):
        return
    k = int(np.argmax(bad))
    last = max(k - 1, 0)
    usable = assembled[k] and np.isfinite(measure[k])
    value = float(measure[k]) if usable else float(measure[last])
    # Distance to the locus along the direction of motion, in the actuated coordinates (bisection on where
    # the mechanism stops assembling or det A changes sign), from the sample itself or, when it no longer
    # assembles, from the last one before it.
    q_at = q[k] if usable else q[last]
    distance = _distance_to_locus(robot, q_at, qd[k] if usable else qd[last])
    what = "crossed" if not assembled[k] else "reached"
    beyond = " (beyond it the mechanism cannot be assembled in its mode)" if not assembled[k] else ""
    where = "there" if usable else "at the last sample before it"
    away = (f"{distance:.3g} from the locus along the direction of motion in the actuated coordinates"
            if np.isfinite(distance) else "at rest (no direction of motion to measure a distance along)")
    raise SingularityError(
        f"{robot.name}: the run {what} a type-2 (parallel) singularity at t = {t[k]:.6g} s{beyond}: normalised "
        f"det A = {value:.3g} {where} (the sine of the angle between the distal links; the run stops below "
        f"{margin:g}), {away} (q = {np.array2string(q_at, precision=6)}); the dynamics are singular there. The "
        "samples before it are in this error's t, q, qd.", float(t[k]), value, distance, t[:k], q[:k], qd[:k])


INTEGRATORS = ("euler", "semi-implicit-euler", "rk4")


class Plant(Protocol):
    """What the harness needs from a robot, simulated or real."""

    n: int

    def read(self) -> tuple[np.ndarray, np.ndarray]:
        """Measured joint positions and velocities, shape (n,) each."""

    def write(self, tau: np.ndarray) -> None:
        """Command joint torques, held until the next write."""


class _Schedule:
    """A per-tick input: None, a constant vector, one row per sample, or a function of time."""

    def __init__(self, value, width: int, name: str, period: float):
        self.name, self.width, self.period = name, width, period
        self.function: Callable | None = None
        self.array: np.ndarray | None = None
        if value is None:
            return
        if callable(value):
            self.function = value
            return
        array = np.ascontiguousarray(value, dtype=np.float64)
        if array.ndim not in (1, 2) or array.shape[-1] != width:
            raise ValueError(f"{name}: expected shape ({width},) or (samples, {width}), got {array.shape}")
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{name}: contains NaN or infinity")
        self.array = array

    @property
    def present(self) -> bool:
        return self.function is not None or self.array is not None

    def require(self, count: int) -> None:
        """Refuse, before a run starts, a per-sample array too short for ``count`` samples."""
        if self.array is not None and self.array.ndim == 2 and self.array.shape[0] < count:
            raise ValueError(f"{self.name}: has {self.array.shape[0]} rows, the run needs one per sample: {count}")

    def at(self, k: int) -> np.ndarray | None:
        if self.function is not None:
            return self._call(k * self.period)
        if self.array is None:
            return None
        if self.array.ndim == 1:
            return self.array
        if k >= self.array.shape[0]:
            raise ValueError(f"{self.name}: has {self.array.shape[0]} rows, tick {k} needs more")
        return self.array[k]

    def rows(self, start: int, count: int) -> np.ndarray | None:
        """The values for ticks start..start+count-1 as a (count, width) array, or a constant (width,)."""
        if self.function is not None:
            return np.stack([self._call((start + k) * self.period) for k in range(count)])
        if self.array is None or self.array.ndim == 1:
            return self.array
        if start + count > self.array.shape[0]:
            raise ValueError(f"{self.name}: has {self.array.shape[0]} rows, the run needs {start + count}")
        return np.ascontiguousarray(self.array[start:start + count])

    def _call(self, t: float) -> np.ndarray:
        value = np.ascontiguousarray(self.function(t), dtype=np.float64)
        if value.shape != (self.width,) or not np.all(np.isfinite(value)):
            raise ValueError(f"{self.name}({t:g}): expected {self.width} finite values, got {value!r}")
        return value


class SimulatedPlant:
    """The compiled robot as a plant: ``write(tau)`` advances the state by one control period.

    ``robot`` is the true plant (its parameters may differ from the controller's model);
    ``disturbance`` (joint torques) and ``wrench`` (on the tool) are added to every write. A passive joint
    (not in the description's ``actuated`` list) has no motor: the torque written for it is dropped, while a
    disturbance still acts on it.
    """

    def __init__(self, robot, period: float, q0=None, qd0=None, *, integrator: str = "rk4", substeps: int = 1,
                 disturbance=None, wrench=None, rtol: float = 1e-9, atol: float = 1e-11,
                 singularity_margin: float = SINGULARITY_MARGIN, contacts=None):
        if (isinstance(period, bool) or not isinstance(period, (int, float, np.integer, np.floating))
                or not 0.0 < period <= MAX_PERIOD):
            raise ValueError(f"period must be a positive number of seconds, at most {MAX_PERIOD:g}, got {period!r}")
        if not isinstance(integrator, str) or (integrator not in INTEGRATORS and integrator not in _ivp_methods()):
            raise ValueError(f"unknown integrator {integrator!r}; expected one of {', '.join(INTEGRATORS)} "
                             f"or a solve_ivp method ({', '.join(_ivp_methods())})")
        if (isinstance(substeps, bool) or not isinstance(substeps, (int, np.integer))
                or not 1 <= substeps <= MAX_SUBSTEPS):
            raise ValueError(f"substeps must be an integer from 1 to {MAX_SUBSTEPS}, got {substeps!r}")
        for name, value in (("rtol", rtol), ("atol", atol)):
            if not (isinstance(value, (int, float, np.floating)) and 0.0 < value < 1.0):
                raise ValueError(f"{name} must be a number in (0, 1), got {value!r}")
        self.robot = robot
        self.n = robot.n
        self.nq = getattr(robot, "nq", robot.n)
        self.period = float(period)
        self.integrator = integrator
        self.substeps = int(substeps)
        self.rtol, self.atol = rtol, atol
        # Contacts: the manifold stepper in Python (robodyn.floating_step). A floating base without them: the
        # compiled step, the same RKMK4 or semi-implicit Euler on SE(3) x R^n (rd_step in robodyn_sim.c).
        self.manifold = None
        floating = bool(getattr(robot, "is_floating_base", False))
        self.floating = floating and contacts is None
        if contacts is not None:
            from .floating_step import ManifoldStepper

            self.manifold = ManifoldStepper(robot, integrator, contacts)
        elif floating:
            from .floating_step import check_integrator

            check_integrator(robot, integrator)
        self.q = _state(robot.neutral() if q0 is None and (floating or contacts is not None) else q0, "q0", self.nq)
        self.qd = _state(qd0, "qd0", self.n)
        if self.manifold is not None:
            self.q[:] = self.manifold.start(self.q)
        elif self.floating:
            self.q[:] = robot._positions(self.q, "q0")  # a unit quaternion (within the tolerance)
        # A floating or manifold plant's acceleration (and contact forces) at the state before its last write; a
        # floating plant's is one buffer, rewritten by each write (a control loop allocates nothing per tick).
        self.last_acceleration: np.ndarray | None = np.empty(self.n) if self.floating else None
        self.last_forces: np.ndarray | None = None
        self.tick = 0
        self.disturbance = _Schedule(disturbance, self.n, "disturbance", self.period)
        self.wrench = _Schedule(wrench, 6, "wrench", self.period)
        # What the last write applied (a disturbance function is sampled once per tick).
        self.last_applied: np.ndarray | None = None
        self.last_wrench: np.ndarray | None = None
        self.constrained = None  # set below for a closed chain without a reduced model
        # 1 on a motorised coordinate, 0 on a passive one (None: every joint has a motor)
        self.actuation: np.ndarray | None = None
        if getattr(robot, "is_underactuated", False) and not getattr(robot, "is_constrained", False):
            self.actuation = np.ones(self.n)
            self.actuation[list(robot.passive)] = 0.0
            self.actuation.setflags(write=False)
        # Per-write constants: write() runs at every tick of a Python loop.
        self._step = robot._step if self.compiled else None
        self._dt = self.period / self.substeps
        if (isinstance(singularity_margin, bool) or not isinstance(singularity_margin, (int, float, np.floating))
                or not 0.0 <= singularity_margin < 1.0):
            raise ValueError(f"singularity_margin must be a number in [0, 1), got {singularity_margin!r}")
        # Closed chains: stop at a type-2 singularity instead of integrating through it.
        self.singularity_margin = float(singularity_margin) if getattr(robot, "is_closed_chain", False) else 0.0
        # A closed chain without a reduced model: the multiplier model in its tree coordinates.
        if getattr(robot, "is_constrained", False):
            self._start_constrained(robot)
        elif self.singularity_margin > 0.0:
            _singularity_check(robot, self.singularity_margin, np.zeros(1), self.q[None], self.qd[None])

    def _explain_failed_step(self, before, applied, h) -> None:
        """Raise SingularityError when a failed step started within reach of a type-2 singularity (it crossed
        the locus, where M is singular); return otherwise (the step's own error stands: a NaN torque, say)."""
        if not np.all(np.isfinite(applied)) or (h is not None and not np.all(np.isfinite(h))):
            return
        q, qd = before
        # Near the locus the accelerations grow without bound, so a step's stages can overshoot far beyond
        # |qd| dt: a singularity within 100 such steps, or a state already within 0.05 of it, is the cause.
        reach = 100.0 * float(np.linalg.norm(qd)) * self.period + 1e-9 * (1.0 + float(np.max(np.abs(q))))
        near = abs(float(self.robot.singularity_measures(q)[2])) < 0.05
        if not (near or _distance_to_locus(self.robot, q, qd) <= reach):
            return
        times = np.array([self.t, self.t + self.period])
        _singularity_check(self.robot, self.singularity_margin, times, np.vstack([q, np.full(self.n, np.nan)]),
                           np.vstack([qd, np.full(self.n, np.nan)]))

    def _start_constrained(self, robot) -> None:
        from .closed_chain import ConstrainedDynamics

        if self.integrator != "rk4":
            raise ValueError(f"{robot.name} has no closed-form reduced model: it is simulated with multipliers and "
                             f"rk4 (got integrator {self.integrator!r})")
        if self.wrench.present:
            raise ValueError(f"{robot.name}: a tool wrench is not supported by the multiplier model yet")
        self.constrained = ConstrainedDynamics(robot)
        residual = float(np.max(np.abs(robot.loop_residual(self.q))))
        if residual > 1e-9 * max(1.0, float(np.max(np.abs(self.q)))):
            raise ValueError(f"q0 does not close the loops of {robot.name} (residual {residual:.3g}); give assembled "
                             "tree positions, e.g. robodyn.closed_chain.ConstrainedDynamics(robot).assemble(qa, guess)")
        q, qd = self.constrained.project(self.q, self.qd)
        self.q[:], self.qd[:] = q, qd
        self._step = None
        self._check_constrained()

    def _check_constrained(self) -> None:
        if self.singularity_margin <= 0.0:
            return
        measure = self.constrained.singularity_measure(self.q)
        if measure < self.singularity_margin:
            raise SingularityError(
                f"{self.robot.name}: the run reached a type-2 (parallel) singularity at t = {self.t:.6g} s: the "
                f"passive joints' loop Jacobian has a relative smallest singular value of {measure:.3g} (the run "
                f"stops below {self.singularity_margin:g})", self.t, measure, float("nan"))

    @property
    def t(self) -> float:
        """Simulated time."""
        return self.tick * self.period

    @property
    def compiled(self) -> bool:
        return self.integrator in INTEGRATORS and self.constrained is None and self.manifold is None

    def read(self) -> tuple[np.ndarray, np.ndarray]:
        return self.q.copy(), self.qd.copy()

    def applied_torque(self, tau, k: int) -> np.ndarray:
        """The motors' torque (the controller's, zero on passive joints) plus the disturbance at tick k (tau
        itself when there is neither)."""
        if type(tau) is not np.ndarray or tau.dtype != np.float64 or not tau.flags.c_contiguous:
            tau = np.ascontiguousarray(tau, dtype=np.float64)
        if tau.shape != (self.n,):
            raise ValueError(f"tau: expected shape ({self.n},), got {tau.shape}")
        if self.actuation is not None:
            tau = tau * self.actuation
        if not self.disturbance.present:
            return tau
        return tau + self.disturbance.at(k)

    def write(self, tau) -> None:
        # An ndarray goes straight to the compiled step, which checks it (dtype, shape, finite).
        if type(tau) is np.ndarray and not self.disturbance.present and self.actuation is None:
            applied = tau
        else:
            applied = self.applied_torque(tau, self.tick)
        h = self.wrench.at(self.tick) if self.wrench.present else None
        if self.singularity_margin > 0.0 and self.constrained is None:
            before = self.q.copy(), self.qd.copy()
            try:
                if self._step is not None:
                    self._step(self.q, self.qd, applied, h, self._dt, self.substeps, self.integrator)
                else:
                    self._ivp_step(applied, h)
            except (ValueError, ArithmeticError):  # did the step cross a singularity? then say where
                self._explain_failed_step(before, applied, h)
                raise
        elif self.floating:  # one C call for every substep; qdd at the tick's own state, as the manifold records
            self._step(self.q, self.qd, applied, h, self._dt, self.substeps, self.integrator, self.last_acceleration)
        elif self._step is not None:
            self._step(self.q, self.qd, applied, h, self._dt, self.substeps, self.integrator)
        elif self.manifold is not None:
            q, qd = self.q, self.qd
            for substep in range(self.substeps):
                q, qd = self.manifold.step(q, qd, applied, h, self._dt)
                if substep == 0:  # the tick's own state: what the trajectory records
                    self.last_acceleration, self.last_forces = (self.manifold.last_acceleration,
                                                                self.manifold.last_forces)
            self.q[:], self.qd[:] = q, qd
        elif self.constrained is not None:  # torques on passive joints are ignored: no motor there
            q, qd = self.q, self.qd
            actuated = applied[self.constrained.actuated]
            for _ in range(self.substeps):
                q, qd = self.constrained.step(q, qd, actuated, self._dt)
            self.q[:], self.qd[:] = q, qd
        else:
            self._ivp_step(applied, h)
        self.last_applied, self.last_wrench = applied, h
        self.tick += 1
        if self.constrained is not None:
            self._check_constrained()
        elif self.singularity_margin > 0.0:
            _singularity_check(self.robot, self.singularity_margin, np.array([self.t]), self.q[None], self.qd[None])

    def _ivp_step(self, tau: np.ndarray, h: np.ndarray | None) -> None:
        from scipy.integrate import solve_ivp

        n, fd = self.n, self.robot.forward_dynamics
        calls = 0

        def rhs(_t, y):
            nonlocal calls
            calls += 1
            if calls > MAX_IVP_EVALUATIONS:  # an adaptive method creeping over a huge period: stop, do not hang
                raise FloatingPointError(f"solve_ivp ({self.integrator}) needed more than {MAX_IVP_EVALUATIONS} "
                                         f"evaluations in one period of {self.period:g} s at t = {start:g} s; "
                                         "use a shorter period or a compiled integrator")
            return np.concatenate((y[n:], fd(np.ascontiguousarray(y[:n]), np.ascontiguousarray(y[n:]), tau, h)))

        start = self.t
        result = solve_ivp(rhs, (start, start + self.period), np.concatenate((self.q, self.qd)),
                           method=self.integrator, rtol=self.rtol, atol=self.atol)
        if not result.success:
            raise FloatingPointError(f"solve_ivp ({self.integrator}) failed at t = {start:g} s: {result.message}")
        self.q[:] = result.y[:n, -1]
        self.qd[:] = result.y[n:, -1]


#: Bounds that keep every run finite: a control period of at most a day, at most 10^4 integration steps
#: per period, at most 10^5 right-hand sides per period for solve_ivp, at most 10^9 ticks per run.
MAX_PERIOD = 86400.0
MAX_SUBSTEPS = 10_000
MAX_IVP_EVALUATIONS = 100_000
MAX_TICKS = 1_000_000_000


def _ivp_methods() -> tuple[str, ...]:
    return ("RK45", "RK23", "DOP853", "Radau", "BDF", "LSODA")


def _state(value, name: str, n: int) -> np.ndarray:
    array = np.zeros(n) if value is None else np.array(value, dtype=np.float64)
    if array.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},), got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name}: contains NaN or infinity")
    return np.ascontiguousarray(array)


@dataclass
class LoopStats:
    """Timing of a run. ``compute`` [s]: read + control + write per tick. In real-time mode
    ``lateness`` [s] is each tick's wake-up time minus its deadline (the jitter) and a missed
    deadline is a tick that ended after the next tick's deadline; in simulation mode (as fast
    as possible) there is no wake-up, and a miss is a tick whose compute exceeded the period."""

    period: float
    realtime: bool
    compute: np.ndarray
    lateness: np.ndarray | None
    missed_deadlines: int
    wall_time: float

    def summary(self) -> dict:
        def stat(values, fn):
            return None if values is None or len(values) == 0 else float(fn(values))

        return {
            "period_s": self.period,
            "realtime": self.realtime,
            "ticks": int(len(self.compute)) - 1,  # control periods; one more sample than ticks
            "wall_time_s": self.wall_time,
            "compute_mean_s": stat(self.compute, np.mean),
            "compute_p99_s": stat(self.compute, lambda v: np.percentile(v, 99)),
            "compute_max_s": stat(self.compute, np.max),
            "jitter_mean_s": stat(self.lateness, np.mean),
            "jitter_p99_s": stat(self.lateness, lambda v: np.percentile(v, 99)),
            "jitter_max_s": stat(self.lateness, np.max),
            "missed_deadlines": int(self.missed_deadlines),
        }


@dataclass
class Trajectory:
    """Samples k = 0..ticks at t = k T: state, acceleration, controller torque and reference.

    ``tau`` is the controller's output (disturbances excluded); ``qdd`` the acceleration under
    everything applied (None for a plant that cannot report it); the reference arrays are None
    for a controller without one.
    """

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray | None
    tau: np.ndarray
    q_ref: np.ndarray | None
    qd_ref: np.ndarray | None
    qdd_ref: np.ndarray | None
    loop: LoopStats
    robot: object = field(default=None, repr=False)  # the plant as simulated (a parameter snapshot)
    contact_forces: np.ndarray | None = None  # a run with contacts: the forces per sample (ContactDynamics order)

    def _plant(self, robot):
        robot = robot or self.robot
        if robot is None:
            raise ValueError("energy needs the plant's model: pass robot=, this trajectory has none")
        return robot

    @property
    def tracking_error(self) -> np.ndarray | None:
        """q_r - q per sample, or None without a reference."""
        return None if self.q_ref is None else self.q_ref - self.q

    def energy(self, robot=None) -> np.ndarray:
        """Total energy T + P of the plant at each sample."""
        robot = self._plant(robot)
        return robot.kinetic_energy(self.q, self.qd) + robot.potential_energy(self.q)

    def energy_drift_rel(self, robot=None) -> float:
        """max |E(t) - E(0)| over the run relative to the energy that moved: max(max kinetic energy,
        range of potential energy), which unlike E(0) does not depend on where potential energy is
        zero. Zero for an exact free motion without friction; under control the controller's work
        changes E too, so it is only a drift with no torque."""
        robot = self._plant(robot)
        kinetic = robot.kinetic_energy(self.q, self.qd)
        potential = robot.potential_energy(self.q)
        total = kinetic + potential
        drift = float(np.max(np.abs(total - total[0])))
        scale = max(float(np.max(kinetic)), float(np.ptp(potential)))
        return 0.0 if drift == 0.0 else drift / max(scale, np.finfo(float).tiny)

    def summary(self, robot=None) -> dict:
        """The figures of ``python -m robodyn simulate --json``."""
        error = self.tracking_error
        robot = robot or self.robot
        return {
            "robot": getattr(robot, "name", None),
            "duration_s": float(self.t[-1]),
            "samples": int(len(self.t)),
            "tracking_error_max": None if error is None else float(np.max(np.abs(error))),
            "tracking_error_rms": None if error is None else float(np.sqrt(np.mean(error**2))),
            "tracking_error_max_per_joint": None if error is None else np.max(np.abs(error), axis=0).tolist(),
            "tracking_error_final": None if error is None else float(np.max(np.abs(error[-1]))),
            "energy_drift_rel": None if robot is None else self.energy_drift_rel(robot),
            "tau_max_per_joint": np.max(np.abs(self.tau), axis=0).tolist(),
            "loop": self.loop.summary(),
        }


class Harness:
    """Runs a plant and a controller at a fixed control rate (Hz)."""

    def __init__(self, plant: Plant, controller: Controller | Callable, rate: float):
        if (isinstance(rate, bool) or not isinstance(rate, (int, float, np.integer, np.floating))
                or not (rate > 0.0 and math.isfinite(rate))):
            raise ValueError(f"rate must be a positive, finite number of Hz, got {rate!r}")
        if not isinstance(controller, Controller):
            controller = FunctionController(controller)
        self.plant = plant
        self.controller = controller
        self.rate = float(rate)
        self.period = 1.0 / self.rate
        if isinstance(plant, SimulatedPlant) and not math.isclose(plant.period, self.period, rel_tol=1e-12):
            raise ValueError(f"the simulated plant steps {plant.period:g} s per write, the harness period is "
                             f"{self.period:g} s")

    def run(self, duration: float | None = None, *, ticks: int | None = None, realtime: bool = False,
            spin: float = 2e-4) -> Trajectory:
        """Run ``duration`` seconds (rounded to whole periods) or ``ticks`` periods; the controller's
        time starts at 0 on each run (a SimulatedPlant serves one run).

        Real-time mode sleeps until ``spin`` seconds before each deadline and busy-waits the rest:
        a sleeping thread wakes 50-100 us late here (and with cold caches), so spinning trades
        CPU time for jitter. ``spin=0`` only sleeps.
        """
        if not isinstance(realtime, (bool, np.bool_)):
            raise TypeError(f"realtime: expected True or False, got {realtime!r}")
        if realtime and not 0.0 <= spin < self.period:
            raise ValueError(f"spin must be in [0, period), got {spin}")
        if ticks is None:
            if (isinstance(duration, bool) or not isinstance(duration, (int, float, np.integer, np.floating))
                    or not (duration >= 0.0 and math.isfinite(duration))):
                raise ValueError(f"give a finite, non-negative duration or a number of ticks, got {duration!r}")
            if duration * self.rate > MAX_TICKS:
                raise ValueError(f"duration {duration:g} s at {self.rate:g} Hz is more than {MAX_TICKS} ticks")
            ticks = int(round(duration * self.rate))
        if isinstance(ticks, bool) or not isinstance(ticks, (int, np.integer)) or not 0 <= ticks <= MAX_TICKS:
            raise ValueError(f"ticks must be an integer from 0 to {MAX_TICKS}, got {ticks!r}")
        plant, controller = self.plant, self.controller
        if isinstance(plant, SimulatedPlant):
            if plant.tick != 0:
                raise ValueError("this SimulatedPlant has already run; use a new one for each run")
            plant.disturbance.require(ticks + 1)
            plant.wrench.require(ticks + 1)
        # The C loop runs the law built into a BuiltinController; a subclass overriding __call__ needs Python.
        # ZeroTorque is NoControl's law in Python. A floating base runs the law "none" only: the joint-space laws
        # read q as n joint positions, a floating base's q holds its pose.
        if not realtime and isinstance(plant, SimulatedPlant) and plant.compiled:
            if type(controller) is ZeroTorque and controller.n == plant.n:
                controller = NoControl(plant.robot)
            if (isinstance(controller, BuiltinController) and type(controller).__call__ is BuiltinController.__call__
                    and (not plant.floating or controller.law == "none")):
                return self._run_compiled(ticks, controller)
        return self._run_ticks(ticks, realtime, spin)

    # -- whole horizon in C ---------------------------------------------------
    def _run_compiled(self, ticks: int, controller: BuiltinController) -> Trajectory:
        plant = self.plant
        n, rows = plant.n, ticks + 1
        q = np.empty((rows, plant.nq))
        qd = np.empty((rows, n))
        q[0], qd[0] = plant.q, plant.qd
        qdd, tau = np.empty((rows, n)), np.empty((rows, n))
        if controller.reference is None:
            q_ref = qd_ref = qdd_ref = None
        else:
            q_ref, qd_ref, qdd_ref = np.empty((rows, n)), np.empty((rows, n)), np.empty((rows, n))
        compute = np.empty(rows)
        start = plant.tick
        disturbance = plant.disturbance.rows(start, rows)
        wrench = plant.wrench.rows(start, rows)
        law = controller.capsule()
        began = time.perf_counter()
        guarded = plant.singularity_margin > 0.0
        if guarded:  # rows the C loop does not reach (it stops on a failed step) stay NaN
            q[1:], qd[1:] = np.nan, np.nan
        try:
            plant.robot._simulate(law, q, qd, qdd, tau, q_ref, qd_ref, qdd_ref, compute, plant.period,
                                  plant.integrator, plant.substeps, disturbance, wrench, True, plant.actuation)
        except (ValueError, ArithmeticError):  # a failed step: M not positive definite past the locus
            if not guarded:
                raise
            _singularity_check(plant.robot, plant.singularity_margin, np.arange(rows) * self.period, q, qd)
            raise
        if guarded:
            _singularity_check(plant.robot, plant.singularity_margin, np.arange(rows) * self.period, q, qd)
        wall = time.perf_counter() - began
        plant.q[:], plant.qd[:] = q[-1], qd[-1]
        plant.tick = start + ticks
        stats = LoopStats(self.period, False, compute, None, int(np.count_nonzero(compute > self.period)), wall)
        t = np.arange(rows) * self.period
        return Trajectory(t, q, qd, qdd, tau, q_ref, qd_ref, qdd_ref, stats, plant.robot.copy())

    # -- tick by tick in Python (any plant, any controller, real time) --------
    def _run_ticks(self, ticks: int, realtime: bool, spin: float) -> Trajectory:
        plant, controller, period = self.plant, self.controller, self.period
        n, rows = plant.n, ticks + 1
        shape = (n,)
        q, qd, tau = np.empty((rows, getattr(plant, "nq", n))), np.empty((rows, n)), np.empty((rows, n))
        simulated = isinstance(plant, SimulatedPlant)
        manifold = plant.manifold if simulated else None
        applied = np.empty((rows, n)) if simulated else None
        # A manifold plant reports its accelerations and contact forces as it steps (not recomputed after).
        recorded = np.empty((rows, n)) if manifold is not None else None
        forces = (np.empty((rows, manifold.contacts.rows))
                  if manifold is not None and manifold.contacts is not None else None)
        wrench = np.zeros((rows, 6)) if simulated and plant.wrench.present else None
        compute = np.empty(rows)
        lateness = np.empty(rows) if realtime else None
        missed = 0
        clock = time.monotonic
        began = time.perf_counter()
        with _timer_slack(realtime), _keep_samples(q, qd, period) as tick:
            origin = clock() + period  # first deadline one period ahead: time to settle
            for k in range(rows):
                tick[0] = k
                if realtime:
                    deadline = origin + k * period
                    now = clock()
                    if now < deadline - spin:
                        time.sleep(deadline - spin - now)
                    tick_start = clock()
                    while tick_start < deadline:
                        tick_start = clock()
                    lateness[k] = tick_start - deadline
                else:
                    tick_start = clock()
                q[k], qd[k] = state = plant.read()  # stored now: a driver may reuse its buffers
                torque = controller(k * period, *state)
                if getattr(torque, "shape", None) != shape and np.shape(torque) != shape:
                    raise ValueError(f"controller returned tau of shape {np.shape(torque)} at t = {k * period:g} s, "
                                     f"expected ({n},)")
                tau[k] = torque
                if k < ticks:
                    plant.write(torque)
                tick_end = clock()
                compute[k] = tick_end - tick_start
                if simulated and k < ticks:
                    applied[k] = plant.last_applied
                    if wrench is not None:
                        wrench[k] = plant.last_wrench
                    if recorded is not None:
                        recorded[k] = plant.last_acceleration
                        if forces is not None:
                            forces[k] = plant.last_forces
                if realtime and tick_end > origin + (k + 1) * period:
                    missed += 1
        wall = time.perf_counter() - began
        if not realtime:
            missed = int(np.count_nonzero(compute > period))
        stats = LoopStats(period, realtime, compute, lateness, missed, wall)
        t = np.arange(rows) * period
        qdd = None
        if simulated:  # accelerations under what was applied; the last sample's inputs are sampled now
            applied[ticks] = plant.applied_torque(tau[ticks], plant.tick)
            if wrench is not None:
                wrench[ticks] = plant.wrench.at(plant.tick)
            if plant.constrained is not None:
                qdd = np.array([plant.constrained.forward_dynamics(a, b, c[plant.constrained.actuated])[0]
                                for a, b, c in zip(q, qd, applied)])
            elif manifold is not None:  # the last sample's, the others recorded during the run
                recorded[ticks], last_forces = manifold.acceleration(q[ticks], qd[ticks], applied[ticks],
                                                                     None if wrench is None else wrench[ticks])
                if forces is not None:
                    forces[ticks] = last_forces
                qdd = recorded
            else:
                qdd = plant.robot.forward_dynamics(q, qd, applied, wrench)
        reference = getattr(controller, "reference", None)
        q_ref = qd_ref = qdd_ref = None
        if isinstance(reference, Reference):
            q_ref, qd_ref, qdd_ref = reference.evaluate(t)
        if simulated and plant.actuation is not None:
            tau *= plant.actuation  # what the motors applied: nothing on passive joints
        robot = plant.robot.copy() if simulated else None
        trajectory = Trajectory(t, q, qd, qdd, tau, q_ref, qd_ref, qdd_ref, stats, robot)
        if forces is not None:
            trajectory.contact_forces = forces
        return trajectory


class _keep_samples:
    """On a SingularityError from the plant, give it the samples recorded so far (ticks 0..k)."""

    def __init__(self, q: np.ndarray, qd: np.ndarray, period: float):
        self.q, self.qd, self.period, self.tick = q, qd, period, [0]

    def __enter__(self):
        return self.tick

    def __exit__(self, kind, error, traceback):
        if isinstance(error, SingularityError):
            rows = self.tick[0] + 1  # tick k was read (and recorded) before its write failed
            error.t = np.arange(rows) * self.period
            error.q, error.qd = self.q[:rows].copy(), self.qd[:rows].copy()
        return False


class _timer_slack:
    """Linux: ask for 1 us timer slack (default 50 us) while pacing, so sleeps end closer to the deadline."""

    PR_SET_TIMERSLACK, PR_GET_TIMERSLACK = 29, 30

    def __init__(self, active: bool):
        self.active = active
        self.previous = None

    def __enter__(self):
        if self.active:
            try:
                import ctypes

                self.libc = ctypes.CDLL(None, use_errno=True)
                self.previous = self.libc.prctl(self.PR_GET_TIMERSLACK, 0, 0, 0, 0)
                if self.previous < 0 or self.libc.prctl(self.PR_SET_TIMERSLACK, 1000, 0, 0, 0) != 0:
                    self.previous = None
            except (OSError, AttributeError):
                self.previous = None
        return self

    def __exit__(self, *exc):
        if self.previous is not None:
            self.libc.prctl(self.PR_SET_TIMERSLACK, self.previous, 0, 0, 0)
        return False


def simulate(robot, controller=None, *, duration: float, rate: float = 1000.0, q0=None, qd0=None,
             integrator: str = "rk4", substeps: int = 1, disturbance=None, wrench=None, realtime: bool = False,
             spin: float = 2e-4, rtol: float = 1e-9, atol: float = 1e-11,
             singularity_margin: float = SINGULARITY_MARGIN, contacts=None) -> Trajectory:
    """Simulate ``robot`` under ``controller`` (None: free motion) for ``duration`` seconds.

    ``contacts`` (frame names, ``robodyn.contact.Contact`` or a ``ContactDynamics``) holds link frames to the
    world where they start; a floating-base robot (q of size nq) is integrated on its configuration manifold
    (robodyn.floating_step; ``q0`` defaults to ``robot.neutral()``): without contacts in C, the whole run in
    one call for free motion (``controller`` None, NoControl or ZeroTorque), a Python tick loop around the
    compiled step otherwise; with contacts in Python.

    ``controller`` is a built-in controller (robodyn.control) or any callable
    ``tau = f(t, q, qd)``. ``q0``/``qd0`` default to zero. ``spin``: see ``Harness.run``
    (capped at half a period). See the module docstring for integrators, disturbances and
    real-time pacing. A closed chain's run raises SingularityError when its normalised type-2 measure
    falls below ``singularity_margin`` (0 turns the check off).
    """
    if controller is None:  # in Python: a closed chain simulated with multipliers, a floating base on contacts
        python_loop = getattr(robot, "is_constrained", False) or (
            getattr(robot, "is_floating_base", False) and contacts is not None)
        controller = ZeroTorque(robot.n) if python_loop else NoControl(robot)
    if isinstance(rate, bool) or not isinstance(rate, (int, float, np.integer, np.floating)) or not (
            0.0 < rate < math.inf):
        raise ValueError(f"rate must be a positive, finite number of Hz, got {rate!r}")
    period = 1.0 / rate
    plant = SimulatedPlant(robot, period, q0, qd0, integrator=integrator, substeps=substeps,
                           disturbance=disturbance, wrench=wrench, rtol=rtol, atol=atol,
                           singularity_margin=singularity_margin, contacts=contacts)
    return Harness(plant, controller, rate).run(duration, realtime=realtime, spin=min(spin, 0.5 / rate))
