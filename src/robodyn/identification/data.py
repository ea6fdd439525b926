"""Measured data for identification: the file format, a simulator of measurements, and processing.

File format (CSV, SI units: s, rad or m, N m or N; one row per sample)::

    # robodyn measurements v1          <- lines starting with '#' are comments, anywhere
    t,q_shoulder,q_elbow,tau_shoulder,tau_elbow
    0,0.1,-0.2,12.5,3.25
    0.001,...

Columns: ``t``, one ``q_<joint>`` and one ``tau_<joint>`` per joint, optionally ``qd_<joint>``
(measured velocities) for every joint; any order. Joint names are those of the robot description
(no commas, no surrounding spaces). NPZ: arrays ``t`` (N,), ``q`` (N, n), ``tau`` (N, n),
``joint_names`` (n,) strings, optionally ``qd`` (N, n).

Processing assumes uniform sampling (zero-phase filters and central differences do), so the reader
refuses time stamps that are not strictly increasing or whose steps differ from the median step by
more than ``TIME_TOLERANCE`` (relative; a CSV written with six decimals at 1 kHz passes, a dropped
sample does not). Files are capped at ``MAX_FILE_BYTES`` and ``MAX_SAMPLES`` so a huge file is
refused before it is parsed, not after minutes of work.

``process`` turns measurements into the stacked linear system W θ = y of the base parameters:
zero-phase Butterworth low-pass of q, central differences for q̇, q̈, the base regressor at every
sample, then the *same* zero-phase low-pass on every regressor column and on τ (parallel
filtering: filtering τ alone leaves the sgn(q̇) columns sharp and biases Coulomb friction),
border trimming and decimation.
"""

from __future__ import annotations

import io
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_SAMPLES",
    "MIN_SAMPLES",
    "TIME_TOLERANCE",
    "Measurements",
    "ProcessedData",
    "TrueSignals",
    "add_noise",
    "excitation_band",
    "process",
    "read_measurements",
    "simulate_measurements",
    "write_measurements",
]

#: Largest relative deviation of a time step from the median step.
TIME_TOLERANCE = 1e-3
#: Refuse files larger than this (bytes) before reading them; a 20 s, 6-joint, 1 kHz CSV is ~5 MB.
MAX_FILE_BYTES = 1 << 30
#: At most this many samples (an hour at 1 kHz is 3.6e6).
MAX_SAMPLES = 20_000_000
#: At least this many samples: fewer cannot be filtered (a 4th-order zero-phase filter pads ~15 samples).
MIN_SAMPLES = 32


@dataclass(frozen=True)
class TrueSignals:
    """The noise-free signals behind simulated measurements (for oracles; never written to files)."""

    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray


@dataclass(frozen=True)
class Measurements:
    """Sampled joint positions ``q`` (N, n) and torques ``tau`` (N, n) at times ``t`` (N,) for the
    joints ``joint_names``; ``qd`` (N, n) when velocities were measured. ``truth`` holds the
    noise-free signals of a simulation."""

    t: np.ndarray
    q: np.ndarray
    tau: np.ndarray
    joint_names: tuple
    qd: np.ndarray | None = None
    truth: TrueSignals | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        names = _joint_names(self.joint_names, "joint_names")
        object.__setattr__(self, "joint_names", names)
        n = len(names)
        t = np.ascontiguousarray(self.t, dtype=np.float64)
        if t.ndim != 1:
            raise ValueError(f"t: expected shape (N,), got {t.shape}")
        object.__setattr__(self, "t", t)
        for key in ("q", "tau", "qd"):
            value = getattr(self, key)
            if value is None:
                continue
            array = np.ascontiguousarray(value, dtype=np.float64)
            if array.shape != (t.shape[0], n):
                raise ValueError(f"{key}: expected shape ({t.shape[0]}, {n}) (samples, joints), got {array.shape}")
            object.__setattr__(self, key, array)

    @property
    def n(self) -> int:
        return len(self.joint_names)

    @property
    def period(self) -> float:
        """Mean sampling period [s]."""
        return float((self.t[-1] - self.t[0]) / (self.t.shape[0] - 1))

    @property
    def rate(self) -> float:
        """Sampling rate [Hz]."""
        return 1.0 / self.period

    def validate(self, source: str = "measurements", time_tolerance: float = TIME_TOLERANCE) -> None:
        """Raise ValueError (naming ``source``) unless the data are finite, uniformly sampled and long enough."""
        _check_samples(self.t.shape[0], source)
        for key in ("t", "q", "tau", "qd"):
            value = getattr(self, key)
            if value is not None and not np.all(np.isfinite(value)):
                row, *col = np.argwhere(~np.isfinite(value))[0]
                where = f"sample {row}" + (f", joint {self.joint_names[col[0]]!r}" if col else "")
                raise ValueError(f"{source}: {key} is NaN or infinite at {where}")
        problem = _time_problem(self.t, time_tolerance)
        if problem is not None:
            raise ValueError(f"{source}: {problem[1]}")


@dataclass(frozen=True)
class ProcessedData:
    """The stacked system ``W θ = y`` of the base parameters after processing.

    Rows are sample-major: row ``k n + j`` is joint j at processed sample k, so ``joint_index``
    (= row % n) says which joint each row belongs to. ``q, qd, qdd, tau`` (N', n) are the
    processed per-sample signals (τ after the parallel filter), ``t`` their times.
    """

    W: np.ndarray
    y: np.ndarray
    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray
    joint_names: tuple
    parameter_names: tuple | None
    rate: float                 # input sampling rate [Hz]
    cutoff: float | None        # position low-pass cutoff [Hz], None when raw
    parallel_cutoff: float | None  # the low-pass shared by W and tau [Hz], None when not applied
    order: int
    decimate: int
    trim: int                   # samples dropped at each border (input rate)
    steps: tuple                # what was done, in order, for reports

    @property
    def n(self) -> int:
        return len(self.joint_names)

    @property
    def joint_index(self) -> np.ndarray:
        return np.tile(np.arange(self.n), self.W.shape[0] // self.n)


# --------------------------------------------------------------------------------------------- files

def _joint_names(value, what: str) -> tuple:
    if isinstance(value, str) or not hasattr(value, "__iter__"):
        raise TypeError(f"{what}: expected a sequence of joint names, got {value!r}")
    names = tuple(str(v) for v in value)
    if not names:
        raise ValueError(f"{what}: no joints")
    for name in names:
        if not name or name != name.strip() or "," in name or "\n" in name or "\r" in name:
            raise ValueError(f"{what}: joint name {name!r} must be non-empty, without commas, line breaks "
                             "or surrounding spaces")
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise ValueError(f"{what}: duplicate joint names {duplicated}")
    return names


def _check_samples(count: int, source: str) -> None:
    if count < MIN_SAMPLES:
        raise ValueError(f"{source}: {count} samples, at least {MIN_SAMPLES} are needed to filter and differentiate")
    if count > MAX_SAMPLES:
        raise ValueError(f"{source}: {count} samples, more than the limit {MAX_SAMPLES}")


def _time_problem(t: np.ndarray, tolerance: float) -> tuple[int, str] | None:
    """(index of the offending sample, message) for non-increasing or non-uniform time, else None."""
    steps = np.diff(t)
    bad = np.flatnonzero(~(steps > 0.0))
    if bad.size:
        k = int(bad[0]) + 1
        return k, f"time is not strictly increasing at sample {k} (t = {float(t[k])!r} after {float(t[k - 1])!r})"
    median = float(np.median(steps))
    deviation = np.abs(steps - median)
    bad = np.flatnonzero(deviation > tolerance * median)
    if bad.size:
        k = int(bad[0]) + 1
        return k, (f"time is not uniformly sampled at sample {k}: step {steps[k - 1]:.9g} s, median step "
                   f"{median:.9g} s (tolerance {tolerance:g} relative); resample or split the record")
    return None


def _check_size(path: Path) -> None:
    try:
        size = path.stat().st_size
    except OSError as error:
        raise ValueError(f"{path}: cannot read: {error.strerror or error}") from None
    if not path.is_file():
        raise ValueError(f"{path}: not a regular file")
    if size > MAX_FILE_BYTES:
        raise ValueError(f"{path}: {size} bytes, more than the limit {MAX_FILE_BYTES} for a measurement file")


def read_measurements(path, joint_names=None, *, time_tolerance: float = TIME_TOLERANCE) -> Measurements:
    """Read a CSV or NPZ measurement file (by suffix: ``.npz`` is NPZ, anything else CSV).

    ``joint_names`` (e.g. ``robot.joint_names``): the file must hold exactly these joints; columns
    are returned in this order. Raises ValueError naming the file, line and column of the problem.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a file name, got {type(path).__name__}")
    path = Path(path)
    _check_size(path)
    if path.suffix.lower() == ".npz":
        m, locate = _read_npz(path), None
    else:
        m, locate = _read_csv(path)
    if joint_names is not None:
        m = _reorder(m, _joint_names(joint_names, "joint_names"), path)
    _check_samples(m.t.shape[0], str(path))
    problem = _time_problem(m.t, time_tolerance)
    if problem is not None:
        k, message = problem
        where = f"{path}:{locate(k)}: column 't'" if locate else f"{path}: t"
        raise ValueError(f"{where}: {message}")
    return m


def _reorder(m: Measurements, names: tuple, path: Path) -> Measurements:
    missing = [name for name in names if name not in m.joint_names]
    extra = [name for name in m.joint_names if name not in names]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"no data for joint(s) {missing}")
        if extra:
            parts.append(f"unknown joint(s) {extra}")
        raise ValueError(f"{path}: {'; '.join(parts)} (the robot's joints are {list(names)})")
    order = [m.joint_names.index(name) for name in names]
    return Measurements(m.t, m.q[:, order], m.tau[:, order], names, None if m.qd is None else m.qd[:, order])


def _data_lines(path: Path, header_line: int) -> list[int]:
    """Line numbers of the data lines after the header (for messages; only on the error paths)."""
    with open(path, encoding="utf-8") as stream:
        return [number for number, line in enumerate(stream, 1)
                if number > header_line and line.strip() and not line.lstrip().startswith("#")]


def _read_csv(path: Path):
    """Header by a scan of the first lines, data by NumPy's C parser straight from the file: memory
    is the array's, not the text's. Line numbers are found again only when a message needs them."""
    header_line, header = 0, []
    try:
        with open(path, encoding="utf-8") as stream:
            for number, line in enumerate(stream, 1):
                if line.strip() and not line.lstrip().startswith("#"):
                    header_line, header = number, [cell.strip() for cell in line.lstrip("\ufeff").split(",")]
                    break
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text (byte {error.start}); is it an NPZ file without the .npz suffix?") \
            from None
    except OSError as error:
        raise ValueError(f"{path}: cannot read: {error.strerror or error}") from None
    if not header_line:
        raise ValueError(f"{path}: no header line (expected t,q_<joint>...,tau_<joint>...)")
    columns: dict[str, int] = {}
    for index, name in enumerate(header):
        if name in columns:
            raise ValueError(f"{path}:{header_line}: column {index + 1}: duplicate column {name!r}")
        columns[name] = index
    if "t" not in columns:
        raise ValueError(f"{path}:{header_line}: missing column 't' (header: {','.join(header)})")
    joints: list[str] = []
    for name in header:
        if name == "t":
            continue
        kind, _, joint = name.partition("_")
        if kind not in ("q", "tau", "qd") or not joint:
            raise ValueError(f"{path}:{header_line}: column {columns[name] + 1}: unknown column {name!r} "
                             "(expected t, q_<joint>, qd_<joint>, tau_<joint>)")
        if kind == "q":
            joints.append(joint)
    if not joints:
        raise ValueError(f"{path}:{header_line}: no q_<joint> columns")
    for kind in ("tau", "qd"):
        present = [joint for joint in joints if f"{kind}_{joint}" in columns]
        if kind == "qd" and not present:
            continue
        for joint in joints:
            if f"{kind}_{joint}" not in columns:
                raise ValueError(f"{path}:{header_line}: missing column '{kind}_{joint}'")
    for name in header:
        kind, _, joint = name.partition("_")
        if kind in ("tau", "qd") and joint not in joints:
            raise ValueError(f"{path}:{header_line}: column {columns[name] + 1}: {name!r} has no matching 'q_{joint}'")
    width = len(header)
    import warnings

    try:
        with warnings.catch_warnings():  # NumPy's note that comment lines do not count towards max_rows
            warnings.simplefilter("ignore", UserWarning)
            data = np.loadtxt(path, delimiter=",", comments="#", skiprows=header_line, dtype=np.float64, ndmin=2,
                              encoding="utf-8", max_rows=MAX_SAMPLES + 1)
        if data.shape[1] != width:
            raise ValueError("shape")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text after the header (byte {error.start})") from None
    except ValueError:
        _csv_syntax_error(path, header_line, header)
        raise  # unreachable: the scan above raises
    if data.shape[0] > MAX_SAMPLES:  # read up to one past the limit: a huge file is not parsed to its end
        raise ValueError(f"{path}: more than {MAX_SAMPLES} samples, the limit")
    _check_samples(data.shape[0], str(path))
    located: list = []

    def locate(row: int) -> int:
        if not located:
            located.append(_data_lines(path, header_line))
        return located[0][row]

    bad = np.argwhere(~np.isfinite(data))
    if bad.size:
        row, column = bad[0]
        raise ValueError(f"{path}:{locate(row)}: column {column + 1} ({header[column]}): "
                         f"{'NaN' if np.isnan(data[row, column]) else 'infinite'} value")

    def pick(kind):
        return np.ascontiguousarray(data[:, [columns[f"{kind}_{joint}"] for joint in joints]])

    qd = pick("qd") if f"qd_{joints[0]}" in columns else None
    try:
        m = Measurements(data[:, columns["t"]].copy(), pick("q"), pick("tau"), tuple(joints), qd)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}:{header_line}: {error}") from None
    return m, locate


def _csv_syntax_error(path: Path, header_line: int, header: list) -> None:
    """Find the first malformed data line (slow path, only after the fast parse failed) and raise."""
    with open(path, encoding="utf-8", errors="replace") as stream:
        for number, line in enumerate(stream, 1):
            if number <= header_line or not line.strip() or line.lstrip().startswith("#"):
                continue
            cells = line.split(",")
            if len(cells) != len(header):
                raise ValueError(f"{path}:{number}: {len(cells)} values, the header has {len(header)} columns")
            for column, cell in enumerate(cells):
                try:
                    float(cell)
                except ValueError:
                    raise ValueError(f"{path}:{number}: column {column + 1} ({header[column]}): not a number: "
                                     f"{cell.strip()[:40]!r}") from None
    raise ValueError(f"{path}: cannot parse the data lines")


def _read_npz(path: Path) -> Measurements:
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:  # refuse a small archive that inflates to a huge one
            inflated = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, OSError) as error:
        raise ValueError(f"{path}: not an NPZ archive: {error}") from None
    if inflated > MAX_FILE_BYTES:
        raise ValueError(f"{path}: inflates to {inflated} bytes, more than the limit {MAX_FILE_BYTES}")
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = sorted({"t", "q", "tau", "joint_names"} - set(npz.files))
            if missing:
                raise ValueError(f"{path}: missing array(s) {missing} (has {sorted(npz.files)})")
            unknown = sorted(set(npz.files) - {"t", "q", "tau", "joint_names", "qd"})
            if unknown:
                raise ValueError(f"{path}: unknown array(s) {unknown}")
            arrays = {key: npz[key] for key in npz.files}
    except (OSError, EOFError, zipfile.BadZipFile, ValueError) as error:  # damaged members, object arrays
        message = str(error)
        raise ValueError(message if message.startswith(str(path)) else f"{path}: cannot read: {message}") from None
    names = arrays["joint_names"]
    if names.dtype.kind not in "US" or names.ndim != 1:
        raise ValueError(f"{path}: joint_names: expected a 1-D array of strings, got {names.dtype} {names.shape}")
    for key in ("t", "q", "tau", "qd"):
        if key in arrays and arrays[key].dtype.kind not in "fiu":
            raise ValueError(f"{path}: {key}: expected numbers, got dtype {arrays[key].dtype}")
    try:
        m = Measurements(arrays["t"], arrays["q"], arrays["tau"], tuple(names.tolist()), arrays.get("qd"))
        m.validate(str(path), time_tolerance=math.inf)  # finite values; time is checked by the caller
    except (TypeError, ValueError) as error:
        message = str(error)
        raise ValueError(message if message.startswith(str(path)) else f"{path}: {message}") from None
    return m


def write_measurements(path, m: Measurements, *, comment: str | None = None) -> Path:
    """Write ``m`` as CSV (17 significant digits: exact round trip) or NPZ (``.npz`` suffix).

    Atomic: written to a temporary file in the same directory, flushed to disk, then renamed over
    ``path``; on any error nothing is left behind and an existing file is untouched.
    """
    if not isinstance(m, Measurements):
        raise TypeError(f"m: expected Measurements, got {type(m).__name__}")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a file name, got {type(path).__name__}")
    path = Path(path)
    m.validate(str(path), time_tolerance=math.inf)
    if path.suffix.lower() == ".npz":
        arrays = {"t": m.t, "q": m.q, "tau": m.tau, "joint_names": np.array(m.joint_names, dtype=str)}
        if m.qd is not None:
            arrays["qd"] = m.qd
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        data = buffer.getvalue()
    else:
        data = _csv_text(m, comment).encode("utf-8")
    from .._files import write_atomically

    return write_atomically(path, data)


def _csv_text(m: Measurements, comment: str | None) -> str:
    columns = ["t"] + [f"q_{j}" for j in m.joint_names] + [f"tau_{j}" for j in m.joint_names]
    blocks = [m.t[:, None], m.q, m.tau]
    if m.qd is not None:
        columns += [f"qd_{j}" for j in m.joint_names]
        blocks.append(m.qd)
    out = io.StringIO()
    out.write("# robodyn measurements v1: SI units (s, rad or m, N m or N), one row per sample\n")
    for line in (comment or "").splitlines():
        out.write(f"# {line}\n")
    out.write(",".join(columns) + "\n")
    np.savetxt(out, np.hstack(blocks), delimiter=",", fmt="%.17g")
    return out.getvalue()


# ---------------------------------------------------------------------------------------- simulation

def simulate_measurements(robot, t, q_ref, qd_ref, qdd_ref, *, encoder_noise=0.0, encoder_resolution=None,
                          torque_noise=0.0, seed: int = 0, kp=None, kd=None, omega: float = 20.0,
                          zeta: float = 1.0, oversample: int = 10, integrator: str = "rk4") -> Measurements:
    """Measurements of ``robot`` (a robodyn.Robot, its own friction on) tracking a sampled reference.

    ``t`` (N,) uniform sample times; ``q_ref, qd_ref, qdd_ref`` (N, n) the reference at those times.
    The closed loop (``robodyn.simulate``) runs ``oversample`` times faster than the sampling, with a
    computed-torque law on the robot's exact model, friction compensated at the reference velocity:
    τ = ID(q, q̇, q̈_r + Kd ė + Kp e) − f(q̇) + f(q̇_r), Kp = ω², Kd = 2 ζ ω unless given (scalar or per
    joint), held over each control period, the reference interpolated between samples by cubic
    Hermite splines. It starts on the reference. Compensating Coulomb friction at the *measured*
    velocity would make a joint stick for ~10 ms at each reversal (the compensation switches one
    tick after the plant's friction and pushes the velocity back to zero), a stick-slip the
    sgn(q̇) model does not describe. Why oversample: a torque held for a whole sampling period T lags the
    smooth motion the processing reconstructs by T/2, which biases inertial parameters by ~ω T/2
    (0.3 % at 1 kHz for a 0.5 Hz motion) and makes each Coulomb switch a T-long glitch; a control
    loop 10 times faster shrinks both tenfold, as a real drive's current loop does.

    Measured, at each sample time: q + N(0, encoder_noise²), then rounded to ``encoder_resolution``
    (an encoder's count, rad or m) when given; τ (the torque applied from that instant) +
    N(0, torque_noise²). Noise levels are scalars or per joint; ``seed`` makes them reproducible.
    The noise-free q, q̇, q̈ (the plant's acceleration under the applied torque) and τ are kept in
    ``.truth``: ID(truth.q, truth.qd, truth.qdd) == truth.tau to rounding. ``add_noise`` draws new
    noise on the same motion (Monte-Carlo without re-simulating).
    """
    from scipy.interpolate import CubicHermiteSpline

    import robodyn

    n = robot.n
    t = np.ascontiguousarray(t, dtype=np.float64)
    if t.ndim != 1:
        raise ValueError(f"t: expected shape (N,), got {t.shape}")
    _check_samples(t.shape[0], "t")
    problem = _time_problem(t, 1e-9)
    if problem is not None:
        raise ValueError(f"t: {problem[1]}")
    if isinstance(oversample, bool) or not isinstance(oversample, (int, np.integer)) or not 1 <= oversample <= 1000:
        raise ValueError(f"oversample: expected an integer from 1 to 1000, got {oversample!r}")
    reference = []
    for name, value in (("q_ref", q_ref), ("qd_ref", qd_ref), ("qdd_ref", qdd_ref)):
        array = np.ascontiguousarray(value, dtype=np.float64)
        if array.shape != (t.shape[0], n):
            raise ValueError(f"{name}: expected shape ({t.shape[0]}, {n}), got {array.shape}")
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{name}: contains NaN or infinity")
        reference.append(array)
    kp = _noise(omega**2 if kp is None else kp, "kp", n)
    kd = _noise(2.0 * zeta * omega if kd is None else kd, "kd", n)
    period = float((t[-1] - t[0]) / (t.shape[0] - 1))
    fine = t[0] + np.arange((t.shape[0] - 1) * oversample + 1) * (period / oversample)
    if oversample == 1:
        q_r, qd_r, qdd_r = reference
    else:
        velocity = CubicHermiteSpline(t, reference[1], reference[2], axis=0)
        q_r = CubicHermiteSpline(t, reference[0], reference[1], axis=0)(fine)
        qd_r, qdd_r = velocity(fine), velocity.derivative()(fine)
    inverse_dynamics, friction = robot.inverse_dynamics, robot.friction
    fine_period = period / oversample

    def computed_torque(time, q, qd):
        k = round(time / fine_period)
        tau = inverse_dynamics(q, qd, qdd_r[k] + kd * (qd_r[k] - qd) + kp * (q_r[k] - q))
        return tau - friction(qd) + friction(qd_r[k])

    run = robodyn.simulate(robot, robodyn.FunctionController(computed_torque), duration=fine_period * (fine.shape[0] - 1),
                           rate=1.0 / fine_period, q0=q_r[0], qd0=qd_r[0], integrator=integrator)
    if run.q.shape[0] != fine.shape[0]:  # duration rounding: cannot happen for a uniform t, but never mis-align
        raise RuntimeError(f"simulation returned {run.q.shape[0]} samples for {fine.shape[0]} control ticks")
    pick = slice(None, None, oversample)
    truth = TrueSignals(run.q[pick].copy(), run.qd[pick].copy(), run.qdd[pick].copy(), run.tau[pick].copy())
    return add_noise(t, truth, tuple(robot.joint_names), encoder_noise=encoder_noise,
                     encoder_resolution=encoder_resolution, torque_noise=torque_noise, seed=seed)


def add_noise(t, truth: TrueSignals, joint_names, *, encoder_noise=0.0, encoder_resolution=None, torque_noise=0.0,
              seed: int = 0) -> Measurements:
    """Measurements of the noise-free signals ``truth`` at times ``t``: encoder noise, then quantisation
    to ``encoder_resolution``, on q; Gaussian noise on τ (see ``simulate_measurements``)."""
    n = truth.q.shape[1]
    encoder_noise = _noise(encoder_noise, "encoder_noise", n)
    torque_noise = _noise(torque_noise, "torque_noise", n)
    rng = np.random.default_rng(seed)
    q = truth.q + rng.standard_normal(truth.q.shape) * encoder_noise
    if encoder_resolution is not None:
        encoder_resolution = _noise(encoder_resolution, "encoder_resolution", n)
        if np.any(encoder_resolution <= 0.0):
            raise ValueError(f"encoder_resolution: must be positive, got {encoder_resolution}")
        q = np.round(q / encoder_resolution) * encoder_resolution
    tau = truth.tau + rng.standard_normal(truth.tau.shape) * torque_noise
    return Measurements(t, q, tau, tuple(joint_names), truth=truth)


def _noise(value, name: str, n: int) -> np.ndarray:
    array = np.array(value, dtype=np.float64, ndmin=1)
    if array.ndim != 1 or array.shape[0] not in (1, n):
        raise ValueError(f"{name}: expected a scalar or {n} values, got shape {np.shape(value)}")
    if not np.all(np.isfinite(array)) or np.any(array < 0.0):
        raise ValueError(f"{name}: must be finite and non-negative, got {value!r}")
    return np.broadcast_to(array, (n,)).copy()


# ---------------------------------------------------------------------------------------- processing

def excitation_band(q: np.ndarray, rate: float, fraction: float = 0.9999) -> float:
    """The frequency [Hz] below which ``fraction`` of the power of every joint's motion lies.

    Per joint: linear trend removed, Hann window, FFT power; the result is the largest joint's
    band. Encoder noise is far below the motion's power, so it barely moves this figure.
    """
    from scipy.signal import detrend, get_window

    x = detrend(np.asarray(q, dtype=np.float64), axis=0)
    window = get_window("hann", x.shape[0])[:, None]
    power = np.abs(np.fft.rfft(x * window, axis=0)) ** 2
    cumulative = np.cumsum(power, axis=0)
    total = cumulative[-1]
    moving = total > 0.0
    if not np.any(moving):
        return 0.0
    index = np.argmax(cumulative[:, moving] >= fraction * total[moving], axis=0)
    frequencies = np.fft.rfftfreq(x.shape[0], d=1.0 / rate)
    return float(frequencies[np.max(index)])


#: Before q's zero-phase filter, the record's ends are extended by the cubic that fits their first (last) half period
#: of the cutoff, over three periods of it: the filter then meets no corner at the ends. SciPy's default, an odd
#: reflection over a few samples, keeps the value and the slope but flips the curvature, whose transient the border
#: trim did not remove: on the RR arm's noise-free 80 s record the true parameters' torque residual was 0.68 N m RMS,
#: 0.026 now; noisy (0.5 N m, 2e-5 rad), the held-out RMS went from 1.8 / 0.74 to 0.05 / 0.04 N m and the largest
#: relative parameter error from 6.0e-4 to 1.3e-4 (20 s: 6.3 / 2.4 to 0.09 / 0.04 N m). The parallel filter of W and
#: τ keeps SciPy's extension: it is linear, so W θ = τ survives it whatever the extension.
EXTENSION_FIT_PERIODS = 0.5
EXTENSION_PERIODS = 3.0


def _zero_phase(sos, x: np.ndarray, rate: float, cutoff: float) -> np.ndarray:
    """``x`` (samples first) through ``sosfiltfilt`` with both ends extended by a fitted cubic (see above)."""
    from scipy.signal import sosfiltfilt

    count = x.shape[0]
    if count < 8:  # too short to fit: SciPy's own extension
        return sosfiltfilt(sos, x, axis=0)
    flat = x.reshape(count, -1)
    fit = max(8, min(count // 4, math.ceil(EXTENSION_FIT_PERIODS * rate / cutoff)))
    pad = math.ceil(EXTENSION_PERIODS * rate / cutoff)
    local = np.arange(fit, dtype=float)
    steps = np.arange(1.0, pad + 1.0)
    polynomial = np.polynomial.polynomial
    head = polynomial.polyval(-steps[::-1], polynomial.polyfit(local, flat[:fit], 3)).T
    tail = polynomial.polyval(fit - 1.0 + steps, polynomial.polyfit(local, flat[-fit:], 3)).T
    extended = np.concatenate([head, flat, tail], axis=0)
    return sosfiltfilt(sos, extended, axis=0, padtype=None)[pad:pad + count].reshape(x.shape)


def process(m: Measurements, robot, *, cutoff: float | None = None, order: int = 4, decimate: int = 1,
            trim: int | None = None, parallel_cutoff: float | None = None, filter_tau_only: bool = False,
            raw: bool = False) -> ProcessedData:
    """Measurements → the stacked base-parameter system W θ = y (see ``ProcessedData``).

    1. q (and measured q̇, if any) through a zero-phase Butterworth low-pass (``order``, run forward
       and backward by ``scipy.signal.sosfiltfilt``: no delay, squared magnitude; the record's ends
       extended by fitted cubics, ``_zero_phase``). ``cutoff``
       defaults to 5 × the excitation band (``excitation_band``: 99.99 % of the motion's power),
       at least 2 Hz and at most 0.4 × Nyquist: the motion passes unattenuated (< 1e-5 at the
       band's edge) while the encoder noise above it, amplified ω² by differentiation, is removed.
    2. q̇, q̈ by second-order central differences (``numpy.gradient``; q̈ from the measured q̇ when given).
    3. The base regressor at every sample (``robot.base_regressor`` on the batch).
    4. The same zero-phase low-pass (``order``, ``parallel_cutoff``, default 0.8 × the decimated
       Nyquist when decimating, else ``cutoff``) on every regressor column and on τ: linear, so
       W θ = τ still holds sample by sample after it, while τ's noise above it is removed.
    5. ``trim`` samples dropped at each border (default: two periods of the lowest cutoff, where
       the filters' and differences' end effects live), then every ``decimate``-th sample kept.

    Negative controls (for tests): ``raw=True`` skips every filter (finite differences of the raw
    positions); ``filter_tau_only=True`` applies step 4 to τ but not to W.
    """
    from scipy.signal import butter, sosfiltfilt

    if not isinstance(m, Measurements):
        raise TypeError(f"m: expected Measurements, got {type(m).__name__}")
    names = tuple(robot.joint_names)
    if names != m.joint_names:
        raise ValueError(f"the measurements' joints {list(m.joint_names)} are not the robot's {list(names)}")
    for name, value, low in (("order", order, 1), ("decimate", decimate, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{name}: expected an integer >= {low}, got {value!r}")
    if order > 12:
        raise ValueError(f"order: at most 12 (higher Butterworth orders are numerically fragile), got {order}")
    m.validate("measurements")
    rate = m.rate
    nyquist = rate / 2.0
    steps = []
    if raw:
        cutoff = parallel_cutoff = None
    else:
        if cutoff is None:
            cutoff = min(max(5.0 * excitation_band(m.q, rate), 2.0), 0.4 * nyquist)
        if parallel_cutoff is None:
            parallel_cutoff = 0.8 * nyquist / decimate if decimate > 1 else cutoff
        for name, value in (("cutoff", cutoff), ("parallel_cutoff", parallel_cutoff)):
            if not (isinstance(value, (int, float, np.floating)) and 0.0 < value < nyquist):
                raise ValueError(f"{name}: expected a frequency in (0, {nyquist:g}) Hz (Nyquist), got {value!r}")
        if parallel_cutoff > 0.8 * nyquist / decimate * (1 + 1e-12) and decimate > 1:
            raise ValueError(f"parallel_cutoff {parallel_cutoff:g} Hz is above 0.8 × the decimated Nyquist "
                             f"{0.8 * nyquist / decimate:g} Hz: decimation would alias")
    if trim is None:
        trim = 0 if raw else math.ceil(2.0 * rate / min(cutoff, parallel_cutoff))
    if isinstance(trim, bool) or not isinstance(trim, (int, np.integer)) or trim < 0:
        raise ValueError(f"trim: expected a non-negative integer, got {trim!r}")
    count = m.t.shape[0]
    if count - 2 * trim < 4 * decimate:
        raise ValueError(f"trimming {trim} samples at each end leaves {max(count - 2 * trim, 0)} of {count}: "
                         "too few (record longer, raise the cutoff or pass a smaller trim)")
    period = m.period

    q = m.q
    qd_measured = m.qd
    if not raw:
        sos = butter(order, cutoff, fs=rate, output="sos")
        q = _zero_phase(sos, q, rate, cutoff)
        if qd_measured is not None:
            qd_measured = _zero_phase(sos, qd_measured, rate, cutoff)
        steps.append(f"zero-phase Butterworth low-pass of q, order {order}, cutoff {cutoff:.4g} Hz")
    if qd_measured is None:
        qd = np.gradient(q, period, axis=0, edge_order=2)
        steps.append("qd by central differences of q")
    else:
        qd = np.ascontiguousarray(qd_measured)
        steps.append("qd measured")
    qdd = np.gradient(qd, period, axis=0, edge_order=2)
    steps.append("qdd by central differences of qd")
    q, qd, qdd = (np.ascontiguousarray(x) for x in (q, qd, qdd))
    regressor = np.asarray(robot.base_regressor(q, qd, qdd))  # (N, n, b)
    n = m.n
    if regressor.ndim != 3 or regressor.shape[:2] != (count, n):
        raise ValueError(f"robot.base_regressor returned shape {regressor.shape}, expected ({count}, {n}, b)")
    b = regressor.shape[2]
    steps.append(f"base regressor at {count} samples ({b} parameters)")
    tau = m.tau
    if not raw:
        sos = butter(order, parallel_cutoff, fs=rate, output="sos")
        tau = sosfiltfilt(sos, tau, axis=0)
        if filter_tau_only:
            steps.append(f"NEGATIVE CONTROL: tau low-passed at {parallel_cutoff:.4g} Hz, regressor NOT filtered")
        else:
            regressor = sosfiltfilt(sos, regressor.reshape(count, n * b), axis=0).reshape(count, n, b)
            steps.append(f"parallel zero-phase low-pass of every regressor column and tau at "
                         f"{parallel_cutoff:.4g} Hz")
    keep = slice(trim, count - trim, decimate)
    if trim:
        steps.append(f"trimmed {trim} samples at each end")
    if decimate > 1:
        steps.append(f"decimated by {decimate}")
    regressor = regressor[keep]
    tau = np.ascontiguousarray(tau[keep])
    kept = regressor.shape[0]
    W = np.ascontiguousarray(regressor.reshape(kept * n, b))
    y = tau.reshape(kept * n).copy()
    parameter_names = getattr(robot, "base_parameter_names", None)
    return ProcessedData(W=W, y=y, t=m.t[keep].copy(), q=q[keep], qd=qd[keep], qdd=qdd[keep], tau=tau,
                         joint_names=names, parameter_names=None if parameter_names is None else tuple(parameter_names),
                         rate=rate, cutoff=cutoff, parallel_cutoff=parallel_cutoff, order=int(order),
                         decimate=int(decimate), trim=int(trim), steps=tuple(steps))
