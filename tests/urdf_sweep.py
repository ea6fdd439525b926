"""The URDF sweep: every URDF of example-robot-data through ``robodyn.load``, checked against Pinocchio.

Each URDF is loaded as a new user would, with the default options. When the load fails with a
DescriptionError whose remedy is a documented option (an impossible inertia tensor:
``accept_invalid_inertia=True``; an unsupported mimic joint: ``lock`` it), it is loaded again with
that option and both outcomes are recorded. Every robot that loads is compared with Pinocchio's
fixed-base model of the same file (``pinocchio.buildModelFromUrdf(path)``) at random states within
the joint limits: M (crba), C (computeCoriolisMatrix), g (computeGeneralizedGravity), inverse
dynamics (rnea, plus the URDF's damping and friction as Pinocchio reads them) and forward dynamics
(aba). Pinocchio's joints are mapped by name; a joint that robodyn locks or couples (mimic) is
projected: with G the coupling matrix and b its offset (Pinocchio's velocity coordinates
theta = G q + b), M = Gᵀ M_pin G, C = Gᵀ C_pin G, g = Gᵀ g_pin, tau = Gᵀ (rnea(Gq + b, G q̇, G q̈) +
friction(G q̇)), and forward dynamics must solve Gᵀ M_pin G q̈ = tau − Gᵀ (nle + friction). Continuous joints (Pinocchio: nq = 2, cos and sin) are converted.

Error metric, per quantity and state: max |robodyn − Pinocchio| over the entries divided by
max |Pinocchio| over the entries; for C, by max(max |C|, max |M|), and for g, by max(max |g|,
max |tau|), since C or g can vanish identically (a rotor about its symmetric axis): Pinocchio's
value is then rounding noise. Forward dynamics is judged by its normwise backward error in
Pinocchio's equations, |M_pin q̈ − (tau − bias_pin)| / (|M_pin| |q̈| + |tau − bias_pin|): two
correct solutions of M q̈ = tau − bias differ by about cond(M) ulps in q̈ itself (iCub's M, with
its eye and finger links, has cond(M) ~ 1e8), but each solves the equations to rounding. The reported error is the worst over quantities and states. A robot
agrees when it is at most 1e-9.

Classification: ``loads`` (default options), ``loads with option`` (the remedy's option),
``rejected`` (a DescriptionError: the description is invalid), ``unsupported`` (a DescriptionError
naming a feature robodyn does not model: floating or planar joints, mimic joints, no moving joint),
``error`` (any other exception: a bug; the traceback is recorded). Pinocchio's own failures are
recorded too.

Every robot runs in its own subprocess (builds of large trees take gigabytes), at most ``--jobs``
at a time:

    python tests/urdf_sweep.py                      # all but the enormous ones (tiago, tiago_dual)
    python tests/urdf_sweep.py --all --markdown docs/urdf_sweep.md --json /tmp/sweep.json
    python tests/urdf_sweep.py --subset             # the CI subset
    python tests/urdf_sweep.py --only panda --only ur5_robot
    python tests/urdf_sweep.py --from-json /tmp/sweep.json --markdown docs/urdf_sweep.md

The cache is $ROBODYN_CACHE_DIR (or --cache-dir): a second run loads every robot in milliseconds,
as long as the generator's source has not changed (it is part of every cache key).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
import xml.etree.ElementTree as ElementTree
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

TOLERANCE = 1e-9
STATES = 5
SEED = 0
#: Robots whose build takes minutes and gigabytes (tiago: 48 joints, about 50 s and 1.9 GB; tiago_dual:
#: 101 joints, about 135 s and 2.5 GB): swept by --all only.
ENORMOUS = ("tiago_description/robots/tiago.urdf", "tiago_description/robots/tiago_dual.urdf")
#: The CI subset: fast builds covering a serial arm, placeholder limits, continuous joints, a hand with
#: invalid inertias, a small leg tree, mimic fingers, and the three kinds of refusal.
SUBSET = (
    "ur_description/urdf/ur5_robot.urdf",                                  # 6-joint serial arm
    "double_pendulum_description/urdf/double_pendulum.urdf",               # placeholder limits
    "double_pendulum_description/urdf/double_pendulum_continuous.urdf",    # continuous joints (nq = 2)
    "finger_edu_description/robots/finger_edu.urdf",                       # unaligned axes
    "bolt_description/robots/bolt.urdf",                                   # a small tree: two legs
    "panda_description/urdf/panda.urdf",                                   # a mimic finger
    "hector_description/robots/quadrotor_base.urdf",                       # no moving joint
    "ur_description/urdf/ur3.urdf",                                        # invalid: no robot name
)
RESULTS = ("loads", "loads with option", "rejected", "unsupported", "error", "timeout", "skipped")
_UNSUPPORTED = re.compile(r"not supported|unsupported|no moving joint", re.IGNORECASE)


def robots_dir() -> Path:
    """example-robot-data's robots/ directory (next to Pinocchio: both are cmeel packages)."""
    try:
        import example_robot_data  # a pip install of example-robot-data without cmeel's path hook

        return Path(example_robot_data.getModelPath("ur_description/urdf/ur5_robot.urdf")) / "robots"
    except ImportError:
        pass
    import pinocchio

    for parent in Path(pinocchio.__file__).resolve().parents:
        candidate = parent / "cmeel.prefix" / "share" / "example-robot-data" / "robots"
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("example-robot-data is not installed (pip install example-robot-data)")


def urdf_files() -> list[str]:
    """Every *.urdf of example-robot-data, relative to its robots/ directory, sorted."""
    root = robots_dir()
    return sorted(path.relative_to(root).as_posix() for path in root.rglob("*.urdf"))


@dataclass
class Record:
    file: str
    result: str = "error"
    joints: int | None = None            # robodyn's n (after locking and coupling)
    reason: str = ""                     # the first problem of the default load's error, if any
    option: str = ""                     # the option that made it load
    warnings: list[str] = field(default_factory=list)
    build_s: float | None = None         # the cache entry's recorded build time (sum of its stages)
    load_s: float | None = None          # wall time of this run's load (milliseconds on a cache hit)
    cached: bool | None = None
    pinocchio: str = ""                  # "nv=6" (its joints) or "fails: ..."
    errors: dict[str, float] = field(default_factory=dict)
    max_error: float | None = None
    agrees: bool | None = None
    traceback: str = ""

    @property
    def loads(self) -> bool:
        return self.result in ("loads", "loads with option")


# ---------------------------------------------------------------------------------------------------------
# One robot


def _short(text: str) -> str:
    """A message without the robots/ directory's absolute path (the docs must not depend on the machine)."""
    return text.replace(str(robots_dir()) + os.sep, "")


def _problem(error) -> str:
    problems = getattr(error, "problems", (error,))
    first = problems[0]
    where = f"line {first.line}: " if first.line is not None else ""
    text = f"{where}{first.field}: {first.message}" if first.field else f"{where}{first.message}"
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return _short(text.splitlines()[0]) + more


def _urdf_joints(path: Path) -> dict[str, dict]:
    """name -> {type, lower, upper, mimic: (joint, multiplier, offset) or None} from the XML itself."""
    joints = {}
    for element in ElementTree.parse(path).getroot().iter("joint"):
        name, kind = element.get("name"), element.get("type")
        if name is None or kind is None:
            continue
        limit, mimic = element.find("limit"), element.find("mimic")
        joints[name] = {
            "type": kind,
            "lower": float(limit.get("lower", 0)) if limit is not None else None,
            "upper": float(limit.get("upper", 0)) if limit is not None else None,
            "mimic": None if mimic is None else (mimic.get("joint"), float(mimic.get("multiplier", 1)),
                                                 float(mimic.get("offset", 0))),
        }
    return joints


def _remedies(error, path: Path) -> dict:
    """The documented options that answer the error's problems ({} when none does)."""
    options: dict = {}
    joints = _urdf_joints(path)
    for problem in getattr(error, "problems", (error,)):
        text = f"{problem.field} {problem.message}"
        massless = re.search(r"carried by joint '([^']+)' has no mass", problem.message)
        if problem.field.endswith(".mimic"):
            # lock every mimic joint (at 0, or the nearest limit)
            locks = {name: _lock_position(joint) for name, joint in joints.items() if joint["mimic"] is not None}
            options = merge(options, {"lock": locks})
        elif massless and "lock it" in problem.message and massless.group(1) in joints:
            options = merge(options, {"lock": {massless.group(1): _lock_position(joints[massless.group(1)])}})
        elif "inertia" in text and ("real body" in text or "positive" in text or "triangle" in text):
            options["accept_invalid_inertia"] = True
    return options


def merge(options: dict, remedy: dict) -> dict:
    """options with a remedy's options added (locks accumulate)."""
    merged = {**options, **remedy}
    if "lock" in options and "lock" in remedy:
        merged["lock"] = {**options["lock"], **remedy["lock"]}
    return merged


def _lock_position(joint: dict) -> float:
    low, high = joint["lower"], joint["upper"]
    return min(max(0.0, low), high) if low is not None and high is not None and low < high else 0.0


def _option_text(options: dict, short: bool = False) -> str:
    parts = []
    for key, value in sorted(options.items()):
        if key == "lock":
            locks = [f"{name}={v:g}" for name, v in sorted(value.items())]
            if short and len(locks) > 2:
                locks = locks[:2] + [f"… ({len(locks)} joints)"]
            parts.append("lock=" + ",".join(locks))
        else:
            parts.append(f"{key}={value}")
    return "; ".join(parts)


def _pinocchio_model(path: Path):
    import pinocchio

    return pinocchio.buildModelFromUrdf(str(path))


def coupling(robot, model, urdf: dict[str, dict], locked: dict[str, float]):
    """G (nv x n) and b (nv): Pinocchio's velocity coordinates theta = G q + b of robodyn's q."""
    column = {name: k for k, name in enumerate(robot.joint_names)}
    missing = set(column) - set(model.names)
    if missing:
        raise AssertionError(f"robodyn joints missing from Pinocchio's model: {sorted(missing)}")
    G, b = np.zeros((model.nv, robot.n)), np.zeros(model.nv)
    rows: dict[str, tuple[np.ndarray, float]] = {}

    def row(name: str, depth: int = 0) -> tuple[np.ndarray, float]:
        if name in rows:
            return rows[name]
        if depth > len(urdf):
            raise AssertionError(f"mimic cycle through {name!r}")
        g = np.zeros(robot.n)
        if name in column:
            g[column[name]] = 1.0
            value = (g, 0.0)
        elif name in locked:
            value = (g, float(locked[name]))
        elif urdf.get(name, {}).get("mimic"):
            leader, multiplier, offset = urdf[name]["mimic"]
            lead_g, lead_b = row(leader, depth + 1)
            value = (multiplier * lead_g, multiplier * lead_b + offset)
        else:
            raise AssertionError(f"Pinocchio's joint {name!r} is neither a robodyn joint, locked, nor a mimic")
        rows[name] = value
        return value

    for j in range(1, model.njoints):
        joint = model.joints[j]
        if joint.nv != 1:
            raise AssertionError(f"Pinocchio joint {model.names[j]!r} has nv = {joint.nv}")
        G[joint.idx_v], b[joint.idx_v] = row(model.names[j])
    return G, b


def configuration(model, theta: np.ndarray) -> np.ndarray:
    """Pinocchio's q of the velocity coordinates theta (continuous joints: cos, sin)."""
    q = np.zeros(model.nq)
    for j in range(1, model.njoints):
        joint = model.joints[j]
        angle = theta[joint.idx_v]
        if joint.nq == 2:
            q[joint.idx_q:joint.idx_q + 2] = np.cos(angle), np.sin(angle)
        else:
            q[joint.idx_q] = angle
    return q


def _limits(robot, model, G: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sampling box of robodyn's q: the joints' limits within [-pi, pi] (placeholder limits lower >= upper
    and continuous joints: the whole circle)."""
    lower, upper = np.full(robot.n, -np.pi), np.full(robot.n, np.pi)
    for j in range(1, model.njoints):
        joint = model.joints[j]
        if joint.nq != 1:
            continue
        columns = np.flatnonzero(G[joint.idx_v] == 1.0)
        if len(columns) != 1 or np.count_nonzero(G[joint.idx_v]) != 1:
            continue
        k = columns[0]
        low, high = model.lowerPositionLimit[joint.idx_q], model.upperPositionLimit[joint.idx_q]
        if low < high:
            lower[k], upper[k] = max(low, -np.pi), min(high, np.pi)
    return lower, upper


def _relative(value, reference, scale: float = 0.0) -> float:
    """max |value - reference| / max(max |reference|, scale): entrywise, relative to the reference's largest
    entry, or to the scale of a related quantity when that is larger (see compare)."""
    value, reference = np.asarray(value, float), np.asarray(reference, float)
    return float(np.abs(value - reference).max() / max(np.abs(reference).max(), scale, 1e-300))


def backward_error(M: np.ndarray, qdd: np.ndarray, rhs: np.ndarray) -> float:
    """Normwise backward error of q̈ as a solution of Pinocchio's M q̈ = rhs: |M q̈ − rhs| / (|M| |q̈| + |rhs|)
    (max norms). A backward-stable solve (LᵀDL, ABA, LU) reaches a few ulps whatever cond(M) is, whereas
    q̈ itself carries cond(M) ulps: iCub's M (eyes, fingers) has cond(M) ~ 1e8 and q̈ ~ 1e9."""
    residual = np.abs(M @ qdd - rhs).max()
    return float(residual / max(np.abs(M).max() * np.abs(qdd).max() + np.abs(rhs).max(), 1e-300))


def compare(robot, model, G: np.ndarray, b: np.ndarray, states: int = STATES, seed: int = SEED) -> dict[str, float]:
    """Worst relative error of M, C, g, inverse and forward dynamics against Pinocchio (see the module doc)."""
    import pinocchio

    data = model.createData()
    n = robot.n
    rng = np.random.default_rng(seed)
    lower, upper = _limits(robot, model, G)
    worst = dict.fromkeys(("M", "C", "g", "inverse", "forward"), 0.0)
    for _ in range(states):
        q, qd = rng.uniform(lower, upper), rng.uniform(-2, 2, n)
        qdd, tau = rng.uniform(-5, 5, n), rng.uniform(-20, 20, n)
        theta, theta_d, theta_dd = G @ q + b, G @ qd, G @ qdd
        q_pin = configuration(model, theta)
        friction = model.damping * theta_d + model.friction * np.sign(theta_d)
        M_full = pinocchio.crba(model, data, q_pin)
        M_full = np.triu(M_full) + np.triu(M_full, 1).T
        M_ref = G.T @ M_full @ G
        C_ref = G.T @ pinocchio.computeCoriolisMatrix(model, data, q_pin, theta_d) @ G
        g_ref = G.T @ pinocchio.computeGeneralizedGravity(model, data, q_pin)
        inverse_ref = G.T @ (pinocchio.rnea(model, data, q_pin, theta_d, theta_dd) + friction)
        bias = G.T @ (pinocchio.nonLinearEffects(model, data, q_pin, theta_d) + friction)
        rhs = tau - bias
        # C and g may vanish identically (rotors spinning about symmetric axes, centres of mass on vertical
        # axes): then Pinocchio's is rounding noise, judged against the scale of M (C's entries times
        # |q̇| <= 2 are torques of the order of M q̈) and of the joint torques.
        inertia, torque = np.abs(M_ref).max(), np.abs(inverse_ref).max()
        for name, value, reference, scale in (
                ("M", robot.M(q), M_ref, 0.0), ("C", robot.C(q, qd), C_ref, inertia),
                ("g", robot.g(q), g_ref, torque),
                ("inverse", robot.inverse_dynamics(q, qd, qdd), inverse_ref, 0.0),
                ("forward", None, None, 0.0)):
            if name == "forward":
                worst[name] = max(worst[name], backward_error(M_ref, robot.forward_dynamics(q, qd, tau), rhs))
                continue
            worst[name] = max(worst[name], _relative(value, reference, scale))
    return worst


def _cached(path: Path, options, cache_dir: Path) -> bool:
    from robodyn import cache

    return cache.find(cache_dir, cache.cache_key(cache.read_description(path), options)) is not None


def sweep_one(relative: str, cache_dir: str | Path | None = None, states: int = STATES) -> Record:
    """Load one URDF (default options, then a documented remedy), classify it, compare it with Pinocchio."""
    import robodyn
    from robodyn.errors import DescriptionError

    path = robots_dir() / relative
    cache_dir = Path(cache_dir) if cache_dir is not None else None
    record = Record(relative)
    try:
        model = _pinocchio_model(path)
        record.pinocchio = f"nv={model.nv}"
    except Exception as exc:  # noqa: BLE001 - Pinocchio's failure is a finding, not ours
        model = None
        record.pinocchio = "fails: " + _short(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    options: dict = {}
    robot = None
    try:
        for _attempt in range(4):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    from robodyn.options import BuildOptions

                    built = BuildOptions().replace(**options)
                    root = cache_dir if cache_dir is not None else None
                    if root is None:
                        from robodyn import cache

                        root = cache.default_root()
                    record.cached = _cached(path, built, root)
                    started = time.perf_counter()
                    robot = robodyn.load(path, built, cache_dir=root, verbose=False)
                    record.load_s = time.perf_counter() - started
                except DescriptionError as exc:
                    if not options:
                        record.reason = _problem(exc)
                        record.result = "unsupported" if _UNSUPPORTED.search(record.reason) else "rejected"
                    remedy = merge(options, _remedies(exc, path))
                    if remedy == options:
                        if options:  # the remedy did not suffice: report what stopped it
                            record.reason += f"; with {_option_text(options, short=True)}: {_problem(exc)}"
                            record.option = ""
                        break
                    options = remedy
                    continue
                finally:
                    record.warnings = sorted({_short(str(w.message)).splitlines()[0] for w in caught
                                              if issubclass(w.category, UserWarning)})
            break
        if robot is None:
            record.cached = None
            return record
        record.result = "loads with option" if options else "loads"
        record.option = _option_text(options)
        record.joints = robot.n
        timings = robot.manifest.get("timings") or {}
        record.build_s = timings.get("total_s") or sum(v for k, v in timings.items() if k.endswith("_s")) or None
        if model is None:
            return record
        G, b = coupling(robot, model, _urdf_joints(path), dict(robot.options.lock))
        record.errors = compare(robot, model, G, b, states)
        record.max_error = max(record.errors.values())
        record.agrees = record.max_error <= TOLERANCE
    except Exception as exc:  # noqa: BLE001 - anything else is a bug: keep its traceback
        record.result = "error"
        record.traceback = _short(traceback.format_exc())
        message = " ".join(line.strip() for line in str(exc).strip().splitlines()[:3]) or "?"
        record.reason = _short(f"{type(exc).__name__}: {message}")
    return record


# ---------------------------------------------------------------------------------------------------------
# The sweep: one subprocess per robot


def _run_worker(relative: str, cache_dir: str | None, timeout: float | None, states: int) -> Record:
    with tempfile.TemporaryDirectory(prefix="urdf-sweep-") as scratch:
        output = Path(scratch) / "record.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", relative, "--output", str(output),
                   "--states", str(states)]
        if cache_dir:
            command += ["--cache-dir", cache_dir]
        started = time.perf_counter()
        try:
            run = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return Record(relative, result="timeout", reason=f"no result within {timeout:g} s")
        if output.is_file():
            return Record(**json.loads(output.read_text()))
        tail = "\n".join((run.stderr or run.stdout).strip().splitlines()[-20:])
        return Record(relative, result="error", reason=f"worker exited with code {run.returncode} after "
                      f"{time.perf_counter() - started:.0f} s", traceback=tail)


def sweep(files: list[str], jobs: int = 1, cache_dir: str | None = None, timeout: float | None = None,
          states: int = STATES, progress=None) -> list[Record]:
    records: dict[str, Record] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(_run_worker, f, cache_dir, timeout, states): f for f in files}
        for future in futures:
            record = future.result()
            records[record.file] = record
            if progress:
                progress(record)
    return [records[f] for f in files]


# ---------------------------------------------------------------------------------------------------------
# The report


def _cell(text: str, limit: int = 400) -> str:
    """A table cell: one line, pipes escaped, long lists (lock=...) cut at ``limit`` characters."""
    text = text.replace("\n", " ")
    if len(text) > limit:
        text = text[:limit].rsplit(",", 1)[0] + ", …"
    return text.replace("|", "\\|")


def _error_text(record: Record) -> str:
    if record.max_error is None:
        return "—"
    worst = max(record.errors, key=record.errors.get)
    verdict = "" if record.agrees else " **FAIL**"
    return f"{record.max_error:.1e} ({worst}){verdict}"


def totals(records: list[Record]) -> dict[str, int]:
    count = {result: sum(r.result == result for r in records) for result in RESULTS}
    return {
        "URDF files": len(records),
        "load with default options": count["loads"],
        "load with a documented option": count["loads with option"],
        "agree with Pinocchio (≤ 1e-9)": sum(bool(r.agrees) for r in records),
        "disagree with Pinocchio": sum(r.agrees is False for r in records),
        "rejected (invalid description)": count["rejected"],
        "unsupported feature": count["unsupported"],
        "other exception (bug)": count["error"],
        "timed out": count["timeout"],
        "not run (--all only)": count["skipped"],
        "Pinocchio fails to load": sum(r.pinocchio.startswith("fails") for r in records),
    }


def markdown(records: list[Record], mode: str) -> str:
    lines = [
        "# URDF sweep: example-robot-data against Pinocchio",
        "",
        "Every URDF of `example-robot-data` through `robodyn.load` with the default options, as a new user",
        "would load it; when that fails with an error whose remedy is a documented option",
        "(`accept_invalid_inertia=True` for a physically impossible inertia tensor, `lock=` for a mimic joint",
        "robodyn does not couple), loaded again with it (column *option*). Every robot that loads is compared",
        "with Pinocchio's fixed-base model of the same file (`pinocchio.buildModelFromUrdf(path)`, joints",
        "mapped by name; locked and mimic joints projected through the coupling matrix G: Gᵀ M G, Gᵀ C G,",
        "Gᵀ g, Gᵀ rnea(Gq + b, Gq̇, Gq̈), forward dynamics in the projected equations) at "
        f"{STATES} random states",
        "within the joint limits: M, C, g, inverse dynamics (with the URDF's damping and friction) and forward",
        "dynamics. *max rel. error* is the worst over those quantities and states of",
        "max |robodyn − Pinocchio| / max |Pinocchio| (entrywise maxima; for C the denominator is at least",
        "max |M|, for g at least max |τ|, because C or g can vanish identically, e.g. a rotor spinning about",
        "its symmetric axis, leaving Pinocchio's rounding noise as the reference; forward dynamics by its",
        "backward error in Pinocchio's equations, |M q̈ − (τ − bias)| / (|M| |q̈| + |τ − bias|), because two",
        "correct solutions of an ill-conditioned M q̈ = τ − bias differ by cond(M) ulps in q̈), with the quantity that",
        "attains it; a robot agrees when it is at most 1e-9. *joints* is robodyn's n (locked joints and mimic followers",
        "are not coordinates), *Pinocchio* its nv (every joint independent) or its failure. *build s* is the",
        "build's recorded time (this machine: 2 cores shared with other builds, `nice -n 10`, so only roughly",
        "reproducible). Warnings are summarised by kind.",
        "",
        f"Generated by `python tests/urdf_sweep.py {mode}--markdown docs/urdf_sweep.md` (re-run it after a",
        "parser change; `ROBODYN_SLOW=1 python -m pytest tests/test_urdf_sweep.py` asserts the whole sweep,",
        "CI asserts a subset). The cache (`$ROBODYN_CACHE_DIR`) makes a re-run cheap as long as the generator's",
        "source has not changed.",
        "",
        "## Totals",
        "",
        "| | count |",
        "|---|---|",
    ]
    lines += [f"| {name} | {value} |" for name, value in totals(records).items()]
    reasons: dict[str, list[str]] = {}
    for record in records:
        if record.result in ("rejected", "unsupported", "loads with option", "error", "timeout"):
            key = f"{record.result}: {_reason_class(record)}"
            reasons.setdefault(key, []).append(Path(record.file).name)
    if reasons:
        lines += ["", "## Failures of the default load, by reason", "", "| result: reason | files |", "|---|---|"]
        lines += [f"| {_cell(key)} | {len(names)}: {', '.join(sorted(names))} |"
                  for key, names in sorted(reasons.items())]
    lines += ["", "## Every URDF", "",
              "| file | joints | result | reason / option | max rel. error vs Pinocchio | build s | Pinocchio |",
              "|---|---|---|---|---|---|---|"]
    for record in records:
        detail = record.reason
        if record.option:
            detail = f"{detail}; **option** `{record.option}`" if detail else f"option `{record.option}`"
        if record.warnings:
            detail += ("; " if detail else "") + "warning: " + _warning_summary(record.warnings)
        build = "—" if record.build_s is None else f"{record.build_s:.1f}"
        joints = "—" if record.joints is None else str(record.joints)
        lines.append(f"| `{record.file}` | {joints} | {record.result} | {_cell(detail) or '—'} | "
                     f"{_error_text(record)} | {build} | {_cell(record.pinocchio)} |")
    return "\n".join(lines) + "\n"


def _warning_summary(messages: list[str]) -> str:
    """The warnings by kind, counted (the records keep them whole)."""
    kinds: dict[str, int] = {}
    for message in messages:
        if "mobile base" in message:
            kind = "the root link looks like a mobile base"
        elif "inertia tensor" in message:
            kind = "impossible inertia tensor accepted"
        else:
            kind = re.sub(r"^\S+:\d+: ", "", message)[:120]
        kinds[kind] = kinds.get(kind, 0) + 1
    return "; ".join(kind if count == 1 else f"{kind} (×{count})" for kind, count in sorted(kinds.items()))


def _reason_class(record: Record) -> str:
    """The reason without names and numbers, so that files failing for the same reason group together."""
    text = record.reason.split("; with ")[0]
    if record.result == "timeout":
        return "timeout"
    text = re.sub(r"^line \d+: ", "", text)
    text = re.sub(r"\[[^\]]*\]", "[…]", text)
    text = re.sub(r"'[^']*'", "'…'", text)
    text = re.sub(r"\{[^}]*\}", "{…}", text)
    text = re.sub(r"-?\d[\d.e+-]*", "#", text)
    text = re.sub(r" \(\+# more\)$", "", text)
    return text


# ---------------------------------------------------------------------------------------------------------
# Command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("--all", action="store_true", help="every URDF, the enormous ones too")
    scope.add_argument("--subset", action="store_true", help="the CI subset")
    scope.add_argument("--only", action="append", metavar="TEXT", help="the URDFs whose path contains TEXT")
    parser.add_argument("--jobs", type=int, default=1, help="robots at a time (default 1)")
    parser.add_argument("--cache-dir", default=os.environ.get("ROBODYN_CACHE_DIR"))
    parser.add_argument("--timeout", type=float, default=None, help="seconds per robot (default: none)")
    parser.add_argument("--states", type=int, default=STATES, help=f"random states per robot (default {STATES})")
    parser.add_argument("--markdown", type=Path, help="write the report (the docs table) here")
    parser.add_argument("--json", type=Path, help="write the records here")
    parser.add_argument("--from-json", type=Path, help="report the records of an earlier --json run, run nothing")
    parser.add_argument("--merge", type=Path, metavar="JSON",
                        help="start from the records of an earlier --json run and replace those run now (e.g. with "
                        "--only: re-run a few robots, report them all)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        record = sweep_one(args.worker, args.cache_dir, args.states)
        args.output.write_text(json.dumps(asdict(record)))
        return 0

    mode = "--all " if args.all else ""
    if args.from_json:
        records = [Record(**r) for r in json.loads(args.from_json.read_text())]
    else:
        files = urdf_files()
        if args.subset:
            files = [f for f in files if f in SUBSET]
        elif args.only:
            files = [f for f in files if any(text in f for text in args.only)]
        skipped = [] if args.all or args.only else [f for f in files if f in ENORMOUS]
        run = [f for f in files if f not in skipped]

        def progress(record: Record) -> None:
            print(f"{record.file:70s} {record.result:18s} n={record.joints} load={record.load_s} "
                  f"err={record.max_error} {record.reason[:100]} {record.option[:60]}", flush=True)

        records = sweep(run, args.jobs, args.cache_dir, args.timeout, args.states, progress)
        records += [Record(f, result="skipped", reason="enormous build: run with --all") for f in skipped]
        if args.merge:
            merged = {r["file"]: Record(**r) for r in json.loads(args.merge.read_text())}
            merged.update((r.file, r) for r in records if not (r.result == "skipped" and r.file in merged))
            records = list(merged.values())
        records.sort(key=lambda r: r.file)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in records], indent=1, sort_keys=True) + "\n")
    if args.markdown:
        args.markdown.write_text(markdown(records, mode))
    for name, value in totals(records).items():
        print(f"{name}: {value}")
    for record in records:
        if record.result == "error":
            print(f"\n{record.file}: {record.reason}\n{record.traceback}")
    bad = [r for r in records if r.result in ("error", "timeout") or r.agrees is False]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
