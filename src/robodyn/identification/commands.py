"""The identification subcommands of ``python -m robodyn``: measure (simulated measurements) and identify."""

from __future__ import annotations

import argparse
import sys

MEASURE_EXAMPLE = """example (a simulated run of the excitation trajectory, a heavier second link than described):
  python -m robodyn measure robots/rr.yaml trajectory.csv --set m2=60 --set D=30 --out data.csv
"""

IDENTIFY_EXAMPLE = """example:
  python -m robodyn identify robots/rr.yaml data.csv --out rr.identified.yaml

Reads the measurements (CSV: t, q_<joint>..., tau_<joint>...; or NPZ), filters and differentiates,
estimates the base parameters, checks them on held-out data, writes a description with the
identified values and builds its module.
"""


def add_parsers(commands) -> None:
    """The measure and identify subcommands, with the model, cache and output options of every command."""
    from ..errors import EXIT_STATUS_HELP
    from ..options import add_arguments

    def subcommand(name: str, summary: str, example: str):
        # conflict_handler="resolve": --out is the command's output file, not the cache option's alias.
        return commands.add_parser(name, help=summary, epilog=example + "\n" + EXIT_STATUS_HELP,
                                   conflict_handler="resolve", formatter_class=argparse.RawDescriptionHelpFormatter)

    measure = subcommand("measure", "simulate measurements of a robot following an excitation trajectory "
                                    "(encoder and torque noise, friction on)", MEASURE_EXAMPLE)
    measure.add_argument("description", help="robot description (YAML or URDF), e.g. robots/rr.yaml")
    measure.add_argument("trajectory", help="excitation trajectory written by `python -m robodyn excite`")
    measure.add_argument("--rate", type=float, default=1000.0, help="samples per second (default 1000)")
    measure.add_argument("--duration", type=float, help="seconds (default: the trajectory's period)")
    measure.add_argument("--encoder-noise", type=float, default=2e-5,
                         help="position noise, standard deviation in rad or m (default 2e-5)")
    measure.add_argument("--encoder-resolution", type=float, help="encoder count in rad or m (default: none)")
    measure.add_argument("--torque-noise", type=float, default=0.5,
                         help="torque noise, standard deviation in N m or N (default 0.5)")
    measure.add_argument("--seed", type=int, default=0, help="noise seed (default 0)")
    measure.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                         help="a parameter of the simulated robot differs from the description (repeatable)")
    add_arguments(measure)
    measure.add_argument("--out", required=True, metavar="FILE", help="measurements to write: .csv or .npz")

    identify = subcommand("identify", "identify the dynamic parameters from measurements, write an identified "
                                      "description and build it", IDENTIFY_EXAMPLE)
    identify.add_argument("description", help="robot description (YAML), e.g. robots/rr.yaml")
    identify.add_argument("data", help="measurements: CSV or NPZ (see robodyn.identification.data)")
    identify.add_argument("--estimator", choices=["wls", "ols", "consistent"], default="wls",
                          help="weighted least squares (default), ordinary, or physically consistent "
                               '(pip install "robodyn[identify]")')
    identify.add_argument("--known-zeros", action="store_true",
                          help="take the base parameters the description fixes at zero as known")
    identify.add_argument("--offset", action="store_true",
                          help="estimate a constant torque offset per joint alongside (a sensor bias; reported)")
    identify.add_argument("--holdout", type=float, default=0.25,
                          help="fraction of the run, at its end, kept to judge the estimate (default 0.25)")
    identify.add_argument("--cutoff", type=float, help="position low-pass in Hz (default: from the motion's band)")
    identify.add_argument("--decimate", type=int, default=10, help="keep every k-th filtered sample (default 10)")
    identify.add_argument("--no-build", action="store_true", help="write the description without building it")
    add_arguments(identify)
    identify.add_argument("--out", required=True, metavar="FILE.yaml", help="identified description to write")


def check_arguments(parser, args) -> None:
    """Command-line mistakes: exit 2 naming the option."""
    import math

    def positive(name: str, value) -> None:
        if value is not None and not (math.isfinite(value) and value > 0):
            parser.error(f"{name} must be positive and finite, got {value}")

    if args.command == "measure":
        positive("--rate", args.rate)
        positive("--duration", args.duration)
        positive("--encoder-resolution", args.encoder_resolution)
        for name in ("encoder_noise", "torque_noise"):
            value = getattr(args, name)
            if not (math.isfinite(value) and value >= 0):
                parser.error(f"--{name.replace('_', '-')} must be at least 0 and finite, got {value}")
        if args.seed < 0:
            parser.error(f"--seed must be at least 0, got {args.seed}")
        if args.duration is not None and args.duration * args.rate > 2e7:
            parser.error("--duration x --rate: at most 2e7 samples")
    if args.command in ("measure", "identify"):
        from pathlib import Path

        inputs = [args.description, args.trajectory if args.command == "measure" else args.data]
        out = Path(args.out)
        for given in inputs:
            if out.exists() and Path(given).exists() and out.resolve() == Path(given).resolve():
                parser.error(f"--out {args.out}: is an input of this command ({given}); write elsewhere")
    if args.command == "identify":
        if args.estimator == "consistent" and args.offset:
            parser.error("--offset: estimated with --estimator wls or ols only")
        if not args.description.lower().endswith((".yaml", ".yml")):
            parser.error(f"{args.description}: identify writes a YAML description (--out) and needs a YAML source; "
                         "URDF write-back is not supported yet (robodyn.identification.identify works on any "
                         "robot from Python)")
        if not (math.isfinite(args.holdout) and 0 <= args.holdout < 0.9):
            parser.error(f"--holdout must be in [0, 0.9), got {args.holdout}")
        positive("--cutoff", args.cutoff)
        if args.decimate < 1:
            parser.error(f"--decimate must be at least 1, got {args.decimate}")


def measure_command(args) -> int:
    from ..__main__ import _check_output, _load_for_identification as _load, _write_output
    from .data import simulate_measurements, write_measurements
    from .excitation import FourierTrajectory

    from ..options import parse_assignments

    out = _check_output(args.out, "--out")
    settings = list(parse_assignments(args.set, "--set").items())
    trajectory = FourierTrajectory.load(args.trajectory)
    robot = _load(args)
    if tuple(trajectory.joint_names) != tuple(robot.joint_names):
        raise ValueError(f"{args.trajectory}: joints {list(trajectory.joint_names)} are not the robot's "
                         f"{list(robot.joint_names)}")
    truth = robot.copy()
    for name, value in settings:
        truth.params[name] = value
    duration = trajectory.measuring_time if args.duration is None else args.duration
    if duration * args.rate > 2e7:
        raise ValueError(f"--rate {args.rate:g} over {duration:g} s: {duration * args.rate:.3g} samples, more than "
                         "2e7 (give a lower --rate or a shorter --duration)")
    t, q, qd, qdd = trajectory.sample(args.rate, args.duration)
    if not args.quiet:
        print(f"simulating {len(t)} samples at {args.rate:g} Hz of {robot.name}"
              + (f" with {', '.join(f'{n}={v:g}' for n, v in settings)}" if settings else ""), file=sys.stderr)
    m = simulate_measurements(truth, t, q, qd, qdd, encoder_noise=args.encoder_noise,
                              encoder_resolution=args.encoder_resolution, torque_noise=args.torque_noise,
                              seed=args.seed)
    comment = (f"simulated by robodyn measure: {robot.name}, trajectory {args.trajectory}, encoder noise "
               f"{args.encoder_noise:g}, torque noise {args.torque_noise:g}, seed {args.seed}"
               + (", " + ", ".join(f"{n}={v:g}" for n, v in settings) if settings else ""))
    _write_output(lambda: write_measurements(out, m, comment=comment), "--out", args.out)
    if not args.quiet:
        print(f"measurements written to {args.out} ({len(t)} samples, {robot.n} joints)")
    return 0


def identify_command(args) -> int:
    from pathlib import Path

    import numpy as np

    from ..__main__ import _check_output, _load_for_identification as _load
    from .data import read_measurements
    from .identify import identify, write_identified

    out = _check_output(args.out, "--out")
    robot = _load(args)
    measurements = read_measurements(args.data, robot.joint_names)
    options = {"decimate": args.decimate}
    if args.cutoff is not None:
        options["cutoff"] = args.cutoff
    result = identify(robot, measurements, method=args.estimator, known_zeros=args.known_zeros,
                      holdout=args.holdout, offset=args.offset, **options)
    if not args.quiet:
        print(result.report())
    adjustments = write_identified(robot, result, args.description, out, data_name=Path(args.data).name)
    if not args.quiet:
        print(f"identified description written to {args.out}")
        for line in adjustments:
            print(f"  adjusted: {line}")
        if adjustments:
            print("  (--estimator consistent estimates under these constraints instead)")
    if args.no_build:
        return 0
    import robodyn

    rebuilt = robodyn.load(out, robot.options, cache_dir=args.cache_dir, force=args.force,
                           verbose=False if args.quiet else None)
    difference = np.max(np.abs(rebuilt.base_parameters() - result.estimated)) / max(
        np.max(np.abs(result.estimated)), 1e-300)
    if not args.quiet:
        print(f"built {rebuilt.name} from {args.out}: self-check {rebuilt.selfcheck.get('status')}; its base "
              f"parameters reproduce the estimate to {difference:.1e} (relative)")
    return 0 if difference < 1e-6 or adjustments else 3
