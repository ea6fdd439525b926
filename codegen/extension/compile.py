"""Stage 5: generated sources -> a compiled robot module in a private build directory.

The module is the static Cython binding (``binding.pyx``, a few lines that export
the routine table) plus the robot's generated C. The steps run as child
processes, in parallel on every core: Cython translates the binding while the
compiler builds the robot's C files (one per routine, largest first), then the
binding's C is compiled and everything is linked. The commands are those
setuptools would run for an extension (the compiler, flags and linker Python was
built with, from ``sysconfig``); each runs in the build directory (we never
chdir) with its whole output kept, and a failure raises BuildError with the
command, its return code and its log.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from robodyn.cache import Entry
from robodyn.errors import BuildError

from ..emit.sources import GeneratedSources

BINDING = Path(__file__).resolve().parent / "binding.pyx"
# The robot's arithmetic: -O2 (-O3 adds compile time, not speed, to straight-line code);
# -g0: Python's own CFLAGS ask for debug information, which costs a third of the compile time;
# -fno-math-errno: sin, cos and sqrt need not set errno, so they can be inlined and vectorised.
ROBOT_FLAGS = ("-O2", "-g0", "-fno-math-errno")
# The binding is Python-object glue run once at import: optimising it only costs compile time.
BINDING_FLAGS = ("-O0", "-g0")
TIMEOUT_S = 600.0


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
        raise BuildError(f"{what} failed in {cwd}", command, result.returncode, log)
    return log


def compile_extension(sources: GeneratedSources, entry: Entry, workdir: Path) -> CompiledExtension:
    """Write the sources into ``workdir`` and compile them into ``entry``'s module file there."""
    started = time.perf_counter()
    for name, text in sources.files.items():
        (workdir / name).write_text(text, encoding="utf-8")
    binding = f"{entry.module_name}.pyx"
    (workdir / binding).write_bytes(BINDING.read_bytes())
    objects_dir = workdir / "build"
    objects_dir.mkdir()
    base = _compiler_base()
    module_path = workdir / entry.module_path.name

    def compile_c(source: str, flags: tuple[str, ...]) -> tuple[str, str]:
        target = f"build/{Path(source).stem}.o"
        return target, _run(base + list(flags) + ["-c", source, "-o", target], workdir, f"compiling {source}")

    def binding_chain() -> tuple[str, str]:
        log = _run([sys.executable, "-m", "cython", "-3", "--module-name", entry.module_name, "-o",
                    f"{entry.module_name}.c", binding], workdir, "Cython")
        target, compile_log = compile_c(f"{entry.module_name}.c", BINDING_FLAGS)
        return target, log + compile_log

    # The binding's chain (Cython, then its C) is the longest single job: start it first.
    with ThreadPoolExecutor(max_workers=max(os.cpu_count() or 1, 2)) as pool:
        jobs = [pool.submit(binding_chain)] + [pool.submit(compile_c, name, ROBOT_FLAGS) for name in sources.c_files]
        results = [job.result() for job in jobs]
    objects = [target for target, _ in results]
    log = "".join(part for _, part in results)
    log += _run(_linker() + objects + ["-lm", "-o", module_path.name], workdir, "linking")
    if not module_path.is_file():
        raise BuildError(f"linking produced no {module_path.name} in {workdir}", _linker(), 0, log)
    return CompiledExtension(entry, workdir, module_path, sources, log,
                             {"compile_s": time.perf_counter() - started})
