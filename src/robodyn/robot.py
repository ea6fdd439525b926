"""The user-facing robot object: a compiled model plus its named parameters."""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from pathlib import Path
from typing import Iterator

import numpy as np

from . import routines
from ._native import RobotCore, make_method
from .cache import MANIFEST, SELFCHECK
from .options import BuildOptions


class Parameters(MutableMapping):
    """Named, runtime-settable model parameters (a live view of the compiled vector).

    Keys are fixed by the description: you can change values, not add or remove
    names. Values must be finite real numbers.
    """

    def __init__(self, robot: "Robot", names: list[str], defaults: list[float]):
        self._robot = robot
        self._index = {name: i for i, name in enumerate(names)}
        self._defaults = dict(zip(names, defaults))

    def __getitem__(self, name: str) -> float:
        return float(self._robot.parameter_values[self._lookup(name)])

    def __setitem__(self, name: str, value: float) -> None:
        index = self._lookup(name)
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"parameter {name!r}: expected a real number, got {type(value).__name__}")
        try:
            value = float(value)
        except OverflowError:
            value = float("inf")
        if not np.isfinite(value):
            raise ValueError(f"parameter {name!r}: value must be finite, got {value}")
        self._robot._set_parameter(index, value)

    def __delitem__(self, name: str) -> None:
        raise TypeError("parameters are fixed by the robot description; they cannot be deleted")

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def _lookup(self, name: str) -> int:
        try:
            return self._index[name]
        except (KeyError, TypeError):
            known = ", ".join(self._index) or "none"
            raise KeyError(f"unknown parameter {name!r}; this robot has: {known}") from None

    def reset(self) -> None:
        """Restore every parameter to the default of the description."""
        self._robot._set_parameters([self._defaults[name] for name in self._index])

    @property
    def defaults(self) -> dict[str, float]:
        return dict(self._defaults)

    def as_array(self) -> np.ndarray:
        """A copy of the values, in description order."""
        return np.array(self._robot.parameter_values, dtype=float)

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={self[k]:g}" for k in self._index)
        return f"Parameters({body})"


class Robot(RobotCore):
    """Compiled rigid-body dynamics of one robot.

    M(q) q̈ + C(q, q̇) q̇ + g(q) + Fv q̇ + Fs sgn(q̇) = τ + J(q)ᵀ h

    Get one with ``robodyn.load(description)``, or by importing a built robot module and calling
    its ``robot()``. The routine methods (``M``, ``C``, ``g``, ``inverse_dynamics``, ...; see
    ``robodyn.routines.TABLE``) take a state of shape (n,) or a batch of shape (N, n) and
    ``out=``; inputs must be float64 arrays (C-contiguous, finite), anything else raises.

    Attributes: ``n``, ``name``, ``joint_names``, ``joint_types``, ``joint_limits``, ``params``
    (a live, settable mapping of the named parameters), ``metadata``, ``manifest``,
    ``selfcheck``, ``source`` and ``options`` (what it was built from), ``release_gil``.
    A robot pickles: it is re-loaded from its cache entry or description in the receiving
    process, with the same parameter values.
    """

    def __init__(self, extension, *, source: Path | None = None, options: BuildOptions | None = None,
                 manifest: dict | None = None, selfcheck: dict | None = None, cache_dir: Path | None = None):
        self._attach(extension, _LAYOUT)
        meta = json.loads(self.metadata_json)
        self.metadata: dict = meta
        self.name: str = meta["robot"]
        self.joint_names: tuple[str, ...] = tuple(meta["joint_names"])
        self.joint_types: tuple[str, ...] = tuple(meta["joint_types"])
        self.source = None if source is None else Path(source)
        self.options = options if options is not None else BuildOptions()
        self.manifest = manifest or {}
        self.selfcheck = selfcheck or {}
        self._cache_dir = cache_dir
        names = [p["name"] for p in meta["parameters"]]
        self.params = Parameters(self, names, [p["default"] for p in meta["parameters"]])

    @classmethod
    def from_extension(cls, extension) -> "Robot":
        """The robot of an imported robot module, with the manifest and self-check of its cache entry
        when it has one (this is what the module's ``robot()`` returns)."""
        directory = Path(getattr(extension, "__file__", "")).parent
        manifest, selfcheck = {}, {}
        try:
            manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
            selfcheck = json.loads((directory / SELFCHECK).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass
        if not isinstance(manifest, dict) or not isinstance(selfcheck, dict):
            manifest, selfcheck = {}, {}
        try:
            options = BuildOptions.from_dict(manifest["options"]) if "options" in manifest else None
        except (TypeError, ValueError, AttributeError):  # a manifest edited by hand: the robot still works
            options = None
        source = manifest.get("description_path")
        source = source if isinstance(source, str) else None
        return cls(extension, source=source, options=options, manifest=manifest, selfcheck=selfcheck)

    @property
    def joint_limits(self) -> list[dict]:
        return [dict(limit) for limit in self.metadata["limits"]]

    # -- identification: tau = regressor(q, qd, qdd) @ dynamic_parameters() ---------------------

    def _identification(self) -> dict:
        info = self.metadata.get("dynamic_parameters")
        if not isinstance(info, dict):
            raise AttributeError(f"robot {self.name!r} was built without a regressor (rebuild it with this robodyn)")
        return info

    @property
    def dynamic_parameter_names(self) -> tuple[str, ...]:
        """Names of the columns of ``regressor``: per body k of the kinematic tree (joint order)
        XXk XYk XZk YYk YZk ZZk (inertia about the link-frame origin, link axes), MXk MYk MZk (first
        moments m c), Mk (mass); per rotor of joint k Iak (spin inertia; its mass and transverse inertia
        are in its link's parameters); per joint Fvk, Fsk (viscous, Coulomb friction)."""
        return tuple(self._identification()["names"])

    @property
    def dynamic_parameter_layout(self) -> tuple[tuple[str, str, int, int], ...]:
        """(kind, label, start, stop) per group of dynamic parameters: kind "link" (ten parameters, label the
        link name), "rotor", "viscous" or "coulomb" (label the joint name)."""
        return tuple((kind, label, int(start), int(stop)) for kind, label, start, stop in
                     self._identification()["layout"])

    @property
    def base_parameter_names(self) -> tuple[str, ...]:
        """Names of the base parameters (columns of ``base_regressor``): the dynamic parameter each one
        starts from, with R when others are grouped into it (ZZ1R = ZZ1 + a1**2*M2)."""
        return tuple(self._identification()["base_names"])

    @property
    def base_parameter_expressions(self) -> dict[str, str]:
        """Each base parameter as a combination of dynamic parameters, with coefficients in the
        description's parameters where the geometry is symbolic (text, SymPy syntax). Numeric
        coefficients are exact when they are short decimals or small fractions, else shown with 12
        significant digits; ``base_parameter_matrix()`` has them to the last bit."""
        info = self._identification()
        return dict(zip(info["base_names"], info["base_expressions"]))

    @property
    def known_zero_base_parameters(self) -> tuple[str, ...]:
        """Base parameters the description fixes at zero whatever its parameter values (every term is a
        literal zero: a centre of mass on a link axis, a planar link, no Coulomb friction). An estimator may
        take them as known: robodyn.identification does with ``known_zeros=True``."""
        info = self._identification()
        return tuple(info["base_names"][i] for i in info.get("base_known_zero", ()))

    @property
    def base_parameter_columns(self) -> tuple[int, ...]:
        """Indices of the base parameters among the dynamic parameters (the regressor's kept columns)."""
        return tuple(int(c) for c in self._identification()["base_columns"])

    @property
    def dimensions(self) -> dict[str, int]:
        """The sizes the routine table's shapes name: n joints, p dynamic and b base parameters."""
        dims = {"n": self.n}
        info = self.metadata.get("dynamic_parameters")
        if isinstance(info, dict):
            dims |= {"p": len(info["names"]), "b": len(info["base_names"])}
        return dims

    def base_parameters(self) -> np.ndarray:
        """The base parameters at the current parameter values: base_parameter_matrix() @ dynamic_parameters()."""
        return self.base_parameter_matrix() @ self.dynamic_parameters()

    def total_energy(self, q, qd):
        """Kinetic plus potential energy (a float, or shape (N,) for a batch)."""
        return self.kinetic_energy(q, qd) + self.potential_energy(q)

    def copy(self) -> "Robot":
        """An independent robot object (own parameter values) sharing the compiled code."""
        other = type(self)(self.extension, source=self.source, options=self.options, manifest=self.manifest,
                           selfcheck=self.selfcheck, cache_dir=self._cache_dir)
        other._set_parameters(self.parameter_values)
        other.release_gil = self.release_gil
        return other

    def __reduce__(self):
        state = {"params": self.params.as_array().tolist(), "release_gil": self.release_gil}
        key = self.manifest.get("key")
        module_path = getattr(self.extension, "__file__", None)
        return (_restore, (str(self.source) if self.source else None, self.options.as_dict(),
                           None if self._cache_dir is None else str(self._cache_dir), key, module_path), state)

    def __setstate__(self, state: dict) -> None:
        self._set_parameters(state["params"])
        self.release_gil = state["release_gil"]

    def __repr__(self) -> str:
        return f"<robodyn.Robot {self.name!r}: {self.n} joints ({', '.join(self.joint_names)})>"


def _restore(source, options, cache_dir, key, module_path) -> Robot:
    """Unpickle: the same build (by cache key or module file) if it is here, else load the description."""
    from . import cache, load

    options = BuildOptions.from_dict(options)
    if key:
        root = Path(cache_dir) if cache_dir else cache.default_root()
        found = cache.find(root, key)
        if found is not None:
            entry, manifest = found
            module = cache.import_extension(entry.module_name, entry.module_path)
            return Robot(module, source=source, options=options, manifest=manifest, selfcheck=entry.selfcheck(),
                         cache_dir=root)
    if source is None and module_path:
        path = Path(module_path)
        return Robot.from_extension(cache.import_extension(path.name.split(".")[0], path))
    if source is None:
        raise ValueError("cannot unpickle this robot: it has neither a description nor a module file")
    robot = load(source, options, cache_dir=cache_dir)
    if key and robot.manifest.get("key") != key:
        raise ValueError(f"cannot unpickle robot from {source}: the description or the toolchain changed since it "
                         "was pickled, so it would be another model")
    return robot


def _layout(table) -> tuple:
    return tuple((r.name, len(r.arguments), len(r.outputs), tuple(a.optional for a in r.arguments)) for r in table)


_LAYOUT: tuple = ()


def install(cls: type, table) -> None:
    """Give ``cls`` (Robot) one method per routine of ``table``: a compiled method descriptor (no
    Python frame per call) with the routine's name, text signature and docstring."""
    global _LAYOUT
    for index, routine in enumerate(table):
        parameters = ["$self"] + [a.name + ("=None" if a.optional else "") for a in routine.arguments]
        doc = f"{routine.method}({', '.join(parameters + ['out=None'])})\n--\n\n{routine.docstring()}"
        method = make_method(index, routine.method, doc, tuple(a.name for a in routine.arguments),
                             routine.n_required, routine.failure, cls)
        setattr(cls, routine.method, method)
    _LAYOUT = _layout(table)


install(Robot, routines.TABLE)
