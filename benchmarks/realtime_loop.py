"""Real-time closed loop: how late each tick wakes up and how long it computes, at 1 kHz.

    python benchmarks/realtime_loop.py                                   # rr, computed torque, 10 s at 1 kHz
    python benchmarks/realtime_loop.py robots/puma560.yaml --controller slotine-li --duration 5
    python benchmarks/realtime_loop.py --rate 2000 --json realtime.json
    python benchmarks/realtime_loop.py panda.urdf --lock panda_finger_joint1=0 --lock panda_finger_joint2=0

Runs ``robodyn.simulate(..., realtime=True)``: the Python harness sleeps to absolute deadlines
on the monotonic clock and at each tick reads the simulated plant, evaluates the controller
and steps the compiled integrator (real-time runs always take this Python tick loop, even
with a built-in controller). Reported: compute time per tick (read + control + write), jitter
(wake-up time minus deadline) and missed deadlines (ticks that ended after the next tick's
deadline). The process is an ordinary one (no SCHED_FIFO, no isolated CPU), so the numbers
are what a plain Linux process gets under whatever else the machine is running; the load
average is printed next to them for that reason.

The motion is the one of ``python -m robodyn simulate --reference sine``, started on the
reference (zero initial error); ``scenario`` is shared with test_bench_simulation.py. The model
options (``--method``, ``--lock``, ...) and the cache options (``--cache-dir``, ``--force``) are
those of every robodyn command (``robodyn.options``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent


def scenario(robot, controller: str, duration: float):
    """(controller object, q0, qd0): a built-in controller tracking a 0.5 Hz sine that moves every joint,
    starting on the reference. "none" gets the same start state and no reference."""
    import robodyn
    from robodyn.__main__ import default_motion, start_position
    from robodyn.control import BUILTIN

    q0 = start_position(robot)
    reference = default_motion(robot, "sine", duration, q0)
    qd0 = np.ascontiguousarray(reference.evaluate(0.0)[1])
    if controller == "none":
        return robodyn.NoControl(robot), q0, qd0
    return BUILTIN[controller](robot, reference), q0, qd0


def microseconds(seconds) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e6:.1f} us"


def report_lines(loop: dict) -> list[str]:
    """compute, jitter and missed-deadline lines of a ``LoopStats.summary()``."""
    def spread(key: str) -> str:
        return ", ".join(f"{stat} {microseconds(loop[f'{key}_{stat}_s'])}" for stat in ("mean", "p99", "max"))

    return [f"compute per tick: {spread('compute')}",
            f"jitter (wake-up - deadline): {spread('jitter')}",
            f"missed deadlines: {loop['missed_deadlines']} of {loop['ticks']} ticks"]


def run(robot, controller: str = "computed-torque", rate: float = 1000.0, duration: float = 10.0) -> dict:
    """One real-time run; the loop summary plus the load average before and after and the tracking error."""
    import robodyn

    law, q0, qd0 = scenario(robot, controller, duration)
    load_before = os.getloadavg()
    trajectory = robodyn.simulate(robot, law, duration=duration, rate=rate, q0=q0, qd0=qd0, realtime=True)
    summary = trajectory.summary(robot)
    return {"robot": robot.name, "controller": controller, "rate_hz": rate, "duration_s": duration,
            "load_average_before": load_before, "load_average_after": os.getloadavg(),
            "tracking_error_max": summary["tracking_error_max"], "loop": summary["loop"]}


def main(argv=None) -> int:
    from robodyn.control import BUILTIN
    from robodyn.options import add_arguments, from_arguments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("robot", nargs="?", default=str(REPO / "robots" / "rr.yaml"), help="robot description")
    parser.add_argument("--rate", type=float, default=1000.0, help="control rate in Hz (default 1000)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of wall time (default 10)")
    parser.add_argument("--controller", choices=list(BUILTIN), default="computed-torque")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the results to this file")
    add_arguments(parser)
    args = parser.parse_args(argv)
    if not (args.rate > 0 and args.duration > 0):
        parser.error("--rate and --duration must be positive")
    try:
        options = from_arguments(args)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    import robodyn

    robot = robodyn.load(args.robot, options, cache_dir=args.cache_dir, force=args.force)
    result = run(robot, args.controller, args.rate, args.duration)
    loop = result["loop"]
    print(f"{robot.name}: {args.controller}, {args.duration:g} s in real time at {args.rate:g} Hz "
          f"(period {loop['period_s'] * 1e6:.0f} us), wall {loop['wall_time_s']:.3f} s")
    for line in report_lines(loop):
        print(line)
    print(f"tracking error max {result['tracking_error_max']:.3e}; load average "
          f"{result['load_average_before'][0]:.2f} before, {result['load_average_after'][0]:.2f} after")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
