"""Command line of the runtime: python -m robodyn demo ROBOT.yaml"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def _time_call(function, *args, repeat: int = 5, number: int = 20000) -> float:
    """Best-of-``repeat`` mean seconds per call."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            function(*args)
        best = min(best, (time.perf_counter() - start) / number)
    return best


def demo(path: str, cache_dir: str | None) -> int:
    import robodyn

    robot = robodyn.load(path, cache_dir=cache_dir, verbose=True)
    n = robot.n
    print(f"\n{robot!r}")
    print("parameters: " + (", ".join(f"{k}={v:g}" for k, v in robot.params.items()) or "none"))
    rng = np.random.default_rng(0)
    q = rng.uniform(-1.0, 1.0, n)
    qd = rng.uniform(-1.0, 1.0, n)
    qdd = rng.uniform(-1.0, 1.0, n)
    np.set_printoptions(precision=4, suppress=True)
    print(f"\nstate  q = {q}\n      qd = {qd}\n     qdd = {qdd}")
    tau = robot.inverse_dynamics(q, qd, qdd)
    print(f"inverse dynamics  tau = {tau}")
    print(f"gravity          g(q) = {robot.g(q)}")
    print(f"forward dynamics  qdd = {robot.forward_dynamics(q, qd, tau)}  (recovers the qdd above)")
    print(f"energy  T = {robot.kinetic_energy(q, qd):.6g}, P = {robot.potential_energy(q):.6g}")

    out = np.empty(n)
    out_matrix = np.empty((n, n))
    print("\ntime per call from Python (best of 5 x 20000 calls, this machine):")
    for label, function, args in [
        ("M(q, out=)", robot.M, (q, out_matrix)),
        ("inverse_dynamics(q, qd, qdd, out=)", robot.inverse_dynamics, (q, qd, qdd, None, out)),
        ("forward_dynamics(q, qd, tau, out=)", robot.forward_dynamics, (q, qd, tau, None, out)),
        ("inverse_dynamics(q, qd, qdd)  [allocates]", robot.inverse_dynamics, (q, qd, qdd)),
    ]:
        seconds = _time_call(function, *args)
        print(f"  {label:<44} {seconds * 1e6:7.3f} us  (includes the Python loop, ~15 ns)")

    checks = robot.selfcheck.get("checks", [])
    print(f"\nself-check of the compiled module: {'passed' if robot.selfcheck.get('passed') else 'FAILED'}")
    for check in checks:
        print(f"  {'ok ' if check['passed'] else 'BAD'} {check['name']:<40} {check['error']:.2e}"
              f" (tolerance {check['tolerance']:.0e})")
    return 0 if robot.selfcheck.get("passed") else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m robodyn", description="robodyn runtime tools")
    commands = parser.add_subparsers(dest="command", required=True)
    demo_parser = commands.add_parser("demo", help="load (building if needed) a robot and show torques, timing "
                                                   "and the self-check")
    demo_parser.add_argument("description", help="robot description, e.g. robots/rr.yaml")
    demo_parser.add_argument("--cache-dir", help="cache directory (default: $ROBODYN_CACHE_DIR or ~/.cache/robodyn)")
    args = parser.parse_args(argv)
    from codegen.errors import CodegenError, report

    try:
        return demo(args.description, args.cache_dir)
    except CodegenError as exc:
        return report(exc)


if __name__ == "__main__":
    sys.exit(main())
