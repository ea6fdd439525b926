"""Exceptions of robodyn and its generator.

Every error a user can cause carries enough context to fix it without a
debugger: description errors name the file, line and field; build errors carry
the command, its return code and the compiler log.
"""

from __future__ import annotations


class CodegenError(Exception):
    """Base class of every error the generator raises on purpose."""


class DescriptionError(CodegenError):
    """A robot description is invalid.

    ``field`` is a dotted path such as ``joints[1].link.inertia.zz``; ``line``
    is 1-based (``None`` when the problem has no single location).
    """

    def __init__(self, path: str, line: int | None, field: str, message: str):
        self.path = str(path)
        self.line = line
        self.field = field
        self.message = message
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")


class BuildError(CodegenError):
    """Compiling the generated sources failed."""

    def __init__(self, message: str, command: list[str] | None = None,
                 returncode: int | None = None, log: str = ""):
        self.command = list(command or [])
        self.returncode = returncode
        self.log = log
        parts = [message]
        if self.command:
            parts.append("command: " + " ".join(self.command))
        if returncode is not None:
            parts.append(f"return code: {returncode}")
        if log:
            parts.append("log:\n" + log.rstrip())
        super().__init__("\n".join(parts))


class SelfCheckError(BuildError):
    """The compiled module failed its post-build self-check."""


def report(error: CodegenError) -> int:
    """Print a command-line message for ``error``; return the exit status.

    1: invalid description, 3: build or self-check failure (2 is argparse's usage error)."""
    import sys

    if isinstance(error, DescriptionError):
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"build failed: {error}", file=sys.stderr)
    return 3
