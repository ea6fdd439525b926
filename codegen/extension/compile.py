"""Stage 5: generated sources -> a compiled robot module in a private build directory.

The module is the static Cython binding (``binding.pyx``, a few lines that export
the routine table) plus the robot's generated C. The binding's translation by
Cython depends only on the module name, so ``translate_binding`` starts it in a
child process as soon as the name is known (after parsing), and it runs while
SymPy derives the model; Cython's own start-up is most of its second. Then the
compiler builds the robot's C files (one per routine, largest first) and the
binding's C in parallel on every core, and everything is linked. The commands are those
setuptools would run for an extension (the compiler, flags and linker Python was
built with, from ``sysconfig``); each runs in the build directory (we never
chdir) with its whole output kept, and a failure raises BuildError with the
command, its return code and its log.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from robodyn.cache import Entry
from robodyn.errors import BuildError, StorageError

from ..emit.sources import GeneratedSources

BINDING = Path(__file__).resolve().parent / "binding.pyx"
# The robot's arithmetic: -O2 (-O3 adds compile time, not speed, to straight-line code);
# -g0: Python's own CFLAGS ask for debug information, which costs a third of the compile time;
# -fno-math-errno: sin, cos and sqrt need not set errno, so they can be inlined and vectorised.
ROBOT_FLAGS = ("-O2", "-g0", "-fno-math-errno")
# The binding is Python-object glue run once at import: optimising it only costs compile time.
BINDING_FLAGS = ("-O0", "-g0")
TIMEOUT_S = 600.0


class BindingTranslation:
    """Cython translating the static binding for one module name, in a child process that writes
    only into a private scratch directory; ``result()`` waits and returns the C text."""

    def __init__(self, module_name: str):
        self.module_name = module_name
        self._scratch = Path(tempfile.mkdtemp(prefix="robodyn-binding-"))
        self.command = [sys.executable, "-m", "cython", "-3", "--module-name", module_name,
                        "-o", str(self._scratch / f"{module_name}.c"), str(BINDING)]
        try:
            self._process = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                             text=True)
        except OSError as exc:
            shutil.rmtree(self._scratch, ignore_errors=True)
            raise BuildError(f"Cython: cannot run {sys.executable}: {exc.strerror}", self.command) from None

    def result(self) -> tuple[str, str]:
        """(C text, Cython's log); BuildError if Cython failed."""
        try:
            log, _ = self._process.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.cancel()
            raise BuildError(f"Cython timed out after {TIMEOUT_S:.0f} s", self.command) from None
        try:
            if self._process.returncode != 0:
                raise BuildError("Cython failed on the binding", self.command, self._process.returncode, log)
            return (self._scratch / f"{self.module_name}.c").read_text(encoding="utf-8"), log
        finally:
            shutil.rmtree(self._scratch, ignore_errors=True)

    def cancel(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        shutil.rmtree(self._scratch, ignore_errors=True)


def translate_binding(module_name: str) -> BindingTranslation:
    """Start Cython on the binding for ``module_name`` (see BindingTranslation)."""
    return BindingTranslation(module_name)


@dataclass(frozen=True)
class CompiledExtension:
    """A compiled, not yet checked or published, robot module."""

    entry: Entry  # where it will be published
    workdir: Path  # the private build directory holding it
    module_path: Path
    sources: GeneratedSources
    log: str
    timings: dict = field(default_factory=dict)


def _native_include() -> Path:
    import robodyn

    return Path(robodyn.__file__).resolve().parent / "native"


def _compiler_base() -> list[str]:
    """The C compiler and flags Python builds extensions with (CC CFLAGS CCSHARED), and its include path."""
    config = sysconfig.get_config_var
    command = shlex.split(config("CC") or "cc") + shlex.split(config("CFLAGS") or "")
    command += shlex.split(config("CCSHARED") or "")
    return command + ["-I", sysconfig.get_paths()["include"], "-I", str(_native_include()), "-I", "."]


def _linker() -> list[str]:
    config = sysconfig.get_config_var
    return shlex.split(config("LDSHARED") or "cc -shared")


def _run(command: list[str], cwd: Path, what: str) -> str:
    try:
        result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        log = exc.stdout if isinstance(exc.stdout, str) else ""
        raise BuildError(f"{what} timed out after {TIMEOUT_S:.0f} s in {cwd}", command, None, log) from None
    except OSError as exc:
        raise BuildError(f"{what}: cannot run {command[0]}: {exc.strerror}", command, None, "") from None
    log = result.stdout + result.stderr
    if result.returncode != 0:
        if "No space left on device" in log or "Disk quota exceeded" in log:
            raise StorageError(f"{what}: no space left on the device in {cwd} (nothing was published; free "
                               "some space and build again)")
        raise BuildError(f"{what} failed in {cwd}", command, result.returncode, log)
    return log


def compile_extension(sources: GeneratedSources, entry: Entry, workdir: Path,
                      binding: BindingTranslation | None = None) -> CompiledExtension:
    """Write the sources into ``workdir`` and compile them into ``entry``'s module file there
    (``binding``: the translation started earlier for this module, else started now)."""
    started = time.perf_counter()
    binding = binding or translate_binding(entry.module_name)
    if binding.module_name != entry.module_name:
        binding.cancel()
        raise BuildError(f"the binding was translated for {binding.module_name}, not {entry.module_name}")
    for name, text in sources.files.items():
        (workdir / name).write_text(text, encoding="utf-8")
    (workdir / f"{entry.module_name}.pyx").write_bytes(BINDING.read_bytes())
    objects_dir = workdir / "build"
    objects_dir.mkdir()
    base = _compiler_base()
    module_path = workdir / entry.module_path.name

    def compile_c(source: str, flags: tuple[str, ...]) -> tuple[str, str]:
        target = f"build/{Path(source).stem}.o"
        return target, _run(base + list(flags) + ["-c", source, "-o", target], workdir, f"compiling {source}")

    def binding_chain() -> tuple[str, str]:
        text, log = binding.result()
        (workdir / f"{entry.module_name}.c").write_text(text, encoding="utf-8")
        target, compile_log = compile_c(f"{entry.module_name}.c", BINDING_FLAGS)
        return target, log + compile_log

    # The binding's chain (waiting for Cython, then its C) is the longest single job: start it first.
    # On an error or Ctrl-C, jobs not started yet are cancelled and running ones finish (a compiler
    # takes seconds at most); the caller then removes the build directory.
    pool = ThreadPoolExecutor(max_workers=max(os.cpu_count() or 1, 2))
    try:
        jobs = [pool.submit(binding_chain)] + [pool.submit(compile_c, name, ROBOT_FLAGS) for name in sources.c_files]
        results = [job.result() for job in jobs]
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    objects = [target for target, _ in results]
    log = "".join(part for _, part in results)
    log += _run(_linker() + objects + ["-lm", "-o", module_path.name], workdir, "linking")
    if not module_path.is_file():
        raise BuildError(f"linking produced no {module_path.name} in {workdir}", _linker(), 0, log)
    return CompiledExtension(entry, workdir, module_path, sources, log,
                             {"compile_s": time.perf_counter() - started})
