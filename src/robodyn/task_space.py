"""Platform paths of closed chains, tracked in the actuated coordinates.

A closed chain with a closed-form geometry (``robot.is_closed_chain``, e.g. robots/biglide.yaml or
robots/fivebar.yaml) is driven through its actuated joints q, but the task is a motion x(t) of its
platform point (``robot.task_coordinates``). With the inverse geometric model in one working mode
σ, the task Jacobian J (ẋ = J q̇) and its bias b (ẍ = J q̈ + b):

    q_r = igm(x_r, σ),   q̇_r = J(q_r)⁻¹ ẋ_r,   q̈_r = J(q_r)⁻¹ (ẍ_r − b(q_r, q̇_r)).

* ``TaskPath`` is a platform motion x(t) with its derivatives; ``Circle`` one turn of a circle at
  rest at both ends (quintic time law on the angle).
* ``TaskReference`` turns a TaskPath into a joint-space ``robodyn.references.Reference`` (it evaluates
  the geometry per sample, in Python: the compiled controllers cannot run it, see below).
  ``check()`` refuses, before a run, a path that leaves the workspace or the joint limits, changes
  assembly mode or comes near a type-1 or type-2 singularity (ValueError naming time and place).
* ``TaskComputedTorque`` is computed torque in Python on any reference with ``evaluate(t)``:
  τ = M̂(q) (q̈_r + Kd ė + Kp e) + Ĉ(q, q̇) q̇ + ĝ(q) + f̂(q̇), one ``inverse_dynamics`` call per tick.
  The built-in laws of robodyn.control evaluate their reference in C (hold, step, sine, quintic
  only), so a TaskReference goes through this one; the harness then runs its Python loop (about
  40 µs a tick with the plant's step, fine at 1 kHz).
* ``platform_circle(model, q0)`` builds the reference ``python -m robodyn simulate`` tracks by default
  on such a robot: a circle of a few cm through the starting platform point, its centre on the side
  that keeps the path furthest from the singularities.

Example::

    fivebar = robodyn.load("robots/fivebar.yaml")
    reference = platform_circle(fivebar, [0.0, 0.0], radius=0.03, duration=4.0)
    run = robodyn.simulate(fivebar, TaskComputedTorque(fivebar, reference), duration=5.0, q0=[0.0, 0.0])
    x_ref, x = reference.path.evaluate(run.t)[0], fivebar.dgm(run.q)   # the platform, planned and actual
"""

from __future__ import annotations

import numpy as np

from .control import DEFAULT_OMEGA, DEFAULT_ZETA, Controller, _gain
from .references import Quintic, Reference

__all__ = ["CHECK_MARGIN", "CHECK_SAMPLES", "Circle", "TaskComputedTorque", "TaskPath", "TaskReference", "closed_form",
           "format_point", "platform_circle", "platform_positions", "platform_tracking", "working_mode"]

#: ``TaskReference.check`` refuses a path whose normalised singularity measures fall below this (a sine of
#: about 3° between the distal links for type 2): J and its inverse stay well conditioned along the path.
CHECK_MARGIN = 0.05
#: Samples of the path that ``check`` examines (evenly spaced in time over the moving part).
CHECK_SAMPLES = 2001


class TaskPath:
    """A platform motion: ``evaluate(t)`` returns (x, ẋ, ẍ), each of shape (e,) for a scalar t or
    (len(t), e) for an array of times. ``e`` is the number of task coordinates; ``start`` and
    ``duration`` bound the moving part (at rest outside it)."""

    e: int
    start: float = 0.0
    duration: float = 0.0

    def evaluate(self, t):
        t = np.asarray(t, dtype=np.float64)
        x, xd, xdd = self._evaluate(np.atleast_1d(t))
        if t.ndim == 0:
            return x[0], xd[0], xdd[0]
        return x, xd, xdd

    def _evaluate(self, t: np.ndarray):
        raise NotImplementedError


class Circle(TaskPath):
    """``turns`` turns of the circle of ``centre`` and ``radius`` in the plane of two task coordinates,
    from the angle ``angle`` (rad, from the first coordinate's axis, counter-clockwise) during
    [t0, t0 + duration]: φ = angle + 2π turns s(u), s the quintic of robodyn.references.Quintic, so the
    platform starts and ends at rest (zero velocity and acceleration) and is held outside the interval."""

    def __init__(self, centre, radius: float, angle: float, duration: float, t0: float = 0.0, turns: float = 1.0):
        centre = np.array(centre, dtype=np.float64, ndmin=1)
        values = (radius, angle, duration, t0, turns)
        if centre.shape != (2,) or not np.all(np.isfinite(centre)) or not np.all(np.isfinite(values)):
            raise ValueError(f"Circle: expected a centre of two finite coordinates and finite numbers, got "
                             f"centre={centre.tolist()}, radius={radius}, angle={angle}, duration={duration}")
        if not (radius > 0.0 and duration > 0.0):
            raise ValueError(f"Circle: radius and duration must be positive, got {radius} and {duration}")
        self.centre = centre
        self.centre.setflags(write=False)
        self.radius, self.angle, self.duration = float(radius), float(angle), float(duration)
        self.start, self.turns = float(t0), float(turns)
        self.e = 2
        self._law = Quintic([0.0], [2.0 * np.pi * self.turns], duration=self.duration, t0=self.start)

    def _evaluate(self, t):
        sweep, rate, acceleration = self._law.evaluate(t)  # (len(t), 1) each: the angle travelled, its derivatives
        phi = self.angle + sweep
        radial = np.concatenate((np.cos(phi), np.sin(phi)), axis=1)
        tangent = np.concatenate((-np.sin(phi), np.cos(phi)), axis=1)
        r = self.radius
        return self.centre + r * radial, r * rate * tangent, r * acceleration * tangent - r * rate**2 * radial

    def __repr__(self) -> str:
        return (f"Circle(centre={self.centre.tolist()}, radius={self.radius:g}, angle={self.angle:g}, "
                f"duration={self.duration:g}, t0={self.start:g}, turns={self.turns:g})")


def closed_form(robot) -> bool:
    """Whether ``robot`` is a closed chain with a closed-form geometry in its actuated coordinates (dgm, igm,
    task_jacobian): what a TaskReference needs."""
    return bool(getattr(robot, "is_closed_chain", False)) and not robot.is_constrained


def _require_closed_form(robot) -> None:
    if not closed_form(robot):
        what = ("has no closed-form geometry (it is simulated with multipliers)" if getattr(robot, "is_closed_chain",
                                                                                             False)
                else "is not a closed chain")
        raise TypeError(f"robot {robot.name!r} {what}: a platform path needs its direct and inverse geometric "
                        "models in the actuated coordinates")


def _revolute(robot) -> np.ndarray:
    return np.array([kind == "revolute" for kind in robot.joint_types])


def _wrap(angle):
    """To (−π, π]."""
    return np.pi - np.mod(np.pi - angle, 2.0 * np.pi)


def working_mode(robot, q, x=None) -> tuple[int, ...]:
    """The working mode (a row of ``robot.modes["working"]``) whose inverse geometric model gives back the
    actuated positions ``q`` (revolute joints modulo 2π) for the platform at ``x`` (default: robot.dgm(q)).
    ValueError when none does (q is not assembled, or sits on a type-1 singularity where modes meet)."""
    _require_closed_form(robot)
    q = np.asarray(q, dtype=np.float64)
    x = robot.dgm(q) if x is None else np.asarray(x, dtype=np.float64)
    candidates = robot.igm(np.ascontiguousarray(x))
    difference = candidates - q
    revolute = _revolute(robot)
    difference[:, revolute] = _wrap(difference[:, revolute])
    distance = np.max(np.abs(np.nan_to_num(difference, nan=np.inf)), axis=1)
    row = int(np.argmin(distance))
    if not distance[row] <= 1e-7 * (1.0 + float(np.max(np.abs(q)))):
        raise ValueError(f"{robot.name}: no working mode gives back q = {q.tolist()} at the platform point "
                         f"{np.asarray(x).tolist()} (nearest off by {distance[row]:.3g})")
    return tuple(robot.modes["working"][row])


class TaskReference(Reference):
    """The joint-space reference of a platform path ``path`` (a TaskPath) for the closed chain ``model``, in
    working mode ``mode`` (default: the one of ``q0``). ``q0`` anchors the revolute joints' turns: q_r
    is igm's angle shifted by whole turns to lie within π of q0 (default: igm at the path's start).

    ``evaluate(t)`` gives (q_r, q̇_r, q̈_r) (module docstring). The model's geometry is used: the
    controller plans with its model. The compiled controllers cannot evaluate this reference
    (``c_arguments`` raises TypeError): track it with ``TaskComputedTorque`` (or AdaptiveSlotineLi).
    """

    kind = "task"

    def __init__(self, model, path: TaskPath, mode=None, q0=None):
        _require_closed_form(model)
        e = len(model.task_coordinates)
        if e != model.n or getattr(path, "e", None) != e:
            raise ValueError(f"{model.name}: a platform path needs as many task coordinates as actuated joints "
                             f"(here {e} and {model.n}) and a path in {e} coordinates (got {getattr(path, 'e', '?')})")
        self.model, self.path = model, path
        x0 = path.evaluate(path.start)[0]
        if mode is None:
            mode = working_mode(model, q0, x0) if q0 is not None else tuple(model.modes["working"][0])
        self.mode = tuple(int(m) for m in mode)
        self._revolute = _revolute(model)
        anchor = model.igm(np.ascontiguousarray(x0), mode=self.mode) if q0 is None else np.array(q0, dtype=np.float64)
        self.anchor = anchor
        self.anchor.setflags(write=False)

    @property
    def n(self) -> int:
        return self.model.n

    def evaluate(self, t):
        t = np.asarray(t, dtype=np.float64)
        x, xd, xdd = (np.ascontiguousarray(v) for v in self.path.evaluate(np.atleast_1d(t)))
        q = self._positions(x)
        J = self.model.task_jacobian(q)
        qd = np.linalg.solve(J, xd[..., None])[..., 0]
        qdd = np.linalg.solve(J, (xdd - self.model.task_bias(q, np.ascontiguousarray(qd)))[..., None])[..., 0]
        if t.ndim == 0:
            return q[0], qd[0], qdd[0]
        return q, qd, qdd

    def _positions(self, x: np.ndarray) -> np.ndarray:
        q = self.model.igm(x, mode=self.mode)
        if np.any(self._revolute):
            shift = _wrap(q - self.anchor) - (q - self.anchor)
            q = q + np.where(self._revolute, shift, 0.0)
        return np.ascontiguousarray(q)

    def c_arguments(self) -> dict:
        raise TypeError("a TaskReference is evaluated in Python (inverse geometry per sample): the compiled "
                        "controllers of robodyn.control cannot track it; use robodyn.task_space.TaskComputedTorque")

    def check(self, samples: int = CHECK_SAMPLES, margin: float = CHECK_MARGIN) -> dict:
        """Refuse (ValueError naming the time and the platform point) a path that leaves the workspace (no
        solution in this working mode), leaves the joint limits, is not given back by the direct geometric
        model in the model's assembly mode (the path crosses a type-2 singularity), or comes within
        ``margin`` of a singularity (normalised |det A| for type 2, |det B| for type 1). Returns the
        smallest normalised measures found: {"type2": ..., "type1": ...}."""
        model, path = self.model, self.path
        t = np.linspace(path.start, path.start + path.duration, int(samples))
        x = np.ascontiguousarray(path.evaluate(t)[0])

        def refuse(k: int, why: str):
            where = format_point(model.task_coordinates, x[k])
            raise ValueError(f"{model.name}: the platform path {why} at t = {t[k]:.4g} s, {where} (working mode "
                             f"{self.mode}); choose a smaller path or another start")

        solved = model.igm_modes(x)[:, model.modes["working"].index(self.mode)]
        outside = ~np.all(np.isfinite(solved), axis=1)
        if np.any(outside):
            refuse(int(np.argmax(outside)), "leaves the workspace")
        q = self._positions(x)
        for j, limit in enumerate(model.joint_limits):
            lower, upper = limit.get("lower"), limit.get("upper")
            lower, upper = -np.inf if lower is None else lower, np.inf if upper is None else upper
            beyond = (q[:, j] < lower) | (q[:, j] > upper)
            if np.any(beyond):
                k = int(np.argmax(beyond))
                refuse(k, f"takes {model.joint_names[j]} to {q[k, j]:.4g}, beyond its limits [{lower}, {upper}]")
        measures = model.singularity_measures(q)
        for column, kind, what in ((2, "type-2", "det A"), (3, "type-1", "det B")):
            near = np.abs(measures[:, column]) < margin
            if np.any(near):
                k = int(np.argmax(near))
                refuse(k, f"comes near a {kind} singularity (normalised {what} = {measures[k, column]:.3g}, "
                       f"below {margin:g})")
        back = platform_positions(model, q)
        moved = ~(np.max(np.abs(back - x), axis=1) <= 1e-9 * (1.0 + np.max(np.abs(x), axis=1)))
        if np.any(moved):
            refuse(int(np.argmax(moved)), f"leaves the assembly mode {model.assembly_mode} the model was built for")
        return {"type2": float(np.min(np.abs(measures[:, 2]))), "type1": float(np.min(np.abs(measures[:, 3])))}

    def __repr__(self) -> str:
        return f"TaskReference({self.model.name!r}, {self.path!r}, mode={self.mode})"


def format_point(names, x) -> str:
    """'x = 0.2, y = 0.2828': task coordinates with 4 significant digits (rounding errors below 1e-12 shown as 0)."""
    return ", ".join(f"{name} = {round(float(value), 12) + 0.0:.4g}" for name, value in zip(names, x))


def platform_circle(model, q0, radius: float = 0.03, duration: float = 4.0, t0: float = 0.0, *,
                    directions: int = 8, margin: float = CHECK_MARGIN) -> TaskReference:
    """A checked TaskReference for one turn of a circle of ``radius`` through the platform point at the
    actuated positions ``q0`` (start and end there, at rest), in q0's working mode, during [t0, t0 + duration].
    Of ``directions`` evenly spaced positions of the centre, the one whose path keeps the largest smallest
    normalised singularity measure is taken; ValueError (check's, for the best direction) when none
    passes ``TaskReference.check``."""
    _require_closed_form(model)
    q0 = np.array(q0, dtype=np.float64)
    x0 = model.dgm(q0)
    if len(model.task_coordinates) != 2:
        raise ValueError(f"{model.name}: a platform circle needs two task coordinates, this robot has "
                         f"{len(model.task_coordinates)} ({', '.join(model.task_coordinates)})")
    mode = working_mode(model, q0, x0)
    best, best_score, failure = None, -np.inf, None
    for k in range(int(directions)):
        towards = 2.0 * np.pi * k / directions
        centre = x0 + radius * np.array([np.cos(towards), np.sin(towards)])
        reference = TaskReference(model, Circle(centre, radius, towards + np.pi, duration, t0), mode, q0)
        try:
            score = min(reference.check(samples=401, margin=margin).values())
        except ValueError as error:
            failure = failure or error
            continue
        if score > best_score:
            best, best_score = reference, score
    if best is None:
        raise failure
    best.check(margin=margin)  # finer than the search
    return best


class TaskComputedTorque(Controller):
    """Computed torque evaluated in Python, for a reference the compiled laws cannot run (a TaskReference,
    or any object whose ``evaluate(t)`` gives (q_r, q̇_r, q̈_r)):

        τ = M̂(q) (q̈_r + Kd ė + Kp e) + Ĉ(q, q̇) q̇ + ĝ(q) + f̂(q̇),   e = q_r − q,

    the law of robodyn.control.ComputedTorque (same defaults: Kp = ω², Kd = 2 ζ ω; ``friction="reference"``
    evaluates f̂ at q̇_r; ``tau_limit`` saturates). ``model`` is the controller's robodyn.Robot.

    Called on a regular time grid (as the harness calls it), the reference is evaluated ``block`` ticks ahead
    in one vectorised call: a tick then costs about the inverse dynamics, not the inverse geometry.
    """

    law = "computed-torque"

    def __init__(self, model, reference, kp=None, kd=None, *, omega: float = DEFAULT_OMEGA,
                 zeta: float = DEFAULT_ZETA, tau_limit=None, friction: str = "measured", block: int = 256):
        if friction not in ("measured", "reference"):
            raise ValueError(f"friction: expected 'measured' or 'reference', got {friction!r}")
        if not callable(getattr(reference, "evaluate", None)):
            raise TypeError(f"reference: expected an object with evaluate(t) -> (q, qd, qdd), got "
                            f"{type(reference).__name__}")
        n = model.n
        self.model, self.reference, self.friction = model, reference, friction
        self.kp = _gain(omega**2 if kp is None else kp, "kp", n)
        self.kd = _gain(2.0 * zeta * omega if kd is None else kd, "kd", n)
        self.tau_limit = None if tau_limit is None else _gain(tau_limit, "tau_limit", n)
        if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or not 1 <= block <= 100_000:
            raise ValueError(f"block: expected an integer from 1 to 100000, got {block!r}")
        self._block = int(block)
        self._ahead: tuple[np.ndarray, np.ndarray] | None = None  # (times, rows (block, 3, n)) evaluated ahead
        self._last: float | None = None

    def _reference_at(self, t: float):
        """(q_r, q̇_r, q̈_r) at t: a row evaluated ahead when t is on the grid of the previous calls."""
        last, self._last = self._last, t
        if self._ahead is not None:
            times, rows = self._ahead
            k = int(round((t - times[0]) / (times[1] - times[0])))
            if 0 <= k < len(times) and abs(times[k] - t) <= 1e-12 * (1.0 + abs(t)):
                return rows[k]
        if last is None or not t > last or self._block == 1:
            return self.reference.evaluate(t)
        times = t + (t - last) * np.arange(max(self._block, 2))
        self._ahead = (times, np.stack(self.reference.evaluate(times), axis=1))
        return self._ahead[1][0]

    def __call__(self, t, q, qd):
        q_r, qd_r, qdd_r = self._reference_at(float(t))
        v = np.ascontiguousarray(qdd_r + self.kd * (qd_r - qd) + self.kp * (q_r - q))
        tau = self.model.inverse_dynamics(q, qd, v)
        if self.friction == "reference":
            tau += self.model.friction(np.ascontiguousarray(qd_r)) - self.model.friction(qd)
        if self.tau_limit is not None:
            np.clip(tau, -self.tau_limit, self.tau_limit, out=tau)
        return tau

    def __repr__(self) -> str:
        return (f"TaskComputedTorque(model={self.model.name!r}, reference={self.reference!r}, kp={self.kp}, "
                f"kd={self.kd})")


def platform_positions(robot, q) -> np.ndarray:
    """The platform point at each row of q, shape (N, e): ``robot``'s direct geometric model in the assembly mode
    it was built for, NaN (not an error) where the mechanism cannot be assembled."""
    row = robot.modes["assembly"].index(robot.assembly_mode)
    return robot.dgm_modes(np.ascontiguousarray(q, dtype=np.float64))[:, row]


def platform_tracking(robot, q, x_ref) -> np.ndarray:
    """|x_ref − x| per sample (Euclidean, task units) with x = platform_positions(robot, q); NaN where the
    mechanism cannot be assembled."""
    return np.linalg.norm(np.asarray(x_ref) - platform_positions(robot, q), axis=1)
