"""Trajectory tracking with each built-in controller, and computed torque with a wrong model.

A rest-to-rest quintic moves every joint of the 3-DOF arm with motors and friction
(robots/rrr.yaml) and, with --puma, of the Puma 560 (robots/puma560.yaml, whose first build
takes about 10 s). PD lags and sags under gravity; PD + gravity removes the sag.
Computed torque and Slotine-Li cancel the dynamics and track closely while their model is
exact. By default they compensate Coulomb friction with the sign of the measured velocity,
which chatters near rest (the start and the goal) and lets the joints stick or creep; the
runs marked "friction at q̇_r" compensate it along the plan instead (friction="reference")
and track an order of magnitude closer. The last run gives computed torque (friction at q̇_r)
a model whose forearm mass is 20 % too large, to show how the error grows with a wrong model.

    python examples/tracking.py [--puma] [--out DIR] [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import robodyn
from robodyn.plotting import plot_comparison, plot_trajectory

ROBOTS = Path(__file__).resolve().parent.parent / "robots"
OUTPUT = Path(__file__).resolve().parent / "output" / "tracking"
CONTROLLERS = {"pd": robodyn.PD, "pd-gravity": robodyn.PDGravity, "computed-torque": robodyn.ComputedTorque,
               "slotine-li": robodyn.SlotineLi}
# robot -> (start, goal) [rad], inside the joint limits
MOTIONS = {
    "rrr": ([0.0, 0.3, -0.6], [1.2, -0.4, 0.8]),
    "puma560": ([0.0, 0.4, -0.8, 0.0, 0.5, 0.0], [1.0, -0.2, 0.3, 0.8, -0.6, 1.0]),
}
MOVE_TIME = 2.0  # [s] the quintic's duration
DURATION = 3.0  # [s] simulated: the move and one second of holding the goal
RATE = 1000.0  # [Hz] control rate (RK4, one step per period)
WRONG_PARAMETER, WRONG_FACTOR = "m3", 1.2  # the forearm mass, in both robots


def track(robot, controller) -> robodyn.Trajectory:
    start = controller.reference.evaluate(0.0)[0]
    return robodyn.simulate(robot, controller, duration=DURATION, rate=RATE, q0=start, integrator="rk4")


def error_norms(trajectory) -> np.ndarray:
    """(max |e|, rms e) over all joints and samples."""
    error = trajectory.tracking_error
    return np.array([np.max(np.abs(error)), np.sqrt(np.mean(error**2))])


def table_row(label: str, trajectory) -> str:
    largest, rms = error_norms(trajectory)
    speed = trajectory.t[-1] / trajectory.loop.wall_time
    return f"{label:<36} {largest:>12.3e} {rms:>12.3e} {np.max(np.abs(trajectory.tau)):>13.3f} {speed:>14.0f}"


def run_robot(name: str, out: Path, cache_dir: str | None) -> None:
    robot = robodyn.load(ROBOTS / f"{name}.yaml", cache_dir=cache_dir, verbose=True)
    start, goal = MOTIONS[name]
    reference = robodyn.Quintic(start, goal, duration=MOVE_TIME)
    print(f"\n{robot!r}: quintic over {MOVE_TIME:g} s, {DURATION:g} s simulated at {RATE:g} Hz (RK4)")
    print(f"{'controller':<36} {'max |e| rad':>12} {'rms e rad':>12} {'max |tau| N m':>13} {'sim s/wall s':>14}")
    runs = {}
    for label, controller_class in CONTROLLERS.items():
        runs[label] = trajectory = track(robot, controller_class(robot.copy(), reference))
        print(table_row(label, trajectory))
        plot_trajectory(trajectory, out / name / f"{label}.png", title=f"{name}: {label}")
    for label in ("computed-torque", "slotine-li"):
        planned = CONTROLLERS[label](robot.copy(), reference, friction="reference")
        runs[f"{label}, friction at q̇_r"] = trajectory = track(robot, planned)
        print(table_row(f"{label}, friction at q̇_r", trajectory))
    plot_trajectory(trajectory, out / name / "slotine-li_friction_at_reference.png",
                    title=f"{name}: slotine-li, friction at q̇_r")
    plot_comparison(runs, out / name / "compare_tracking_error.png", quantity="tracking_error",
                    title=f"{name}: tracking error q_r − q per controller")

    wrong_model = robot.copy()
    wrong_model.params[WRONG_PARAMETER] *= WRONG_FACTOR
    label = f"computed-torque, {WRONG_PARAMETER} x{WRONG_FACTOR:g}"  # friction at q̇_r, like its exact peer
    wrong = track(robot, robodyn.ComputedTorque(wrong_model, reference, friction="reference"))
    print(table_row(label, wrong))
    exact = runs["computed-torque, friction at q̇_r"]
    max_growth, rms_growth = error_norms(wrong) / error_norms(exact)
    print(f"{WRONG_PARAMETER} x{WRONG_FACTOR:g} in the model ({robot.params[WRONG_PARAMETER]:g} -> "
          f"{wrong_model.params[WRONG_PARAMETER]:g} kg) multiplies the tracking error by {max_growth:.2f} (max), "
          f"{rms_growth:.2f} (rms)")
    plot_trajectory(wrong, out / name / "computed-torque_wrong_model.png", title=f"{name}: {label}")
    plot_comparison({"exact model": exact, f"{WRONG_PARAMETER} x{WRONG_FACTOR:g}": wrong},
                    out / name / "compare_wrong_model.png", quantity="tracking_error",
                    title=f"{name}: computed torque, exact vs wrong model")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--puma", action="store_true", help="also run the Puma 560 (slow first build)")
    parser.add_argument("--out", type=Path, default=OUTPUT,
                        help="directory for the figures (default: examples/output/tracking)")
    parser.add_argument("--cache-dir", help="robodyn build cache (default: $ROBODYN_CACHE_DIR or ~/.cache/robodyn)")
    args = parser.parse_args(argv)
    for name in ("rrr", "puma560") if args.puma else ("rrr",):
        run_robot(name, args.out, args.cache_dir)
    print(f"\nfigures written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
