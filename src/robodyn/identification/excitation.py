"""Excitation trajectories for identification: finite Fourier series (Swevers et al. 1997) whose
coefficients are optimised so that the stacked base regressor is well conditioned, within the
robot's position, velocity, acceleration and torque limits.

Per joint i, with the base pulsation w = 2 pi f (f = 1 / period) and L harmonics::

    q_i(t)   = q0_i + sum_l  a_il / (w l) sin(w l t) - b_il / (w l) cos(w l t)
    qd_i(t)  =        sum_l  a_il cos(w l t) + b_il sin(w l t)
    qdd_i(t) =        sum_l -a_il w l sin(w l t) + b_il w l cos(w l t)

The motion is periodic (measure whole periods and average them against noise) and band-limited to
L f (so a low-pass filter above it keeps the signal). ``a``, ``b`` are velocity amplitudes.

    trajectory, report = design_excitation(robot, duration=20, harmonics=5)
    trajectory.save("trajectory.csv")           # samples; also .json or .npz (coefficients)
    print(report.summary())

Why the raw condition number: the criterion is cond(W) of the stacked base regressor in SI units,
as in the literature and the issue's figures (notes' RR arm, centres of mass on the link axes:
cond 252 for one sine per joint over 20 s, 12 optimised with 5 harmonics; with general centres of
mass, 6 inertial base parameters: 4449 and 19). Scaling every column to unit norm makes cond independent of units but blind to a
parameter that is excited weakly compared with the torque it must be separated from (one slow sine
already scores ~5 there, and unit-scaled designs leave most of the limits unused), so it is an
option (``column_scale="unit"``), not the default; any positive (b,) vector, such as the nominal
parameter magnitudes, is accepted too. The D-optimal criterion (maximise log det WᵀW) does not
depend on column scaling at all and rewards strong excitation. For geared robots the SI cond is
dominated by the rotor columns (squared gear ratios; Puma 560: 4418 where the unit-norm cond of
the same design is 13.7): use the unit scaling or D-optimality there; the report gives both conds
and says so.
"""

from __future__ import annotations

import io
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._arrays import float_array

__all__ = [
    "CRITERIA",
    "DEFAULT_LIMITS",
    "ExcitationReport",
    "FourierTrajectory",
    "StartResult",
    "design_excitation",
    "excitation_limits",
    "regressor_condition",
    "single_sine",
]

CRITERIA = ("cond", "d-optimal")

#: Limits used where the robot description gives none (per joint type). Revolute: one turn of
#: travel, 2 rad/s, 10 rad/s²; prismatic: ±0.5 m, 0.5 m/s, 5 m/s². No torque limit unless given.
#: Pass ``limits=`` for the real machine's values: these only keep a design physically plausible.
DEFAULT_LIMITS = {
    "revolute": {"lower": -math.pi, "upper": math.pi, "velocity": 2.0, "acceleration": 10.0},
    "prismatic": {"lower": -0.5, "upper": 0.5, "velocity": 0.5, "acceleration": 5.0},
}
LIMIT_KINDS = ("lower", "upper", "velocity", "acceleration", "effort")
#: Each design's limits are checked after optimisation on a grid this many times finer.
CHECK_REFINEMENT = 8
#: The optimiser sees the limits at this many times per period of the highest harmonic (at most
#: ``samples``): a peak between them is missed by at most 1 - cos(pi / 20) = 1.2 % of it, within half
#: the default margin; fewer rows keep SLSQP's subproblems small (its time grows with the rows).
CONSTRAINT_POINTS_PER_CYCLE = 20
#: ``summary`` points at column scaling when cond in SI units exceeds this multiple of the unit-norm
#: cond (Puma 560: 4418 against 13.7, its rotor columns carry the squared gear ratios; RR arm: 20 / 3.4).
SCALE_WARNING = 100.0
#: Regularisation of the D-optimal criterion, relative to the mean eigenvalue of WᵀW/N.
D_OPTIMAL_EPSILON = 1e-9
_FORMAT = "robodyn excitation v1"
#: The highest base frequency of an excitation trajectory (Hz): a robot arm's are a fraction of a hertz.
MAX_FREQUENCY = 1e3


# --------------------------------------------------------------------------- the trajectory

@dataclass(frozen=True, eq=False)
class FourierTrajectory:
    """A finite Fourier series per joint (formulas in the module docstring).

    ``frequency`` the base frequency f in Hz (period 1/f); ``a``, ``b`` (n, L) sine and cosine
    coefficients (velocity amplitudes, rad/s or m/s); ``offsets`` (n,) q0; ``joint_names`` (n,);
    ``duration`` the measuring time in s that ``samples`` and ``save`` cover (default one period).
    """

    frequency: float
    a: np.ndarray
    b: np.ndarray
    offsets: np.ndarray
    joint_names: tuple
    duration: float | None = None

    def __post_init__(self):
        frequency = _positive(self.frequency, "frequency")
        if frequency > MAX_FREQUENCY:
            raise ValueError(f"frequency: {frequency:g} Hz is beyond {MAX_FREQUENCY:g} Hz, faster than any robot "
                             "can be excited")
        a = float_array(self.a, "a", ndmin=2)
        b = float_array(self.b, "b", ndmin=2)
        offsets = float_array(self.offsets, "offsets", ndmin=1)
        names = tuple(self.joint_names) if isinstance(self.joint_names, (Sequence, np.ndarray)) and not isinstance(
            self.joint_names, str) else None
        if names is None or not all(isinstance(name, str) and name and "," not in name for name in names):
            raise TypeError(f"joint_names: expected a sequence of non-empty names without commas, "
                            f"got {self.joint_names!r}")
        n = len(names)
        if len(set(names)) != n:
            raise ValueError(f"joint_names: duplicate names in {names}")
        if a.ndim != 2 or a.shape[0] != n or a.shape[1] < 1:
            raise ValueError(f"a: expected shape ({n}, L) with L >= 1, got {a.shape}")
        if b.shape != a.shape:
            raise ValueError(f"b: expected the shape of a {a.shape}, got {b.shape}")
        if offsets.shape != (n,):
            raise ValueError(f"offsets: expected shape ({n},), got {offsets.shape}")
        for name, value in (("a", a), ("b", b), ("offsets", offsets)):
            if not np.all(np.isfinite(value)):
                raise ValueError(f"{name}: the values must be finite")
        duration = None if self.duration is None else _positive(self.duration, "duration")
        for name, value in (("frequency", frequency), ("a", a), ("b", b), ("offsets", offsets),
                            ("joint_names", names), ("duration", duration)):
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
            object.__setattr__(self, name, value)

    @property
    def n(self) -> int:
        return len(self.joint_names)

    @property
    def harmonics(self) -> int:
        return self.a.shape[1]

    @property
    def period(self) -> float:
        return 1.0 / self.frequency

    @property
    def omega(self) -> float:
        """Base pulsation w = 2 pi f (rad/s)."""
        return 2.0 * math.pi * self.frequency

    @property
    def measuring_time(self) -> float:
        return self.period if self.duration is None else self.duration

    def evaluate(self, t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(q, qd, qdd) at time(s) ``t``: shape (n,) each for a scalar t, (N, n) for N times."""
        times = np.asarray(t, dtype=np.float64)
        if times.ndim > 1 or not np.all(np.isfinite(times)):
            raise ValueError("t: expected a finite time or a 1-D array of finite times")
        scalar = times.ndim == 0
        times = np.atleast_1d(times)
        w = self.omega * np.arange(1, self.harmonics + 1)          # (L,)
        phase = times[:, None] * w[None, :]                        # (N, L)
        sin, cos = np.sin(phase), np.cos(phase)
        q = self.offsets + (sin / w) @ self.a.T - (cos / w) @ self.b.T
        qd = cos @ self.a.T + sin @ self.b.T
        qdd = -(sin * w) @ self.a.T + (cos * w) @ self.b.T
        if scalar:
            return q[0], qd[0], qdd[0]
        return q, qd, qdd

    def sample(self, rate: float = 100.0, duration: float | None = None):
        """(t, q, qd, qdd) at ``rate`` Hz over ``duration`` s (default: ``measuring_time``), t from
        0 and the end excluded (a whole period repeats seamlessly)."""
        rate = _positive(rate, "rate")
        duration = self.measuring_time if duration is None else _positive(duration, "duration")
        count = int(round(duration * rate))
        if not 2 <= count <= 50_000_000:
            raise ValueError(f"rate x duration: expected between 2 and 5e7 samples, got {count}")
        t = np.arange(count) / rate
        return (t, *self.evaluate(t))

    # ------------------------------------------------------------------ files

    def as_dict(self) -> dict:
        return {"format": _FORMAT, "frequency": self.frequency, "period": self.period,
                "duration": self.duration, "joint_names": list(self.joint_names),
                "offsets": self.offsets.tolist(), "a": self.a.tolist(), "b": self.b.tolist()}

    @classmethod
    def from_dict(cls, values: Mapping, source: str = "trajectory") -> FourierTrajectory:
        if not isinstance(values, Mapping) or values.get("format") != _FORMAT:
            raise ValueError(f"{source}: not a robodyn excitation trajectory (expected format {_FORMAT!r})")
        try:
            return cls(frequency=values["frequency"], a=values["a"], b=values["b"], offsets=values["offsets"],
                       joint_names=values["joint_names"], duration=values.get("duration"))
        except KeyError as exc:
            raise ValueError(f"{source}: missing field {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{source}: {exc}") from None

    def save(self, path, rate: float = 100.0) -> Path:
        """Write the trajectory, atomically (complete or not at all), by the file's suffix:

        * ``.csv`` — samples at ``rate`` Hz over ``measuring_time``: ``#`` comment lines (the
          formula, units and a ``# fourier: {...}`` line with the coefficients as JSON, which
          ``load`` reads), then the header ``t,q_<joint>...,qd_<joint>...,qdd_<joint>...`` and one
          row per sample (17 significant digits; the column names follow the measurement files
          of robodyn.identification.data);
        * ``.json`` — the coefficients (``as_dict``);
        * ``.npz`` — the coefficients (``frequency``, ``a``, ``b``, ``offsets``, ``joint_names``,
          ``duration`` NaN when unset) and the samples ``t``, ``q``, ``qd``, ``qdd``.
        """
        from .._files import write_atomically

        path = Path(path)
        suffix = path.suffix.lower()
        if suffix == ".json":
            write_atomically(path, json.dumps(self.as_dict(), indent=2) + "\n")
        elif suffix == ".csv":
            write_atomically(path, self._csv(rate))
        elif suffix == ".npz":
            t, q, qd, qdd = self.sample(rate)
            arrays = dict(format=np.array(_FORMAT), frequency=np.array(self.frequency), a=self.a, b=self.b,
                          offsets=self.offsets, joint_names=np.array(self.joint_names),
                          duration=np.array(np.nan if self.duration is None else self.duration),
                          t=t, q=q, qd=qd, qdd=qdd)
            buffer = io.BytesIO()
            np.savez(buffer, **arrays)
            write_atomically(path, buffer.getvalue())
        else:
            raise ValueError(f"{path}: unknown file type {path.suffix!r} (expected .csv, .json or .npz)")
        return path

    def _csv(self, rate: float) -> str:
        t, q, qd, qdd = self.sample(rate)
        names = self.joint_names
        header = ["t"] + [f"{kind}_{name}" for kind in ("q", "qd", "qdd") for name in names]
        lines = [f"# {_FORMAT}: finite Fourier series (Swevers et al. 1997), {self.harmonics} harmonics, "
                 f"period {self.period:.17g} s",
                 "# q_i(t) = q0_i + sum_l a_il/(w l) sin(w l t) - b_il/(w l) cos(w l t), w = 2 pi frequency",
                 "# units: t s; q rad or m; qd rad/s or m/s; qdd rad/s^2 or m/s^2 (SI)",
                 "# fourier: " + json.dumps(self.as_dict(), separators=(",", ":")),
                 ",".join(header)]
        block = np.column_stack([t, q, qd, qdd])
        lines += [",".join(f"{value:.17g}" for value in row) for row in block]
        return "\n".join(lines) + "\n"

    @classmethod
    def load(cls, path) -> FourierTrajectory:
        """Read a trajectory written by ``save`` (.csv through its ``# fourier:`` line, .json, .npz).
        Anything else — a missing, special, huge or damaged file — is a ValueError naming it."""
        import stat
        import zipfile

        path = Path(path)
        try:
            info = path.stat()
        except OSError as exc:
            raise ValueError(f"{path}: cannot read the trajectory: {exc.strerror or exc}") from None
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{path}: not a regular file (a directory, FIFO or device is not a trajectory)")
        if info.st_size > 1 << 28:
            raise ValueError(f"{path}: {info.st_size} bytes, more than a trajectory file has (256 MiB)")
        try:
            return cls._load(path)
        except (OSError, UnicodeDecodeError, RecursionError, zipfile.BadZipFile, EOFError) as exc:
            raise ValueError(f"{path}: not a readable trajectory ({type(exc).__name__}: {exc})") from None
        except ValueError as exc:
            message = str(exc)
            raise ValueError(message if message.startswith(str(path)) else f"{path}: {message}") from None

    @classmethod
    def _load(cls, path: Path) -> FourierTrajectory:
        suffix = path.suffix.lower()
        if suffix == ".json":
            try:
                values = json.loads(path.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ValueError(f"{path}: not JSON ({exc})") from None
            return cls.from_dict(values, str(path))
        if suffix == ".csv":
            with open(path, encoding="utf-8") as stream:
                for number, line in enumerate(stream, 1):
                    if not line.startswith("#"):
                        break
                    if line.startswith("# fourier: "):
                        try:
                            values = json.loads(line[len("# fourier: "):])
                        except json.JSONDecodeError as exc:
                            raise ValueError(f"{path}:{number}: damaged '# fourier:' line ({exc})") from None
                        return cls.from_dict(values, f"{path}:{number}: '# fourier:' line")
            raise ValueError(f"{path}: no '# fourier:' comment line before the header (not written by "
                             "FourierTrajectory.save)")
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as data:
                try:
                    if str(data["format"]) != _FORMAT:
                        raise KeyError("format")
                    duration = float(data["duration"])
                    return cls(frequency=float(data["frequency"]), a=data["a"], b=data["b"],
                               offsets=data["offsets"], joint_names=tuple(str(s) for s in data["joint_names"]),
                               duration=None if math.isnan(duration) else duration)
                except KeyError as exc:
                    raise ValueError(f"{path}: not a robodyn excitation trajectory (missing {exc.args[0]!r})") from None
        raise ValueError(f"{path}: unknown file type {path.suffix!r} (expected .csv, .json or .npz)")


def single_sine(joint_names: Sequence[str], period: float, amplitude=1.0, phase_step: float = 0.5 * math.pi,
                offsets=None) -> FourierTrajectory:
    """The baseline of the issue's figure: one harmonic per joint at the base frequency 1/period,
    q_i = q0_i + amplitude_i sin(w t - i phase_step) (joint i a quarter period behind joint i-1 by
    default). For the notes' RR arm over 20 s with amplitude 1 rad: cond 252 (8 base columns)."""
    n = len(joint_names)
    w = 2.0 * math.pi / _positive(period, "period")
    amplitude = np.broadcast_to(np.asarray(amplitude, dtype=np.float64), (n,))
    phase = -phase_step * np.arange(n)
    # A sin(wt + p) = (a/w) sin(wt) - (b/w) cos(wt) with a = A w cos p, b = -A w sin p.
    a = (amplitude * w * np.cos(phase))[:, None]
    b = (-amplitude * w * np.sin(phase))[:, None]
    return FourierTrajectory(1.0 / period, a, b, np.zeros(n) if offsets is None else offsets, tuple(joint_names))


# --------------------------------------------------------------------------- criteria

class WithoutKnownZeros:
    """A robot whose base regressor leaves out the base parameters its description fixes at zero
    (everything else is the robot's; pickles with it, for worker processes)."""

    def __init__(self, robot):
        self.robot = robot
        zeros = set(robot.known_zero_base_parameters)
        self.columns = [i for i, name in enumerate(robot.base_parameter_names) if name not in zeros]
        self.base_parameter_names = tuple(robot.base_parameter_names[i] for i in self.columns)

    def base_regressor(self, q, qd, qdd):
        return self.robot.base_regressor(q, qd, qdd)[..., self.columns]

    def __getattr__(self, name):
        if name in ("robot", "columns", "__setstate__") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.robot, name)


def regressor_condition(robot, trajectory: FourierTrajectory, samples: int = 200, column_scale=None) -> float:
    """cond of the stacked base regressor of ``robot`` over one period of ``trajectory``
    (``samples`` times, end excluded), columns scaled by ``column_scale`` (see the module)."""
    t = np.arange(samples) * (trajectory.period / samples)
    W = _stacked(robot, *trajectory.evaluate(t))
    return _cond(_scaled(W, column_scale))


def _stacked(robot, q, qd, qdd) -> np.ndarray:
    Y = np.asarray(robot.base_regressor(np.ascontiguousarray(q), np.ascontiguousarray(qd),
                                        np.ascontiguousarray(qdd)))
    return Y.reshape(-1, Y.shape[-1])


def _scaled(W: np.ndarray, column_scale) -> np.ndarray:
    if column_scale is None:
        return W
    if isinstance(column_scale, str):  # "unit", validated by design_excitation
        norms = np.linalg.norm(W, axis=0)
        return W / np.where(norms > 0, norms, 1.0)
    return W * column_scale


def _cond(W: np.ndarray) -> float:
    s = np.linalg.svd(W, compute_uv=False)
    return float(s[0] / s[-1]) if s[-1] > s[0] * 1e-300 else math.inf


def _log_det(W: np.ndarray) -> float:
    """Regularised log det(WᵀW/N + eps I), eps relative to the mean eigenvalue."""
    information = W.T @ W / W.shape[0]
    eps = D_OPTIMAL_EPSILON * max(np.trace(information) / information.shape[0], 1e-300)
    sign, value = np.linalg.slogdet(information + eps * np.eye(information.shape[0]))
    return float(value) if sign > 0 else -math.inf


# --------------------------------------------------------------------------- limits

def excitation_limits(robot, limits: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    """Per-joint limits for a design: ``lower``, ``upper``, ``velocity``, ``acceleration``,
    ``effort`` arrays (n,). From ``limits`` (a mapping of those names to a number or n numbers;
    effort None or inf = unlimited), else the robot's ``joint_limits``, else ``DEFAULT_LIMITS`` by
    joint type (no torque limit). Raises ValueError naming a bad entry."""
    n = robot.n
    types = tuple(getattr(robot, "joint_types", ("revolute",) * n))
    described = list(getattr(robot, "joint_limits", None) or [{}] * n)
    if len(described) != n:
        raise ValueError(f"robot.joint_limits: expected {n} entries, got {len(described)}")
    given = dict(limits or {})
    unknown = set(given) - set(LIMIT_KINDS)
    if unknown:
        raise ValueError(f"limits: unknown kind(s) {', '.join(sorted(unknown))}; expected {', '.join(LIMIT_KINDS)}")
    out = {}
    for kind in LIMIT_KINDS:
        values = np.empty(n)
        for i in range(n):
            value = (described[i] or {}).get(kind)
            if value is None:
                value = DEFAULT_LIMITS.get(types[i], DEFAULT_LIMITS["revolute"]).get(kind, math.inf)
            values[i] = value
        if given.get(kind) is not None:
            try:
                override = np.broadcast_to(np.asarray(given[kind], dtype=np.float64), (n,))
            except (TypeError, ValueError):
                raise ValueError(f"limits[{kind!r}]: expected a number or {n} numbers, got {given[kind]!r}") from None
            values = np.array(override, dtype=np.float64)
        if np.any(np.isnan(values)):
            raise ValueError(f"limits[{kind!r}]: NaN")
        out[kind] = values
    for kind in ("velocity", "acceleration", "effort"):
        if np.any(out[kind] <= 0):
            raise ValueError(f"limits[{kind!r}]: must be positive, got {out[kind].tolist()}")
    if not np.all(np.isfinite(out["velocity"])) or not np.all(np.isfinite(out["acceleration"])):
        raise ValueError("limits: velocity and acceleration limits must be finite (a Fourier design needs them)")
    if not (np.all(np.isfinite(out["lower"])) and np.all(np.isfinite(out["upper"]))
            and np.all(out["lower"] < out["upper"])):
        raise ValueError(f"limits: every joint needs finite lower < upper, got lower {out['lower'].tolist()}, "
                         f"upper {out['upper'].tolist()}")
    return out


# --------------------------------------------------------------------------- the design

@dataclass
class StartResult:
    """One start of the multi-start optimisation."""

    index: int
    criterion_value: float     # what was minimised: log cond, or -log det / b for d-optimal
    cond: float
    feasible: bool             # on the check grid, within every limit less half the margin (the rest
                               # absorbs peaks between the optimiser's constraint times)
    margin: float              # smallest unused fraction of any limit on the check grid
    iterations: int
    message: str
    seconds: float
    trajectory: FourierTrajectory = field(repr=False)

    def as_dict(self) -> dict:
        return {"index": self.index, "criterion_value": self.criterion_value, "cond": self.cond,
                "feasible": self.feasible, "margin": self.margin, "iterations": self.iterations,
                "message": self.message, "seconds": self.seconds}


@dataclass
class ExcitationReport:
    """What ``design_excitation`` found: the best start's ``cond`` (and regularised ``log_det`` of
    WᵀW/N), its ``margin`` (smallest unused fraction of any limit; ``usage`` per kind and joint is
    the peak fraction used), the ``limits`` applied, every start, wall ``seconds``."""

    criterion: str
    cond: float
    log_det: float
    margin: float
    feasible: bool
    cond_unit: float           # cond with every column scaled to unit norm (free of units and gear ratios)
    usage: dict
    limits: dict
    starts: list
    best: int
    samples: int
    harmonics: int
    period: float
    column_scale: Any
    seconds: float

    def as_dict(self) -> dict:
        scale = self.column_scale
        return {"criterion": self.criterion, "cond": self.cond, "cond_unit": self.cond_unit, "log_det": self.log_det,
                "margin": self.margin,
                "feasible": self.feasible, "usage": {k: v.tolist() for k, v in self.usage.items()},
                "limits": {k: [None if not math.isfinite(x) else x for x in v.tolist()]
                           for k, v in self.limits.items()},
                "starts": [s.as_dict() for s in self.starts], "best": self.best, "samples": self.samples,
                "harmonics": self.harmonics, "period": self.period,
                "column_scale": scale.tolist() if isinstance(scale, np.ndarray) else scale, "seconds": self.seconds}

    def summary(self) -> str:
        feasible = sum(s.feasible for s in self.starts)
        worst = max(self.usage, key=lambda kind: float(np.max(self.usage[kind])))
        lines = [f"cond of the stacked base regressor: {self.cond:.4g} (criterion {self.criterion}; "
                 f"best of {len(self.starts)} starts, {feasible} within the limits; {self.seconds:.1f} s)",
                 f"limits margin: {self.margin:.1%} of the tightest limit unused ({worst})"]
        for kind, usage in self.usage.items():
            lines.append(f"  peak {kind:<12} " + ", ".join(f"{u:.0%}" for u in usage))
        lines.append(f"cond with unit-norm columns: {self.cond_unit:.4g}")
        if self.criterion == "cond" and self.column_scale is None and self.cond > SCALE_WARNING * self.cond_unit:
            lines.append("note: the columns' scales differ by orders of magnitude (gear ratios, units), so cond in "
                         "SI units measures them more than the excitation; consider column_scale='unit' "
                         "(--column-scale unit) or the d-optimal criterion")
        if not self.feasible:
            lines.append("no start stayed within the limits: relax them, raise the duration or lower the margin")
        return "\n".join(lines)


@dataclass(frozen=True)
class _Problem:
    """Everything a start needs (pickled to workers)."""

    robot: Any
    names: tuple
    period: float
    harmonics: int
    samples: int
    criterion: str
    margin: float
    limits: dict
    column_scale: Any
    optimise_offsets: bool
    maxiter: int
    seed: int


def design_excitation(robot, *, duration: float, harmonics: int, samples: int = 200, criterion: str = "cond",
                      starts: int = 8, seed: int = 0, margin: float = 0.05, limits: Mapping | None = None,
                      frequency: float | None = None, column_scale=None, optimise_offsets: bool = True,
                      maxiter: int = 300, executor=None, known_zeros: bool = False,
                      progress: Callable[[int, int], None] | None = None) -> tuple[FourierTrajectory, ExcitationReport]:
    """Optimise a finite Fourier excitation for identifying ``robot``'s base parameters.

    ``robot`` needs ``n``, ``joint_names``, ``base_regressor(q, qd, qdd)`` for batches (N, n) ->
    (N, n, b), and ``inverse_dynamics`` for batches when a torque limit applies; ``joint_limits``
    and ``joint_types`` are used when present (``excitation_limits``). The period is ``duration``
    (or 1/``frequency``, then ``duration`` must cover at least one period); ``harmonics`` L per
    joint; the criterion is evaluated on ``samples`` times of one period.

    ``criterion``: "cond" minimises log cond(W) of the stacked base regressor W (columns scaled by
    ``column_scale``: None for SI units, "unit" for unit-norm columns, or b positive factors);
    "d-optimal" maximises the regularised log det(WᵀW/N + eps I) (scale-free). Every limit is used
    up to (1 - ``margin``) of itself: velocities, accelerations and torques up to that fraction of
    the limit, positions within that fraction of the half-range around its middle.

    Method: SciPy's SLSQP, with the limits as explicit inequality constraints on the sample grid.
    It suits this small, smooth problem (2 L n + n variables): the position, velocity and
    acceleration limits are linear in the coefficients, so their exact constant Jacobian is given;
    the torque limits go through the compiled ``inverse_dynamics`` of the whole batch (finite-
    difference Jacobian); a penalty would need tuning per robot and ends slightly outside the
    limits. Each of ``starts`` random starts (seeded by (seed, start index), so results do not
    depend on where a start runs) is an independent task for ``executor`` (robodyn.parallel;
    None: this process). Afterwards each design is checked on a grid ``CHECK_REFINEMENT`` times
    finer; the best feasible start wins (if none is feasible, the one closest to feasible, with
    ``report.feasible`` False). ``progress(done, total)`` is called as starts end.

    ``known_zeros``: leave out the base parameters the description fixes at zero
    (``robot.known_zero_base_parameters``), as ``identify(known_zeros=True)`` does: the notes' RR
    model (centres of mass on the link axes) has 8 columns instead of 10.

    Returns (trajectory, report); the trajectory's ``duration`` is ``duration``.
    """
    from ..parallel import map_tasks

    if known_zeros:
        robot = WithoutKnownZeros(robot)
    for attribute in ("n", "joint_names", "base_regressor"):
        if not hasattr(robot, attribute):
            raise TypeError(f"robot: expected a robodyn.Robot (or an object with n, joint_names, base_regressor), "
                            f"got {type(robot).__name__} without {attribute!r}")
    duration = _positive(duration, "duration")
    harmonics = _count(harmonics, "harmonics", 1, 100)
    samples = _count(samples, "samples", 8, 100_000)
    starts = _count(starts, "starts", 1, 100_000)
    maxiter = _count(maxiter, "maxiter", 1, 1_000_000)
    seed = _count(seed, "seed", 0, 2**63 - 1)
    if criterion not in CRITERIA:
        raise ValueError(f"criterion: expected one of {', '.join(CRITERIA)}, got {criterion!r}")
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= margin < 1:
        raise ValueError(f"margin: expected a fraction in [0, 1), got {margin!r}")
    if not isinstance(optimise_offsets, bool):
        raise TypeError(f"optimise_offsets: expected True or False, got {optimise_offsets!r}")
    period = duration if frequency is None else 1.0 / _positive(frequency, "frequency")
    if period > duration * (1 + 1e-12):
        raise ValueError(f"duration {duration:g} s is shorter than one period ({period:g} s) of the base frequency")
    if samples < 4 * harmonics:
        raise ValueError(f"samples: at least 4 per period of the highest harmonic needed ({4 * harmonics}), got {samples}")
    if isinstance(column_scale, str):
        if column_scale != "unit":
            raise ValueError(f"column_scale: expected None, 'unit' or b positive numbers, got {column_scale!r}")
    elif column_scale is not None:
        column_scale = np.asarray(column_scale, dtype=np.float64)
        if column_scale.ndim != 1 or not np.all(np.isfinite(column_scale)) or np.any(column_scale <= 0):
            raise ValueError("column_scale: expected None, 'unit' or a vector of b positive numbers")
    bounds = excitation_limits(robot, limits)
    names = tuple(robot.joint_names)
    if np.any(np.isfinite(bounds["effort"])) and not hasattr(robot, "inverse_dynamics"):
        raise TypeError("robot: torque limits need robot.inverse_dynamics")
    problem = _Problem(robot, names, period, harmonics, samples, criterion, float(margin), bounds, column_scale,
                       optimise_offsets, maxiter, seed)
    started = time.perf_counter()
    results = map_tasks(_run_start, [(problem, index) for index in range(starts)], executor=executor,
                        progress=progress)
    feasible = [r for r in results if r.feasible]
    pool = feasible or results
    best = min(pool, key=lambda r: (r.criterion_value if feasible else -r.margin, r.index))
    trajectory = FourierTrajectory(1.0 / period, best.trajectory.a, best.trajectory.b, best.trajectory.offsets,
                                   names, duration=duration)
    check = _Checker(problem, CHECK_REFINEMENT * samples)
    usage = check.usage(trajectory)
    W = _stacked(robot, *trajectory.evaluate(np.arange(samples) * (period / samples)))
    report = ExcitationReport(criterion=criterion, cond=_cond(_scaled(W, column_scale)), log_det=_log_det(W),
                              cond_unit=_cond(_scaled(W, "unit")),
                              margin=float(1.0 - max(float(np.max(u)) for u in usage.values())),
                              feasible=bool(feasible), usage=usage, limits=bounds, starts=results, best=best.index,
                              samples=samples, harmonics=harmonics, period=period, column_scale=column_scale,
                              seconds=time.perf_counter() - started)
    return trajectory, report


class _Checker:
    """Limits of a trajectory on a time grid as usage fractions (1 = at the limit)."""

    def __init__(self, problem: _Problem, count: int):
        self.problem = problem
        self.t = np.arange(count) * (problem.period / count)
        limits = problem.limits
        self.middle = 0.5 * (limits["lower"] + limits["upper"])
        self.half = 0.5 * (limits["upper"] - limits["lower"])
        self.torque = np.isfinite(limits["effort"])

    def usage(self, trajectory: FourierTrajectory) -> dict:
        limits = self.problem.limits
        q, qd, qdd = trajectory.evaluate(self.t)
        usage = {"position": np.max(np.abs(q - self.middle), axis=0) / self.half,
                 "velocity": np.max(np.abs(qd), axis=0) / limits["velocity"],
                 "acceleration": np.max(np.abs(qdd), axis=0) / limits["acceleration"]}
        if np.any(self.torque):
            tau = np.asarray(self.problem.robot.inverse_dynamics(q, qd, qdd))
            usage["torque"] = np.where(self.torque, np.max(np.abs(tau), axis=0) / limits["effort"], 0.0)
        return usage


def _run_start(task) -> StartResult:
    """One start: a seeded random feasible point, then SLSQP (runs in a worker)."""
    from ..parallel import one_blas_thread

    problem, index = task
    with one_blas_thread():  # small SVDs and SLSQP subproblems: threads cost more than they gain
        return _optimise_start(problem, index)


def _optimise_start(problem: _Problem, index: int) -> StartResult:
    from scipy.optimize import minimize

    started = time.perf_counter()
    robot, n, L, K = problem.robot, len(problem.names), problem.harmonics, problem.samples
    limits = problem.limits
    keep = 1.0 - problem.margin
    middle = 0.5 * (limits["lower"] + limits["upper"])
    half = 0.5 * (limits["upper"] - limits["lower"])
    velocity, acceleration, effort = limits["velocity"], limits["acceleration"], limits["effort"]
    harmonic = 2.0 * math.pi / problem.period * np.arange(1, L + 1)

    def bases(count: int):
        """Per joint, with u = [a, b] / velocity_i (scaled coefficients) and q0 = middle + half z:
        the position excursion, velocity and acceleration per unit of u at ``count`` times."""
        phase = (np.arange(count) * (problem.period / count))[:, None] * harmonic[None, :]
        sin, cos = np.sin(phase), np.cos(phase)
        return (np.hstack([sin / harmonic, -cos / harmonic]), np.hstack([cos, sin]),
                np.hstack([-sin * harmonic, cos * harmonic]))

    P, V, A = bases(K)
    Kc = min(K, CONSTRAINT_POINTS_PER_CYCLE * L)
    Pc, Vc, Ac = bases(Kc)
    size = 2 * L * n + n

    def unpack(x):
        u = x[:2 * L * n].reshape(n, 2 * L) * velocity[:, None]
        z = x[2 * L * n:] if problem.optimise_offsets else np.zeros(n)
        return u[:, :L], u[:, L:], middle + half * z

    def trajectory(x) -> FourierTrajectory:
        a, b, offsets = unpack(x)
        return FourierTrajectory(1.0 / problem.period, a, b, offsets, problem.names)

    def states(x, P=P, V=V, A=A):
        a, b, offsets = unpack(x)
        u = np.hstack([a, b])                       # (n, 2L)
        return offsets + P @ u.T, V @ u.T, A @ u.T  # (K, n) each

    # Linear limits G x + h >= 0 (normalised so that each row is "unused fraction of the limit").
    rows, constants = [], []
    for i in range(n):
        columns = slice(2 * L * i, 2 * L * (i + 1))
        for basis, scale, fixed in ((Pc, velocity[i] / half[i], True), (Vc, 1.0, False),
                                    (Ac, velocity[i] / acceleration[i], False)):
            for sign in (1.0, -1.0):
                block = np.zeros((Kc, size))
                block[:, columns] = -sign * scale * basis
                if fixed and problem.optimise_offsets:
                    block[:, 2 * L * n + i] = -sign
                rows.append(block)
                constants.append(np.full(Kc, keep))
    G, h = np.vstack(rows), np.concatenate(constants)
    constraints = [{"type": "ineq", "fun": lambda x: G @ x + h, "jac": lambda x: G}]
    limited = np.flatnonzero(np.isfinite(effort))
    if limited.size:
        def torque_slack(x):
            tau = np.asarray(robot.inverse_dynamics(*(np.ascontiguousarray(s) for s in states(x, Pc, Vc, Ac))))
            tau = tau[:, limited]
            ratio = tau / effort[limited]
            return np.concatenate([(keep - ratio).ravel(), (keep + ratio).ravel()])
        constraints.append({"type": "ineq", "fun": torque_slack})

    def violation(x) -> float:
        """Largest excess over any limit (0 inside), in fractions of the limit."""
        if not np.all(np.isfinite(x)):
            return math.inf
        slack = [G @ x + h] + ([torque_slack(x)] if limited.size else [])
        return max(0.0, -min(float(np.min(part)) for part in slack))

    def objective(x):
        W = _scaled(_stacked(robot, *states(x)), problem.column_scale)
        if problem.criterion == "cond":
            s = np.linalg.svd(W, compute_uv=False)
            return float(math.log(s[0] / s[-1])) if s[-1] > s[0] * 1e-15 else 40.0
        return -_log_det(W) / W.shape[1]

    # A random start inside the linear limits: random coefficients (falling as 1/l so that the
    # accelerations stay comparable), shrunk to use half of the tightest limit.
    rng = np.random.default_rng(np.random.SeedSequence(problem.seed, spawn_key=(index,)))
    x0 = np.zeros(size)
    x0[:2 * L * n] = (rng.standard_normal((n, 2, L)) / np.arange(1, L + 1)).ravel()
    if problem.optimise_offsets:
        x0[2 * L * n:] = rng.uniform(-0.2, 0.2, n)
    coefficient_rows = -(G[:, :2 * L * n] @ x0[:2 * L * n])
    room = h + G[:, 2 * L * n:] @ x0[2 * L * n:] if problem.optimise_offsets else h
    needed = np.max(coefficient_rows / np.maximum(room, 1e-12))
    if needed > 0.5:
        x0[:2 * L * n] *= 0.5 / needed
    bounds = [(-2.0 * L, 2.0 * L)] * (2 * L * n) + [(-keep, keep)] * (size - 2 * L * n)
    if limited.size and np.min(torque_slack(x0)) < 0:
        # Phase one: a start inside the torque limits (gravity alone may exceed them in parts of the
        # workspace, and SLSQP stalls on linearised constraints it cannot meet). Minimise the worst
        # violation s over (x, s) with torque_slack(x) + s >= 0: always compatible, s0 meets it.
        s0 = -float(np.min(torque_slack(x0)))
        phase = minimize(lambda y: y[-1], np.append(x0, s0), jac=lambda y: np.eye(1, size + 1, size)[0],
                         method="SLSQP", bounds=bounds + [(-0.5 * problem.margin, s0)],
                         constraints=[{"type": "ineq", "fun": lambda y: G @ y[:-1] + h,
                                       "jac": lambda y: np.hstack([G, np.zeros((G.shape[0], 1))])},
                                      {"type": "ineq", "fun": lambda y: torque_slack(y[:-1]) + y[-1]}],
                         options={"maxiter": problem.maxiter, "ftol": 1e-10})
        if violation(phase.x[:-1]) < violation(x0):
            x0 = phase.x[:-1]
    result = minimize(objective, x0, method="SLSQP", constraints=constraints, bounds=bounds,
                      options={"maxiter": problem.maxiter, "ftol": 1e-7})
    # A failed SLSQP run can end far outside the limits: then its start is the better answer.
    x = result.x if violation(result.x) <= max(violation(x0), 1e-2) else x0
    design = trajectory(x)
    check = _Checker(problem, CHECK_REFINEMENT * K)
    usage = check.usage(design)
    peak = max(float(np.max(u)) for u in usage.values())
    W = _stacked(robot, *states(x))
    return StartResult(index=index, criterion_value=float(objective(x)), cond=_cond(_scaled(W, problem.column_scale)),
                       feasible=bool(peak <= 1.0 - 0.5 * problem.margin), margin=1.0 - peak, iterations=int(result.nit),
                       message=str(result.message), seconds=time.perf_counter() - started, trajectory=design)


# --------------------------------------------------------------------------- small helpers

def _positive(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}: expected a positive number, got {value!r}")
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name}: expected a positive finite number, got {value!r}")
    return value


def _count(value, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}: expected an integer, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{name}: expected an integer from {low} to {high}, got {value}")
    return int(value)
