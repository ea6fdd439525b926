"""Command line of the runtime.

    python -m robodyn demo ROBOT.yaml
    python -m robodyn simulate ROBOT.yaml --controller computed-torque --duration 5 --rate 1000 --json out.json
    python -m robodyn simulate robots/biglide.yaml --plot biglide.png   # a closed chain: its platform's circle
    python -m robodyn excite ROBOT.yaml --duration 20 --harmonics 5 --out trajectory.csv

Every subcommand takes the same model, cache and output options (--quiet, --debug) as
``python -m codegen`` (robodyn.options); exit statuses: robodyn.errors.EXIT_STATUS_HELP.
"""

from __future__ import annotations

import argparse
import math
import re
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


def _load_for_identification(args):
    """_load, refusing a floating base: the commands plan and fit joint trajectories of a fixed base."""
    robot = _load(args)
    if getattr(robot, "is_floating_base", False):
        raise ValueError(f"{robot.name} has a floating base: excite, measure and identify plan and fit joint "
                         "trajectories of a fixed base (a legged robot's excitation needs contacts and its base rows "
                         "force measurements); its regressor is compiled: fit robot.base_regressor(q, v, a) "
                         "directly (docs/floating_base.md)")
    return robot


def demo(args) -> int:
    robot = _load(args)
    n = robot.n
    print(f"\n{robot!r}")
    print("parameters: " + (", ".join(f"{k}={v:g}" for k, v in robot.params.items()) or "none"))
    if robot.is_underactuated and not robot.is_closed_chain:
        print(f"motors: {', '.join(robot.actuated_joint_names)}; passive (no motor): "
              f"{', '.join(robot.passive_joint_names)}")
    rng = np.random.default_rng(0)
    q = _demo_position(robot, rng)
    qd = rng.uniform(-1.0, 1.0, n)
    qdd = rng.uniform(-1.0, 1.0, n)
    np.set_printoptions(precision=4, suppress=True)
    constrained = robot.is_constrained
    if constrained:  # tree coordinates: velocities and accelerations must keep the loops closed
        from .closed_chain import ConstrainedDynamics

        model = ConstrainedDynamics(robot)
        qd[model.passive] = model.passive_velocities(q, qd[model.actuated])
        qdd, _ = model.forward_dynamics(q, qd, np.zeros(len(model.actuated)))
    if robot.is_closed_chain and not constrained:
        platform = ", ".join(f"{name} = {value:.4f}" for name, value in zip(robot.task_coordinates, robot.dgm(q)))
        print(f"\nplatform {platform} "
              f"(assembly mode {robot.assembly_mode:+d}); singularity measures {robot.singularity_measures(q)}")
    print(f"\nstate  q = {_shown(q)}\n      qd = {_shown(qd)}\n     qdd = {_shown(qdd)}")
    tau = robot.inverse_dynamics(q, qd, qdd)
    print(f"inverse dynamics  tau = {_shown(tau)}")
    print(f"gravity          g(q) = {_shown(robot.g(q))}")
    if constrained:
        print("forward dynamics: by multipliers (robodyn.closed_chain), the accelerations above under no torque; "
              "the tree's tau includes the loops' constraint forces")
    else:
        print(f"forward dynamics  qdd = {_shown(robot.forward_dynamics(q, qd, tau))}  (recovers the qdd above)")
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
        if constrained and function == robot.forward_dynamics:
            continue
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


def _demo_position(robot, rng) -> np.ndarray:
    """A random position in [-1, 1]; for a closed chain one where it assembles, away from its singularities
    (with a closed form), or the assembled start (without); a floating base's orientation a random unit
    quaternion."""
    if robot.is_floating_base:
        q = rng.uniform(-1.0, 1.0, robot.nq)
        q[3:7] /= np.linalg.norm(q[3:7])
        return q
    if not robot.is_closed_chain:
        return rng.uniform(-1.0, 1.0, robot.n)
    if robot.is_constrained:
        return start_position(robot)
    for _ in range(1000):
        q = rng.uniform(-1.0, 1.0, robot.n) * rng.uniform(0.0, 1.0)
        if np.all(np.isfinite(robot.dgm_modes(q))) and np.all(np.abs(robot.singularity_measures(q)[2:]) > 0.2):
            return q
    return start_position(robot)


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
    """Zero, or the middle of a joint's limits when zero is outside them. A closed chain simulated in its tree
    coordinates (no closed form) starts where the loops close: its actuated joints there, the passive ones
    solved for from a few guesses."""
    q0 = np.zeros(robot.n)
    for i, limit in enumerate(robot.joint_limits):
        lower, upper = limit.get("lower"), limit.get("upper")
        if lower is not None and upper is not None and not lower <= 0.0 <= upper:
            q0[i] = 0.5 * (lower + upper)
    if robot.is_constrained:
        from .closed_chain import ConstrainedDynamics

        model = ConstrainedDynamics(robot)
        for guess in np.linspace(-np.pi, np.pi, 9)[1:]:
            try:
                return model.assemble(q0[model.actuated], np.full(len(model.passive), guess))
            except ValueError:
                continue
        raise ValueError(f"{robot.name}: the loops do not close with the actuated joints at "
                         f"{q0[model.actuated].tolist()}; give a start that does with --q0 (every joint)")
    return q0


_PI_MULTIPLE = re.compile(r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)?)\s*\*?\s*pi\s*(?:/\s*(\d+(?:\.\d*)?))?\s*$")


def _number(text: str) -> float:
    """A number, or a multiple of pi: "pi", "-pi/2", "2pi", "0.5*pi" (no expression is evaluated)."""
    match = _PI_MULTIPLE.match(text)
    if match is None:
        return float(text)
    factor = match.group(1)
    factor = -1.0 if factor == "-" else 1.0 if factor in ("", "+") else float(factor)
    return factor * math.pi / (float(match.group(2)) if match.group(2) else 1.0)


def _vector_option(text: str | None, n: int, option: str) -> np.ndarray | None:
    if text is None:
        return None
    try:
        values = np.array([_number(v) for v in text.split(",")])
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"{option} {text!r}: expected comma-separated numbers (or multiples of pi: pi, -pi/2, "
                         "2*pi)") from None
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
    import tempfile
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
    try:  # what access() cannot tell: root's writes refused (/proc, /sys), a file system mounted read-only
        os.rmdir(tempfile.mkdtemp(prefix=".robodyn-probe-", dir=ancestor))
    except OSError as exc:
        raise ValueError(f"{option} {path}: cannot write in {ancestor} ({exc.strerror or exc})") from None
    return str(target)


def simulate_command(args) -> int:
    import json

    import robodyn

    from .control import BUILTIN, NoControl, ZeroTorque
    from .options import parse_assignments
    from .task_space import closed_form

    json_path = _check_output(args.json, "--json")
    plot_path = _check_output(args.plot, "--plot")
    if plot_path:  # before a long run, not after it
        from .plotting import require_matplotlib

        require_matplotlib()
    robot = _load(args)
    for name, value in parse_assignments(args.set, "--set").items():
        robot.params[name] = value
    model = robot.copy()
    for name, value in parse_assignments(args.model_set, "--model-set").items():
        model.params[name] = value
    if robot.is_floating_base:
        return _simulate_floating_base(args, robot, model, json_path, plot_path)
    if args.contacts:
        print("error: --contacts is for floating-base robots (a URDF with --base floating, or a YAML description "
              "with base: {floating: true, ...}); robodyn.simulate(..., contacts=) holds frames of any robot",
              file=sys.stderr)
        return 2
    if args.controller == "standing":
        print("error: --controller standing is for floating-base robots standing on --contacts (a URDF with --base "
              "floating); a fixed-base robot: --controller none, lqr or one of the tracking controllers",
              file=sys.stderr)
        return 2
    constrained = robot.is_constrained
    equilibrium = _vector_option(args.equilibrium, robot.n, "--equilibrium")
    if equilibrium is not None and args.controller not in (None, "lqr"):
        print(f"error: --equilibrium is for --controller lqr (got --controller {args.controller})", file=sys.stderr)
        return 2
    if args.controller is None:
        if equilibrium is not None:
            args.controller = "lqr"
        elif robot.is_underactuated:
            args.controller = "none"
            if not args.quiet:
                print(f"note: {robot.name} is underactuated (no motor on {', '.join(robot.passive_joint_names)}): "
                      "computed torque cannot track a motion of every joint, so this runs free motion; stabilise "
                      "an equilibrium with --controller lqr --equilibrium Q", file=sys.stderr)
        else:
            args.controller = "none" if constrained else "computed-torque"
    if args.controller == "lqr" and equilibrium is None:
        print("error: --controller lqr needs --equilibrium: the joint positions to hold (e.g. 0,pi for "
              "robots/cartpole.yaml)", file=sys.stderr)
        return 2
    elif constrained and args.controller != "none":
        print(f"error: --controller {args.controller}: {robot.name} is a closed chain without a closed-form model "
              "(it is simulated with multipliers); the built-in controllers need one. Use --controller none, or "
              "robodyn.simulate with a controller of your own", file=sys.stderr)
        return 2
    q0 = _vector_option(args.q0, robot.n, "--q0")
    if q0 is not None and robot.is_closed_chain and not constrained:
        try:
            robot.dgm(q0)
        except ValueError:
            raise ValueError(f"--q0 {args.q0}: {robot.name} cannot be assembled there in its assembly mode "
                             f"{robot.assembly_mode:+d}; give actuated positions where it can") from None
    if q0 is None and equilibrium is not None:  # a disturbed start near the equilibrium
        q0 = equilibrium + LQR_START_OFFSET
    q0 = start_position(robot) if q0 is None else q0
    platform = closed_form(robot)  # a closed chain with dgm and igm: the platform is reported and plotted
    reference_name = args.reference or ("circle" if platform and args.controller == "computed-torque" else "quintic")
    if reference_name == "circle" and args.controller != "none" and not platform:
        print(f"error: --reference circle: {robot.name} is not a closed chain with a closed-form geometry (the "
              "platform's circle needs its direct and inverse geometric models)", file=sys.stderr)
        return 2
    path_reference = None  # the platform's path, when one is tracked
    if args.controller == "none":
        controller = ZeroTorque(robot.n) if constrained else NoControl(model)
    elif args.controller == "lqr":
        from .lqr import LQR

        reference_name = "hold"
        efforts = [limit["effort"] for limit in robot.joint_limits]  # a joint without one is not saturated
        tau_limit = ([e if e is not None and math.isfinite(e) else np.finfo(float).max for e in efforts]
                     if any(e is not None for e in efforts) else None)
        controller = LQR(model, equilibrium, dt=1.0 / args.rate, tau_limit=tau_limit)
    elif reference_name == "circle":
        from .task_space import TaskComputedTorque, platform_circle

        path_reference = platform_circle(model, q0, radius=args.radius, duration=CIRCLE_SHARE * args.duration)
        controller = TaskComputedTorque(model, path_reference, friction=args.friction,
                                        **({} if args.omega is None else {"omega": args.omega}))
    else:
        options = {} if args.omega is None else {"omega": args.omega}
        if args.controller in ("computed-torque", "slotine-li"):
            options["friction"] = args.friction
        controller = BUILTIN[args.controller](model, default_motion(robot, reference_name, args.duration, q0),
                                              **options)
    from .simulation import SingularityError

    try:
        trajectory = robodyn.simulate(robot, controller, duration=args.duration, rate=args.rate, q0=q0,
                                      integrator=args.integrator, substeps=args.substeps, realtime=args.realtime,
                                      spin=max(args.spin_us, 0.0) * 1e-6)
    except SingularityError as error:  # one line on the command line, with what to change
        raise ValueError(_singularity_message(error)) from None
    summary = trajectory.summary(robot)
    summary.update(controller=args.controller, reference=None if args.controller == "none" else reference_name,
                   integrator=args.integrator, substeps=args.substeps, rate_hz=args.rate,
                   gains=_gains(controller), friction=_has_friction(robot, trajectory.qd[0]))
    x_ref = None
    if platform:
        x_ref = None if path_reference is None else path_reference.path.evaluate(trajectory.t)[0]
        summary.update(_platform_summary(robot, model, trajectory, x_ref, path_reference))
    if not args.quiet:
        _print_summary(summary)
    if json_path:
        from pathlib import Path

        _write_output(lambda: _write_atomically(Path(json_path), json.dumps(summary, indent=2) + "\n"),
                      "--json", args.json)
    if plot_path:
        from .plotting import plot_platform, plot_trajectory

        title = f"{robot.name}: {args.controller}, {args.integrator} at {args.rate:g} Hz"
        if platform:
            _write_output(lambda: plot_platform(trajectory, plot_path, x_ref=x_ref, title=title, model=model),
                          "--plot", args.plot)
        elif args.controller == "lqr":
            from .plotting import plot_regulation

            _write_output(lambda: plot_regulation(trajectory, controller, plot_path, title=title), "--plot", args.plot)
        else:
            _write_output(lambda: plot_trajectory(trajectory, plot_path, title=title), "--plot", args.plot)
        if not args.quiet:
            print(f"plot written to {args.plot}")
    return 0


def _simulate_floating_base(args, robot, model, json_path, plot_path) -> int:
    """simulate for a floating base: free motion, or standing on --contacts under a whole-body PD with gravity
    compensation (robodyn.whole_body), integrated on SE(3) x R^n."""
    import json

    import robodyn

    from .control import ZeroTorque

    contacts = [name.strip() for name in args.contacts.split(",")] if args.contacts else None
    controller_name = args.controller or ("standing" if contacts else "none")
    if controller_name not in ("none", "standing") or args.equilibrium is not None:
        print(f"error: {robot.name} has a floating base: --controller none (free motion) or standing (a whole-body "
              "PD holding --q0 on --contacts); the joint-space controllers and lqr are for fixed bases",
              file=sys.stderr)
        return 2
    if controller_name == "standing" and not contacts:
        print("error: --controller standing needs --contacts: the link frames that touch the ground, e.g. "
              "--contacts FL_FOOT,FR_FOOT,HL_FOOT,HR_FOOT", file=sys.stderr)
        return 2
    q0 = _vector_option(args.q0, robot.nq, "--q0")
    q0 = robot.neutral() if q0 is None else robot._positions(q0, "--q0")
    if controller_name == "standing":
        from .contact import ContactDynamics
        from .whole_body import WholeBodyPD

        controller = WholeBodyPD(model, q0, ContactDynamics(model, contacts))
    else:
        controller = ZeroTorque(robot.n)
    trajectory = robodyn.simulate(robot, controller, duration=args.duration, rate=args.rate, q0=q0,
                                  integrator=args.integrator, substeps=args.substeps, contacts=contacts)
    summary = trajectory.summary(robot)
    summary.update(controller=controller_name, reference=None, integrator=args.integrator, substeps=args.substeps,
                   rate_hz=args.rate, gains=None, contacts=contacts,
                   base_displacement_max_m=float(np.max(np.linalg.norm(trajectory.q[:, :3] - q0[:3], axis=1))))
    if trajectory.contact_forces is not None:
        summary["contact_force_vertical_min_N"] = float(np.min(trajectory.contact_forces[:, 2::3]))
    if not args.quiet:
        _print_summary(summary)
        print(f"base displacement: max {summary['base_displacement_max_m']:.3e} m")
        if "contact_force_vertical_min_N" in summary:
            print(f"smallest vertical contact force: {summary['contact_force_vertical_min_N']:.3g} N (negative: a "
                  "contact pulls, the foot would lift off)")
    if json_path:
        from pathlib import Path

        _write_output(lambda: _write_atomically(Path(json_path), json.dumps(summary, indent=2) + "\n"),
                      "--json", args.json)
    if plot_path:
        from .plotting import plot_push_recovery

        title = f"{robot.name}: {controller_name}, {args.integrator} at {args.rate:g} Hz"
        _write_output(lambda: plot_push_recovery(trajectory, plot_path, contacts, title=title), "--plot", args.plot)
        if not args.quiet:
            print(f"plot written to {args.plot}")
    return 0


#: simulate --controller lqr without --q0: the start's offset from the equilibrium on every joint.
LQR_START_OFFSET = 0.05

#: simulate --reference circle: the platform goes round during this share of --duration, then rests.
CIRCLE_SHARE = 0.8


def _singularity_message(error) -> str:
    """A SingularityError's message for the command line: one line, without the Python API's pointers."""
    message = " ".join(str(error).replace(" The samples before it are in this error's t, q, qd.", "").split())
    return f"{message.rstrip('.')}; start elsewhere (--q0) or choose another motion (--reference, --radius)"


def _platform_summary(robot, model, trajectory, x_ref, reference) -> dict:
    """A closed chain's extra figures: the platform's tracking error in task space (against the path, or
    against the model's dgm of the joint reference) and the smallest normalised singularity measures."""
    from .task_space import platform_positions, platform_tracking

    if x_ref is None and trajectory.q_ref is not None:
        x_ref = platform_positions(model, trajectory.q_ref)
    error = None if x_ref is None else platform_tracking(robot, trajectory.q, x_ref)
    measured = error is not None and bool(np.all(np.isfinite(error)))
    measures = np.abs(robot.singularity_measures(np.ascontiguousarray(trajectory.q)))
    summary = {
        "task_coordinates": list(robot.task_coordinates),
        "platform_tracking_error_max": float(np.max(error)) if measured else None,
        "platform_tracking_error_rms": float(np.sqrt(np.mean(error**2))) if measured else None,
        "singularity_type2_min": float(np.min(measures[:, 2])),
        "singularity_type1_min": float(np.min(measures[:, 3])),
    }
    if reference is not None:
        path = reference.path
        summary["path"] = {"kind": "circle", "centre": path.centre.tolist(), "radius": path.radius,
                           "start": path.evaluate(path.start)[0].tolist(), "duration_s": path.duration,
                           "working_mode": list(reference.mode)}
    return summary


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
    from ._files import write_atomically

    write_atomically(path, text)


def _gains(controller) -> dict:
    if controller.law == "none":
        return {}
    if controller.law == "state-feedback":
        return {"K": controller.K.tolist(), "equilibrium": controller.q0.tolist(), "u0": controller.u0.tolist()}
    if controller.law == "slotine-li":
        return {"lambda": controller.kp.tolist(), "k": controller.kd.tolist()}
    return {"kp": controller.kp.tolist(), "kd": controller.kd.tolist()}


def _shown(values: np.ndarray) -> np.ndarray:
    """Values as the demo prints them (4 decimals): a rounding residue such as -1e-17 shows as 0., not -0."""
    return np.round(values, 4) + 0.0


def _has_friction(robot, velocity) -> bool:
    """Whether the robot's friction (viscous or Coulomb) acts at some velocity: then energy is not conserved."""
    if not hasattr(robot, "friction"):
        return False
    return bool(np.any(robot.friction(np.ones_like(velocity)) != 0.0))


def _print_summary(summary: dict) -> None:
    from .task_space import format_point

    loop = summary["loop"]

    def us(value):
        return "n/a" if value is None else f"{value * 1e6:.2f} us"

    print(f"\n{summary['robot']}: {summary['duration_s']:g} s at {summary['rate_hz']:g} Hz, "
          f"controller {summary['controller']}, {summary['integrator']} x{summary['substeps']}")
    if summary["tracking_error_max"] is not None:
        print(f"tracking error: max {summary['tracking_error_max']:.3e}, rms {summary['tracking_error_rms']:.3e}, "
              f"final {summary['tracking_error_final']:.3e}")
    if "path" in summary:
        path = summary["path"]
        print(f"platform path: a circle of radius {path['radius']:g} m through "
              f"({format_point(summary['task_coordinates'], path['start'])}) "
              f"in {path['duration_s']:g} s, working mode {tuple(path['working_mode'])}")
    if summary.get("platform_tracking_error_max") is not None:
        print(f"platform tracking error ({', '.join(summary['task_coordinates'])}): "
              f"max {summary['platform_tracking_error_max']:.3e} m, rms {summary['platform_tracking_error_rms']:.3e} m")
    if "singularity_type2_min" in summary:
        print(f"smallest normalised singularity measures: type 2 (det A) {summary['singularity_type2_min']:.3g}, "
              f"type 1 (det B) {summary['singularity_type1_min']:.3g}")
    if summary["controller"] == "none":  # under control the controller's work changes the energy
        losses = " (the model's friction dissipates energy)" if summary.get("friction") else ""
        print(f"relative energy drift: {summary['energy_drift_rel']:.3e}{losses}")
    print(f"loop: wall {loop['wall_time_s']:.3f} s for {loop['ticks']} ticks "
          f"({summary['duration_s'] / max(loop['wall_time_s'], 1e-12):.0f} simulated s per wall s); "
          f"compute mean {us(loop['compute_mean_s'])}, p99 {us(loop['compute_p99_s'])}, "
          f"max {us(loop['compute_max_s'])}")
    if loop["realtime"]:
        print(f"real time: jitter mean {us(loop['jitter_mean_s'])}, p99 {us(loop['jitter_p99_s'])}, "
              f"max {us(loop['jitter_max_s'])}; missed deadlines {loop['missed_deadlines']}")


EXCITE_EXAMPLE = """examples:
  python -m robodyn excite robots/rr.yaml --duration 20 --harmonics 5 --out trajectory.csv
  python -m robodyn excite robots/puma560.yaml --limit effort=97,186,89,24,20,21 --starts 16 --workers 2 --out puma.npz
  python -m robodyn excite robots/rr.yaml --out rr.json --scheduler tcp://127.0.0.1:8786   # a Dask cluster

The trajectory is a finite Fourier series per joint (period = --duration) whose coefficients minimise
the condition number of the stacked base regressor within the joint limits (the description's, else
2 rad/s, 10 rad/s^2 and +-pi for revolute joints; --limit overrides). The output's suffix chooses the
file: .csv samples at --rate Hz with the coefficients in a '# fourier:' comment line, .json or .npz
coefficients (robodyn.identification.excitation.FourierTrajectory.load reads all three). When no
start stays within the limits, the best one's report is printed, nothing is written and the status is 1.
"""


#: excitation.CRITERIA, spelled out so that the other commands do not import the identification package.
EXCITE_CRITERIA = ("cond", "d-optimal")
EXCITE_LIMITS = ("lower", "upper", "velocity", "acceleration", "effort")


def _limit_options(items: list[str], n: int) -> dict:
    """--limit KIND=V or KIND=V1,...,Vn (repeatable) as a mapping for excitation_limits (n None: the
    count of values is not checked yet)."""
    import math

    limits = {}
    for item in items:
        kind, sep, text = item.partition("=")
        kind = kind.strip()
        if not sep or kind not in EXCITE_LIMITS:
            raise ValueError(f"--limit {item!r}: expected KIND=VALUE[,VALUE...] with KIND one of "
                             f"{', '.join(EXCITE_LIMITS)}")
        try:
            values = [float(v) for v in text.split(",")]
        except ValueError:
            raise ValueError(f"--limit {item!r}: expected comma-separated numbers") from None
        if not all(math.isfinite(v) or (v == math.inf and kind == "effort") for v in values):
            raise ValueError(f"--limit {item!r}: the values must be finite (effort may be inf: no limit)")
        if n is not None and len(values) not in (1, n):
            raise ValueError(f"--limit {item!r}: expected one number or {n} (one per joint)")
        limits[kind] = values[0] if len(values) == 1 else values
    return limits


def excite_command(args) -> int:
    import contextlib

    from codegen.pipeline import delayed_progress, stderr_writer

    from .identification.excitation import design_excitation
    from .parallel import executor

    out_path = _check_output(args.out, "--out")
    robot = _load_for_identification(args)
    try:
        limits = _limit_options(args.limit, robot.n)
    except ValueError as exc:  # found only now that n is known: still a command-line mistake
        print(f"error: {exc}", file=sys.stderr)
        return 2
    say = None if args.quiet else delayed_progress(stderr_writer("[excite]"))
    progress = None if say is None else (lambda done, total: say(f"{done}/{total} starts done"))
    if say is not None:
        say(f"designing {args.harmonics} harmonics over {args.duration:g} s for {robot.name}: {args.starts} starts "
            + (f"on {args.scheduler}" if args.scheduler else f"on {args.workers or 'all'} local worker(s)"))
    try:
        serial = args.scheduler is None and args.workers == 1
        with contextlib.nullcontext(None) if serial else executor(args.scheduler, args.workers) as pool:
            trajectory, report = design_excitation(
                robot, duration=args.duration, harmonics=args.harmonics, samples=args.samples,
                criterion=args.criterion, starts=args.starts, seed=args.seed, margin=args.margin, limits=limits,
                column_scale=None if args.column_scale == "si" else args.column_scale, executor=pool,
                known_zeros=args.known_zeros,
                progress=progress)
    finally:
        getattr(say, "cancel", lambda: None)()
    if not args.quiet or not report.feasible:
        print(report.summary())
    if not report.feasible:  # a trajectory beyond the limits must not reach a robot by mistake
        print(f"error: no design stayed within the limits (see above); nothing written to {args.out}",
              file=sys.stderr)
        return 1
    _write_output(lambda: trajectory.save(out_path, rate=args.rate), "--out", args.out)
    if not args.quiet:
        print(f"trajectory written to {args.out}")
    return 0


EPILOG = """examples:
  python -m robodyn demo robots/rr.yaml
  python -m robodyn simulate robots/rrr.yaml --controller slotine-li --duration 5 --json run.json --plot run.png
  python -m robodyn simulate panda.urdf --lock panda_finger_joint1=0 --lock panda_finger_joint2=0
  python -m robodyn simulate robots/fivebar.yaml --radius 0.04 --plot fivebar.png   # the platform round a circle
  python -m robodyn excite robots/rr.yaml --duration 20 --harmonics 5 --out trajectory.csv
  python -m robodyn measure robots/rr.yaml trajectory.csv --set m2=60 --set D=30 --out data.csv
  python -m robodyn identify robots/rr.yaml data.csv --out rr.identified.yaml
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
                              epilog="examples:\n  python -m robodyn simulate robots/rrr.yaml --controller slotine-li "
                                     "--duration 5 --json run.json\n  python -m robodyn simulate robots/cartpole.yaml "
                                     "--controller lqr --equilibrium 0,pi --q0 0.2,0.8pi --plot cartpole.png\n\n"
                                     + EXIT_STATUS_HELP,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sim.add_argument("description", help="robot description (YAML or URDF), e.g. robots/rr.yaml")
    sim.add_argument("--controller", choices=[*BUILTIN, "lqr", "standing"], default=None,
                     help="control law (default computed-torque, or lqr with --equilibrium; none: free motion, the "
                          "default for an underactuated robot and the only choice for a closed chain without a "
                          "closed-form model, such as robots/fourbar.yaml); lqr: discrete-time LQR at the control "
                          "rate about --equilibrium (Q = I, R = I, saturated at the joints' effort limits); standing "
                          "(floating bases, the default with --contacts): a whole-body PD with gravity compensation "
                          "holding --q0 on the contacts")
    sim.add_argument("--contacts", metavar="LINKS",
                     help="floating bases: link frames held by the ground where they start (point contacts), "
                          "comma-separated, e.g. FL_FOOT,FR_FOOT,HL_FOOT,HR_FOOT")
    sim.add_argument("--equilibrium", metavar="Q",
                     help="lqr: joint positions to stabilise, comma-separated, multiples of pi allowed (e.g. 0,pi); "
                          "the run starts 0.05 rad or m away from it on every joint unless --q0 is given")
    sim.add_argument("--duration", type=float, default=5.0, help="simulated seconds (default 5)")
    sim.add_argument("--rate", type=float, default=1000.0, help="control rate in Hz (default 1000)")
    sim.add_argument("--reference", choices=["hold", "step", "sine", "quintic", "circle"],
                     help="desired motion (default: circle for a closed chain under computed torque, quintic "
                          "otherwise); quintic: a smooth move of every joint; circle (closed chains): one turn of "
                          "the platform round a circle of --radius through its starting point during "
                          f"{CIRCLE_SHARE * 100:g} %% of the run, at rest at both ends, tracked by computed torque "
                          "(evaluated in Python)")
    sim.add_argument("--radius", type=float, default=0.03,
                     help="radius of --reference circle in m (default 0.03); the path is checked to stay in the "
                          "workspace, the joint limits and away from singularities before the run")
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
    sim.add_argument("--q0", help="initial joint positions, comma-separated (default: zero or mid-limits); a "
                                  "floating base's pose first (x, y, z, quaternion x, y, z, w)")
    sim.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                     help="set a parameter of the simulated robot (repeatable)")
    sim.add_argument("--model-set", action="append", default=[], metavar="NAME=VALUE",
                     help="set a parameter of the controller's model only: a deliberately wrong model")
    sim.add_argument("--plot", metavar="FILE.png", help="save q, qd, qdd, tau and tracking error; for a closed chain "
                                                        "the platform's path in the plane (reference and actual), "
                                                        "its tracking error, the singularity measures and tau "
                                                        "(needs matplotlib)")
    sim.add_argument("--json", metavar="FILE.json", help="write the summary as JSON")
    add_arguments(sim)
    _excite_parser(commands)
    from .identification import commands as identification

    identification.add_parsers(commands)
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
        if not 0 < args.radius <= 1e3:
            parser.error("--radius must be positive and finite (at most 1000 m)")
        if args.reference == "circle" and args.controller not in (None, "computed-torque", "none"):
            parser.error("--reference circle is tracked by --controller computed-torque only")
    if args.command == "excite":
        _check_excite_arguments(parser, args)
    identification.check_arguments(parser, args)
    command = {"simulate": simulate_command, "excite": excite_command, "measure": identification.measure_command,
               "identify": identification.identify_command}.get(args.command, demo)
    return run_command(command, args, debug=args.debug)


def _excite_parser(commands) -> None:
    from .errors import EXIT_STATUS_HELP
    from .options import add_arguments

    # conflict_handler="resolve": the cache options call their directory --cache-dir or --out; here
    # --out is the trajectory file, added last, and the cache directory stays --cache-dir.
    excite = commands.add_parser("excite", help="design an excitation trajectory for parameter identification "
                                                "(finite Fourier series, well-conditioned base regressor)",
                                 epilog=EXCITE_EXAMPLE + "\n" + EXIT_STATUS_HELP, conflict_handler="resolve",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    excite.add_argument("description", help="robot description (YAML or URDF), e.g. robots/rr.yaml")
    excite.add_argument("--duration", type=float, default=20.0, help="period of the trajectory in s (default 20)")
    excite.add_argument("--harmonics", type=int, default=5, help="harmonics per joint (default 5)")
    excite.add_argument("--starts", type=int, default=8, help="random starts of the optimisation (default 8)")
    excite.add_argument("--seed", type=int, default=0, help="seed of the starts (default 0; same seed, same result)")
    excite.add_argument("--criterion", choices=EXCITE_CRITERIA, default="cond",
                        help="cond: minimise the condition number (default); d-optimal: maximise log det WᵀW")
    excite.add_argument("--column-scale", choices=["si", "unit"], default="si",
                        help="columns of the regressor for cond: in SI units (default) or scaled to unit norm")
    excite.add_argument("--known-zeros", action="store_true",
                        help="leave out the base parameters the description fixes at zero (as identify "
                             "--known-zeros)")
    excite.add_argument("--samples", type=int, default=200, help="times per period the criterion sees (default 200)")
    excite.add_argument("--margin", type=float, default=0.05,
                        help="fraction of every limit kept unused (default 0.05)")
    excite.add_argument("--limit", action="append", default=[], metavar="KIND=V[,V...]",
                        help="override a limit for all joints or per joint (repeatable); KIND: lower, upper, "
                             "velocity, acceleration, effort")
    excite.add_argument("--rate", type=float, default=100.0, help="CSV: samples per second (default 100)")
    excite.add_argument("--scheduler", metavar="ADDRESS",
                        help='run the starts on a Dask cluster, e.g. tcp://127.0.0.1:8786 (pip install '
                             '"robodyn[distributed]")')
    excite.add_argument("--workers", type=int, help="local worker processes (default: one per core; 1: in this "
                                                    "process)")
    add_arguments(excite)
    excite.add_argument("--out", required=True, metavar="FILE",
                        help="where to write the trajectory: .csv (samples), .json or .npz (coefficients); "
                             "written atomically")


def _check_excite_arguments(parser, args) -> None:
    """Command-line mistakes of excite: exit 2 with a message naming the option."""
    import math
    from pathlib import Path

    if not (math.isfinite(args.duration) and 0 < args.duration <= 1e6):
        parser.error("--duration must be positive and at most 1e6 s")
    if not 1 <= args.harmonics <= 100:
        parser.error("--harmonics must be between 1 and 100")
    if not 1 <= args.starts <= 10000:
        parser.error("--starts must be between 1 and 10000")
    if not 0 <= args.seed < 2**63:
        parser.error("--seed must be a non-negative integer")
    if not 4 * args.harmonics <= args.samples <= 100000:
        parser.error(f"--samples must be at least 4 per period of the highest harmonic ({4 * args.harmonics}) and "
                     "at most 100000")
    if not 0 <= args.margin < 1:
        parser.error("--margin must be a fraction in [0, 1)")
    if not (math.isfinite(args.rate) and 0 < args.rate and 2 <= args.rate * args.duration <= 5e7):
        parser.error("--rate must be positive, with --rate x --duration between 2 and 5e7 samples")
    if args.workers is not None and not 1 <= args.workers <= 1024:
        parser.error("--workers must be between 1 and 1024")
    if args.workers is not None and args.scheduler is not None:
        parser.error("--workers and --scheduler exclude each other: the cluster decides how many tasks run")
    if args.scheduler is not None and not args.scheduler.strip():
        parser.error("--scheduler: expected an address such as tcp://127.0.0.1:8786")
    if Path(args.out).suffix.lower() not in (".csv", ".json", ".npz"):
        parser.error(f"--out {args.out}: expected a .csv, .json or .npz file name")
    try:
        _limit_options(args.limit, None)
    except ValueError as exc:
        parser.error(str(exc))


if __name__ == "__main__":
    from .errors import exit_with

    exit_with(main())
