"""Stage 2: RobotDescription -> SymbolicModel, by the Euler-Lagrange or the recursive route."""

from __future__ import annotations

from robodyn.options import BuildOptions

# The Euler-Lagrange route gives readable closed forms but differentiates M, which
# grows quickly with the number of joints; beyond this many joints "auto" recurses.
LAGRANGE_MAX_JOINTS = 3


def resolve_method(method: str, n: int, exact_rotations: bool = True) -> str:
    """The route "auto" stands for: Lagrange up to LAGRANGE_MAX_JOINTS joints whose fixed rotations are
    exact (see ``exact_rotations``), recursive otherwise."""
    from robodyn.options import METHODS

    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if method == "auto":
        return "lagrange" if n <= LAGRANGE_MAX_JOINTS and exact_rotations else "recursive"
    return method


def exact_rotations(description) -> bool:
    """Whether every fixed rotation and axis of the tree is exact, with angles that are right angles or
    rational multiples of pi.

    Generic angles (URDF rpy such as 0.3 rad) leave cos(3/10) and sin(3/10) in the closed forms, and
    simplifying M with them takes minutes even for three joints, with nothing readable to show for it:
    such robots take the recursive route."""
    import sympy as sp

    for joint in description.tree:
        if sp.Matrix(joint.axis).has(sp.Float):  # an axis normalised in floating point
            return False
        for transform in (joint.placement, joint.successor):
            for entry in sp.Matrix(transform)[:3, :3]:
                if not entry.is_number:
                    continue  # a symbolic parameter: the user asked for closed forms in it
                if entry.has(sp.Float):
                    return False
                for trig in entry.atoms(sp.sin, sp.cos, sp.tan):
                    if not (trig.args[0] / sp.pi).is_rational:
                        return False
    return True


def derive_model(description, options: BuildOptions | None = None, progress=None, regressor: bool = True):
    """RobotDescription -> SymbolicModel by the route the options choose; ``progress(message)`` hears
    each step of the derivation (per joint on the Lagrange route, per algorithm on the recursive one).
    A closed chain (``description.closure``) gets its reduced model in actuated coordinates
    (``closed_chain.derive_closed_chain``); ``regressor=False`` skips the identification pass."""
    import dataclasses

    from .closed_chain import derive_closed_chain
    from .lagrange import derive_lagrange
    from .recursive import derive_recursive
    from .regressor import derive_regressor

    options = options or BuildOptions()
    if description.closure is not None:
        return derive_closed_chain(description, options, progress=progress)
    method = resolve_method(options.method, len(description.tree),  # bodies, coupled or not
                            options.method != "auto" or exact_rotations(description))
    if description.floating_base is not None:
        if method == "lagrange" and options.method == "lagrange":
            from robodyn.errors import BuildError

            raise BuildError("a floating base takes the recursive route (--method recursive or auto): its "
                             "orientation is a quaternion, which the Euler-Lagrange closed forms do not handle")
        method = "recursive"
    if method == "lagrange":
        model = derive_lagrange(description, simplify=options.simplify, progress=progress)
    else:
        model = derive_recursive(description, progress=progress, articulated=options.forward == "aba")
    if not regressor:
        return model
    # The regressor comes from its own Newton-Euler pass whatever the route: one formulation to verify.
    regressor = derive_regressor(description, progress=progress)
    timings = dict(model.timings, regressor_s=regressor.seconds - regressor.base.seconds,
                   base_parameters_s=regressor.base.seconds)
    return dataclasses.replace(model, regressor=regressor, timings=timings)
