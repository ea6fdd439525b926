"""Command line of the runtime.

    python -m robodyn demo ROBOT.yaml
    python -m robodyn simulate ROBOT.yaml --controller computed-torque --duration 5 --rate 1000 --json out.json

Every subcommand takes the same model, cache and output options (--quiet, --debug) as
``python -m codegen`` (robodyn.options); exit statuses: robodyn.errors.EXIT_STATUS_HELP.
"""

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


def _load(args):
    import robodyn

    from .options import from_arguments

    return robodyn.load(args.description, from_arguments(args), cache_dir=args.cache_dir, force=args.force,
                        verbose=False if args.quiet else None)


def demo(args) -> int:
    robot = _load(args)
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
    status = robot.selfcheck.get("status", "passed")
    print(f"\nself-check of the compiled module: {status}" + (" (built with --no-selfcheck)" if status == "skipped"
                                                               else ""))
    for check in checks:
        print(f"  {'ok ' if check['passed'] else 'BAD'} {check['name']:<40} {check['error']:.2e}"
              f" (tolerance {check['tolerance']:.0e})")
    return 3 if robot.selfcheck.get("passed") is False else 0


def default_motion(robot, reference: str, duration: float, start: np.ndarray):
    """A smooth motion that moves every joint: 0.5 rad (revolute) or 0.1 m (prismatic), alternating in
    sign, kept 10 % inside the joint limits; reached by a quintic over the first half of the run
    (or: held, stepped to at 10 % of the run, or oscillated to and from at 0.5 Hz)."""
    from .references import Hold, Quintic, Sine, Step

    offsets = np.array([0.5 if kind == "revolute" else 0.1 for kind in robot.joint_types])
    offsets *= np.where(np.arange(robot.n) % 2 == 0, 1.0, -1.0)
    goal = start + offsets
    for i, limit in enumerate(robot.joint_limits):
        lower, upper = limit.get("lower"), limit.get("upper")
        if lower is not None and upper is not None:
            margin = 0.1 * (upper - lower)
            goal[i] = min(max(goal[i], lower + margin), upper - margin)
    if reference == "hold":
        return Hold(goal)
    if reference == "step":
        return Step(start, goal, time=0.1 * duration)
    if reference == "sine":  # between start and goal at 0.5 Hz, leaving start at rest
        return Sine(0.5 * (start + goal), 0.5 * (goal - start), frequency=0.5, phase=-0.5 * np.pi)
    return Quintic(start, goal, duration=max(0.5 * duration, 1e-3))


def start_position(robot) -> np.ndarray:
    """Zero, or the middle of a joint's limits when zero is outside them."""
    q0 = np.zeros(robot.n)
    for i, limit in enumerate(robot.joint_limits):
        lower, upper = limit.get("lower"), limit.get("upper")
        if lower is not None and upper is not None and not lower <= 0.0 <= upper:
            q0[i] = 0.5 * (lower + upper)
    return q0


def _vector_option(text: str | None, n: int, option: str) -> np.ndarray | None:
    if text is None:
        return None
    try:
        values = np.array([float(v) for v in text.split(",")])
    except ValueError:
        raise ValueError(f"{option} {text!r}: expected comma-separated numbers") from None
    if values.shape != (n,):
        raise ValueError(f"{option}: expected {n} values, got {values.shape[0]}")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{option} {text!r}: the values must be finite")
    return values


def _check_output(path: str | None, option: str) -> str | None:
    """Refuse, before a long run, an output file that could not be written: its nearest existing
    ancestor must be a writable directory (missing directories are created, as for the plot), and an
    existing file must be a regular file (the output replaces it by a rename: a device, a FIFO or a
    socket must not be replaced). Returns the path to write: a symbolic link's target."""
    import os
    import stat
    from pathlib import Path

    if path is None:
        return None
    if not path.strip() or "\x00" in path:
        raise ValueError(f"{option}: {'empty file name' if not path.strip() else 'a file name cannot contain NUL'}")
    target = Path(path).absolute()
    if target.is_symlink():
        target = target.resolve()  # write the link's target, keep the link
    if target.is_dir():
        raise ValueError(f"{option} {path}: is a directory")
    if target.exists() and not stat.S_ISREG(target.stat().st_mode):
        raise ValueError(f"{option} {path}: exists and is not a regular file (a device, FIFO or socket is "
                         "never replaced)")
    if target.exists() and not os.access(target, os.W_OK):
        raise ValueError(f"{option} {path}: the file is not writable")
    ancestor = target.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ValueError(f"{option} {path}: {ancestor} is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {path}: directory {ancestor} is not writable")
    return str(target)


def simulate_command(args) -> int:
    import json

    import robodyn

    from .control import BUILTIN, NoControl
    from .options import parse_assignments

    json_path = _check_output(args.json, "--json")
    plot_path = _check_output(args.plot, "--plot")
    robot = _load(args)
    for name, value in parse_assignments(args.set, "--set").items():
        robot.params[name] = value
    model = robot.copy()
    for name, value in parse_assignments(args.model_set, "--model-set").items():
        model.params[name] = value
    q0 = _vector_option(args.q0, robot.n, "--q0")
    q0 = start_position(robot) if q0 is None else q0
    if args.controller == "none":
        controller = NoControl(model)
    else:
        reference = default_motion(robot, args.reference, args.duration, q0)
        options = {} if args.omega is None else {"omega": args.omega}
        if args.controller in ("computed-torque", "slotine-li"):
            options["friction"] = args.friction
        controller = BUILTIN[args.controller](model, reference, **options)
    trajectory = robodyn.simulate(robot, controller, duration=args.duration, rate=args.rate, q0=q0,
                                  integrator=args.integrator, substeps=args.substeps, realtime=args.realtime,
                                  spin=max(args.spin_us, 0.0) * 1e-6)
    summary = trajectory.summary(robot)
    summary.update(controller=args.controller, reference=None if args.controller == "none" else args.reference,
                   integrator=args.integrator, substeps=args.substeps, rate_hz=args.rate,
                   gains=_gains(controller))
    if not args.quiet:
        _print_summary(summary)
    if json_path:
        from pathlib import Path

        _write_output(lambda: _write_atomically(Path(json_path), json.dumps(summary, indent=2) + "\n"),
                      "--json", args.json)
    if plot_path:
        from .plotting import plot_trajectory

        _write_output(lambda: plot_trajectory(trajectory, plot_path, title=f"{robot.name}: {args.controller}, "
                                              f"{args.integrator} at {args.rate:g} Hz"), "--plot", args.plot)
        if not args.quiet:
            print(f"plot written to {args.plot}")
    return 0


def _write_output(write, option: str, path: str) -> None:
    """Run ``write``; a failure to write is the destination's problem, named by its option (exit 1)."""
    import errno

    from .errors import StorageError

    try:
        write()
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise StorageError(f"{option} {path}: no space left on the device") from None
        raise ValueError(f"{option} {path}: cannot write the file: {exc.strerror or exc}") from None


def _write_atomically(path, text: str) -> None:
    """Write ``path`` completely or not at all (a full disk leaves no truncated file)."""
    import os
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(temporary, 0o666 & ~umask)  # a plain file's mode, not mkstemp's private 0600
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def _gains(controller) -> dict:
    if controller.law == "none":
        return {}
    if controller.law == "slotine-li":
        return {"lambda": controller.kp.tolist(), "k": controller.kd.tolist()}
    return {"kp": controller.kp.tolist(), "kd": controller.kd.tolist()}


def _print_summary(summary: dict) -> None:
    loop = summary["loop"]

    def us(value):
        return "n/a" if value is None else f"{value * 1e6:.2f} us"

    print(f"\n{summary['robot']}: {summary['duration_s']:g} s at {summary['rate_hz']:g} Hz, "
          f"controller {summary['controller']}, {summary['integrator']} x{summary['substeps']}")
    if summary["tracking_error_max"] is not None:
        print(f"tracking error: max {summary['tracking_error_max']:.3e}, rms {summary['tracking_error_rms']:.3e}")
    if summary["controller"] == "none":  # under control the controller's work changes the energy
        print(f"relative energy drift: {summary['energy_drift_rel']:.3e}")
    print(f"loop: wall {loop['wall_time_s']:.3f} s for {loop['ticks']} ticks "
          f"({summary['duration_s'] / max(loop['wall_time_s'], 1e-12):.0f} simulated s per wall s); "
          f"compute mean {us(loop['compute_mean_s'])}, p99 {us(loop['compute_p99_s'])}, "
          f"max {us(loop['compute_max_s'])}")
    if loop["realtime"]:
        print(f"real time: jitter mean {us(loop['jitter_mean_s'])}, p99 {us(loop['jitter_p99_s'])}, "
              f"max {us(loop['jitter_max_s'])}; missed deadlines {loop['missed_deadlines']}")


EPILOG = """examples:
  python -m robodyn demo robots/rr.yaml
  python -m robodyn simulate robots/rrr.yaml --controller slotine-li --duration 5 --json run.json --plot run.png
  python -m robodyn simulate panda.urdf --lock panda_finger_joint1=0 --lock panda_finger_joint2=0
"""


def main(argv: list[str] | None = None) -> int:
    from . import __version__
    from .control import BUILTIN
    from .errors import EXIT_STATUS_HELP, run_command
    from .options import add_arguments, from_arguments
    from .simulation import INTEGRATORS

    parser = argparse.ArgumentParser(prog="python -m robodyn", description="robodyn runtime tools",
                                     epilog=EPILOG + "\n" + EXIT_STATUS_HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"robodyn {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    demo_parser = commands.add_parser("demo", help="load (building if needed) a robot and show torques, timing "
                                                   "and the self-check",
                                      epilog="example:\n  python -m robodyn demo robots/rr.yaml\n\n"
                                             + EXIT_STATUS_HELP,
                                      formatter_class=argparse.RawDescriptionHelpFormatter)
    demo_parser.add_argument("description", help="robot description (YAML or URDF), e.g. robots/rr.yaml")
    add_arguments(demo_parser)

    sim = commands.add_parser("simulate", help="closed-loop simulation with a built-in controller; prints (and "
                                               "optionally saves) tracking error, energy drift and loop timing",
                              epilog="example:\n  python -m robodyn simulate robots/rrr.yaml --controller slotine-li "
                                     "--duration 5 --json run.json\n\n" + EXIT_STATUS_HELP,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sim.add_argument("description", help="robot description (YAML or URDF), e.g. robots/rr.yaml")
    sim.add_argument("--controller", choices=list(BUILTIN), default="computed-torque",
                     help="control law (default computed-torque; none: free motion)")
    sim.add_argument("--duration", type=float, default=5.0, help="simulated seconds (default 5)")
    sim.add_argument("--rate", type=float, default=1000.0, help="control rate in Hz (default 1000)")
    sim.add_argument("--reference", choices=["hold", "step", "sine", "quintic"], default="quintic",
                     help="desired motion (default quintic: a smooth move of every joint)")
    sim.add_argument("--realtime", action="store_true", help="pace the loop to the wall clock")
    sim.add_argument("--spin-us", type=float, default=200.0,
                     help="real time: busy-wait this long before each deadline instead of sleeping (default 200)")
    sim.add_argument("--integrator", default="rk4",
                     help=f"{', '.join(INTEGRATORS)} (compiled) or a solve_ivp method such as RK45 (default rk4)")
    sim.add_argument("--substeps", type=int, default=1, help="integration steps per control period (default 1)")
    sim.add_argument("--omega", type=float, help="controller bandwidth in rad/s for the default gains (default 20)")
    sim.add_argument("--friction", choices=["measured", "reference"], default="measured",
                     help="computed torque / Slotine-Li: compensate friction at the measured velocity (exact "
                          "law, default) or at the reference velocity (no Coulomb chatter near rest)")
    sim.add_argument("--q0", help="initial joint positions, comma-separated (default: zero or mid-limits)")
    sim.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                     help="set a parameter of the simulated robot (repeatable)")
    sim.add_argument("--model-set", action="append", default=[], metavar="NAME=VALUE",
                     help="set a parameter of the controller's model only: a deliberately wrong model")
    sim.add_argument("--plot", metavar="FILE.png", help="save q, qd, qdd, tau and tracking error (needs matplotlib)")
    sim.add_argument("--json", metavar="FILE.json", help="write the summary as JSON")
    add_arguments(sim)
    args = parser.parse_args(argv)
    try:
        from_arguments(args)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    if args.command == "simulate":
        if not (0 < args.duration <= 1e6 and 0 < args.rate <= 1e6 and args.duration * args.rate <= 1e7):
            parser.error("--duration and --rate must be positive and finite, at most 1e6 each, and "
                         "duration x rate at most 1e7 ticks")
        if args.rate < 1 / 86400:
            parser.error("--rate must be at least one tick a day (1/86400 Hz)")
        if not 1 <= args.substeps <= 10000:
            parser.error("--substeps must be between 1 and 10000")
        if not 0 <= args.spin_us < 1e6:
            parser.error("--spin-us must be at least 0 and finite")
        if args.omega is not None and not 0 < args.omega < 1e9:
            parser.error("--omega must be positive and finite")
    return run_command(simulate_command if args.command == "simulate" else demo, args, debug=args.debug)


if __name__ == "__main__":
    sys.exit(main())
