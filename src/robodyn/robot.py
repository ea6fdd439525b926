"""The user-facing robot object: a compiled model plus its named parameters."""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from pathlib import Path
from typing import Iterator

import numpy as np

from . import routines
from ._arrays import finite_number, float_array
from ._native import RobotCore, make_method
from .cache import MANIFEST, SELFCHECK
from .options import BuildOptions


#: The velocity coordinates of a floating base: linear, then angular velocity, in the base frame.
BASE_VELOCITY_NAMES = ("base_vx", "base_vy", "base_vz", "base_wx", "base_wy", "base_wz")


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

    Attributes: ``n`` (degrees of freedom), ``nq`` (size of q: n + 1 with a floating base), ``name``,
    ``joint_names``, ``joint_types``, ``joint_limits``, ``frame_names``, ``params``
    (a live, settable mapping of the named parameters), ``metadata``, ``manifest``,
    ``selfcheck``, ``source`` and ``options`` (what it was built from), ``release_gil``.
    A floating base (docs/floating_base.md): ``is_floating_base``, ``base_link``, ``neutral``,
    ``integrate``, ``difference``.
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

    # -- configuration space: nq positions, n velocities (a floating base: docs/floating_base.md) ----

    @property
    def nq(self) -> int:
        """The size of q: n, or n + 1 with a floating base (position, unit quaternion x y z w, joints)."""
        return int(self.metadata.get("nq", self.n))

    @property
    def nv(self) -> int:
        """The size of q̇, q̈ and τ: the degrees of freedom (``n``; with a floating base its six come first)."""
        return self.n

    @property
    def is_floating_base(self) -> bool:
        """Whether the root body moves freely (Pinocchio's free flyer): q starts with its pose, v with its
        velocity in the base frame, τ with the wrench on it (always zero: the base has no motor)."""
        return isinstance(self.metadata.get("floating_base"), dict)

    @property
    def base_link(self) -> str | None:
        """The floating base's link (None for a fixed base)."""
        info = self.metadata.get("floating_base")
        return info["link"] if isinstance(info, dict) else None

    def neutral(self) -> np.ndarray:
        """The neutral configuration (nq,): joints at zero; a floating base at the origin with the identity
        orientation (quaternion 0, 0, 0, 1)."""
        if self.is_floating_base:
            from .floating_base import neutral

            return neutral(self.n - 6)
        return np.zeros(self.n)

    def integrate(self, q, v, dt: float = 1.0) -> np.ndarray:
        """The configuration reached from q at the constant velocity v after dt: q + dt v for joints, the SE(3)
        exponential map for a floating base (Pinocchio's integrate). Shapes (nq,), (n,) or batches."""
        if self.is_floating_base:
            from .floating_base import integrate

            return integrate(self._positions(q), self._velocities(v), dt)
        return self._positions(q) + finite_number(dt, "dt") * self._velocities(v)

    def difference(self, q0, q1) -> np.ndarray:
        """The velocity that ``integrate`` turns q0 into q1 with in unit time (Pinocchio's difference): q1 - q0
        for joints, the SE(3) logarithm for a floating base."""
        if self.is_floating_base:
            from .floating_base import difference

            return difference(self._positions(q0, "q0"), self._positions(q1, "q1"))
        return self._positions(q1, "q1") - self._positions(q0, "q0")

    def _input_problem(self, name: str, value) -> str | None:
        """Why a routine's argument made its kernel fail, if the argument is the cause (a floating base's
        quaternion of other than unit norm: the kernels check it); None otherwise."""
        if name != "q" or not self.is_floating_base:
            return None
        from .floating_base import check_configuration

        try:
            check_configuration(value, name)
        except ValueError as exc:
            return str(exc)
        return None

    def _positions(self, q, name: str = "q") -> np.ndarray:
        """q as a new float array of nq values (or a batch), finite, with a unit base quaternion."""
        q = _vector(q, name, self.nq)
        if self.is_floating_base:
            from .floating_base import check_configuration

            check_configuration(q, name)
        return q

    def _velocities(self, v, name: str = "v") -> np.ndarray:
        return _vector(v, name, self.n)

    def total_mass(self) -> float:
        """The mass of the whole robot at the current parameter values (a floating base: M's linear block)."""
        if not self.is_floating_base:
            raise AttributeError(f"{self.name}: total_mass is computed for floating bases (the base's mass does not "
                                 "enter a fixed base's M)")
        return float(self.M(self.neutral())[0, 0])

    # -- named frames: every link of the description ---------------------------------------------

    @property
    def frame_names(self) -> tuple[str, ...]:
        """Every link frame (URDF: every link, merged ones included; YAML: the base and each joint's link)."""
        return tuple(self.metadata.get("frame_names", ()))

    def frame_index(self, frame: str | int) -> int:
        """The index of a frame (by name, or an index checked) in ``frame_names``."""
        names = self.frame_names
        if isinstance(frame, (int, np.integer)) and not isinstance(frame, (bool, np.bool_)):
            if not 0 <= frame < len(names):
                raise IndexError(f"frame index {frame} out of range: this robot has {len(names)} frames")
            return int(frame)
        if not isinstance(frame, str):
            raise TypeError(f"frame: expected a link name or an index, got {type(frame).__name__}")
        try:
            return names.index(frame)
        except ValueError:
            from difflib import get_close_matches

            close = get_close_matches(frame, names, 3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise KeyError(f"no frame named {frame!r}{hint} (robot.frame_names lists {len(names)})") from None

    def frame_placement(self, q, frame: str | int) -> np.ndarray:
        """The 4 x 4 world pose of one frame (by link name): shape (4, 4), or (N, 4, 4) for a batch."""
        return self.frame_placements(q)[..., self.frame_index(frame), :, :]

    def frame_jacobian(self, q, frame: str | int, reference: str = "world_aligned") -> np.ndarray:
        """The 6 x n Jacobian of one frame: linear velocity of its origin, then angular velocity. ``reference``
        "world_aligned" (world axes; Pinocchio's LOCAL_WORLD_ALIGNED) or "local" (the frame's own axes)."""
        index = self.frame_index(frame)
        jacobian = self.frame_jacobians(q)[..., index, :, :]
        if reference == "world_aligned":
            return np.ascontiguousarray(jacobian)
        if reference != "local":
            raise ValueError(f"reference: expected 'world_aligned' or 'local', got {reference!r}")
        rotation_t = np.swapaxes(self.frame_placements(q)[..., index, :3, :3], -1, -2)
        return np.concatenate([rotation_t @ jacobian[..., :3, :], rotation_t @ jacobian[..., 3:, :]], axis=-2)

    def frame_bias_acceleration(self, q, qd, frame: str | int) -> np.ndarray:
        """J̇ q̇ of one frame (world axes): its origin's classical acceleration and its angular acceleration are
        J q̈ + J̇ q̇."""
        return np.ascontiguousarray(self.frame_bias_accelerations(q, qd)[..., self.frame_index(frame), :])

    @property
    def joint_limits(self) -> list[dict]:
        return [dict(limit) for limit in self.metadata["limits"]]

    @property
    def actuated(self) -> tuple[int, ...]:
        """Indices (ascending) of the coordinates that have a motor; the others are passive (zero torque). The
        description's ``actuated:`` list; every joint when it has none."""
        return tuple(int(i) for i in self.metadata.get("actuated", range(self.n)))

    @property
    def passive(self) -> tuple[int, ...]:
        """Indices (ascending) of the coordinates without a motor: those not in ``actuated``."""
        actuated = set(self.actuated)
        return tuple(i for i in range(self.n) if i not in actuated)

    @property
    def n_actuated(self) -> int:
        """How many coordinates have a motor: the number of inputs (columns of B in ``linearize``)."""
        return len(self.actuated)

    @property
    def is_underactuated(self) -> bool:
        """Some coordinate has no motor (an acrobot's shoulder, a cart-pole's pendulum)."""
        return self.n_actuated < self.n

    @property
    def actuated_joint_names(self) -> tuple[str, ...]:
        return tuple(self.coordinate_names[i] for i in self.actuated)

    @property
    def coordinate_names(self) -> tuple[str, ...]:
        """A name per velocity coordinate (n): the joints', after a floating base's six (BASE_VELOCITY_NAMES)."""
        return (BASE_VELOCITY_NAMES if self.is_floating_base else ()) + self.joint_names

    @property
    def actuation_matrix(self) -> np.ndarray:
        """S (n x n_actuated): the joint torques are τ = S u for the motor torques u (a new array)."""
        selection = np.zeros((self.n, self.n_actuated))
        selection[list(self.actuated), range(self.n_actuated)] = 1.0
        return selection

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
    def base_parameter_gravity(self) -> tuple[float, float, float] | None:
        """The gravity (x, y, z) the base parameters were derived for, when they hold only for gravity parallel
        to it: a fixed base whose first axis is along gravity cannot see its link's first moments, which a
        tilted gravity shows. ``base_regressor`` and ``slotine_li_regressor`` then raise for another direction
        (magnitude and sense may change). None: they hold for any gravity the parameters can set."""
        gravity = self._identification().get("base_gravity")
        return None if gravity is None else tuple(float(v) for v in gravity)

    @property
    def base_parameter_columns(self) -> tuple[int, ...]:
        """Indices of the base parameters among the dynamic parameters (the regressor's kept columns)."""
        return tuple(int(c) for c in self._identification()["base_columns"])

    @property
    def dimensions(self) -> dict[str, int]:
        """The sizes the routine table's shapes name: n joints, p dynamic and b base parameters; for a closed
        chain t tree joints, k loop equations, np passive joints, e task coordinates, am and wm modes."""
        dims = {"n": self.n, "nq": self.nq, "f": len(self.frame_names)}
        info = self.metadata.get("dynamic_parameters")
        if isinstance(info, dict):
            dims |= {"p": len(info["names"]), "b": len(info["base_names"])}
        chain = self.metadata.get("closed_chain")
        if isinstance(chain, dict):
            dims |= chain["dimensions"]
        return dims

    # -- closed chains: geometry with modes (docs/closed_chains.md) ------------------------------

    @property
    def is_closed_chain(self) -> bool:
        """Whether the robot is a closed-chain mechanism (its coordinates are the actuated joints)."""
        return isinstance(self.metadata.get("closed_chain"), dict)

    def _chain(self, closed_form: bool = False) -> dict:
        info = self.metadata.get("closed_chain")
        if not isinstance(info, dict):
            raise AttributeError(f"robot {self.name!r} is not a closed chain")
        if closed_form and not info["closed_form"]:
            raise AttributeError(f"robot {self.name!r} has no closed-form geometry ({info['reason']}); solve it "
                                 "numerically with robodyn.closed_chain.ConstrainedDynamics(robot).assemble(qa, guess) "
                                 "or .follow(path)")
        return info

    @property
    def is_constrained(self) -> bool:
        """A closed chain without a closed-form reduced model: its coordinates are every joint of its tree and
        robodyn.closed_chain.ConstrainedDynamics solves its loops (simulation uses it)."""
        return self.is_closed_chain and not self.metadata["closed_chain"]["closed_form"]

    @property
    def assembly_mode(self) -> int:
        """The assembly mode the dynamics were compiled for (+1 or -1; the build option assembly_mode)."""
        return int(self._chain()["assembly_mode"])

    @property
    def modes(self) -> dict:
        """The modes of the geometric models and what they mean: {"assembly": [+1, -1], "working": [(σ1, σ2),
        ...], "assembly_meaning": text, "working_meaning": [text per actuated joint]}."""
        info = self._chain(closed_form=True)
        return {"assembly": list(info["assembly_modes"]), "working": [tuple(m) for m in info["working_modes"]],
                "assembly_meaning": info["assembly_meaning"], "working_meaning": list(info["working_meaning"])}

    @property
    def passive_joint_names(self) -> tuple[str, ...]:
        """The joints without a motor: a closed chain's passive joints (in its tree) or a serial or tree robot's
        passive coordinates."""
        if not self.is_closed_chain:
            base = len(BASE_VELOCITY_NAMES) if self.is_floating_base else 0
            return tuple(self.coordinate_names[i] for i in self.passive if i >= base)
        info = self._chain()
        return tuple(info["tree_joint_names"][i] for i in info["passive"])

    @property
    def tree_joint_names(self) -> tuple[str, ...]:
        """Every joint of the virtual tree (the loops cut), description order: the order of ``qt``."""
        return tuple(self._chain()["tree_joint_names"])

    @property
    def task_coordinates(self) -> tuple[str, ...]:
        """Names of the end-effector coordinates dgm returns and igm takes (the platform point's, base frame)."""
        return tuple(self._chain(closed_form=True)["task_coordinates"])

    @property
    def singularity_loci(self) -> tuple[str, ...]:
        """The type-1 and type-2 singularity loci, as the build derived them symbolically."""
        return tuple(self._chain(closed_form=True)["loci"])

    def _mode_row(self, mode, modes: list, what: str) -> int:
        """The row of ``mode`` among ``modes``: ±1 for an assembly mode, a tuple of ±1 (one per actuated joint)
        for a working mode; integers only (a bool, a string or 1.5 is refused)."""
        def sign(value):
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value not in (1, -1):
                raise ValueError(f"unknown {what} mode {mode!r}; this robot has {', '.join(map(str, modes))}")
            return int(value)

        if isinstance(mode, np.ndarray):
            mode = mode.tolist()
        key = tuple(sign(m) for m in mode) if isinstance(mode, (tuple, list)) else sign(mode)
        for index, candidate in enumerate(modes):
            if (tuple(candidate) if isinstance(candidate, (list, tuple)) else candidate) == key:
                return index
        raise ValueError(f"unknown {what} mode {mode!r}; this robot has {', '.join(map(str, modes))}")

    @staticmethod
    def _assembled(values: np.ndarray, what: str, mode) -> np.ndarray:
        bad = ~np.all(np.isfinite(values), axis=-1)
        if np.any(bad):
            where = "" if values.ndim == 1 else f" (batch rows {np.flatnonzero(bad)[:5].tolist()})"
            raise ValueError(f"{what} has no solution in mode {mode}{where}: the mechanism cannot be assembled there")
        return values

    def _in_assembly_mode(self, modes: np.ndarray, mode, what: str) -> np.ndarray:
        """The rows of one assembly mode (default: the robot's) out of a routine's all-modes result."""
        info = self._chain(closed_form=True)
        mode = self.assembly_mode if mode is None else mode
        row = self._mode_row(mode, info["assembly_modes"], "assembly")
        return self._assembled(np.ascontiguousarray(modes[..., row, :]), what, mode)

    def dgm(self, q, mode=None) -> np.ndarray:
        """Direct geometric model: the end-effector coordinates (``task_coordinates``) at actuated positions q,
        in assembly mode ``mode`` (+1 or -1; default: the mode the robot was built for). Shape (e,) or (N, e).
        ValueError where the mechanism cannot be assembled."""
        self._chain(closed_form=True)
        return self._in_assembly_mode(self.dgm_modes(q), mode, "the direct geometric model")

    def igm(self, x, mode=None) -> np.ndarray:
        """Inverse geometric model: actuated positions that put the end effector at x, in working mode ``mode``
        (a tuple of ±1, one per actuated joint; see ``modes``), shape (n,) or (N, n). Without ``mode``: every
        working mode, shape (wm, n) (rows in the order of ``modes["working"]``; NaN where out of reach)."""
        info = self._chain(closed_form=True)
        values = self.igm_modes(x)
        if mode is None:
            if np.all(np.isnan(values)):
                raise ValueError(f"the end-effector position {np.asarray(x).tolist()} is out of reach")
            return values
        row = self._mode_row(mode, info["working_modes"], "working")
        return self._assembled(np.ascontiguousarray(values[..., row, :]), "the inverse geometric model", tuple(mode))

    def passive_positions(self, q, mode=None) -> np.ndarray:
        """Positions of the passive joints (``passive_joint_names``) at actuated positions q, in assembly mode
        ``mode`` (default: the robot's)."""
        self._chain(closed_form=True)
        return self._in_assembly_mode(self.passive_modes(q), mode, "the passive-joint model")

    def tree_positions(self, q, mode=None) -> np.ndarray:
        """Every joint of the virtual tree (``tree_joint_names`` order) at actuated positions q."""
        info = self._chain(closed_form=True)
        passive = self.passive_positions(q, mode)  # checks q like every routine
        q = np.asarray(q, dtype=float)
        out = np.empty(q.shape[:-1] + (len(info["tree_joint_names"]),))
        out[..., info["actuated"]] = q
        out[..., info["passive"]] = passive
        return out

    def tree_velocities(self, q, qd) -> np.ndarray:
        """Every joint's velocity in the virtual tree: actuated qd, passive Jp(q) qd (build's assembly mode)."""
        info = self._chain(closed_form=True)
        jacobian = self.passive_jacobian(q)  # checks q like every routine
        qd = float_array(qd, "qd")
        if qd.shape != np.shape(q):
            raise ValueError(f"qd: expected shape {np.shape(q)} like q, got {qd.shape}")
        if not np.all(np.isfinite(qd)):
            raise ValueError("qd: contains NaN or infinity")
        out = np.empty(qd.shape[:-1] + (len(info["tree_joint_names"]),))
        out[..., info["actuated"]] = qd
        out[..., info["passive"]] = np.einsum("...ij,...j->...i", jacobian, qd)
        return out

    def base_parameters(self) -> np.ndarray:
        """The base parameters at the current parameter values: base_parameter_matrix() @ dynamic_parameters()."""
        return self.base_parameter_matrix() @ self.dynamic_parameters()

    def linearize(self, q, qd, tau, dt: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(A, B) of the state-space model of x = (q, qd) about (q, qd, tau): continuous, or with ``dt`` the
        exact Jacobians of one RK4 step of the simulation harness (see robodyn.linearization)."""
        from .linearization import linearize

        return linearize(self, q, qd, tau, dt)

    def total_energy(self, q, qd):
        """Kinetic plus potential energy (a float, or shape (N,) for a batch)."""
        return self.kinetic_energy(q, qd) + self.potential_energy(q)

    def copy(self) -> "Robot":
        """An independent robot object (own parameter values) sharing the compiled code."""
        other = type(self)(self.extension, source=self.source, options=self.options, manifest=self.manifest,
                           selfcheck=self.selfcheck, cache_dir=self._cache_dir)
        other._set_parameters(self.parameter_values)
        other.release_gil = self.release_gil
        other.threads = self.threads
        return other

    def __reduce__(self):
        state = {"params": self.params.as_array().tolist(), "release_gil": self.release_gil, "threads": self.threads}
        key = self.manifest.get("key")
        module_path = getattr(self.extension, "__file__", None)
        return (_restore, (str(self.source) if self.source else None, self.options.as_dict(),
                           None if self._cache_dir is None else str(self._cache_dir), key, module_path), state)

    def __setstate__(self, state: dict) -> None:
        self._set_parameters(state["params"])
        self.release_gil = state["release_gil"]
        self.threads = state.get("threads", "auto")

    def __repr__(self) -> str:
        if self.is_floating_base:
            return (f"<robodyn.Robot {self.name!r}: floating base {self.base_link!r} and {len(self.joint_names)} "
                    f"joints ({', '.join(self.joint_names)}); nq = {self.nq}, nv = {self.n}>")
        return f"<robodyn.Robot {self.name!r}: {self.n} joints ({', '.join(self.joint_names)})>"


def _vector(value, name: str, width: int) -> np.ndarray:
    """A new float array of shape (width,) or (N, width), finite."""
    array = float_array(value, name)
    if array.ndim not in (1, 2) or array.shape[-1] != width:
        raise ValueError(f"{name}: expected shape ({width},) or (N, {width}), got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name}: contains NaN or infinity")
    return array


def _restore(source, options, cache_dir, key, module_path) -> Robot:
    """Unpickle: the same build (by cache key or module file) if it is here, else load the description."""
    from . import cache, load

    options = BuildOptions.from_dict(options)
    if key:
        root = Path(cache_dir) if cache_dir else cache.default_root()
        found = cache.find(root, key)
        if found is not None:
            entry, manifest = found
            try:
                module = cache.import_extension(entry.module_name, entry.module_path)
            except ImportError:  # an entry whose module does not import: load() below says so and rebuilds it
                pass
            else:
                return Robot(module, source=source, options=options, manifest=manifest,
                             selfcheck=entry.selfcheck(), cache_dir=root)
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
