"""Exceptions of robodyn and its generator.

Every error a user can cause carries enough context to fix it without a
debugger: description errors name the file, line and field; build errors carry
the command, its return code and the compiler log.
"""

from __future__ import annotations

import contextlib


class CodegenError(Exception):
    """Base class of every error the generator raises on purpose."""


class DescriptionError(CodegenError):
    """A robot description is invalid.

    ``field`` is a dotted path such as ``joints[1].link.inertia.zz``; ``line``
    is 1-based (``None`` when the problem has no single location).
    """

    #: At most this many problems of one description are reported together.
    MAX_PROBLEMS = 20

    #: A message is cut at this many characters (a 2 MB attribute must not become a 2 MB line).
    MAX_MESSAGE = 600

    def __init__(self, path: str, line: int | None, field: str, message: str):
        self.path = str(path)
        self.line = line
        self.field = field if len(field) <= self.MAX_MESSAGE else field[:self.MAX_MESSAGE] + "..."
        self.message = message if len(message) <= self.MAX_MESSAGE else (
            f"{message[:self.MAX_MESSAGE]}... ({len(message) - self.MAX_MESSAGE} more characters)")
        self.problems: tuple[DescriptionError, ...] = (self,)
        super().__init__(self.location())

    def location(self) -> str:
        """``file:line: field: message`` for this one problem."""
        return _located(self.path, self.line, self.field, self.message)

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
        super().__init__(_located(self.path, line, field, message))


def _located(path: str, line: int | None, field: str, message: str) -> str:
    where = path if line is None else f"{path}:{line}"
    return f"{where}: {field}: {message}" if field else f"{where}: {message}"


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

    @contextlib.contextmanager
    def section(self):
        try:
            yield
        except DescriptionError as error:
            self.add(error)

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


class StorageError(CodegenError):
    """A file or directory robodyn must write or read cannot be used: the cache directory (missing
    permissions, a file in its place, no home directory), or the disk filled up during a build.
    Nothing half-written is left behind."""


#: Exit statuses of ``python -m codegen`` and ``python -m robodyn`` (also in their --help and the README).
EXIT_OK = 0
EXIT_INPUT = 1        # invalid description, parameter or state; unusable --json/--plot destination
EXIT_USAGE = 2        # bad command line (argparse)
EXIT_BUILD = 3        # compiling or the self-check failed
EXIT_ENVIRONMENT = 4  # cache directory or environment unusable, disk full
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
EXIT_TERMINATED = 143  # SIGTERM (128 + 15), e.g. from `timeout` or a job scheduler

EXIT_STATUS_HELP = """exit status:
  0    success
  1    invalid input: robot description, parameter (--set), state (--q0), a simulation that diverged
       with them, or an unusable output file (--json, --plot)
  2    bad command line
  3    build failure: the compiler or Cython failed, the compiled module failed its self-check
       (or an internal error: please report it with the output of --debug)
  4    environment: the cache directory cannot be created or written (--cache-dir, $ROBODYN_CACHE_DIR,
       $XDG_CACHE_HOME, $HOME), no space left on the device, out of memory, an optional extra
       that is not installed (pip install "robodyn[identify]", "robodyn[distributed]"); also, silently, an
       output pipe its reader closed (... | head -1)
  130  interrupted (Ctrl-C); the cache is left as it was
  143  terminated (SIGTERM: timeout, a job scheduler); the cache is left as it was
Errors are printed as one line (a description lists all its problems) without a Python traceback;
--debug adds the traceback."""


def report(error: BaseException) -> int:
    """Print a command-line message for ``error`` on stderr; return the exit status (EXIT_*)."""
    import sys

    if isinstance(error, Terminated):
        print("terminated", file=sys.stderr)
        return EXIT_TERMINATED
    if isinstance(error, KeyboardInterrupt):
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if isinstance(error, DescriptionError):
        print(f"error: {error}", file=sys.stderr)
        return EXIT_INPUT
    if isinstance(error, StorageError):
        print(f"error: {error}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    if isinstance(error, BuildError):
        print(f"build failed: {error}", file=sys.stderr)
        return EXIT_BUILD
    if isinstance(error, BrokenPipeError) and _stdout_gone():
        return EXIT_ENVIRONMENT  # what reads our output has gone (`... | head -1`): nothing to tell it
    if isinstance(error, OSError):
        where = f"{error.filename}: " if error.filename else ""
        print(f"error: {where}{error.strerror or error}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    if isinstance(error, MemoryError):
        print(f"error: out of memory {error}".rstrip(), file=sys.stderr)
        return EXIT_ENVIRONMENT
    if isinstance(error, ImportError):  # an optional extra that is not installed: the environment
        print(f"error: {error}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    message = error.args[0] if isinstance(error, KeyError) and error.args else error
    print(f"error: {message}", file=sys.stderr)
    return EXIT_INPUT


def _stdout_gone() -> bool:
    """Whether standard output is a pipe its reader has closed (the write end then polls as an error). If so, later
    writes (the interpreter's flush at exit) go to the null device instead of raising again, as Python's
    documentation advises."""
    import os
    import sys

    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # no file behind stdout
        return False
    try:
        import select

        poller = select.poll()
        poller.register(descriptor, select.POLLOUT)
        gone = any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows): a broken pipe there is most likely stdout
        gone = True
    if gone:
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, descriptor)
            finally:
                os.close(null)
        except OSError:
            pass
    return gone


def format_warning(message, category, filename, lineno, file=None, line=None) -> str:
    """One line per warning on the command line: ``warning: file:line: field: message`` for a
    DescriptionWarning (its text), ``warning: message`` for any other."""
    return f"warning: {message}\n"


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    import sys

    try:
        (file or sys.stderr).write(format_warning(message, category, filename, lineno))
    except OSError:  # stderr closed: nothing to tell
        pass


def exit_with(status: int) -> None:
    """End a command-line process with ``status``. After an interrupt (EXIT_INTERRUPTED) the process leaves at once,
    its output flushed: the interrupted work has cleaned up after itself, and CPython's finalization can still turn
    a KeyboardInterrupt it saw (and we handled) into death by SIGINT (status -2 to a parent, not 130: seen once in
    CI on an interrupted build)."""
    import os
    import sys

    if status in (EXIT_INTERRUPTED, EXIT_TERMINATED):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe or stream: nothing more to tell
                pass
        os._exit(status)
    sys.exit(status)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread is, as Ctrl-C's KeyboardInterrupt is: a build cleans up after itself
    the same way (its temporary directory removed, the cache lock released) before the command exits."""


def _terminate(signum, frame) -> None:
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM, during the clean-up, ends the process at once
    raise Terminated()


def run_command(function, *args, debug: bool = False) -> int:
    """Run a command-line action: its return value is the exit status; every failure becomes one
    line on stderr and a documented status (see EXIT_STATUS_HELP), or a traceback too with ``debug``.
    Warnings print as one line each; SIGTERM ends the action as Ctrl-C does (status EXIT_TERMINATED)."""
    import signal
    import sys
    import threading
    import traceback
    import warnings

    saved = warnings.showwarning
    warnings.showwarning = show_warning
    saved_sigterm = False  # not replaced (signals go to the main thread only)
    if threading.current_thread() is threading.main_thread():
        saved_sigterm = signal.signal(signal.SIGTERM, _terminate)
    try:
        return function(*args)
    except SystemExit:
        raise
    except (KeyboardInterrupt, CodegenError, OSError, ValueError, TypeError, KeyError, ArithmeticError,
            MemoryError, ImportError) as error:
        if debug:
            traceback.print_exc()
        return report(error)
    except Exception:  # a bug: the traceback is what a report needs
        if debug:
            raise
        print("internal error (a bug in robodyn; run again with --debug for the traceback):", file=sys.stderr)
        print(f"  {traceback.format_exc().strip().splitlines()[-1]}", file=sys.stderr)
        return EXIT_BUILD
    finally:
        warnings.showwarning = saved
        if saved_sigterm is not False:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if saved_sigterm is None else saved_sigterm)
