"""robodyn's generator: robot description -> SymPy model -> C -> compiled module.

Stages, each a function from one plain-data object to the next:

    parse_file(path)        -> RobotDescription   (codegen.description)
    derive_lagrange(desc)   -> SymbolicModel      (codegen.model)
    emit(model)             -> GeneratedSources   (codegen.emit)
    build(sources, ...)     -> BuiltModule        (codegen.build; the only stage that writes files)
"""

__version__ = "0.1.0"

from .errors import BuildError, CodegenError, DescriptionError, SelfCheckError  # noqa: E402


def derive(path, simplify: bool = True):
    """Parse a description and return its SymbolicModel (M, C, g, ... as SymPy matrices)."""
    from .description.parse import parse_file
    from .model.lagrange import derive_lagrange

    return derive_lagrange(parse_file(path), simplify=simplify)


__all__ = ["__version__", "derive", "BuildError", "CodegenError", "DescriptionError", "SelfCheckError"]
