"""Stage 5: generated sources -> a compiled robot module in a private build directory.

The module is the static Cython binding (``binding.pyx``, a few lines that export
the routine table) plus the robot's generated C. The binding's C comes from the
translation made once at install time (codegen.extension.translation); without
one (a source tree edited since), ``translate_binding`` starts Cython in a child
process as soon as the module name is known (after parsing), and it runs while
SymPy derives the model; Cython's own start-up is most of its second. Then the
compiler builds the robot's C files (one per routine) as the emit stage hands
them over (``Compilation``), and the binding's C, in parallel on every core, and
everything is linked. The commands are those
setuptools would run for an extension (the compiler, flags and linker Python was
built with, from ``sysconfig``); each runs in the build directory (we never
chdir) with its whole output kept, and a failure raises BuildError with the
command, its return code and its log.
"""

from __future__ import annotations

import heapq
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from robodyn.cache import Entry
from robodyn.errors import BuildError, StorageError

from ..emit.sources import GeneratedSources
from .translation import BINDING, TRANSLATED_MODULE, TRANSLATED_NAME, pretranslated

# The robot's arithmetic: -O2 (-O3 adds compile time, not speed, to straight-line code);
# -g0: Python's own CFLAGS ask for debug information, which costs a third of the compile time;
# -fno-math-errno: sin, cos and sqrt need not set errno, so they can be inlined and vectorised.
# -fno-tree-slp-vectorize: GCC's straight-line vectoriser gains nothing on this code (the Panda's inverse
# dynamics has as many instructions without it) but may compute one value twice, in a vector lane and in scalar
# code, contracted into FMAs differently: an AVX2 build then wrote M[4, 6] and M[6, 4] one ulp apart.
# -fno-schedule-insns2 -fno-dse: the second scheduling pass and dead-store elimination take 11 % of the compile time
# of a Panda (4.7 s of GCC time instead of 5.3) and change nothing measurable in this straight-line code: the same
# number of instructions (objdump; M, C, ID, FD, g, the split derivative kernels, the regressors with their zeroing
# loops, at -O2 and -O1) and the same call times from Python within noise (M, C, ID, FD, g).
ROBOT_FLAGS = ("-O2", "-g0", "-fno-math-errno", "-fno-tree-slp-vectorize", "-fno-schedule-insns2", "-fno-dse")
# PRESSURE_ROUTINES (codegen.emit.sources) add GCC's first scheduling pass, before register allocation, made aware
# of register pressure: off at -O2 on x86-64, where plain it lengthens live ranges; with -fsched-pressure it
# shortens them (the Panda's C: 8 % less time a call; GCC's time on that file 0.38 -> 0.64 s).
PRESSURE_FLAGS = (*ROBOT_FLAGS, "-fschedule-insns", "-fsched-pressure")
# Files the emit stage marks quick (codegen.emit.sources.QUICK_BUILD_OPERATIONS) compile at -O1 with the -O2 passes this
# code needs: vectorisation at the cheap cost model (the sine-cosine block of the joint angles; GCC 4.9 has it, and
# the same code as GCC 12's very-cheap on the Panda's derivatives and regressors), the register
# allocator's expensive optimisations (without them, many more spills), strict aliasing (outputs cannot alias the
# inputs), and memset for the loops zeroing an output (a regressor's zeros were a scalar loop: 1,200 instructions
# for the Panda's Slotine-Li regressor). Plain -O1 made the Panda's inverse-dynamics derivatives 46 % longer; this
# set makes them 0.2 % longer, the forward-dynamics derivatives 0.7 % and the regressors 3 % (callgrind), for 15-25 %
# less GCC time on each file (the Panda's build: 0.5 s less CPU, 0.2 s less wall time, A/B).
QUICK_FLAGS = ("-O1", "-ftree-vectorize", "-fvect-cost-model=cheap", "-fexpensive-optimizations",
               "-fstrict-aliasing", "-ftree-loop-distribute-patterns", *ROBOT_FLAGS[1:])
# Files marked large (a humanoid's regressors and derivatives) leave out the register allocator's expensive
# optimisations, about a tenth of GCC's time on such files (the Panda's inverse-dynamics derivatives: 0.73 s
# instead of 0.82), for more spills.
LARGE_FLAGS = tuple(flag for flag in QUICK_FLAGS if flag != "-fexpensive-optimizations")

# The binding is Python-object glue run once at import: optimising it only costs compile time.
BINDING_FLAGS = ("-O0", "-g0")
TIMEOUT_S = 600.0


def tier_flags(tier: str) -> tuple[str, ...]:
    """The compiler flags of a build tier the emit stage names (codegen.emit.sources.QUICK_BUILD_OPERATIONS)."""
    return {"speed": ROBOT_FLAGS, "pressure": PRESSURE_FLAGS, "quick": QUICK_FLAGS, "large": LARGE_FLAGS}[tier]


class BindingTranslation:
    """The static binding's C for one module name: the install-time translation when there is one
    (codegen.extension.translation; ``defines`` then renames its initialisation function), else Cython
    translating it in a child process that writes only into a private scratch directory. ``result()``
    waits and returns the C text."""

    def __init__(self, module_name: str, translated: str | None = None):
        self.module_name = module_name
        self.command: list[str] = []
        self._process = None
        self._text = translated
        self.defines: tuple[str, ...] = ()
        if translated is not None:
            self.defines = (f"-DPyInit_{TRANSLATED_MODULE}=PyInit_{module_name}",)
            return
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
        if self._process is None:
            return self._text, f"binding: translated by Cython at install time ({TRANSLATED_NAME})\n"
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
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        shutil.rmtree(self._scratch, ignore_errors=True)


def translate_binding(module_name: str) -> BindingTranslation:
    """The binding's C for ``module_name``: the install-time translation if it is there and intact, else
    Cython started on it now (see BindingTranslation)."""
    return BindingTranslation(module_name, pretranslated(_native_include() / TRANSLATED_NAME))


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


class Compilation:
    """Compiles one module's sources in ``workdir`` as they arrive (``add``, the emit stage's ``ready``), on every
    core: a routine compiles while the next one is emitted. Each compile job takes the largest source waiting, so
    the big ones start first and the build does not end on one core. ``finish`` adds what was not handed over,
    waits and links; on any error, or Ctrl-C, jobs not started are cancelled and running ones finish (a
    compiler takes seconds at most) before the error propagates (the caller removes the build directory)."""

    def __init__(self, entry: Entry, workdir: Path, binding: BindingTranslation | None = None):
        self.started = time.perf_counter()
        self.entry, self.workdir = entry, workdir
        self.binding = binding or translate_binding(entry.module_name)
        if self.binding.module_name != entry.module_name:
            self.binding.cancel()
            raise BuildError(f"the binding was translated for {self.binding.module_name}, not {entry.module_name}")
        (workdir / f"{entry.module_name}.pyx").write_bytes(BINDING.read_bytes())
        (workdir / "build").mkdir()
        self._base = _compiler_base()
        self._added: set[str] = set()
        self._waiting: list[tuple[int, str, tuple]] = []  # heap of (-size, name, flags)
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=max(os.cpu_count() or 1, 2))
        self._jobs: list = []

    def add(self, name: str, text: str, tier: str = "speed") -> None:
        """Write one file; a C file is queued for compilation (with ``tier_flags(tier)``), and the binding's
        chain starts with its header."""
        (self.workdir / name).write_text(text, encoding="utf-8")
        self._added.add(name)
        if name.endswith(".c"):
            flags = tier_flags(tier)
            with self._lock:
                heapq.heappush(self._waiting, (-len(text), name, flags))
            self._submit(self._compile_largest)
        elif name == "robot_table.h":
            self._submit(self._binding_chain)

    def _submit(self, job) -> None:
        try:
            self._jobs.append(self._pool.submit(job))
        except BaseException:
            self.cancel()
            raise

    def _compile(self, source: str, flags: tuple[str, ...]) -> tuple[str, str]:
        target = f"build/{Path(source).stem}.o"
        return target, _run(self._base + list(flags) + ["-c", source, "-o", target], self.workdir,
                            f"compiling {source}")

    def _compile_largest(self) -> tuple[str, str]:
        with self._lock:
            _, name, flags = heapq.heappop(self._waiting)
        return self._compile(name, flags)

    def _binding_chain(self) -> tuple[str, str]:
        """Wait for Cython, then compile the binding's C (it includes robot_table.h)."""
        text, log = self.binding.result()
        (self.workdir / f"{self.entry.module_name}.c").write_text(text, encoding="utf-8")
        target, compile_log = self._compile(f"{self.entry.module_name}.c", BINDING_FLAGS + self.binding.defines)
        return target, log + compile_log

    def cancel(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.binding.cancel()

    def abandon(self) -> None:
        """Cancel the jobs and remove the build directory (a failed or interrupted build)."""
        self.cancel()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def finish(self, sources: GeneratedSources) -> CompiledExtension:
        """Add the files not handed over yet (largest first), wait for every job and link."""
        try:
            for name in sorted(sources.files, key=lambda name: (-len(sources.files[name]), name)):
                if name not in self._added:
                    self.add(name, sources.files[name], sources.build_tiers.get(name, "speed"))
            results = [job.result() for job in self._jobs]
        except BaseException:
            self.cancel()
            raise
        self._pool.shutdown(wait=True)
        objects = sorted(target for target, _ in results)
        log = "".join(part for _, part in results)
        module_path = self.workdir / self.entry.module_path.name
        log += _run(_linker() + objects + ["-lm", "-o", module_path.name], self.workdir, "linking")
        if not module_path.is_file():
            raise BuildError(f"linking produced no {module_path.name} in {self.workdir}", _linker(), 0, log)
        return CompiledExtension(self.entry, self.workdir, module_path, sources, log,
                                 {"compile_s": time.perf_counter() - self.started})
