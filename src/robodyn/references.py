"""Joint-space references q_r(t) with their velocity and acceleration.

Each reference is a small immutable description. Built-in controllers evaluate
it in C inside the simulation loop; ``evaluate(t)`` is an independent NumPy
implementation of the same formulas (for plots, custom controllers and tests).
Times are in seconds, positions in rad (revolute) or m (prismatic).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Reference", "Hold", "Step", "Sine", "Quintic"]


def _vector(value, name: str, n: int | None = None) -> np.ndarray:
    array = np.array(value, dtype=np.float64, ndmin=1)
    if array.ndim != 1:
        raise ValueError(f"{name}: expected a vector, got shape {array.shape}")
    if n is not None and array.shape[0] not in (1, n):
        raise ValueError(f"{name}: expected {n} values, got {array.shape[0]}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name}: values must be finite")
    array.setflags(write=False)
    return array


def _per_joint(value, name: str, n: int) -> np.ndarray:
    """A scalar or n values, as a read-only vector of n."""
    array = np.array(np.broadcast_to(_vector(value, name, n), (n,)))
    array.setflags(write=False)
    return array


def _time(value, name: str) -> float:
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name}: must be finite, got {value}")
    return value


class Reference:
    """Base class: ``evaluate(t)`` returns (q, qd, qdd) for a scalar t (shape (n,)) or an array of
    times (shape (len(t), n)); ``n`` is the number of joints."""

    kind: str = ""
    n: int

    def evaluate(self, t):
        t = np.asarray(t, dtype=np.float64)
        q, qd, qdd = self._evaluate(np.atleast_1d(t)[:, None])
        if t.ndim == 0:
            return q[0], qd[0], qdd[0]
        return q, qd, qdd

    def _evaluate(self, t: np.ndarray):
        raise NotImplementedError

    def c_arguments(self) -> dict:
        """Keyword arguments of the compiled ``Dynamics.control_law`` describing this reference."""
        raise NotImplementedError


@dataclass(frozen=True)
class Hold(Reference):
    """Hold the position ``q``."""

    q: np.ndarray
    kind: str = field(default="hold", init=False)

    def __post_init__(self):
        object.__setattr__(self, "q", _vector(self.q, "q"))

    @property
    def n(self) -> int:
        return self.q.shape[0]

    def _evaluate(self, t):
        zeros = np.zeros((t.shape[0], self.n))
        return np.broadcast_to(self.q, zeros.shape).copy(), zeros, zeros.copy()

    def c_arguments(self) -> dict:
        return {"reference": "hold", "a": self.q}


@dataclass(frozen=True)
class Step(Reference):
    """``start`` before ``time``, ``goal`` from ``time`` on (velocity and acceleration zero)."""

    start: np.ndarray
    goal: np.ndarray
    time: float = 0.0
    kind: str = field(default="step", init=False)

    def __post_init__(self):
        object.__setattr__(self, "start", _vector(self.start, "start"))
        object.__setattr__(self, "goal", _per_joint(self.goal, "goal", self.n))
        object.__setattr__(self, "time", _time(self.time, "time"))

    @property
    def n(self) -> int:
        return self.start.shape[0]

    def _evaluate(self, t):
        q = np.where(t >= self.time, self.goal, self.start)
        zeros = np.zeros_like(q)
        return q, zeros, zeros.copy()

    def c_arguments(self) -> dict:
        return {"reference": "step", "t0": self.time, "a": self.start, "b": np.ascontiguousarray(self.goal)}


@dataclass(frozen=True)
class Sine(Reference):
    """``centre + amplitude * sin(2 pi frequency t + phase)`` per joint (frequency in Hz)."""

    centre: np.ndarray
    amplitude: np.ndarray
    frequency: np.ndarray
    phase: np.ndarray = 0.0
    kind: str = field(default="sine", init=False)

    def __post_init__(self):
        centre = _vector(self.centre, "centre")
        n = centre.shape[0]
        object.__setattr__(self, "centre", centre)
        for name in ("amplitude", "frequency", "phase"):
            object.__setattr__(self, name, _per_joint(getattr(self, name), name, n))

    @property
    def n(self) -> int:
        return self.centre.shape[0]

    def _evaluate(self, t):
        omega = 2.0 * np.pi * self.frequency
        angle = omega * t + self.phase
        s, c = np.sin(angle), np.cos(angle)
        return self.centre + self.amplitude * s, self.amplitude * omega * c, -self.amplitude * omega**2 * s

    def c_arguments(self) -> dict:
        return {"reference": "sine", "a": self.centre, "b": self.amplitude,
                "omega": 2.0 * np.pi * self.frequency, "phase": self.phase}


@dataclass(frozen=True)
class Quintic(Reference):
    """Rest-to-rest minimum-jerk motion from ``start`` to ``goal`` during [t0, t0 + duration]:
    q = start + (goal - start) s(u), s(u) = 10u³ - 15u⁴ + 6u⁵, u = (t - t0) / duration;
    zero velocity and acceleration at both ends, held outside the interval."""

    start: np.ndarray
    goal: np.ndarray
    duration: float
    t0: float = 0.0
    kind: str = field(default="quintic", init=False)

    def __post_init__(self):
        object.__setattr__(self, "start", _vector(self.start, "start"))
        object.__setattr__(self, "goal", _per_joint(self.goal, "goal", self.n))
        duration = _time(self.duration, "duration")
        if not duration > 0.0:
            raise ValueError(f"duration must be positive, got {self.duration}")
        object.__setattr__(self, "duration", duration)
        object.__setattr__(self, "t0", _time(self.t0, "t0"))

    @property
    def n(self) -> int:
        return self.start.shape[0]

    def _evaluate(self, t):
        u = np.clip((t - self.t0) / self.duration, 0.0, 1.0)
        inside = (t > self.t0) & (t < self.t0 + self.duration)
        s = u**3 * (10.0 - 15.0 * u + 6.0 * u**2)
        ds = np.where(inside, 30.0 * u**2 * (1.0 - u) ** 2, 0.0)
        dds = np.where(inside, 60.0 * u * (1.0 - u) * (1.0 - 2.0 * u), 0.0)
        delta = self.goal - self.start
        return self.start + delta * s, delta * ds / self.duration, delta * dds / self.duration**2

    def c_arguments(self) -> dict:
        return {"reference": "quintic", "t0": self.t0, "duration": self.duration, "a": self.start, "b": self.goal}
