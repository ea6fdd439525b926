"""Command line: python -m codegen DESCRIPTION [model options] [--cache-dir DIR] [--force] [--print]
[--quiet] [--debug]

Exit statuses: robodyn.errors.EXIT_STATUS_HELP (0 success, 1 invalid input, 2 bad command line,
3 build or self-check failure, 4 cache directory or environment, 130 interrupted).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time

from robodyn.errors import EXIT_STATUS_HELP, exit_with, run_command
from robodyn.options import BuildOptions, add_arguments, from_arguments

from . import __version__

EPILOG = """examples:
  python -m codegen robots/rr.yaml                       derive, emit C, compile, self-check, cache
  python -m codegen robots/rr.yaml --print               show M, C, g, friction and energies
  python -m codegen panda.urdf --lock panda_finger_joint1=0 --lock panda_finger_joint2=0 --tool panda_hand

Progress (the stages of a build that takes more than a second, with their times) goes to stderr;
--quiet leaves only errors, warnings and the result line.

""" + EXIT_STATUS_HELP


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m codegen", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Derive the dynamic model of a robot description, emit C, compile it into a Python "
                    "extension module (cached) and self-check it.")
    parser.add_argument("description", help="robot description: our YAML format (e.g. robots/rr.yaml) or a URDF file")
    add_arguments(parser)
    parser.add_argument("--print", dest="print_model", action="store_true",
                        help="print the symbolic model (M, C, g, friction, energies) and exit without building")
    parser.add_argument("--version", action="version", version=f"robodyn codegen {__version__}")
    return parser


def _print_model(path: str, options: BuildOptions) -> None:
    import sympy as sp

    from . import derive

    model = derive(path, options)
    if model.closed_chain is not None:
        _print_closed_chain_model(model)
        return
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


def _print_closed_chain_model(model) -> None:
    """A closed chain's loop equations and closed-form geometry (its dynamics are a projection of the tree's:
    printed expanded they would be unreadable)."""
    import sympy as sp

    chain = model.closed_chain
    tree = chain.tree.description
    actuated = [tree.joints[i].name for i in chain.actuated]
    coordinates = (", ".join(f"q{k + 1} = {name}" for k, name in enumerate(actuated)) if chain.closed_form
                   else f"every joint of the tree; actuated: {', '.join(actuated)}")
    print(f"Closed chain {model.description.name!r}: {len(tree.joints)} joints in the virtual tree "
          f"({', '.join(j.name for j in tree.joints)}); coordinates {coordinates}")
    by_name = {symbol: sp.Symbol(joint.name) for symbol, joint in zip(chain.tree.q, tree.joints)}
    print("\nloop equations h = 0, in the tree's joint positions:")
    for row in chain.constraint:
        print(f"  {sp.sstr(row.xreplace(by_name))} = 0")
    form = chain.closed_form
    if form is None:
        print(f"\nno closed-form geometry ({chain.reason}): simulated with multipliers (robodyn.closed_chain)")
        return
    axes = "xyz"
    names = {form.xi[0]: sp.Symbol(axes[form.plane[1]]), form.xi[1]: sp.Symbol(axes[form.plane[2]])}
    for mode, dgm in zip((1, -1), form.dgm):
        print(f"\ndirect geometric model, assembly mode {mode:+d}:")
        for symbol, value in zip(names.values(), dgm):
            print(f"  {symbol} = {sp.sstr(value)}")
    for modes, igm in zip(form.working_modes, form.igm):
        print(f"\ninverse geometric model, working mode {modes}:")
        for k, value in enumerate(igm):
            print(f"  q{k + 1} = {sp.sstr(value.xreplace(names))}")
    print("\nA = dh/dx =", sp.sstr(form.A.xreplace(names)))
    print("B = dh/dq =", sp.sstr(form.B.xreplace(names)))
    print("\n" + "\n".join(form.loci))
    print("\ndynamics: M = G^T M_tree G, C = G^T (M_tree Gdot + C_tree G), g = G^T g_tree with G = [I; Jp], "
          "Jp = -A_x^-1 B_x from the loop equations (docs/closed_chains.md)")


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
    return run_command(_run, args, options, debug=args.debug)


def _run(args, options: BuildOptions) -> int:
    if args.print_model:
        _print_model(args.description, options)
        return 0
    from .pipeline import build, delayed_progress, stderr_writer

    start = time.perf_counter()
    progress = None if args.quiet else delayed_progress(stderr_writer())
    try:
        built = build(args.description, options, cache_dir=args.cache_dir, force=args.force, progress=progress,
                      notice=stderr_writer())
    finally:
        getattr(progress, "cancel", lambda: None)()
    elapsed = time.perf_counter() - start

    if built.cache_hit:
        print(f"cache hit: {built.module_path} ({elapsed * 1000:.0f} ms)")
    else:
        print(f"built {built.module_path} in {elapsed:.1f} s")
    if not args.quiet:
        checks = built.selfcheck.get("checks", [])
        status = built.selfcheck.get("status", "passed")
        print(f"self-check {status}" + (" (built with --no-selfcheck)" if status == "skipped" else ":"))
        for check in checks:
            mark = "ok " if check["passed"] else "BAD"
            if check.get("note"):  # a figure reported, not judged
                print(f"  --  {check['name']:<40} {check['note']}")
                continue
            print(f"  {mark} {check['name']:<40} error {check['error']:.2e}  (tolerance {check['tolerance']:.0e})")
        chain = built.manifest.get("metadata", {}).get("closed_chain")
        if isinstance(chain, dict):
            _print_closed_chain(chain)
        counts = built.manifest.get("operation_counts", {})
        if counts:
            print("operation counts after CSE: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        print("use it from Python:")
        print("  import robodyn")
        extra = "".join(f", {k}={v!r}" for k, v in _option_keywords(options).items())
        extra += f", cache_dir={args.cache_dir!r}" if args.cache_dir else ""
        print(f"  robot = robodyn.load({args.description!r}{extra})")
        cache_flags = ["--cache-dir", str(args.cache_dir)] if args.cache_dir else []
        print(f"or: python -m robodyn simulate {shlex.join([args.description, *options.flags(), *cache_flags])}")
    return 0


def _print_closed_chain(chain: dict) -> None:
    """The build report of a closed chain: its coordinates, modes and singularity loci."""
    print(f"closed chain: {len(chain['actuated'])} actuated of {len(chain['tree_joint_names'])} joints, "
          f"{chain['constraints']} loop equations")
    if not chain["closed_form"]:
        print(f"  no closed-form geometry ({chain['reason']}): simulated with multipliers "
              "(robodyn.closed_chain.ConstrainedDynamics)")
        return
    print(f"  assembly mode {chain['assembly_mode']:+d} compiled ({chain['assembly_meaning']})")
    for meaning in chain["working_meaning"]:
        print(f"  working modes: {meaning}")
    print("  singularity loci:")
    for line in chain["loci"]:
        print(f"    {line}")


def _option_keywords(options: BuildOptions) -> dict:
    default = BuildOptions()
    values = {}
    for name, value in options.as_dict().items():
        if value != default.as_dict()[name]:
            values[name] = options.lock_map if name == "lock" else value
    return values


if __name__ == "__main__":
    exit_with(main())
