"""robodyn's generator: robot description -> SymPy model -> C -> compiled robot module.

The stages and the order they run in are in ``codegen.pipeline``; ``build`` runs
them all (with a cache lookup first). For the symbolic model alone::

    model = codegen.derive("robots/rr.yaml")      # .M, .C, .g, .friction, energies, tool kinematics
"""

from robodyn._version import __version__
from robodyn.options import METHODS, BuildOptions

from .errors import BuildError, CodegenError, DescriptionError, SelfCheckError


def derive(path, options: BuildOptions | None = None, **option_values):
    """Parse a description and return its SymbolicModel (M, C, g, ... as SymPy matrices).

    ``options`` (or its fields as keywords: ``method``, ``simplify``, ``lock``,
    ``runtime_parameters``, ``tool``) as for ``robodyn.load``. On the recursive route the
    matrices refer to the intermediate symbols in ``model.definitions``."""
    from .description import parse_path
    from .model import derive_model

    options = (options or BuildOptions()).replace(**option_values)
    return derive_model(parse_path(path, options), options)


def build(path, options: BuildOptions | None = None, **keywords):
    """Build (or find in the cache) the robot module of a description: see codegen.pipeline.build."""
    from .pipeline import build as run

    return run(path, options, **keywords)


__all__ = ["__version__", "derive", "build", "BuildOptions", "METHODS", "BuildError", "CodegenError",
           "DescriptionError", "SelfCheckError"]
