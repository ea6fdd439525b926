"""The Panda's LQR about a posture, and its region of attraction sampled and checked by simulation.

The Franka Panda of example-robot-data (7 joints, the two fingers locked at 0) is regulated
about the "ready" posture q0 = (0, -pi/4, 0, -3pi/4, 0, pi/2, pi/4) by an infinite-horizon
LQR, designed on the exact discrete-time model of the harness (RK4, torque held over the
1 ms control period: LQR(..., dt=1e-3)) so that the gain is optimal for the loop it runs in.
Weights: Q = diag(100 per rad^2 on the positions, 1 per (rad/s)^2 on the velocities),
R = --torque-weight (default 1) per (N m)^2 on every motor, so 0.1 rad, 1 rad/s and 1 N m cost
alike: a compliant regulator. The motor torques saturate at the URDF's effort limits (87 N m on
joints 1-4, 12 N m on joints 5-7); gravity at q0 is the feedforward u0.

robodyn.lqr.region_of_attraction estimates the region {V < rho}, V = dx' P dx, in which the
sampled V-dot of the nonlinear, saturated closed loop is negative (a sampled estimate). The
estimate is then checked by simulating the nonlinear loop (the whole loop in C, several runs
at once on a thread pool) from states drawn uniformly inside {V < rho} (all must converge) and
from the shells rho < V < 4 rho and 4 rho < V < 16 rho (most converge too: the estimate is
conservative). A run converges when, after DURATION seconds, |q - q0| and |qd| are below
TOLERANCE on every joint. Joint position limits are not enforced by the simulation.

The figure shows a slice through the 14-dimensional state space: the offsets of joints 2 and
4 on a grid inside their URDF limits, the other joints at q0 and every velocity zero, coloured
by the outcome of the nonlinear simulation, with the boundary of {V < rho} in that slice (an
ellipse); and max |x - x0| (over the 14 coordinates) against time for some of the samples.

With the default, compliant weights it is gravity, not saturation, that bounds the region
(the script prints rho without saturation too: the same): from the upper left of the slice
the arm heads for a second equilibrium, joint 4 bent past its limit, where the weak feedback
balances gravity. With stiff gains (--torque-weight 1e-4) the torques saturate and bound the
estimate instead (rho about 2.4, 26 without saturation), and the whole slice converges.

    python examples/lqr_panda.py [--quick] [--torque-weight R] [--workers N] [--out DIR] [--cache-dir DIR]

Needs example-robot-data (pip install example-robot-data) and matplotlib. Takes about 25 s
on two cores after the Panda's first build (5-10 s); --quick about 5 s.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import NamedTuple

import numpy as np

import robodyn
from robodyn.lqr import LQR, region_of_attraction
from robodyn.plotting import require_matplotlib

OUTPUT = Path(__file__).resolve().parent / "output" / "lqr_panda"
PANDA = "panda_description/urdf/panda.urdf"
FINGERS = ("panda_finger_joint1", "panda_finger_joint2")
READY = np.array([0.0, -np.pi / 4, 0.0, -3 * np.pi / 4, 0.0, np.pi / 2, np.pi / 4])  # [rad]
RATE = 1000.0  # [Hz] the harness's control rate; the LQR is designed at its period
POSITION_WEIGHT, VELOCITY_WEIGHT = 100.0, 1.0  # Q per rad^2 and per (rad/s)^2
DURATION = 5.0  # [s] simulated from each start; the slowest closed-loop mode decays as exp(-3 t)
TOLERANCE = 1e-3  # [rad], [rad/s] on every joint at the end of a run: converged
SHELLS = ((1.0, 4.0), (4.0, 16.0))  # outside the estimate: V / rho in these ranges
SLICE = (1, 3)  # joints 2 and 4 (0-based)
HISTORY_STEP = 10  # keep |x - x0| every 10 ticks (10 ms) for the time-history panel
SIZES = {False: {"inside": 200, "shell": 100, "grid": 33}, True: {"inside": 40, "shell": 20, "grid": 12}}


def panda_urdf() -> Path:
    """The Panda's URDF from the example-robot-data package."""
    try:
        return robodyn.example_robot_data(PANDA)
    except FileNotFoundError as error:
        raise SystemExit(f"this example needs the Panda's URDF: {error}") from None


def design(robot, torque_weight: float, tau_limit) -> LQR:
    Q = np.concatenate((np.full(robot.n, POSITION_WEIGHT), np.full(robot.n, VELOCITY_WEIGHT)))
    return LQR(robot, READY, Q=Q, R=torque_weight, dt=1.0 / RATE, tau_limit=tau_limit)


def shell_states(region, rng, count: int, low: float, high: float) -> np.ndarray:
    """``count`` states with V uniformly distributed in (low rho, high rho), in uniformly random directions."""
    directions = region.sample(count, rng) - region.x0
    values = np.einsum("ki,ij,kj->k", directions, region.P, directions)
    levels = region.rho * rng.uniform(low, high, count)
    return region.x0 + directions * np.sqrt(levels / values)[:, None]


class Outcome(NamedTuple):
    converged: bool  # max |q - q0|, |qd| < TOLERANCE at the end
    final: float  # max |x - x0| at the end (inf: the run failed)
    q: np.ndarray  # the last position
    history: np.ndarray | None  # max |x - x0| every HISTORY_STEP ticks (None: the run failed)


class Runner:
    """Simulates the closed loop from many starts on a thread pool (robodyn.simulate runs the whole loop in C
    without the GIL). Each thread builds its own controller (they are cheap: one Riccati equation)."""

    def __init__(self, robot, make_controller, q0, workers: int):
        self.robot, self.make_controller, self.q0 = robot, make_controller, q0
        self.workers = workers
        self.local = threading.local()

    def one(self, state: np.ndarray) -> Outcome:
        if not hasattr(self.local, "controller"):
            self.local.controller = self.make_controller()
        n = self.robot.n
        try:
            run = robodyn.simulate(self.robot, self.local.controller, duration=DURATION, rate=RATE,
                                   q0=state[:n], qd0=state[n:])
        except (ValueError, ArithmeticError):  # a step failed: the state ran away
            return Outcome(False, np.inf, np.full(n, np.nan), None)
        dx = np.hstack((run.q - self.q0, run.qd))
        final = float(np.max(np.abs(dx[-1])))
        return Outcome(bool(final < TOLERANCE), final, run.q[-1], np.max(np.abs(dx[::HISTORY_STEP]), axis=1))

    def all(self, states: np.ndarray, label: str) -> list:
        """One result per state, in order; a progress line on a terminal."""
        results = [None] * len(states)
        started = last = time.perf_counter()
        show = sys.stderr.isatty()
        with ThreadPoolExecutor(self.workers) as pool:
            futures = {pool.submit(self.one, state): i for i, state in enumerate(states)}
            for done, future in enumerate(as_completed(futures), 1):
                results[futures[future]] = future.result()
                now = time.perf_counter()
                if show and now - last > 0.25:
                    last = now
                    print(f"\r  {label}: {done}/{len(states)} runs, {now - started:.0f} s", end="", file=sys.stderr,
                          flush=True)
        if show and last > started:
            print("\r" + " " * 72 + "\r", end="", file=sys.stderr, flush=True)
        return results


def ellipse(matrix: np.ndarray, level: float, points: int = 200) -> np.ndarray:
    """Boundary of {d : d' matrix d = level} in the plane (points, 2)."""
    angle = np.linspace(0.0, 2 * np.pi, points)
    lower = np.linalg.cholesky(matrix)
    return np.linalg.solve(lower.T, np.sqrt(level) * np.vstack((np.cos(angle), np.sin(angle)))).T


def save_figure(figure, path: Path) -> Path:
    """Written under a temporary name, then renamed (as robodyn.plotting does); no matplotlib version inside."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.png")
    try:
        figure.savefig(temporary, dpi=100, metadata={"Software": None})
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return path


def plot(robot, region, offsets, outcome, histories, path: Path) -> Path:
    require_matplotlib()
    import matplotlib.backends.backend_agg
    import matplotlib.colors
    import matplotlib.figure
    import matplotlib.lines
    import matplotlib.patches

    i, j = SLICE
    names = [name.replace("panda_", "") for name in robot.joint_names]
    figure = matplotlib.figure.Figure(figsize=(11.0, 4.6), layout="constrained")
    matplotlib.backends.backend_agg.FigureCanvasAgg(figure)
    left, right = figure.subplots(1, 2, gridspec_kw={"width_ratios": (1.0, 1.15)})

    a, b = offsets
    step_a, step_b = a[1] - a[0], b[1] - b[0]
    colours = matplotlib.colors.ListedColormap(["#ff9f40", "#8fd18f"])  # not converged, converged
    left.imshow(outcome.astype(float), origin="lower", cmap=colours, vmin=-0.5, vmax=1.5, interpolation="nearest",
                aspect="auto",
                extent=(a[0] - step_a / 2, a[-1] + step_a / 2, b[0] - step_b / 2, b[-1] + step_b / 2))
    cut = ellipse(region.P[np.ix_(SLICE, SLICE)], region.rho)
    left.plot(cut[:, 0], cut[:, 1], color="k", lw=1.6)
    left.plot([0.0], [0.0], "k+", ms=10)
    handles = [matplotlib.patches.Patch(color="#8fd18f", label="converges to q0"),
               matplotlib.patches.Patch(color="#ff9f40", label=f"not within {TOLERANCE:g} after {DURATION:g} s"),
               matplotlib.lines.Line2D([], [], color="k", lw=1.6, label="estimate {V < ρ} in this slice")]
    left.legend(handles=handles, loc="lower right", fontsize=8, framealpha=0.9)
    left.set_xlabel(f"{names[i]} − q0 [rad]")
    left.set_ylabel(f"{names[j]} − q0 [rad]")
    left.set_title(f"slice inside the joint limits: other joints at q0, q̇ = 0 ({outcome.size} runs)", fontsize=10)

    styles = {"inside": ("C0", "inside {V < ρ}"), "shell": ("0.45", "outside, converged"),
              "failed": ("C3", "outside, not converged")}
    labelled = set()
    t = np.arange(next(h for _, h in histories if h is not None).shape[0]) * HISTORY_STEP / RATE
    for kind, history in histories:
        if history is None:
            continue
        colour, label = styles[kind]
        right.semilogy(t[:len(history)], np.maximum(history, 1e-14), color=colour, lw=1.0, alpha=0.85,
                       label=None if kind in labelled else label)
        labelled.add(kind)
    right.axhline(TOLERANCE, color="k", lw=0.8, ls="--", label="convergence tolerance")
    right.set_xlabel("time [s]")
    right.set_ylabel("max |x − x0|  (rad, rad/s)")
    right.set_title("nonlinear closed loop from sampled starts", fontsize=10)
    right.legend(loc="upper right", fontsize=8)
    right.grid(True, alpha=0.3)
    figure.suptitle(f"{robot.name}: discrete LQR at {RATE:g} Hz about q0 = ready, saturated at the URDF efforts; "
                    f"ρ = {region.rho:.3g}", fontsize=11)
    return save_figure(figure, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples and a coarser slice (a few seconds)")
    parser.add_argument("--torque-weight", type=float, default=1.0, metavar="R",
                        help="R per (N m)^2 on every motor (default 1; smaller: stiffer gains)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="simulation threads (default: "
                        "the number of cores)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sampled starts")
    parser.add_argument("--out", type=Path, default=OUTPUT,
                        help="directory for the figure (default: examples/output/lqr_panda)")
    parser.add_argument("--cache-dir", help="robodyn build cache (default: $ROBODYN_CACHE_DIR or ~/.cache/robodyn)")
    args = parser.parse_args(argv)
    if not args.torque_weight > 0.0 or args.workers < 1:
        parser.error("--torque-weight must be positive and --workers at least 1")
    require_matplotlib()
    sizes = SIZES[args.quick]
    rng = np.random.default_rng(args.seed)

    robot = robodyn.load(panda_urdf(), cache_dir=args.cache_dir, lock={name: 0.0 for name in FINGERS}, verbose=True)
    effort = np.array([limit["effort"] for limit in robot.joint_limits], dtype=float)
    began = time.perf_counter()
    lqr = design(robot, args.torque_weight, effort)
    magnitudes = np.abs(lqr.closed_loop_eigenvalues)
    rates = -np.log(magnitudes) * RATE  # the equivalent continuous-time decay rates [1/s]
    print(f"\n{robot!r}: LQR about q0 = {np.array2string(READY, precision=3)} (discrete, dt = {1e3 / RATE:g} ms)")
    print(f"  Q = diag({POSITION_WEIGHT:g} x {robot.n}, {VELOCITY_WEIGHT:g} x {robot.n}), "
          f"R = {args.torque_weight:g} I; "
          f"u0 (gravity) = {np.array2string(lqr.u0, precision=2, suppress_small=True)} N m; "
          f"saturation at {np.array2string(effort, precision=0)} N m")
    print(f"  K: {lqr.K.shape[0]} x {lqr.K.shape[1]}; closed-loop eigenvalues |z| from {magnitudes.min():.4f} to "
          f"{magnitudes.max():.5f} (decay rates {rates.min():.3g} to {rates.max():.3g} 1/s) "
          f"[{time.perf_counter() - began:.2f} s]")

    began = time.perf_counter()
    region = region_of_attraction(robot, lqr)
    region_s = time.perf_counter() - began
    unsaturated = region_of_attraction(robot, design(robot, args.torque_weight, None))
    slice_extent = np.sqrt(region.rho / np.diag(region.P)[list(SLICE)])
    print(f"region of attraction {{V < rho}}: rho = {region.rho:.4g} (V-dot at {region.samples} states, "
          f"{region_s:.2f} s); without saturation rho = {unsaturated.rho:.4g}")
    print(f"  extent along joints {SLICE[0] + 1} and {SLICE[1] + 1} alone: "
          f"{np.array2string(slice_extent, precision=3)} rad")

    runner = Runner(robot, lambda: design(robot, args.torque_weight, effort), READY, args.workers)
    began = time.perf_counter()
    inside = region.sample(sizes["inside"], rng)
    results = runner.all(inside, "inside")
    converged = sum(result.converged for result in results)
    histories = [("inside", result.history) for result in results[:6]]
    print(f"inside {{V < rho}}: {converged}/{len(inside)} converged (worst final max |x - x0| "
          f"{max(result.final for result in results):.2e}; {DURATION:g} s from each start)")
    for low, high in SHELLS:
        states = shell_states(region, rng, sizes["shell"], low, high)
        shell = runner.all(states, f"{low:g}-{high:g} rho")
        count = sum(result.converged for result in shell)
        print(f"shell {low:g} rho < V < {high:g} rho: {count}/{len(states)} converged ({count / len(states):.0%})")
        histories += [("shell", result.history) for result in shell if result.converged][:3]
        histories += [("failed", result.history) for result in shell if not result.converged][:3]
    samples_s = time.perf_counter() - began

    began = time.perf_counter()
    i, j = SLICE
    limits = robot.joint_limits
    a = np.linspace(limits[i]["lower"] - READY[i], limits[i]["upper"] - READY[i], sizes["grid"])
    b = np.linspace(limits[j]["lower"] - READY[j], limits[j]["upper"] - READY[j], sizes["grid"])
    grid = np.tile(region.x0, (b.size * a.size, 1))
    grid[:, i] += np.tile(a, b.size)
    grid[:, j] += np.repeat(b, a.size)
    slice_runs = runner.all(grid, "slice")
    outcome = np.array([result.converged for result in slice_runs]).reshape(b.size, a.size)
    inside_slice = region.contains(grid[:, :robot.n], grid[:, robot.n:])
    agree = bool(np.all(outcome.reshape(-1)[inside_slice]))
    print(f"slice of joints {i + 1} and {j + 1} ({a.size} x {b.size} starts inside the joint limits): "
          f"{np.count_nonzero(outcome)} converge; {np.count_nonzero(inside_slice)} inside the estimate, "
          f"{'all' if agree else 'NOT all'} of which converge [{time.perf_counter() - began:.1f} s]")
    ends = np.array([result.q - READY for result in slice_runs if not result.converged and result.history is not None])
    failed = sum(result.history is None for result in slice_runs)
    if len(ends):  # where the others are going
        centre = np.median(ends, axis=0)
        near = np.count_nonzero(np.max(np.abs(ends - centre), axis=1) < 0.05)
        print(f"  {near} of the other {len(ends)} are within 0.05 rad of q0 + "
              f"{np.array2string(centre, precision=2)} after {DURATION:g} s (another rest position)"
              + (f"; {failed} runs failed" if failed else ""))
    print(f"simulations: {len(inside) + 2 * sizes['shell'] + grid.shape[0]} runs of {DURATION:g} s at {RATE:g} Hz "
          f"on {args.workers} threads, samples {samples_s:.1f} s")
    path = plot(robot, region, (a, b), outcome, histories, args.out / "panda_lqr_roa.png")
    print(f"\nfigure written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
