"""The generator's exceptions: defined by the runtime (robodyn.errors), re-exported here."""

from robodyn.errors import BuildError, CodegenError, DescriptionError, DescriptionErrors, DescriptionWarning, SelfCheckError, report

__all__ = ["BuildError", "CodegenError", "DescriptionError", "DescriptionErrors", "DescriptionWarning", "SelfCheckError", "report"]
