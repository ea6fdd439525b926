"""Stage 2: RobotDescription -> SymbolicModel, by the Euler-Lagrange or the recursive route."""

from __future__ import annotations

from robodyn.options import BuildOptions

# The Euler-Lagrange route gives readable closed forms but differentiates M, which
# grows quickly with the number of joints; beyond this many joints "auto" recurses.
LAGRANGE_MAX_JOINTS = 3


def resolve_method(method: str, n: int) -> str:
    """The route "auto" stands for: Lagrange up to LAGRANGE_MAX_JOINTS joints, recursive beyond."""
    from robodyn.options import METHODS

    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if method == "auto":
        return "lagrange" if n <= LAGRANGE_MAX_JOINTS else "recursive"
    return method


def derive_model(description, options: BuildOptions | None = None, progress=None):
    """RobotDescription -> SymbolicModel by the route the options choose; ``progress(message)`` hears
    each step of the derivation (per joint on the Lagrange route, per algorithm on the recursive one)."""
    from .lagrange import derive_lagrange
    from .recursive import derive_recursive

    options = options or BuildOptions()
    if resolve_method(options.method, len(description.tree)) == "lagrange":  # bodies, coupled or not
        return derive_lagrange(description, simplify=options.simplify, progress=progress)
    return derive_recursive(description, progress=progress)
