"""Instructions per call of the compiled routines, counted with valgrind callgrind.

Wall-clock timings of sub-microsecond calls are noisy on shared machines;
instruction counts are deterministic. This script builds (or reuses) a robot,
then runs one child Python under ``valgrind --tool=callgrind`` that measures
every routine of the routine table (``robodyn.routines.TABLE``) the robot's
module provides: the call with ``out=`` and the allocating call, random inputs
of the sizes the table declares (optional arguments such as the wrench ``h``
left out, so None), plus one batch case (``g`` on 16 rows with ``out=``). Each
case is a loop of ``--calls`` calls ``robot.<method>(...)`` and the same loop
with the call replaced by ``pass``; a marker call (``os.getppid``) around each
loop makes callgrind dump its counters (``--dump-before``), so every loop gets
its own total. Per call::

    total    = (Ir(call loop) - Ir(empty loop)) / calls
    kernel   = inclusive Ir of the generated C routine <robot>_<routine>_kernel (e.g. rr_gravity_kernel) / calls
    overhead = total - kernel     (Python call, argument checks, out=/allocation, table dispatch)
    binding  = inclusive Ir of robodyn's entry (robodyn_method.h: rd_routine_vectorcall, or for a bound method its
               trampoline rd_method_<index>) / calls - kernel:
               the part of the overhead inside robodyn's binding (argument parsing and checks, out=/allocation
               and the NumPy and CPython API calls it makes, the GIL, table dispatch); the rest of it,
               overhead - binding, is the interpreter's (the method lookup, the call instruction, the result's
               reference); None when the entry is not found

Usage::

    python benchmarks/callgrind_calls.py                      # robots/rr.yaml
    python benchmarks/callgrind_calls.py robots/rrr.yaml --calls 20000 --json cg.json
    python benchmarks/callgrind_calls.py panda.urdf --lock panda_finger_joint1=0 --lock panda_finger_joint2=0
    python benchmarks/callgrind_calls.py --module path/to/robodyn_rr_xxx.so   # a given build
    python benchmarks/callgrind_calls.py panda.urdf --lock ... --only regressor --only base_regressor

The model options (``--method``, ``--forward``, ``--lock``, ``--tool``, ...) and the cache
options (``--cache-dir``, ``--force``) are those of every robodyn command
(``robodyn.options``). ``--bound`` calls a method object bound once before the loop
(``f = robot.g; f(q)``) instead of ``robot.g(q)``.

Without valgrind on PATH the script says so and exits with status 0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MARKER = "getppid"  # os.getppid() -> libc getppid(): never called by the measured code
BATCH_ROWS = 16
BATCH_ROUTINE = "gravity"  # the batch case: g on BATCH_ROWS rows with out=


def _size(size: str, dims: dict[str, int]) -> int:
    """An argument size of the routine table ("n" or a number) for this robot."""
    return int(size) if size.isdigit() else dims[size]


def cases(robot, table=None, only=None) -> list[dict]:
    """The measured calls, in table order: for each routine the robot has, with ``out=`` then allocating;
    then the batch case. Each: label, routine (table entry), arguments (required only), out (None, an
    array, or a tuple of arrays for several outputs), batch rows (0: one state). ``only``: the routines
    (method or C names) to measure, None for all. Sizes come from ``robot.dimensions`` (n joints, p
    dynamic and b base parameters: the regressors' (n, p) and (n, b) outputs)."""
    import numpy as np

    from robodyn import routines as table_module

    table = table_module.TABLE if table is None else table
    if only:
        table = [r for r in table if r.method in only or r.name in only]
    available = set(robot.routine_names)
    dims = robot.dimensions
    rng = np.random.default_rng(0)
    result = []

    def outputs(routine, rows: int):
        shapes = [((rows,) if rows else ()) + routine.shape(output, dims) for output in routine.outputs]
        arrays = tuple(np.zeros(shape) for shape in shapes)
        return arrays[0] if len(arrays) == 1 else arrays

    def arguments(routine, rows: int):
        values = [rng.uniform(-1.0, 1.0, ((rows,) if rows else ()) + (_size(a.size, dims),))
                  for a in routine.arguments if not a.optional]
        if robot.is_floating_base:  # a floating base's configurations carry a unit quaternion
            for a, value in zip([a for a in routine.arguments if not a.optional], values):
                if a.size == "nq":
                    value[..., 3:7] /= np.linalg.norm(value[..., 3:7], axis=-1, keepdims=True)
        return values

    for routine in table:
        if routine.name not in available:
            continue
        names = [a.name for a in routine.arguments if not a.optional]
        args = arguments(routine, 0)
        result.append({"label": f"{routine.method}({', '.join(names + ['out=out'])})", "routine": routine,
                       "arguments": args, "out": outputs(routine, 0), "rows": 0})
        result.append({"label": f"{routine.method}({', '.join(names)})", "routine": routine, "arguments": args,
                       "out": None, "rows": 0})
    batch = next((r for r in table if r.name == BATCH_ROUTINE), None)
    if batch is not None and batch.name in available:
        names = ", ".join(a.name.upper() for a in batch.arguments if not a.optional)
        result.append({"label": f"{batch.method}({names}, out=OUT) batch of {BATCH_ROWS} rows", "routine": batch,
                       "arguments": arguments(batch, BATCH_ROWS), "out": outputs(batch, BATCH_ROWS),
                       "rows": BATCH_ROWS})
    return result


def _loops(method: str, n_arguments: int, with_out: bool, bound: bool):
    """(call loop, empty loop): the same plain local-variable bytecode around the call or ``pass``."""
    parameters = ", ".join(["r"] + [f"a{i}" for i in range(n_arguments)] + ["out", "k"])
    arguments = ", ".join([f"a{i}" for i in range(n_arguments)] + (["out=out"] if with_out else []))
    call = f"r({arguments})" if bound else f"r.{method}({arguments})"
    namespace: dict = {}
    exec(f"def call_loop({parameters}):\n    for _ in range(k):\n        {call}\n"
         f"def empty_loop({parameters}):\n    for _ in range(k):\n        pass\n", namespace)
    return namespace["call_loop"], namespace["empty_loop"]


def child(args) -> None:
    """Under callgrind: load the module, run every case between markers, write what each dump holds."""
    from robodyn.cache import import_extension
    from robodyn.robot import Robot

    path = Path(args.module).resolve()
    robot = Robot.from_extension(import_extension(path.name.split(".")[0], path))
    labels, dumps = [], []
    for case in cases(robot, only=args.only):
        routine = case["routine"]
        call_loop, empty_loop = _loops(routine.method, len(case["arguments"]), case["out"] is not None, args.bound)
        target = getattr(robot, routine.method) if args.bound else robot
        a = (target, *case["arguments"], case["out"])
        call_loop(*a, 200)  # warm up: quickening, allocator pools, first-call binding
        empty_loop(*a, 200)
        os.getppid()  # dump: everything before (start-up, warm-up)
        dumps.append(None)
        empty_loop(*a, args.calls)
        os.getppid()
        dumps.append([case["label"], "empty"])
        call_loop(*a, args.calls)
        os.getppid()
        dumps.append([case["label"], "call"])
        labels.append({"call": case["label"], "routine": routine.name, "method": routine.method,
                       "symbol": f"{robot.name}_{routine.name}_kernel", "rows": case["rows"]})
    Path(args.labels).write_text(json.dumps({"robot": robot.name, "n": robot.n, "cases": labels,
                                             "dumps": dumps}))


def _total(dump: Path) -> int:
    for line in dump.read_text().splitlines():
        if line.startswith("totals:") or line.startswith("summary:"):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {dump}")


#: Where robodyn's C starts (robodyn_method.h): ``robot.<method>(...)`` enters rd_routine_vectorcall; a bound method
#: (``f = robot.<method>; f(...)``) enters its table index's trampoline rd_method_<index>.
BINDING_SYMBOL = re.compile(r"rd_routine_vectorcall|rd_method_\d+")


def _inclusive(dump: Path, symbol: str | re.Pattern, absent=0):
    """Inclusive Ir of one function in a dump (callgrind_annotate), ``absent`` if not found; ``symbol`` a name, or a
    pattern its name must match in full (the largest such function)."""
    tool = shutil.which("callgrind_annotate")
    if tool is None:
        return absent
    text = subprocess.run([tool, "--inclusive=yes", "--threshold=100", str(dump)], capture_output=True,
                          text=True).stdout
    found = None
    for line in text.splitlines():
        match = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+\S*:(\S+)", line) or re.match(r"\s*([\d,]+)\s+\S*:(\S+)", line)
        if match is None:
            continue
        name = match.group(2)
        if name == symbol if isinstance(symbol, str) else symbol.fullmatch(name):
            value = int(match.group(1).replace(",", ""))
            found = value if found is None else max(found, value)
    return absent if found is None else found


def _module_path(args, options) -> tuple[Path, str]:
    """The robot module to measure (built here, outside valgrind, if needed) and a description of it."""
    if args.module:
        path = Path(args.module).resolve()
        if not path.is_file():
            raise SystemExit(f"--module {args.module}: no such file")
        return path, path.name
    import robodyn  # build outside valgrind: SymPy and the compiler under callgrind would take ages

    robot = robodyn.load(args.robot, options, cache_dir=args.cache_dir, force=args.force)
    return Path(robot.extension.__file__).resolve(), " ".join([Path(args.robot).name, *options.flags()])


def parent(args, options) -> int:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("valgrind not found on PATH: skipping the instruction counts (install valgrind to run this).")
        return 0
    module, source = _module_path(args, options)
    with tempfile.TemporaryDirectory(prefix="robodyn-callgrind-") as tmp:
        tmp = Path(tmp)
        labels_file = tmp / "labels.json"
        # The child always imports the module file: no cache lookup (and no compiler query) under valgrind.
        command = [valgrind, "--tool=callgrind", f"--callgrind-out-file={tmp / 'cg.out'}",
                   f"--dump-before={MARKER}", sys.executable, str(Path(__file__).resolve()), "--child",
                   "--calls", str(args.calls), "--labels", str(labels_file), "--module", str(module)]
        if args.bound:
            command.append("--bound")
        for name in args.only or ():
            command += ["--only", name]
        env = dict(os.environ, PYTHONHASHSEED="0")
        result = subprocess.run(command, capture_output=True, text=True, env=env)
        if result.returncode != 0 or not labels_file.is_file():
            print(result.stdout + result.stderr, file=sys.stderr)
            return 1
        info = json.loads(labels_file.read_text())
        robot = info["robot"]
        # The i-th marker call of the child wrote cg.out.<i + 1>: what ran since the previous marker.
        files = sorted(tmp.glob("cg.out.*"), key=lambda p: int(p.suffix[1:]))
        if len(files) < len(info["dumps"]):
            print(f"expected {len(info['dumps'])} callgrind dumps, found {len(files)}", file=sys.stderr)
            return 1
        loops = {tuple(what): dump for dump, what in zip(files, info["dumps"]) if what is not None}
        rows = []
        for case in info["cases"]:
            label = case["call"]
            empty, full = loops[label, "empty"], loops[label, "call"]
            total = (_total(full) - _total(empty)) / args.calls
            kernel = _inclusive(full, case["symbol"]) / args.calls
            trampoline = _inclusive(full, BINDING_SYMBOL, absent=None)
            binding = None if trampoline is None else trampoline / args.calls - kernel
            rows.append(dict(case, total=total, kernel=kernel, binding=binding))
    width = max(len(row["call"]) for row in rows)
    style = "f = robot.<method>; f(...)" if args.bound else "robot.<method>(...)"
    print(f"robot {robot} ({info['n']} joints, {source}): instructions per call (valgrind callgrind, "
          f"{args.calls} calls, {style})")
    print(f"{'call':<{width}}  {'total':>8}  {'kernel':>8}  {'overhead':>8}  {'binding':>8}  {'interpreter':>11}")
    for row in rows:
        overhead, binding = row["total"] - row["kernel"], row["binding"]
        split = (f"{binding:8.0f}  {overhead - binding:11.0f}" if binding is not None else f"{'-':>8}  {'-':>11}")
        print(f"{row['call']:<{width}}  {row['total']:8.0f}  {row['kernel']:8.0f}  {overhead:8.0f}  {split}")
    if args.json:
        Path(args.json).write_text(json.dumps({"robot": robot, "n": info["n"], "source": source, "calls": args.calls,
                                               "bound": args.bound, "rows": rows}, indent=2) + "\n")
    return 0


def main(argv=None) -> int:
    from robodyn.options import add_arguments, from_arguments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("robot", nargs="?", default=str(REPO / "robots" / "rr.yaml"), help="robot description")
    parser.add_argument("--module", default=None, metavar="PATH",
                        help="measure this compiled robot module instead of loading ROBOT (model options ignored)")
    parser.add_argument("--calls", type=int, default=20000, help="calls per loop (default 20000)")
    parser.add_argument("--bound", action="store_true", help="call a method bound before the loop (f = robot.g)")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the results to this file")
    parser.add_argument("--only", action="append", default=None, metavar="ROUTINE",
                        help="measure only this routine (method or C name, e.g. regressor); repeatable")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--labels", default=None, help=argparse.SUPPRESS)
    add_arguments(parser)
    args = parser.parse_args(argv)
    if args.calls < 1:
        parser.error("--calls must be positive")
    if args.child:
        child(args)
        return 0
    try:
        options = from_arguments(args)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    return parent(args, options)


if __name__ == "__main__":
    sys.exit(main())
