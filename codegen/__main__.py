"""Command line: python -m codegen ROBOT.yaml [--out DIR] [--force] [--print]

Exit codes: 0 success, 1 invalid description, 2 bad command line,
3 build or self-check failure.
"""

from __future__ import annotations

import argparse
import sys
import time

from . import __version__
from .errors import CodegenError, report


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m codegen",
        description="Derive the dynamic model of a robot description, emit C, compile it into a Python "
                    "extension module (cached) and self-check it.")
    parser.add_argument("description", help="robot description: our YAML format (e.g. robots/rr.yaml) or a URDF file")
    parser.add_argument("--lock", metavar="JOINT=VALUE", action="append", default=[],
                        help="URDF only: freeze a joint at a position (repeatable), e.g. --lock panda_finger_joint1=0")
    parser.add_argument("--out", metavar="DIR", help="cache directory for compiled modules "
                        "(default: $ROBODYN_CACHE_DIR, else $XDG_CACHE_HOME/robodyn or ~/.cache/robodyn)")
    parser.add_argument("--forward", choices=("ltdl", "aba"), default="ltdl",
                        help="forward dynamics: M, bias and a sparse L^T D L solve (default; any robot), or the "
                             "articulated-body algorithm (recursive route, no motor rotors)")
    parser.add_argument("--runtime-parameters", action="store_true",
                        help="URDF only: keep masses, centres of mass, inertias and friction as parameters "
                             "settable at run time (default: baked into the code as numbers)")
    parser.add_argument("--force", action="store_true", help="rebuild even if a cached module exists")
    parser.add_argument("--print", dest="print_model", action="store_true",
                        help="print the symbolic model (M, C, g, friction, energies) and exit without building")
    parser.add_argument("--method", choices=("auto", "lagrange", "recursive"), default="auto",
                        help="derivation route: Euler-Lagrange closed forms, or recursive algorithms "
                             "(Newton-Euler, composite rigid body, recursive Coriolis matrix); "
                             "auto = Lagrange up to 3 joints (default)")
    parser.add_argument("--no-simplify", action="store_true",
                        help="skip trigonometric simplification (faster derivation, larger expressions)")
    parser.add_argument("--quiet", action="store_true", help="print only errors and the final summary line")
    parser.add_argument("--version", action="version", version=f"robodyn codegen {__version__}")
    return parser


def _print_model(path: str, simplify: bool, method: str, lock: dict, runtime_parameters: bool) -> None:
    import sympy as sp

    from . import derive

    model = derive(path, method=method, simplify=simplify, lock=lock, runtime_parameters=runtime_parameters)
    if model.definitions:
        from .model.program import expand_program

        if model.n > 3:
            print(f"(recursive model of {model.n} joints: {len(model.definitions)} intermediate definitions; "
                  "printing the expanded expressions would be unreadable, use --method lagrange for closed forms)")
            return
        model = _expanded(model, expand_program)
    d = model.description
    print(f"Robot {d.name!r}: {model.n} joints; q = {list(model.q)}")
    print("Parameters: " + (", ".join(f"{p.name}={p.default:g}" for p in d.parameters) or "none"))
    print("\nM(q) =")
    sp.pprint(model.M, wrap_line=False, use_unicode=True)
    print("\nC(q, qd) =")
    sp.pprint(model.C, wrap_line=False, use_unicode=True)
    print("\ng(q) =")
    sp.pprint(model.g, wrap_line=False, use_unicode=True)
    print("\nfriction(qd) =")
    sp.pprint(model.friction, wrap_line=False, use_unicode=True)
    print("\npotential energy P(q) =")
    sp.pprint(model.potential_energy, wrap_line=False, use_unicode=True)
    print("\nkinetic energy = 1/2 qd^T M(q) qd")


def _expanded(model, expand_program):
    """The recursive model with its intermediates substituted (small robots only)."""
    import dataclasses

    import sympy as sp

    def full(matrix):
        return sp.ImmutableMatrix(matrix.applyfunc(lambda e: sp.simplify(expand_program(model.definitions, e))))

    return dataclasses.replace(model, M=full(model.M), C=full(model.C), g=full(model.g),
                               potential_energy=sp.simplify(expand_program(model.definitions, model.potential_energy)),
                               definitions=())


def parse_assignments(items: list[str], option: str) -> dict[str, float]:
    """NAME=NUMBER options (--lock here, --set and --model-set in python -m robodyn) as a dict;
    ValueError names the option and the bad item."""
    values = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            values[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise ValueError(f"{option} {item!r}: expected NAME=NUMBER")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        lock = parse_assignments(args.lock, "--lock")
    except ValueError as exc:
        parser.error(str(exc))
    try:
        if args.print_model:
            _print_model(args.description, not args.no_simplify, args.method, lock, args.runtime_parameters)
            return 0
        from .build import ensure_built

        start = time.perf_counter()
        progress = None if args.quiet else (lambda message: print(f"[codegen] {message}", flush=True))
        built = ensure_built(args.description, out=args.out, force=args.force, progress=progress,
                             simplify=not args.no_simplify, method=args.method, lock=lock,
                             runtime_parameters=args.runtime_parameters, forward=args.forward)
        elapsed = time.perf_counter() - start
    except CodegenError as exc:
        return report(exc)

    if built.cache_hit:
        print(f"cache hit: {built.module_path} ({elapsed * 1000:.0f} ms)")
    else:
        print(f"built {built.module_path} in {elapsed:.1f} s")
    if not args.quiet:
        checks = built.selfcheck.get("checks", [])
        status = "passed" if built.selfcheck.get("passed") else "FAILED"
        print(f"self-check {status}:")
        for check in checks:
            mark = "ok " if check["passed"] else "BAD"
            print(f"  {mark} {check['name']:<40} error {check['error']:.2e}  (tolerance {check['tolerance']:.0e})")
        counts = built.manifest.get("operation_counts", {})
        if counts:
            print("operation counts after CSE: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        print("use it from Python:")
        print("  import robodyn")
        extra = (f", cache_dir={args.out!r}" if args.out else "") + (f", lock={lock!r}" if lock else "") \
            + (", runtime_parameters=True" if args.runtime_parameters else "")
        print(f"  robot = robodyn.load({args.description!r}{extra})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
