"""Instructions per control tick of the closed loops, counted with valgrind callgrind.

Timings of a sub-microsecond tick are noisy on a shared machine; instruction counts are not.
This script builds (or reuses) a robot, then runs one child Python under callgrind that runs
each case for N and for 2N ticks, a marker call (``os.getppid``, as in callgrind_calls.py)
around each run so that every run gets its own dump. Per tick::

    total    = (Ir(2N-tick run) - Ir(N-tick run)) / N         (set-up and allocation cancel)
    <kernel> = the same difference for the calls of one generated routine (e.g. rr_forward_dynamics),
               read from the dump's call edges: inclusive Ir per tick and calls per tick
               (a column for every routine of robodyn.routines.TABLE that the loops call)

plus libm's sin/cos/sincos, which the generated routines and the sine reference call.
Cases: ``robodyn.simulate`` with each built-in controller (the C loop), the compiled loop
called directly without recording qdd or timing ticks (``robot._simulate``), and the
Python tick loop with the compiled computed-torque law or the NumPy one of
test_bench_simulation.py as a callable. RK4, one step per 1 ms period, the motion of
realtime_loop.scenario.

Usage::

    python benchmarks/callgrind_simulation.py                        # robots/rr.yaml
    python benchmarks/callgrind_simulation.py robots/puma560.yaml --ticks 2000 --json cg.json
    python benchmarks/callgrind_simulation.py panda.urdf --lock panda_finger_joint1=0 --lock panda_finger_joint2=0

The model options (``--method``, ``--lock``, ...) and the cache options (``--cache-dir``,
``--force``) are those of every robodyn command (``robodyn.options``).

Without valgrind on PATH the script says so and exits with status 0.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from callgrind_calls import _total

REPO = Path(__file__).resolve().parent.parent
PERIOD = 1e-3
BUILTIN = ("none", "pd", "pd-gravity", "computed-torque", "slotine-li")

def _kernels() -> tuple[str, ...]:
    """The routine names of the table: a column each (shown when the loops call it)."""
    from robodyn.routines import TABLE

    return tuple(routine.name for routine in TABLE)


def _cases(robot):
    """label -> (run(ticks), is a Python loop): each run simulates ``ticks`` control periods."""
    import numpy as np
    from realtime_loop import scenario
    from test_bench_simulation import NumpyComputedTorque

    import robodyn

    def simulate_with(controller, q0, qd0):
        return lambda ticks: robodyn.simulate(robot, controller, duration=ticks * PERIOD, q0=q0, qd0=qd0)

    cases = {}
    for name in BUILTIN:
        cases[f"simulate(): {name}, C loop"] = (simulate_with(*scenario(robot, name, 1.0)), False)
    law, q0, qd0 = scenario(robot, "computed-torque", 1.0)

    def bare_loop(ticks):
        q, qd = np.empty((ticks + 1, robot.n)), np.empty((ticks + 1, robot.n))
        q[0], qd[0] = q0, qd0
        robot._simulate(law.capsule(), q, qd, None, None, None, None, None, None, PERIOD, "rk4", 1, None, None,
                        False)

    cases["robot._simulate: computed-torque, no qdd/tau/ref record, no clock"] = (bare_loop, False)
    cases["simulate(): callable-c-law, Python tick loop"] = (
        simulate_with(robodyn.FunctionController(law, law.reference), q0, qd0), True)
    cases["simulate(): callable-numpy-law, Python tick loop"] = (
        simulate_with(robodyn.FunctionController(NumpyComputedTorque(law), law.reference), q0, qd0), True)
    return cases


def child(args) -> int:
    """Under callgrind: the robot from its module file (no cache lookup, no compiler query here)."""
    from robodyn.cache import import_extension
    from robodyn.robot import Robot

    path = Path(args.module).resolve()
    robot = Robot.from_extension(import_extension(path.name.split(".")[0], path))
    dumps = []  # what each dump holds, in order
    for label, (run, python_loop) in _cases(robot).items():
        ticks = args.python_ticks if python_loop else args.ticks
        run(max(ticks // 10, 10))  # warm up: quickening, allocator pools
        os.getppid()
        dumps.append(None)
        for count in (ticks, 2 * ticks):
            run(count)
            os.getppid()
            dumps.append((label, count))
    Path(args.child).write_text(json.dumps({"robot": robot.name, "dumps": dumps}))
    return 0


def _callees(dump: Path) -> dict:
    """callee name -> [calls, inclusive Ir], summed over every call edge of one callgrind dump.

    In the dump, ``cfn=(id) name`` names the callee (the name only at its first use), ``calls=N ...``
    counts the calls and the next line is ``position Ir``, the calls' inclusive cost.
    """
    names, callee, edges, edge = {}, None, {}, None
    for line in dump.read_text().splitlines():
        if edge is not None:
            edge[1] += int(line.split()[1])
            edge = None
        elif line.startswith(("fn=", "cfn=")):
            ident, _, name = line.partition("=")[2].partition(" ")
            if name:
                names[ident] = name
            callee = names.get(ident) if line.startswith("cfn=") else None
        elif line.startswith("calls=") and callee is not None:
            edge = edges.setdefault(callee, [0, 0])
            edge[0] += int(line[len("calls="):].split()[0])
    return edges


def _is_trig(name: str) -> bool:
    """libm's sin, cos or sincos under any of its names (__sincos_fma, sin@plt, ...)."""
    return name.lstrip("_").split("@")[0].split("_")[0] in ("sin", "cos", "sincos")


def _measure(dump: Path, robot: str) -> dict:
    """Total Ir, and [calls, inclusive Ir] of each generated kernel and of libm's trigonometry."""
    edges = _callees(dump)
    counts = {kernel: edges.get(f"{robot}_{kernel}_kernel", [0, 0]) for kernel in _kernels()}
    counts["sin/cos"] = [sum(value[i] for name, value in edges.items() if _is_trig(name)) for i in (0, 1)]
    return {"total": _total(dump), **counts}


def parent(args, options) -> int:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("valgrind not found on PATH: skipping the instruction counts (install valgrind to run this).")
        return 0
    import robodyn  # build outside valgrind: SymPy and the compiler under callgrind would take ages

    module = Path(robodyn.load(args.robot, options, cache_dir=args.cache_dir, force=args.force).extension.__file__)
    with tempfile.TemporaryDirectory(prefix="robodyn-callgrind-sim-") as tmp:
        tmp = Path(tmp)
        labels_file = tmp / "labels.json"
        command = [valgrind, "--tool=callgrind", f"--callgrind-out-file={tmp / 'cg.out'}", "--dump-before=getppid",
                   sys.executable, str(Path(__file__).resolve()), "--child", str(labels_file),
                   "--ticks", str(args.ticks), "--python-ticks", str(args.python_ticks), "--module",
                   str(module.resolve())]
        result = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, PYTHONHASHSEED="0"),
                                check=False)
        if result.returncode != 0 or not labels_file.is_file():
            print(result.stdout + result.stderr, file=sys.stderr)
            return 1
        info = json.loads(labels_file.read_text())
        robot = info["robot"]
        files = sorted(tmp.glob("cg.out.*"), key=lambda p: int(p.suffix[1:]))
        # The i-th marker call of the child wrote cg.out.<i + 1>: what ran since the previous marker.
        runs: dict = {}
        for dump, content in zip(files, info["dumps"]):
            if content is not None:
                label, count = content
                runs.setdefault(label, {})[count] = _measure(dump, robot)
    rows = {}
    for label, by_count in runs.items():
        (short, first), (long, second) = sorted(by_count.items())
        ticks = long - short
        rows[label] = {key: (second[key] - first[key]) / ticks if key == "total"
                       else [(second[key][i] - first[key][i]) / ticks for i in (0, 1)] for key in first}
    _print_table(robot, rows, args)
    if args.json:
        Path(args.json).write_text(json.dumps({"robot": robot, "ticks": args.ticks, "python_ticks": args.python_ticks,
                                               "per_tick": rows}, indent=2) + "\n")
    return 0


def _print_table(robot: str, rows: dict, args) -> None:
    columns = [key for key in (*_kernels(), "sin/cos") if any(row[key][0] for row in rows.values())]
    width = max(len(label) for label in rows)
    print(f"robot {robot}: instructions (Ir) per control tick, valgrind callgrind, {args.ticks} vs {2 * args.ticks} "
          f"ticks ({args.python_ticks} vs {2 * args.python_ticks} for the Python loops)")
    print(f"{'case':<{width}}  {'total':>8}" + "".join(f"  {key:>24}" for key in columns))
    for label, row in rows.items():
        cells = "".join(f"  {row[key][1]:>10.0f} ({row[key][0]:4.2f} calls)" if row[key][0] else f"  {'-':>24}"
                        for key in columns)
        print(f"{label:<{width}}  {row['total']:>8.0f}{cells}")
    print("kernel columns: inclusive Ir per tick of the generated routine (libm for sin/cos) and its calls per tick.")


def main(argv=None) -> int:
    from robodyn.options import add_arguments, from_arguments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("robot", nargs="?", default=str(REPO / "robots" / "rr.yaml"), help="robot description")
    parser.add_argument("--ticks", type=int, default=5000, help="N for the compiled cases (default 5000)")
    parser.add_argument("--python-ticks", type=int, default=500, help="N for the Python loops (default 500)")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    parser.add_argument("--child", metavar="LABELS", help=argparse.SUPPRESS)  # the run under valgrind; writes LABELS
    parser.add_argument("--module", help=argparse.SUPPRESS)  # the child's robot module
    add_arguments(parser)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    try:
        options = from_arguments(args)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    return parent(args, options)


if __name__ == "__main__":
    sys.exit(main())
