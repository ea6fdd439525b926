"""Command line: python -m codegen DESCRIPTION [model options] [--cache-dir DIR] [--force] [--print]

Exit codes: 0 success, 1 invalid description, 2 bad command line,
3 build or self-check failure.
"""

from __future__ import annotations

import argparse
import sys
import time

from robodyn.options import BuildOptions, add_arguments, from_arguments

from . import __version__
from .errors import CodegenError, report

EPILOG = """examples:
  python -m codegen robots/rr.yaml                       derive, emit C, compile, self-check, cache
  python -m codegen robots/rr.yaml --print               show M, C, g, friction and energies
  python -m codegen panda.urdf --lock panda_finger_joint1=0 --lock panda_finger_joint2=0 --tool panda_hand
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m codegen", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Derive the dynamic model of a robot description, emit C, compile it into a Python "
                    "extension module (cached) and self-check it.")
    parser.add_argument("description", help="robot description: our YAML format (e.g. robots/rr.yaml) or a URDF file")
    add_arguments(parser)
    parser.add_argument("--print", dest="print_model", action="store_true",
                        help="print the symbolic model (M, C, g, friction, energies) and exit without building")
    parser.add_argument("--quiet", action="store_true", help="print only errors and the final summary line")
    parser.add_argument("--version", action="version", version=f"robodyn codegen {__version__}")
    return parser


def _print_model(path: str, options: BuildOptions) -> None:
    import sympy as sp

    from . import derive

    model = derive(path, options)
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


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        options = from_arguments(args)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    try:
        if args.print_model:
            _print_model(args.description, options)
            return 0
        from .pipeline import build

        start = time.perf_counter()
        progress = None if args.quiet else (lambda message: print(f"[codegen] {message}", flush=True))
        built = build(args.description, options, cache_dir=args.cache_dir, force=args.force, progress=progress)
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
        extra = "".join(f", {k}={v!r}" for k, v in _option_keywords(options).items())
        extra += f", cache_dir={args.cache_dir!r}" if args.cache_dir else ""
        print(f"  robot = robodyn.load({args.description!r}{extra})")
        print(f"or: python -m robodyn simulate {' '.join([args.description] + options.flags())}")
    return 0


def _option_keywords(options: BuildOptions) -> dict:
    default = BuildOptions()
    values = {}
    for name, value in options.as_dict().items():
        if value != default.as_dict()[name]:
            values[name] = options.lock_map if name == "lock" else value
    return values


if __name__ == "__main__":
    sys.exit(main())
