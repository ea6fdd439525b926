"""The generator's exceptions: defined by the runtime (robodyn.errors), re-exported here."""

from robodyn.errors import (EXIT_BUILD, EXIT_ENVIRONMENT, EXIT_INPUT, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE,
                            BuildError, CodegenError, DescriptionError, DescriptionErrors, DescriptionWarning,
                            SelfCheckError, StorageError, report)

__all__ = ["BuildError", "CodegenError", "DescriptionError", "DescriptionErrors", "DescriptionWarning",
           "SelfCheckError", "StorageError", "report", "EXIT_OK", "EXIT_INPUT", "EXIT_USAGE", "EXIT_BUILD",
           "EXIT_ENVIRONMENT", "EXIT_INTERRUPTED"]
