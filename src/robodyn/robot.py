"""The user-facing robot object: a compiled model plus its named parameters."""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path
from typing import Iterator

import numpy as np


class Parameters(MutableMapping):
    """Named, runtime-settable model parameters (a live view of the compiled vector).

    Keys are fixed by the description: you can change values, not add or remove
    names. Values must be finite real numbers.
    """

    def __init__(self, names: list[str], values: np.ndarray, defaults: list[float]):
        self._index = {name: i for i, name in enumerate(names)}
        self._values = values
        self._defaults = dict(zip(names, defaults))

    def __getitem__(self, name: str) -> float:
        return float(self._values[self._lookup(name)])

    def __setitem__(self, name: str, value: float) -> None:
        index = self._lookup(name)
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"parameter {name!r}: expected a real number, got {type(value).__name__}")
        value = float(value)
        if not np.isfinite(value):
            raise ValueError(f"parameter {name!r}: value must be finite, got {value}")
        self._values[index] = value

    def __delitem__(self, name: str) -> None:
        raise TypeError("parameters are fixed by the robot description; they cannot be deleted")

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def _lookup(self, name: str) -> int:
        try:
            return self._index[name]
        except KeyError:
            known = ", ".join(self._index) or "none"
            raise KeyError(f"unknown parameter {name!r}; this robot has: {known}") from None

    def reset(self) -> None:
        """Restore every parameter to the default of the description."""
        for name, value in self._defaults.items():
            self._values[self._index[name]] = value

    @property
    def defaults(self) -> dict[str, float]:
        return dict(self._defaults)

    def as_array(self) -> np.ndarray:
        """A copy of the values, in description order."""
        return np.array(self._values, dtype=float)

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={self[k]:g}" for k in self._index)
        return f"Parameters({body})"


class Robot:
    """Compiled rigid-body dynamics of one robot.

    M q̈ + C(q, q̇) q̇ + g(q) + Fv q̇ + Fs sgn(q̇) = τ + J(q)ᵀ h

    Attributes: ``n``, ``name``, ``joint_names``, ``params`` (settable mapping),
    ``metadata``, ``selfcheck`` and the compiled routines, each accepting a
    state of shape (n,) or a batch of shape (N, n), and ``out=``:

    ``M(q)``, ``C(q, qd)``, ``g(q)``, ``friction(qd)``, ``nonlinear_effects(q, qd)``,
    ``inverse_dynamics(q, qd, qdd, h=None)``, ``forward_dynamics(q, qd, tau, h=None)``,
    ``kinetic_energy(q, qd)``, ``potential_energy(q)``, ``fk(q)`` (4x4 tool pose),
    ``jacobian(q)`` (6 x n geometric tool Jacobian, linear rows first).

    Inputs must be float64 arrays (C-contiguous, finite); anything else raises.
    """

    def __init__(self, module, manifest: dict | None = None, selfcheck: dict | None = None,
                 source: Path | None = None):
        self._module = module
        self._dynamics = dynamics = module.Dynamics()
        meta = module.metadata
        self.metadata: dict = meta
        self.name: str = meta["robot"]
        self.n: int = int(meta["n"])
        self.joint_names: tuple[str, ...] = tuple(meta["joint_names"])
        self.joint_types: tuple[str, ...] = tuple(meta["joint_types"])
        self.source = source
        self.manifest = manifest or {}
        self.selfcheck = selfcheck or {}
        names = [p["name"] for p in meta["parameters"]]
        self.params = Parameters(names, dynamics.parameter_values, [p["default"] for p in meta["parameters"]])
        # Bind compiled methods directly: a call costs no extra Python frame.
        self.M = dynamics.M
        self.C = dynamics.C
        self.g = dynamics.g
        self.friction = dynamics.friction
        self.nonlinear_effects = dynamics.nonlinear_effects
        self.inverse_dynamics = dynamics.inverse_dynamics
        self.forward_dynamics = dynamics.forward_dynamics
        self.kinetic_energy = dynamics.kinetic_energy
        self.potential_energy = dynamics.potential_energy
        self.fk = dynamics.fk
        self.jacobian = dynamics.jacobian

    @property
    def release_gil(self):
        """"auto" (default: batches and routines over 1000 operations), True (every call) or False."""
        return self._dynamics.release_gil

    @release_gil.setter
    def release_gil(self, value) -> None:
        self._dynamics.release_gil = value

    @property
    def joint_limits(self) -> list[dict]:
        return [dict(limit) for limit in self.metadata["limits"]]

    def total_energy(self, q, qd) -> float:
        return self.kinetic_energy(q, qd) + self.potential_energy(q)

    def copy(self) -> "Robot":
        """An independent robot object (own parameter values) sharing the compiled code."""
        other = Robot(self._module, self.manifest, self.selfcheck, self.source)
        for name in self.params:
            other.params[name] = self.params[name]
        return other

    def __repr__(self) -> str:
        return f"<robodyn.Robot {self.name!r}: {self.n} joints ({', '.join(self.joint_names)})>"
