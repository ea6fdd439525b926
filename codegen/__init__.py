"""robodyn's generator: robot description -> SymPy model -> C -> compiled module.

Stages, each a function from one plain-data object to the next:

    parse_path(path)        -> RobotDescription   (codegen.description: YAML or URDF)
    derive_model(desc)      -> SymbolicModel      (codegen.model: Lagrange or recursive route)
    emit(model)             -> GeneratedSources   (codegen.emit)
    ensure_built(path, ...) -> BuiltModule        (codegen.build; the only stage that writes files)
"""

__version__ = "0.1.0"

from .errors import BuildError, CodegenError, DescriptionError, SelfCheckError  # noqa: E402


METHODS = ("auto", "lagrange", "recursive")
# The Euler-Lagrange route gives readable closed forms but differentiates M, which
# grows quickly with the number of joints; beyond this many joints "auto" recurses.
LAGRANGE_MAX_JOINTS = 3


def resolve_method(method: str, n: int) -> str:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if method == "auto":
        return "lagrange" if n <= LAGRANGE_MAX_JOINTS else "recursive"
    return method


def derive_model(description, method: str = "auto", simplify: bool = True):
    """RobotDescription -> SymbolicModel by the chosen route."""
    from .model.lagrange import derive_lagrange
    from .model.recursive import derive_recursive

    if resolve_method(method, description.n) == "lagrange":
        return derive_lagrange(description, simplify=simplify)
    return derive_recursive(description)


def derive(path, method: str = "auto", simplify: bool = True, lock=None, runtime_parameters: bool = False):
    """Parse a description and return its SymbolicModel (M, C, g, ... as SymPy matrices).

    ``method``: "lagrange" (closed forms, Christoffel symbols), "recursive" (Newton-Euler,
    composite rigid body and a recursive Coriolis matrix; matrices refer to the
    intermediate symbols in ``model.definitions``) or "auto" (Lagrange up to 3 joints).
    ``path`` is a YAML description or a URDF file; ``lock`` maps URDF joint names to the
    positions at which they are frozen."""
    from .description import parse_path

    return derive_model(parse_path(path, lock, runtime_parameters), method=method, simplify=simplify)


__all__ = ["__version__", "derive", "derive_model", "resolve_method", "METHODS", "BuildError", "CodegenError", "DescriptionError", "SelfCheckError"]
