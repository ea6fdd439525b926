"""Forward dynamics two ways, in C: sparse LᵀDL solve vs articulated-body algorithm.

    python benchmarks/forward_dynamics_variants.py [DESCRIPTION] [--lock JOINT=VALUE ...] [--tool LINK]

Derives the recursive model of a robot once (default: the Panda of example-robot-data,
fingers locked), runs the generator's routine and emit stages (``codegen.model.routines``,
``codegen.emit.sources``) with each forward-dynamics option (``BuildOptions.forward``),
compiles a small C driver against each variant's ``<robot>_forward_dynamics.c`` with the
flags of robot modules, checks that both give the same q̈, and reports time per call and,
when valgrind is installed, instructions per call (stable on a busy machine). Measured here for the Panda (7 joints):
LᵀDL 5.9k instructions per call, articulated body 6.0k — within 2 %, so the default stays LᵀDL,
which also handles motor rotors.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import codegen
from codegen.emit.sources import emit
from codegen.extension.compile import ROBOT_FLAGS
from codegen.model.routines import define_routines
from robodyn.options import BuildOptions, parse_assignments

CALLS = 100_000

DRIVER = r"""
#include <stdio.h>
#include <time.h>
#include "{robot}_dynamics.h"
int main(int argc, char **argv) {{
    double q[{n}], qd[{n}], tau[{n}], out[{n}], p[{np}], best = 1e9;
    long calls = argc > 1 ? atol(argv[1]) : {calls};
    struct timespec t0, t1;
    for (int i = 0; i < {n}; i++) {{ q[i] = 0.1 * i; qd[i] = 0.2 - 0.05 * i; tau[i] = 1.0 + i; }}
    for (int i = 0; i < {np}; i++) p[i] = 0.0;
{defaults}
    for (int r = 0; r < 5; r++) {{
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long k = 0; k < calls; k++) {{ q[k % {n}] += 1e-12; {robot}_forward_dynamics(q, qd, tau, 0, p, out); }}
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double dt = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
        if (dt < best) best = dt;
    }}
    printf("%.1f", best / calls * 1e9);
    for (int i = 0; i < {n}; i++) printf(" %.17g", out[i]);
    printf("\n");
    return 0;
}}
"""


def _panda() -> tuple[Path, dict]:
    import pinocchio

    for parent in Path(pinocchio.__file__).resolve().parents:
        candidate = parent / "cmeel.prefix/share/example-robot-data/robots/panda_description/urdf/panda.urdf"
        if candidate.is_file():
            return candidate, {"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0}
    raise SystemExit("example-robot-data is not installed; give a description path")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("description", nargs="?", help="robot description (default: the Panda, fingers locked)")
    parser.add_argument("--lock", action="append", default=[], metavar="JOINT=VALUE",
                        help="URDF: freeze a joint at a position (repeatable), as on every robodyn command")
    parser.add_argument("--tool", default=None, metavar="LINK", help="the link that carries the tool frame")
    args = parser.parse_args()
    try:
        lock = parse_assignments(args.lock, "--lock")
    except ValueError as exc:
        parser.error(str(exc))
    path, default_lock = (Path(args.description), {}) if args.description else _panda()
    # The articulated-body variant needs the recursive route; the model is the same for both variants.
    options = BuildOptions(method="recursive", forward="aba", lock=lock or default_lock, tool=args.tool)
    model = codegen.derive(path, options)
    if model.aba is None:
        raise SystemExit("this robot has motor rotors: the articulated-body variant does not apply")
    defaults = "\n".join(f"    p[{i}] = {p.default!r};" for i, p in enumerate(model.description.parameters))
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for variant in ("ltdl", "aba"):
            sources = emit(define_routines(model, options.replace(forward=variant)))
            folder = Path(tmp) / variant
            folder.mkdir()
            for name, text in sources.files.items():
                (folder / name).write_text(text)
            robot = sources.robot
            (folder / "driver.c").write_text(DRIVER.format(robot=robot, n=model.n, np=max(1, len(model.parameters)),
                                                           calls=CALLS, defaults=defaults).replace(
                "#include <stdio.h>", "#include <stdio.h>\n#include <stdlib.h>"))
            # One file per routine: the driver needs only forward dynamics (robot modules' flags).
            subprocess.run(["gcc", *ROBOT_FLAGS, "-o", "driver", "driver.c", f"{robot}_forward_dynamics.c", "-lm"],
                           cwd=folder, check=True)
            fields = subprocess.run([str(folder / "driver")], capture_output=True, text=True,
                                    check=True).stdout.split()
            instructions = None
            if shutil.which("valgrind"):
                out = folder / "callgrind.out"
                run = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                                      str(folder / "driver"), "2000"], capture_output=True, text=True, check=True)
                total = int(next(line for line in run.stderr.splitlines() if "Collected" in line).split()[-1])
                instructions = total / (5 * 2000)
            results[variant] = (float(fields[0]), np.array(fields[1:], dtype=float), instructions,
                                sources.operation_counts["forward_dynamics"])
    np.testing.assert_allclose(results["aba"][1], results["ltdl"][1], rtol=1e-10, atol=1e-12)
    print(f"{model.description.name}: {model.n} joints")
    for variant, (ns, _, instructions, operations) in results.items():
        extra = f", {instructions:.0f} instructions per call" if instructions else ""
        print(f"  {variant:<5} {ns:8.1f} ns per call, {operations} operations in the C{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
