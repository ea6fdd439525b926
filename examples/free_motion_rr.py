"""Free motion of the planar two-link arm (robots/rr.yaml), as simulated in the lecture notes.

Zero torque from rest at q = 0 (both links horizontal) for 10 s with viscous joint friction
D = diag(0, 0), diag(30, 30) and diag(80, 80). The notes integrated with an adaptive RK45
(ERR = 1e-3); each case runs here with scipy's RK45 at that tolerance and with the compiled
fixed-step RK4 at 1 kHz, and the two must agree. robodyn.simulate restarts RK45 every control
period, which bounds its step; one RK45 solve over the whole 10 s, as in the notes, takes
far larger steps, and its printed deviation shows how accurate the notes' curves are at that
tolerance. Without friction the total energy must stay
constant; with friction the energy lost must equal the friction work, the integral of
q̇ᵀ D q̇ dt, which checks the generated dynamics against an independent energy balance.

    python examples/free_motion_rr.py [--out DIR] [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from scipy.integrate import cumulative_trapezoid, solve_ivp

import robodyn
from robodyn.plotting import plot_comparison, plot_trajectory

ROBOT = Path(__file__).resolve().parent.parent / "robots" / "rr.yaml"
OUTPUT = Path(__file__).resolve().parent / "output" / "free_motion"
FRICTION = (0.0, 30.0, 80.0)  # D of the notes [N m s/rad]
DURATION = 10.0  # TF [s]
RK4_RATE = 1000.0  # [Hz]
# Free motion holds a zero torque, so the control rate of an adaptive run only sets how often
# the state is recorded: 100 Hz keeps the Python loop around solve_ivp short.
RK45_RATE = 100.0
RK45_TOLERANCE = {"rtol": 1e-3, "atol": 1e-6}  # the notes' ERR = 1e-3 (MATLAB ode45's defaults)


def energy_balance_mismatch(trajectory, damping: float) -> float:
    """max over t of |(E(0) - E(t)) - ∫₀ᵗ q̇ᵀ D q̇ dτ| relative to the total friction work (trapezoid rule)."""
    power = damping * np.sum(trajectory.qd**2, axis=1)
    work = cumulative_trapezoid(power, trajectory.t, initial=0.0)
    energy = trajectory.energy()
    lost = energy[0] - energy
    return float(np.max(np.abs(lost - work)) / work[-1])


def simulate_both(robot):
    """The RK45 run and the RK4 run, from rest at q = 0."""
    q0 = np.zeros(robot.n)
    adaptive = robodyn.simulate(robot, None, duration=DURATION, rate=RK45_RATE, q0=q0, integrator="RK45",
                                **RK45_TOLERANCE)
    fixed = robodyn.simulate(robot, None, duration=DURATION, rate=RK4_RATE, q0=q0, integrator="rk4")
    return adaptive, fixed


def whole_span_deviation(robot, fixed) -> tuple[float, int]:
    """max |q - q_RK4| of one RK45 solve over [0, DURATION] (the notes' run), and its number of
    dynamics evaluations."""
    n, no_torque = robot.n, np.zeros(robot.n)

    def rhs(_t, state):
        q, qd = np.ascontiguousarray(state[:n]), np.ascontiguousarray(state[n:])
        return np.concatenate((qd, robot.forward_dynamics(q, qd, no_torque)))

    solution = solve_ivp(rhs, (0.0, DURATION), np.zeros(2 * n), method="RK45", dense_output=True,
                         **RK45_TOLERANCE)
    if not solution.success:
        raise RuntimeError(f"RK45 over the whole run failed: {solution.message}")
    return float(np.max(np.abs(solution.sol(fixed.t)[:n].T - fixed.q))), int(solution.nfev)


def max_difference(adaptive, fixed) -> float:
    """max |q_RK45 - q_RK4| at the adaptive run's samples (every tenth RK4 sample)."""
    stride = round(RK4_RATE / RK45_RATE)
    if not np.allclose(fixed.t[::stride], adaptive.t):
        raise RuntimeError("the RK4 and RK45 runs are not sampled at common times")
    return float(np.max(np.abs(fixed.q[::stride] - adaptive.q)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUTPUT,
                        help="directory for the figures (default: examples/output/free_motion)")
    parser.add_argument("--cache-dir", help="robodyn build cache (default: $ROBODYN_CACHE_DIR or ~/.cache/robodyn)")
    args = parser.parse_args(argv)

    robot = robodyn.load(ROBOT, cache_dir=args.cache_dir)
    print(f"{robot!r}: free motion from rest at q = 0 for {DURATION:g} s; "
          f"RK45 (rtol {RK45_TOLERANCE['rtol']:g}, atol {RK45_TOLERANCE['atol']:g}) vs RK4 at {RK4_RATE:g} Hz")
    runs = {}
    for damping in FRICTION:
        robot.params["D"] = damping
        adaptive, fixed = simulate_both(robot)
        label = f"D = {damping:g}"
        runs[label] = fixed
        print(f"\n{label}: final q = {np.array2string(fixed.q[-1], precision=6)} rad (RK4), "
              f"{np.array2string(adaptive.q[-1], precision=6)} rad (RK45)")
        print(f"  max |q_RK45 - q_RK4| = {max_difference(adaptive, fixed):.3e} rad")
        deviation, evaluations = whole_span_deviation(robot, fixed)
        print(f"  one RK45 solve over the whole run as in the notes ({evaluations} evaluations): "
              f"max |q - q_RK4| = {deviation:.3e} rad")
        for name, run in (("RK45", adaptive), ("RK4", fixed)):
            if damping == 0.0:
                print(f"  {name}: relative energy drift {run.energy_drift_rel():.3e}")
            else:
                print(f"  {name}: energy lost vs friction work, relative mismatch "
                      f"{energy_balance_mismatch(run, damping):.3e} (sampled at {1.0 / run.loop.period:g} Hz)")
        plot_trajectory(fixed, args.out / f"trajectory_D{damping:g}.png",
                        title=f"rr free motion, {label} N m s/rad (RK4, {RK4_RATE:g} Hz)")
    robot.params.reset()

    for quantity in ("q", "qd", "qdd"):
        plot_comparison(runs, args.out / f"compare_{quantity}.png", quantity=quantity,
                        title=f"rr free motion: {quantity} for viscous friction D [N m s/rad]")
    print(f"\nfigures written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
