"""Build time against joint count: serial chains of N revolute joints, N = 2 ... 50.

    python benchmarks/build_scaling.py                          # N = 2, 3, 4, 6, 8, 12, 16, 24, 32, 40, 50
    python benchmarks/build_scaling.py --joints 2,4,8 --plot /tmp/scaling.png
    python benchmarks/build_scaling.py --timeout 900 --json scaling.json --csv scaling.csv
    python benchmarks/build_scaling.py --derivatives no         # without the derivative routines

For each N the script writes the YAML description of a serial chain of N revolute joints (URDF
style, ``origin`` + ``axis``; every value a number, no parameters, as a URDF robot is read): the
joint axes cycle z, y, y (a yaw joint, then two pitch joints, as an anthropomorphic arm repeated),
each link is a solid box spanning its joint offset, with masses, lengths and centres of mass that
vary from link to link and taper along the chain, and inertia tensors rotated slightly off the
link axes (so they have products of inertia). The chains are drawn from one seeded generator, so
the chain of N joints is the first N joints of every longer one.

Each chain is built by the generator's pipeline, ``codegen.pipeline.build(path, options,
cache_dir=<fresh directory>, force=True)``, in a child process of its own (started in a new
session, so that on ``--timeout`` it is killed with its compilers). SymPy and the generator are
imported in the child before the clock starts, so the times are those of the build, not of
Python's imports (the child's wall time, imports included, is recorded as ``process_s``). The
builds run one at a time (on a 2-core machine a build already uses both cores: SymPy on one,
the C compilers on the other). After a build that times out, larger N are skipped; a build that
fails is recorded and the next N is tried.

Reported per N, from ``BuildResult.timings`` (seconds): ``parse``, ``derive`` (the symbolic
model), ``define`` (the routines' definitions, derivative routines included), ``emit`` (SymPy
writing C, common-subexpression elimination included), ``compile`` (the compiler's wall time,
which starts with the emission and overlaps it), ``tail`` (emission-and-compilation minus
emission: the compilation left after the last file is emitted, linking included), ``selfcheck``
and ``total``; parse + derive + define + emit + tail + selfcheck = total (to rounding). Also the
derivative routines' share (``deriv``: their definition and emission) and the number of
operations in the generated C. With ``--method auto`` (the default) chains of up to 3 joints take the
Lagrange route and longer ones the recursive route, so only N >= 4 measure one algorithm (the fit
starts at 8; the plot shades the Lagrange points).

Growth order: a least-squares line through (log N, log time) for N >= ``--fit-from`` (default 8),
for the total and each stage, reported as the exponent with its standard error
("build time grows as N^2.3±0.1 (N ≥ 8)"). The plot (``--plot``, log-log) shows the total, the
main stages and the fitted power law of the total.

The model options (``--method``, ``--derivatives``, ``--no-selfcheck``, ...) are those of every
robodyn command (``robodyn.options``); the default is what ``python -m codegen`` builds (for a
fixed base: the derivative routines too). ``--cache-dir DIR`` puts the private per-build caches
under DIR instead of the system's temporary directory; every build is forced (``--force`` is
implied), and each cache is removed after its build unless ``--keep``.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DEFAULT_JOINTS = (2, 3, 4, 6, 8, 12, 16, 24, 32, 40, 50)
DEFAULT_PLOT = REPO / "docs" / "img" / "build_scaling.png"
WORKER_FLAG = "--_worker"  # the child process's entry (internal)
#: Imported by the child before the build's clock starts (codegen.pipeline imports them only when building).
PRELOADED = ("sympy", "codegen.model", "codegen.model.routines", "codegen.emit.sources", "codegen.extension.compile",
             "codegen.extension.selfcheck", "robodyn.robot")

#: Joint axes, cycled along the chain: yaw, pitch, pitch.
AXES = ((0.0, 0.0, 1.0), (0.0, 1.0, 0.0), (0.0, 1.0, 0.0))
#: (column key, table heading, what it is); the timing keys of BuildResult.timings, plus derived ones.
STAGES = (
    ("parse_s", "parse", "parsing and validating the description"),
    ("derive_s", "derive", "deriving the symbolic model"),
    ("define_s", "define", "defining the routines (derivative routines included)"),
    ("emit_s", "emit", "emitting C (SymPy, common-subexpression elimination included)"),
    ("compile_s", "compile", "compiler wall time, from the first emitted file to linking (overlaps emit)"),
    ("tail_s", "tail", "compilation left after the emission ended, linking included"),
    ("selfcheck_s", "selfcheck", "self-check of the compiled module"),
    ("derivatives_s", "deriv", "share of the derivative routines (their definition and emission)"),
)
#: The stages drawn, which add up to the total (compile overlaps emit, deriv is a share of define + emit).
PLOTTED = ("derive_s", "define_s", "emit_s", "tail_s", "selfcheck_s")


# --------------------------------------------------------------------------------------------- the chains

def _box_inertia(mass: float, size: np.ndarray) -> np.ndarray:
    """Inertia tensor about the centre of a solid box of the given edge lengths (x, y, z)."""
    sx, sy, sz = size ** 2
    return mass / 12.0 * np.diag([sy + sz, sx + sz, sx + sy])


def _rotation(rng: np.random.Generator, spread: float) -> np.ndarray:
    """A rotation by a random angle within ±spread about a random axis (Rodrigues)."""
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    angle = rng.uniform(-spread, spread)
    k = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
    return np.eye(3) + math.sin(angle) * k + (1.0 - math.cos(angle)) * k @ k


def _number(value: float, digits: int = 6) -> float:
    """A value rounded to ``digits`` significant digits (short, readable YAML; -0.0 becomes 0.0)."""
    return float(f"{value:.{digits}g}") + 0.0


def chain_description(n: int, seed: int = 0) -> dict:
    """The description (a plain dict, as YAML would load it) of a serial chain of ``n`` revolute joints.

    Joint k's axis is AXES[k % 3]. Link k spans the offset from joint k to joint k + 1: mostly along its
    joint's axis after a yaw joint (a column), mostly along x after a pitch joint (an arm segment), with a
    smaller sideways offset, so that no two consecutive axes meet or line up. Links taper along the chain
    (lengths and masses shrink by about 4 % a link, with ±20 % scatter); each is a solid box spanning its
    offset, its inertia turned up to 0.3 rad off the link axes. The same seed gives the same first joints
    whatever ``n``."""
    if n < 1:
        raise ValueError(f"a chain needs at least one joint, got {n}")
    rng = np.random.default_rng(seed)
    joints = []
    offset = np.zeros(3)  # joint k's origin in link k - 1's frame
    for k in range(n):
        taper = 0.96 ** k
        axis = AXES[k % len(AXES)]
        length = rng.uniform(0.8, 1.2) * 0.35 * taper
        side = rng.uniform(0.1, 0.3) * length * rng.choice((-1.0, 1.0))
        if axis == (0.0, 0.0, 1.0):
            span = np.array([rng.uniform(0.05, 0.2) * length, side, length])
        else:
            span = np.array([length, side, rng.uniform(0.05, 0.2) * length])
        thickness = rng.uniform(0.05, 0.09) * max(taper, 0.3)
        mass = rng.uniform(0.8, 1.2) * 4.0 * taper
        size = np.abs(span) + thickness
        rotation = _rotation(rng, 0.3)
        inertia = rotation @ _box_inertia(mass, size) @ rotation.T
        com = span / 2 + rng.uniform(-0.1, 0.1, size=3) * thickness
        reach = rng.uniform(2.4, 3.0)
        joints.append({
            "name": f"j{k + 1}",
            "type": "revolute",
            "origin": {"xyz": [_number(v) for v in offset]},
            "axis": [_number(v) for v in axis],
            "link": {
                "mass": _number(mass),
                "com": [_number(v) for v in com],
                "inertia": {key: _number(inertia[i, j]) for key, (i, j) in
                            (("xx", (0, 0)), ("yy", (1, 1)), ("zz", (2, 2)),
                             ("xy", (0, 1)), ("xz", (0, 2)), ("yz", (1, 2)))},
            },
            "friction": {"viscous": _number(rng.uniform(0.05, 0.5) * taper),
                         "coulomb": _number(rng.uniform(0.05, 0.3) * taper)},
            "limits": {"lower": _number(-reach), "upper": _number(reach),
                       "velocity": _number(rng.uniform(2.0, 3.5)), "effort": _number(200.0 * taper)},
        })
        offset = span
    return {
        "name": f"chain{n}",
        "description": f"serial chain of {n} revolute joints (benchmarks/build_scaling.py, seed {seed})",
        "gravity": [0.0, 0.0, -9.81],
        "joints": joints,
        "tool": {"xyz": [_number(v) for v in offset]},
    }


def write_chain(n: int, directory: Path, seed: int = 0) -> Path:
    """Write the chain's description as YAML into ``directory``; its path."""
    import yaml

    path = directory / f"chain{n}.yaml"
    with open(path, "w", encoding="utf-8") as stream:
        yaml.safe_dump(chain_description(n, seed), stream, sort_keys=False, default_flow_style=None, width=110)
    return path


# --------------------------------------------------------------------------------------------- one build

@dataclass
class Measurement:
    """One build: its timings (seconds, BuildResult.timings plus tail_s), or why there are none."""

    joints: int
    status: str  # "ok", "timeout", "failed" or "interrupted"
    timings: dict = field(default_factory=dict)
    operations: int | None = None
    process_s: float = 0.0
    selfcheck: str | None = None
    method: str | None = None  # the derivation route taken ("lagrange" or "recursive")
    routine_operations: dict = field(default_factory=dict)  # operations of each generated routine
    load_average: tuple = ()  # the machine's 1-minute load average before and after the build
    error: str | None = None

    @property
    def total(self) -> float | None:
        return self.timings.get("total_s")


def _worker(argv: list[str]) -> int:
    """The child: build one description, write the timings as JSON. argv: DESCRIPTION CACHE OPTIONS RESULT."""
    description, cache_dir, options_json, result_path = argv
    # The heavy imports first, so the build's clock measures the build.
    for module in PRELOADED:
        importlib.import_module(module)
    from codegen.pipeline import build
    from robodyn.options import BuildOptions

    options = BuildOptions.from_dict(json.loads(options_json))
    built = build(description, options, cache_dir=cache_dir, force=True)
    timings = {key: value for key, value in built.timings.items() if isinstance(value, (int, float))}
    timings["tail_s"] = timings["emit_and_compile_s"] - timings["emit_s"]
    counts = built.manifest["operation_counts"]
    result = {"timings": timings, "operations": sum(counts.values()), "routine_operations": counts,
              "selfcheck": built.selfcheck.get("status"), "method": built.manifest["metadata"].get("method")}
    Path(result_path).write_text(json.dumps(result), encoding="utf-8")
    return 0


def measure(n: int, options, workdir: Path, seed: int, timeout: float | None, keep: bool = False) -> Measurement:
    """Write chain n, build it in a child process (killed with its process group after ``timeout`` s)."""
    description = write_chain(n, workdir, seed)
    cache_dir = workdir / f"cache{n}"
    result_path = workdir / f"result{n}.json"
    command = [sys.executable, str(Path(__file__).resolve()), WORKER_FLAG, str(description), str(cache_dir),
               json.dumps(options.as_dict()), str(result_path)]
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True, cwd=REPO)
    try:
        log, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)  # the child's session: it and its compilers
        child.communicate()
        return Measurement(n, "timeout", process_s=time.perf_counter() - started,
                           error=f"no result after {timeout:g} s")
    except BaseException:  # Ctrl-C: take the child and its compilers down too
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        raise
    finally:
        if not keep:
            shutil.rmtree(cache_dir, ignore_errors=True)
    elapsed = time.perf_counter() - started
    load = (load_before, os.getloadavg()[0])
    if child.returncode != 0 or not result_path.is_file():
        lines = [line for line in log.strip().splitlines() if line.strip()]
        return Measurement(n, "failed", process_s=elapsed, load_average=load,
                           error=f"exit status {child.returncode}: " + (lines[-1] if lines else "no output"))
    result = json.loads(result_path.read_text(encoding="utf-8"))
    return Measurement(n, "ok", result["timings"], result["operations"], elapsed, result["selfcheck"],
                       result["method"], result["routine_operations"], load)


# --------------------------------------------------------------------------------------------- analysis

@dataclass(frozen=True)
class PowerLaw:
    """time ≈ coefficient · N^exponent, fitted on log-log axes over ``points`` values of N."""

    exponent: float
    stderr: float
    coefficient: float
    points: int
    r_squared: float

    def __call__(self, n):
        return self.coefficient * np.asarray(n, dtype=float) ** self.exponent


def fit_power_law(joints, seconds, minimum: int) -> PowerLaw | None:
    """Least-squares line through (log N, log t) for N ≥ minimum and t > 0 (None with fewer than 3 points)."""
    from scipy.stats import linregress

    pairs = [(n, t) for n, t in zip(joints, seconds) if n >= minimum and t is not None and t > 0]
    if len(pairs) < 3:
        return None
    x, y = np.log([p[0] for p in pairs]), np.log([p[1] for p in pairs])
    fit = linregress(x, y)
    return PowerLaw(float(fit.slope), float(fit.stderr), float(math.exp(fit.intercept)), len(pairs),
                    float(fit.rvalue ** 2))


def fits(measurements: list[Measurement], minimum: int) -> dict[str, PowerLaw | None]:
    done = [m for m in measurements if m.status == "ok"]
    joints = [m.joints for m in done]
    keys = ("total_s",) + tuple(key for key, _, _ in STAGES)
    return {key: fit_power_law(joints, [m.timings.get(key) for m in done], minimum) for key in keys}


def _order(law: PowerLaw) -> str:
    return f"N^{law.exponent:.1f}±{law.stderr:.1f}"


# --------------------------------------------------------------------------------------------- output

def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if value < 100 else f"{value:.0f}"


def table(measurements: list[Measurement]) -> str:
    headings = ["N", "method", "total"] + [heading for _, heading, _ in STAGES] + ["operations"]
    rows = []
    for m in measurements:
        if m.status == "ok":
            stages = [_seconds(m.timings.get(key)) for key, _, _ in STAGES]
            rows.append([str(m.joints), m.method or "?", _seconds(m.total)] + stages + [f"{m.operations:,}"])
        else:
            rows.append([str(m.joints), "-", m.status] + ["-"] * len(STAGES) + ["-"])
    widths = [max(len(row[i]) for row in rows + [headings]) for i in range(len(headings))]
    lines = ["  ".join(text.rjust(width) for text, width in zip(row, widths)) for row in [headings] + rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def _csv_rows(measurements: list[Measurement]) -> tuple[list[str], list[list]]:
    keys = sorted({key for m in measurements for key in m.timings})
    header = (["joints", "status", "method"] + keys + ["operations", "largest_routine", "largest_routine_operations",
                                                      "process_s", "load_before", "load_after", "selfcheck", "error"])
    rows = []
    for m in measurements:
        largest = max(m.routine_operations, key=m.routine_operations.get) if m.routine_operations else ""
        load = [round(v, 2) for v in m.load_average] or ["", ""]
        rows.append([m.joints, m.status, m.method or ""] + [m.timings.get(key, "") for key in keys]
                    + [m.operations if m.operations is not None else "", largest,
                       m.routine_operations.get(largest, ""), round(m.process_s, 3), *load, m.selfcheck or "",
                       m.error or ""])
    return header, rows


def write_csv(path: Path, measurements: list[Measurement]) -> None:
    header, rows = _csv_rows(measurements)
    with open(path, "w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream)
        writer.writerow(header)
        writer.writerows(rows)


def write_json(path: Path, measurements: list[Measurement], laws: dict, minimum: int, options, seed: int,
               wall_s: float) -> None:
    document = {
        "benchmark": "build_scaling",
        "options": options.as_dict(),
        "seed": seed,
        "fit_from": minimum,
        "wall_s": wall_s,
        "cpu_count": os.cpu_count(),
        "stages": {key: text for key, _, text in STAGES},
        "builds": [asdict(m) for m in measurements],
        "fits": {key: (asdict(law) if law else None) for key, law in laws.items()},
    }
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def plot(path: Path, measurements: list[Measurement], laws: dict, minimum: int, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [m for m in measurements if m.status == "ok"]
    joints = np.array([m.joints for m in done], dtype=float)
    headings = {key: heading for key, heading, _ in STAGES}
    fig, ax = plt.subplots(figsize=(7.5, 5.2), layout="constrained")
    total = laws.get("total_s")
    label = "total" + (f" ({_order(total)})" if total else "")
    ax.loglog(joints, [m.total for m in done], "o-", color="black", lw=2, label=label)
    markers = iter("s^vDP")
    for key in PLOTTED:
        values = [m.timings.get(key) for m in done]
        shown = [(n, v) for n, v in zip(joints, values) if v and v > 0]
        if not shown:
            continue
        law = laws.get(key)
        ax.loglog(*zip(*shown), next(markers) + "-", lw=1, ms=4,
                  label=headings[key] + (f" ({_order(law)})" if law else ""))
    if total:
        span = np.geomspace(max(minimum, joints.min()), joints.max(), 50)
        ax.loglog(span, total(span), "--", color="grey", lw=1.5,
                  label=f"fit {total.coefficient:.2g}·N^{total.exponent:.2f} (N ≥ {minimum})")
    lagrange = [m.joints for m in done if m.method == "lagrange"]
    if lagrange:  # the auto method's closed forms (up to 3 joints): another algorithm than the rest
        ax.axvspan(min(lagrange) / 1.08, max(lagrange) * 1.08, color="0.92", zorder=0)
        ax.text(min(lagrange), 0.02, " Lagrange", transform=ax.get_xaxis_transform(), fontsize=8, color="0.4")
    for m in measurements:
        if m.status == "timeout":
            ax.axvline(m.joints, color="red", ls=":", lw=1)
            ax.text(m.joints, ax.get_ylim()[1], " timeout", color="red", va="top", rotation=90, fontsize=8)
    ax.set_xlabel("revolute joints N")
    ax.set_ylabel("build time [s]")
    ax.set_title(title, fontsize=10)
    ticks = [int(n) for n in joints]
    ax.set_xticks(ticks, [str(n) for n in ticks], minor=False)
    ax.minorticks_off()
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.savefig(path, dpi=130)
    plt.close(fig)


# --------------------------------------------------------------------------------------------- command line

def _joint_list(text: str) -> list[int]:
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"expected joint counts of at least 1, got {text!r}")
    return values


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    from robodyn.options import add_arguments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 1)[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--joints", type=_joint_list, default=list(DEFAULT_JOINTS), metavar="N,N,...",
                        help=f"joint counts to build (default {','.join(map(str, DEFAULT_JOINTS))})")
    parser.add_argument("--timeout", type=_positive, default=None, metavar="SECONDS",
                        help="per build: kill a build still running after this long, and skip larger N "
                             "(default: no limit)")
    parser.add_argument("--fit-from", type=int, default=8, metavar="N",
                        help="fit the power law over N >= this (default 8)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the chains' link parameters (default 0)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the measurements and fits as JSON")
    parser.add_argument("--csv", type=Path, metavar="FILE", help="write the measurements as CSV")
    parser.add_argument("--plot", type=Path, default=DEFAULT_PLOT, metavar="FILE",
                        help=f"log-log plot of time against N (default {DEFAULT_PLOT.relative_to(REPO)}); "
                             "'none' for no plot")
    parser.add_argument("--keep", action="store_true",
                        help="keep the descriptions and the per-build caches (their directory is printed)")
    add_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [WORKER_FLAG]:
        return _worker(argv[1:])
    from robodyn.options import from_arguments

    parser = _parser()
    args = parser.parse_args(argv)
    try:
        options = from_arguments(args)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    say = (lambda message: None) if args.quiet else (lambda message: print(message, flush=True))
    if args.cache_dir:
        Path(args.cache_dir).mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="build_scaling_", dir=args.cache_dir))
    flags = " ".join(options.flags()) or "default options"
    say(f"building serial chains of {', '.join(map(str, args.joints))} revolute joints ({flags}), one at a time, "
        f"in {workdir}" + (f"; timeout {args.timeout:g} s per build" if args.timeout else ""))
    measurements: list[Measurement] = []
    started = time.perf_counter()
    try:
        for n in args.joints:
            try:
                m = measure(n, options, workdir, args.seed, args.timeout, args.keep)
            except KeyboardInterrupt:  # Ctrl-C: the build in progress is killed; report what was measured
                measurements.append(Measurement(n, "interrupted", error="interrupted (Ctrl-C)"))
                say(f"N={n:3d}: interrupted; reporting the builds that finished")
                break
            measurements.append(m)
            if m.status == "ok":
                t = m.timings
                say(f"N={n:3d} ({m.method}): {t['total_s']:8.2f} s  (derive {t['derive_s']:.2f}, "
                    f"define {t['define_s']:.2f}, emit {t['emit_s']:.2f}, "
                    f"compile {t['compile_s']:.2f} of which tail {t['tail_s']:.2f}, "
                    f"self-check {t['selfcheck_s']:.2f}); {m.operations:,} operations; "
                    f"load average {m.load_average[1]:.1f}  [{time.perf_counter() - started:.0f} s elapsed]")
            else:
                say(f"N={n:3d}: {m.status}: {m.error}  [{time.perf_counter() - started:.0f} s elapsed]")
            if m.status == "timeout":
                skipped = [k for k in args.joints if k > n]
                if skipped:
                    say(f"skipping N = {', '.join(map(str, skipped))} (larger than a build that timed out)")
                break
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    wall = time.perf_counter() - started

    laws = fits(measurements, args.fit_from)
    print()
    print(table(measurements))
    print(f"\n(seconds; {', '.join(f'{h}: {text}' for _, h, text in STAGES[4:6])}; "
          f"deriv: {STAGES[-1][2]})")
    loads = [v for m in measurements for v in m.load_average]
    if loads:
        print(f"machine load average (1 min) around the builds: {min(loads):.1f} to {max(loads):.1f} "
              f"on {os.cpu_count()} cores (a build alone keeps about 2 busy)")
    print(f"\ngrowth order, least squares on log-log axes over N >= {args.fit_from}:")
    if all(law is None for law in laws.values()):
        print(f"  too few points (a fit needs 3 builds with N >= {args.fit_from})")
    for key, law in laws.items() if any(laws.values()) else ():
        name = "total" if key == "total_s" else {k: h for k, h, _ in STAGES}[key]
        if law is None:
            print(f"  {name:>10}: too few points (a fit needs 3 builds with N >= {args.fit_from})")
        else:
            print(f"  {name:>10}: exponent {law.exponent:5.2f} ± {law.stderr:.2f}  "
                  f"(R² {law.r_squared:.3f}, {law.points} points)")
    total = laws["total_s"]
    if total:
        print(f"\nbuild time grows as {_order(total)} (N ≥ {args.fit_from})")
    print(f"benchmark wall time {wall:.0f} s")
    if args.json:
        write_json(args.json, measurements, laws, args.fit_from, options, args.seed, wall)
        print(f"wrote {args.json}")
    if args.csv:
        write_csv(args.csv, measurements)
        print(f"wrote {args.csv}")
    if str(args.plot) != "none" and any(m.status == "ok" for m in measurements):
        title = (f"robodyn build time, serial chains of N revolute joints ({flags}; "
                 f"{os.cpu_count()} cores)")
        plot(args.plot, measurements, laws, args.fit_from, title)
        print(f"wrote {args.plot}")
    if any(m.status == "interrupted" for m in measurements):
        return 130
    return 0 if all(m.status == "ok" for m in measurements) else 1


if __name__ == "__main__":
    sys.exit(main())
