"""LQR at the upright equilibrium of two underactuated robots: the cart-pole and the acrobot.

Each robot has one motor (robots/cartpole.yaml: the cart; robots/acrobot.yaml: the elbow) and a passive
joint. The LQR is designed on the exact discrete-time model of the harness at 1 kHz (``robot.linearize``
with dt: the Jacobians of one RK4 step) and runs in the compiled loop. Each run starts away from the
upright equilibrium; the script prints the closed-loop eigenvalues (continuous-time equivalents), the
estimated region of attraction {V < rho} (robodyn.lqr.region_of_attraction: sampled, conservative), the
largest motor torque and the time to settle, and draws the runs (robodyn.plotting.plot_regulation, with V
and rho).

    python examples/lqr_underactuated.py [--out DIR] [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import robodyn
from robodyn.lqr import LQR, region_of_attraction
from robodyn.plotting import plot_regulation, require_matplotlib

ROBOTS = Path(__file__).resolve().parent.parent / "robots"
OUTPUT = Path(__file__).resolve().parent / "output" / "lqr_underactuated"
RATE = 1000.0  # [Hz]
DURATION = 8.0  # [s]
SETTLED = 1e-3  # |q - q0| (rad or m) and |qd| below this: settled
# robot -> (equilibrium q0, weights, torque limit per joint, disturbed start q, qd)
CASES = {
    "cartpole": (np.array([0.0, np.pi]), dict(Q=[10.0, 10.0, 1.0, 1.0], R=1.0), [20.0, 0.0],
                 np.array([0.3, np.pi - 0.3]), np.array([0.0, 0.5])),
    "acrobot": (np.array([np.pi, 0.0]), dict(Q=[10.0, 10.0, 1.0, 1.0], R=1.0), [0.0, 50.0],
                np.array([np.pi + 0.05, -0.1]), np.array([0.0, 0.0])),
}


def settling_time(run, q0) -> float:
    """First time after which every sample stays within SETTLED of the equilibrium (inf if never)."""
    far = np.max(np.abs(np.hstack((run.q - q0, run.qd))), axis=1) >= SETTLED
    if far[-1]:
        return float("inf")
    return float(run.t[np.flatnonzero(far)[-1] + 1]) if far.any() else 0.0


def run_robot(name: str, out: Path, cache_dir: str | None) -> robodyn.Trajectory:
    q0, weights, tau_limit, q_start, qd_start = CASES[name]
    robot = robodyn.load(ROBOTS / f"{name}.yaml", cache_dir=cache_dir, verbose=True)
    law = LQR(robot, q0, dt=1.0 / RATE, tau_limit=tau_limit, **weights)
    continuous = np.log(law.closed_loop_eigenvalues.astype(complex)) * RATE  # z = exp(s dt)
    region = region_of_attraction(robot, law)
    print(f"\n{robot!r}: motors {', '.join(robot.actuated_joint_names)}, passive "
          f"{', '.join(robot.passive_joint_names)}")
    print(f"  LQR at q0 = {np.array2string(q0, precision=4)}: K = {np.array2string(law.K, precision=3)}")
    print(f"  closed-loop eigenvalues (s = ln z / dt): {np.array2string(np.sort_complex(continuous), precision=3)}")
    print(f"  estimated region of attraction: V = dx' P dx < {region.rho:.4g} (start: V = "
          f"{float(np.hstack((q_start - q0, qd_start)) @ region.P @ np.hstack((q_start - q0, qd_start))):.4g})")
    run = robodyn.simulate(robot, law, duration=DURATION, rate=RATE, q0=q_start, qd0=qd_start)
    motor = run.tau[:, list(robot.actuated)]
    print(f"  from q = {np.array2string(q_start, precision=3)}, qd = {np.array2string(qd_start, precision=3)}: "
          f"settled (|dx| < {SETTLED:g}) after {settling_time(run, q0):.2f} s, max |u| = {np.max(np.abs(motor)):.2f}, "
          f"final |dx| = {np.max(np.abs(np.hstack((run.q[-1] - q0, run.qd[-1])))):.1e}, "
          f"{DURATION / run.loop.wall_time:.0f} simulated s per wall s")
    path = plot_regulation(run, law, out / f"{name}.png", title=f"{name}: LQR at the upright equilibrium",
                           region=region)
    print(f"  figure: {path}")
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="example: python examples/lqr_underactuated.py --out /tmp/lqr")
    parser.add_argument("--out", type=Path, default=OUTPUT,
                        help="directory for the figures (default: examples/output/lqr_underactuated)")
    parser.add_argument("--cache-dir", help="robodyn build cache (default: $ROBODYN_CACHE_DIR or ~/.cache/robodyn)")
    args = parser.parse_args(argv)
    require_matplotlib()
    for name in CASES:
        run_robot(name, args.out, args.cache_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
