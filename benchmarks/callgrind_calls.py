"""Instructions per call of the compiled routines, counted with valgrind callgrind.

Wall-clock timings of sub-microsecond calls are noisy on shared machines;
instruction counts are deterministic. This script builds (or reuses) a robot,
then runs one child Python under ``valgrind --tool=callgrind`` that, for each
routine, executes a loop of ``--calls`` calls and the same loop with the call
replaced by ``pass``. A marker call (``os.getppid``) before each loop makes
callgrind dump its counters (``--dump-before``), so every loop gets its own
total. Per call::

    total    = (Ir(call loop) - Ir(empty loop)) / calls
    kernel   = inclusive Ir of the generated C routine (e.g. rr_gravity) / calls
    overhead = total - kernel     (Python call + argument checks + bridge)

Usage::

    python benchmarks/callgrind_calls.py                      # robots/rr.yaml
    python benchmarks/callgrind_calls.py robots/rrr.yaml --calls 20000
    python benchmarks/callgrind_calls.py --module path/to/robodyn_rr_xxx.so   # a given build

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

# label, method, arguments (names of prepared arrays), out shape key (None: no out=)
CASES = [
    ("g(q, out=out)", "g", ("q",), "vec"),
    ("g(q)", "g", ("q",), None),
    ("M(q, out=out)", "M", ("q",), "mat"),
    ("M(q)", "M", ("q",), None),
    ("C(q, qd, out=out)", "C", ("q", "qd"), "mat"),
    ("inverse_dynamics(q, qd, qdd, out=out)", "inverse_dynamics", ("q", "qd", "qdd"), "vec"),
    ("inverse_dynamics(q, qd, qdd)", "inverse_dynamics", ("q", "qd", "qdd"), None),
    ("forward_dynamics(q, qd, tau, out=out)", "forward_dynamics", ("q", "qd", "tau"), "vec"),
    ("forward_dynamics(q, qd, tau)", "forward_dynamics", ("q", "qd", "tau"), None),
    ("kinetic_energy(q, qd)", "kinetic_energy", ("q", "qd"), None),
    ("g(Q, out=OUT) batch of 16 rows", "g", ("Q",), "batch"),
]

KERNELS = {"g": "gravity", "M": "mass_matrix", "C": "coriolis_matrix", "inverse_dynamics": "inverse_dynamics",
           "forward_dynamics": "forward_dynamics", "kinetic_energy": "kinetic_energy"}


def _load_dynamics(args):
    """The compiled Dynamics object and the robot name (no SymPy, no build in the child)."""
    if args.module:
        sys.path.insert(0, str(REPO))
        from codegen.build import import_module

        path = Path(args.module).resolve()
        module = import_module(path.name.split(".")[0], path)
    else:
        import robodyn

        module = robodyn.load(args.robot, cache_dir=args.cache_dir)._module
    return module.Dynamics(), module.metadata["robot"]


def child(args) -> None:
    import numpy as np

    d, robot = _load_dynamics(args)
    n = d.n
    rng = np.random.default_rng(0)
    arrays = {name: rng.uniform(-1.0, 1.0, n) for name in ("q", "qd", "qdd", "tau")}
    arrays["Q"] = rng.uniform(-1.0, 1.0, (16, n))
    outs = {"vec": np.empty(n), "mat": np.empty((n, n)), "batch": np.empty((16, n))}
    calls = args.calls
    labels = []
    namespace: dict = {}
    for label, method, names, out_key in CASES:
        arguments = ", ".join(f"a{i}" for i in range(len(names)))
        call = f"f({arguments}, out=out)" if out_key else f"f({arguments})"
        # One function per case so the loop is plain local-variable bytecode.
        exec(f"def call_loop(f, a0, a1, a2, out, k):\n    for _ in range(k):\n        {call}\n"
             f"def empty_loop(f, a0, a1, a2, out, k):\n    for _ in range(k):\n        pass\n", namespace)
        call_loop, empty_loop = namespace["call_loop"], namespace["empty_loop"]
        f = getattr(d, method)
        a = [arrays[name] for name in names] + [None] * (3 - len(names))
        out = outs[out_key] if out_key else None
        call_loop(f, *a, out, 200)  # warm up: quickening, allocator pools
        empty_loop(f, *a, out, 200)
        os.getppid()
        empty_loop(f, *a, out, calls)
        os.getppid()
        call_loop(f, *a, out, calls)
        labels.append(label)
    os.getppid()
    Path(args.labels).write_text(json.dumps({"robot": robot, "labels": labels}))


def _total(dump: Path) -> int:
    for line in dump.read_text().splitlines():
        if line.startswith("totals:") or line.startswith("summary:"):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {dump}")


def _inclusive(dump: Path, symbol: str) -> int:
    """Inclusive Ir of one function in a dump (callgrind_annotate), 0 if absent."""
    tool = shutil.which("callgrind_annotate")
    if tool is None:
        return 0
    text = subprocess.run([tool, "--inclusive=yes", "--threshold=100", str(dump)], capture_output=True,
                          text=True).stdout
    for line in text.splitlines():
        match = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+\S*:(\S+)", line) or re.match(r"\s*([\d,]+)\s+\S*:(\S+)", line)
        if match and match.group(2) == symbol:
            return int(match.group(1).replace(",", ""))
    return 0


def parent(args) -> int:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("valgrind not found on PATH: skipping the instruction counts (install valgrind to run this).")
        return 0
    if not args.module:
        import robodyn  # build outside valgrind: SymPy and the compiler under callgrind would take ages

        robodyn.load(args.robot, cache_dir=args.cache_dir)
    with tempfile.TemporaryDirectory(prefix="robodyn-callgrind-") as tmp:
        tmp = Path(tmp)
        labels_file = tmp / "labels.json"
        command = [valgrind, "--tool=callgrind", f"--callgrind-out-file={tmp / 'cg.out'}",
                   f"--dump-before={MARKER}", sys.executable, str(Path(__file__).resolve()), "--child",
                   "--calls", str(args.calls), "--labels", str(labels_file), args.robot]
        if args.cache_dir:
            command += ["--cache-dir", str(args.cache_dir)]
        if args.module:
            command += ["--module", str(args.module)]
        env = dict(os.environ, PYTHONHASHSEED="0")
        result = subprocess.run(command, capture_output=True, text=True, env=env)
        if result.returncode != 0 or not labels_file.is_file():
            print(result.stdout + result.stderr, file=sys.stderr)
            return 1
        info = json.loads(labels_file.read_text())
        robot, labels = info["robot"], info["labels"]
        dumps = sorted(tmp.glob("cg.out.*"), key=lambda p: int(p.suffix[1:]))
        # cg.out.1 is start-up; then (empty loop, call loop) per case.
        pairs = dumps[1:1 + 2 * len(labels)]
        rows = []
        for i, label in enumerate(labels):
            empty, full = pairs[2 * i], pairs[2 * i + 1]
            total = (_total(full) - _total(empty)) / args.calls
            method = next(c[1] for c in CASES if c[0] == label)
            kernel = _inclusive(full, f"{robot}_{KERNELS[method]}") / args.calls
            rows.append((label, total, kernel))
    width = max(len(label) for label, _, _ in rows)
    print(f"robot {robot}: instructions per call (valgrind callgrind, {args.calls} calls)")
    print(f"{'call':<{width}}  {'total':>8}  {'kernel':>8}  {'overhead':>8}")
    for label, total, kernel in rows:
        print(f"{label:<{width}}  {total:8.0f}  {kernel:8.0f}  {total - kernel:8.0f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"robot": robot, "calls": args.calls,
                                               "rows": [{"call": r[0], "total": r[1], "kernel": r[2]}
                                                        for r in rows]}, indent=2))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("robot", nargs="?", default=str(REPO / "robots" / "rr.yaml"))
    parser.add_argument("--cache-dir", default=None, help="robodyn cache (default: the usual one)")
    parser.add_argument("--module", default=None, help="measure this compiled extension instead of loading ROBOT")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--json", default=None, help="also write the results to this file")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--labels", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return 0
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
