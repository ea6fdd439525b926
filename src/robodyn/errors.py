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

    #: At most this many problems of one description are reported together.
    MAX_PROBLEMS = 20

    def __init__(self, path: str, line: int | None, field: str, message: str):
        self.path = str(path)
        self.line = line
        self.field = field
        self.message = message
        self.problems: tuple[DescriptionError, ...] = (self,)
        super().__init__(self.location())

    def location(self) -> str:
        """``file:line: field: message`` for this one problem."""
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"

    @classmethod
    def combine(cls, errors: "list[DescriptionError]", truncated: bool = False) -> "DescriptionError":
        """One error for several problems of a description (each problem keeps its file, line and field).

        The combined error's path/line/field/message are its first problem's; ``problems`` holds
        all of them and ``str()`` lists them one per line."""
        problems = [p for error in errors for p in error.problems]
        if len(problems) == 1 and not truncated:
            return problems[0]
        first = problems[0]
        combined = cls(first.path, first.line, first.field, first.message)
        combined.problems = tuple(problems)
        more = f" (stopped after {len(problems)})" if truncated else ""
        lines = [f"{len(problems)} problems{more}:"] + [f"  {p.location()}" for p in problems]
        Exception.__init__(combined, "\n".join(lines))
        return combined


class DescriptionWarning(UserWarning):
    """A description is accepted, but something in it deserves the user's attention (issued with
    ``warnings.warn``; the command line prints it as ``warning: file:line: field: message``)."""

    def __init__(self, path: str, line: int | None, field: str, message: str):
        self.path, self.line, self.field, self.message = str(path), line, field, message
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")


class DescriptionErrors:
    """Collects a description's problems so that one run reports all of them (up to a cap).

        problems = DescriptionErrors()
        with problems.section():      # a problem here is recorded; parsing goes on after the block
            parse_joint(...)
        problems.raise_if_any()       # one DescriptionError listing every problem

    ``section`` re-raises once ``MAX_PROBLEMS`` are recorded, so a broken file stops early.
    """

    def __init__(self, limit: int = DescriptionError.MAX_PROBLEMS):
        self.errors: list[DescriptionError] = []
        self.limit = limit

    def add(self, error: DescriptionError) -> None:
        self.errors.extend(error.problems)
        if len(self.errors) >= self.limit:
            raise DescriptionError.combine(self.errors[:self.limit], truncated=True)

    def section(self):
        import contextlib

        collector = self

        @contextlib.contextmanager
        def _section():
            try:
                yield
            except DescriptionError as error:
                collector.add(error)

        return _section()

    def __bool__(self) -> bool:
        return bool(self.errors)

    def raise_if_any(self) -> None:
        if self.errors:
            raise DescriptionError.combine(self.errors)


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
