"""The generator's pipeline, in one place.

    request     = read_request(path, options, cache_dir)   Request            reads the description
    description = describe(request)                         RobotDescription   (codegen.description)
    binding     = translate_binding(module name)            the install-time translation, or Cython started now
    model       = derive_model(description, options)        SymbolicModel      (codegen.model)
    routines    = define_routines(model, options)           RoutineSet         (codegen.model.routines)
    compilation = start_compilation(request, robot, binding)  Compilation        a private build directory
    sources     = emit(routines, ready=compilation.add)     GeneratedSources   (codegen.emit), each file handed
    compiled    = compilation.finish(sources)               CompiledExtension  to the compiler as it is ready
    result      = check_and_publish(compiled, routines, request)  BuildResult  writes the self-check, publishes

Each stage is a function from one plain dataclass to the next; only the first
reads input and only the last two write files. Two steps do not wait for their
turn: Cython's translation of the static binding, which depends only on the
module's name (done once at install time, codegen.extension.translation; else
here), runs in a child process (writing only into its own scratch
directory) while SymPy derives the model, and the compiler starts on each
routine's file while the next one is emitted (``emit_and_compile``): SymPy
keeps one core, the compiler the others.

``build`` runs them, after a cache lookup that needs neither SymPy nor a
compiler; after parsing and until publishing it holds a per-key lock, so processes
that need the same robot at once build it once. A build happens in a hidden
temporary directory next to its cache entry and becomes visible only by an
atomic rename after it compiled and passed the self-check, so a failed, killed
or interrupted (Ctrl-C) build, or one that fills the disk, never leaves an
importable module behind. A damaged entry (see ``robodyn.cache.Entry.inspect``)
is reported through ``notice`` and replaced. Every run, a cache hit too, first
removes temporaries left by dead processes (``robodyn.cache.tidy``).

``progress(message)`` receives one line per stage (start and end, with times);
``delayed_progress`` turns a writer into one that stays silent for builds
shorter than a second. The model stage (codegen.model) hears the same callable
for finer progress: per joint on the Lagrange route, per algorithm on the recursive one.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from robodyn import cache
from robodyn.cache import MANIFEST, SELFCHECK, Entry
from robodyn.errors import BuildError, CodegenError, SelfCheckError, StorageError
from robodyn.options import BuildOptions

Progress = Callable[[str], None]


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def stderr_writer(prefix: str = "[codegen]") -> Progress:
    """A progress callable printing ``prefix message`` lines on stderr."""
    def write(message: str) -> None:
        print(f"{prefix} {message}", file=sys.stderr, flush=True)

    return write


def delayed_progress(write: Progress, delay: float = 1.0) -> Progress:
    """A progress callable that holds its messages back until ``delay`` seconds have passed since it was
    made (then prints them, and every later one, at once): a build shorter than that prints nothing,
    a longer one shows where it is. A timer thread does the first printing, so a stage that runs long
    (a derivation of minutes) is visible while it runs."""
    lock = threading.Lock()
    held: list[str] = []
    live = False

    def flush() -> None:
        nonlocal live
        with lock:
            live = True
            for message in held:
                write(message)
            held.clear()

    timer = threading.Timer(delay, flush)
    timer.daemon = True
    timer.start()

    def progress(message: str) -> None:
        with lock:
            if live:
                write(message)
            else:
                held.append(message)

    progress.cancel = timer.cancel  # type: ignore[attr-defined]
    return progress


@dataclass(frozen=True)
class Request:
    """What to build: the description's bytes, the options, and where it goes (its cache key)."""

    path: Path
    data: bytes
    options: BuildOptions
    root: Path
    key: str
    key_inputs: dict


@dataclass(frozen=True)
class BuildResult:
    """A published (or found) robot module."""

    entry: Entry
    manifest: dict
    selfcheck: dict
    cache_hit: bool
    timings: dict = field(default_factory=dict)

    @property
    def module_path(self) -> Path:
        return self.entry.module_path


def read_request(path: str | Path, options: BuildOptions | None = None, cache_dir: str | Path | None = None) -> Request:
    """Stage 1 (input): read the description and compute its cache key."""
    options = options or BuildOptions()
    data = cache.read_description(path)
    inputs = cache.key_inputs(data, options)
    return Request(Path(path), data, options, Path(cache_dir) if cache_dir is not None else cache.default_root(),
                   cache.cache_key(data, options), inputs)


def describe(request: Request):
    """Stage 1: the description, parsed and validated."""
    from .description import parse_source

    return parse_source(request.data, str(request.path), request.options)


def lookup(request: Request, started: float | None = None,
           damaged: list | None = None) -> BuildResult | None:
    """The cache entry for the request, if there is a complete one (no SymPy, no compiler); damaged
    entries of its key are appended to ``damaged`` as (entry, reason)."""
    found, broken = cache.inspect(request.root, request.key)
    if damaged is not None:
        damaged.extend(broken)
    if found is None:
        return None
    entry, manifest = found
    timings = {} if started is None else {"lookup_s": time.perf_counter() - started}
    return BuildResult(entry, manifest, entry.selfcheck(), True, timings)


def _storage_error(what: str, exc: OSError) -> StorageError:
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        reason += " (nothing was published; free some space and build again)"
    return StorageError(f"{what}: {reason}")


def start_compilation(request: Request, robot: str, binding=None):
    """Stage 5 begins: a Compilation (codegen.extension.compile) in a private temporary directory under the
    cache root, which compiles each file the emit stage hands it."""
    from .extension.compile import Compilation

    entry = Entry(request.root, robot, request.key)
    try:
        workdir = Path(tempfile.mkdtemp(prefix=f"{entry.temporary_prefix()}{os.getpid()}-",
                                        dir=cache.writable_root(request.root)))
    except OSError as exc:
        raise _storage_error(f"cannot create a build directory in {request.root}", exc) from None
    try:
        return Compilation(entry, workdir, binding)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise


def emit_and_compile(routines, compilation):
    """Stages 4 and 5 together: each file is compiled as soon as it is emitted."""
    from .emit.sources import emit

    try:
        sources = emit(routines, ready=compilation.add)
        return sources, compilation.finish(sources)
    except OSError as exc:
        compilation.abandon()
        raise _storage_error(f"cannot write the build in {compilation.workdir}", exc) from None
    except BaseException:
        compilation.abandon()
        raise


def check_and_publish(compiled, routines, request: Request, timings: dict | None = None) -> BuildResult:
    """Stage 6: self-check the compiled module (unless options.selfcheck is False: the report then
    says "skipped"), write its report and manifest, publish it atomically."""
    from robodyn.robot import Robot

    from .extension.selfcheck import report, run_selfcheck, skipped

    timings = dict(timings or {})
    entry, workdir = compiled.entry, compiled.workdir
    try:
        started = time.perf_counter()
        module = cache.import_extension(entry.module_name, compiled.module_path, fresh=True)
        if request.options.selfcheck:
            checks = run_selfcheck(Robot(module), routines)
            selfcheck = report(checks)
        else:
            checks, selfcheck = [], skipped()
        timings["selfcheck_s"] = time.perf_counter() - started
        _write_json(workdir / SELFCHECK, selfcheck)
        if selfcheck["passed"] is False:
            failed = [c for c in checks if not c.passed]
            detail = "\n".join(f"  {c.name}: error {c.error:.3e} > tolerance {c.tolerance:.1e}" for c in failed)
            if any(c.name == "positive_definite" for c in failed):
                hint = ("\n(nothing was published; M is singular at the description's parameter values: some joint "
                        "moves no mass or inertia — check the masses and inertias of the links it carries)")
            else:
                hint = ("\n(nothing was published; if the description mixes magnitudes many orders apart, e.g. a "
                        "length of 1e90 m beside 0.1 m, check its units: double precision cannot verify such a model)")
            raise SelfCheckError(f"self-check failed for {request.path}:\n{detail}{hint}", log=compiled.log)
        manifest = {
            "module_name": entry.module_name,
            "module_file": entry.module_path.name,
            "module_size": compiled.module_path.stat().st_size,
            "module_sha256": cache.file_sha256(compiled.module_path),
            "selfcheck": selfcheck["status"],
            "key": request.key,
            "built_from": request.key_inputs,
            "robot": compiled.sources.robot,
            "description_path": str(request.path.resolve()),
            "options": request.options.as_dict(),
            "metadata": compiled.sources.metadata,
            "operation_counts": compiled.sources.operation_counts,
            "timings": timings,
        }
        _write_json(workdir / MANIFEST, manifest)
        # Keep the sources, the module, the manifest and the self-check; drop intermediates.
        shutil.rmtree(workdir / "build", ignore_errors=True)
        for leftover in (workdir / f"{entry.module_name}.c",):
            leftover.unlink(missing_ok=True)
        _publish(workdir, entry)
        module.__file__ = str(entry.module_path)  # imported from the build directory, now renamed
    except OSError as exc:
        shutil.rmtree(workdir, ignore_errors=True)
        raise _storage_error(f"cannot write the cache entry {entry.directory}", exc) from None
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return BuildResult(entry, manifest, selfcheck, False, timings)


def _write_json(path: Path, value: dict) -> None:
    with open(path, "w", encoding="utf-8") as stream:
        stream.write(json.dumps(value, indent=2, sort_keys=True) + "\n")
        stream.flush()
        os.fsync(stream.fileno())  # a full disk shows here, not after the entry is published


def _publish(workdir: Path, entry: Entry) -> None:
    """Rename the build directory to the entry's. An existing entry (a forced rebuild, a broken
    entry, or another process that finished the same build first) is first renamed aside, so the
    entry's name always holds a complete entry or nothing: modules already imported from it stay
    valid, their files are unlinked, not changed."""
    try:
        os.rename(workdir, entry.directory)
        return
    except OSError:
        if not entry.directory.exists():
            raise
    aside = Path(tempfile.mkdtemp(prefix=f"{entry.temporary_prefix()}{os.getpid()}-old-", dir=entry.root))
    os.rename(entry.directory, aside / "entry")
    try:
        os.rename(workdir, entry.directory)
    finally:
        shutil.rmtree(aside, ignore_errors=True)


def build(path: str | Path, options: BuildOptions | None = None, *, cache_dir: str | Path | None = None,
          force: bool = False, progress: Progress | None = None, notice: Progress | None = None) -> BuildResult:
    """Return the published module for a description, building it unless the cache has it.

    ``progress``: one line per stage; ``notice``: one line for what the user should know even when
    quiet (a damaged cache entry being rebuilt). StorageError when the cache directory cannot be
    used, checked before any work."""
    started = time.perf_counter()
    request = read_request(path, options, cache_dir)
    cache.tidy(request.root, request.key)
    damaged: list = []
    found = None if force else lookup(request, started, damaged)
    if found is not None:
        return found
    say = progress or (lambda message: None)
    for entry, reason in damaged:
        (notice or say)(f"cache entry {entry.directory} is damaged ({reason}); rebuilding")
    cache.writable_root(request.root)  # before any work: a build must be able to publish
    clock = time.perf_counter()
    say(f"parsing {request.path}")
    description = describe(request)  # an invalid description fails here, before anything is written
    parse_s = time.perf_counter() - clock
    say(f"parsed {request.path} in {parse_s:.2f} s ({_plural(description.n, 'joint')}, "
        f"{_plural(len(description.parameters), 'parameter')})")
    with cache.lock(request.root, request.key):
        damaged = []
        found = None if force else lookup(request, started, damaged)  # another process may have built it meanwhile
        if found is not None:
            return found
        cache.remove_stale_temporaries(request.root)
        for entry, _ in damaged:
            cache.discard(entry)
        return _build(request, description, say, started, parse_s)


def _build(request: Request, description, say: Progress, started: float, parse_s: float) -> BuildResult:
    """The stages after parsing, in order."""
    # Heavy imports (SymPy) only when building.
    from .extension.compile import translate_binding
    from .model import derive_model
    from .model.routines import define_early, define_routines

    timings: dict[str, float] = {"parse_s": parse_s}
    clock = time.perf_counter()

    def lap(name: str) -> float:
        nonlocal clock
        now = time.perf_counter()
        timings[name], clock = now - clock, now
        return timings[name]

    binding = translate_binding(Entry(request.root, description.name, request.key).module_name)
    try:
        say(f"deriving the model of {_plural(description.n, 'joint')} ({request.options.method} method)")
        early: dict = {}  # routines defined while the identification pass is derived beside the model

        def meanwhile(partial) -> None:
            started = time.perf_counter()
            early.update(define_early(partial, request.options))
            say(f"  defined {sum(result is not None for result, _ in early.values())} routines while the "
                f"identification pass was derived beside the model ({time.perf_counter() - started:.2f} s)")

        model = derive_model(description, request.options, progress=say, meanwhile=meanwhile)
        say(f"derived the {model.method} model in {lap('derive_s'):.2f} s")
        say("compiling the routines' C as it is emitted (SymPy writes one routine while GCC compiles the last)")
        routines = define_routines(model, request.options, early=early)
        lap("define_s")
        compilation = start_compilation(request, description.name, binding)
        sources, compiled = emit_and_compile(routines, compilation)
        lap("emit_and_compile_s")
        timings["emit_s"], timings["cse_s"] = sources.timings["emit_s"], sources.timings["cse_s"]
        timings["compile_s"] = compiled.timings["compile_s"]  # from the first file on: overlaps emit_s
        # The derivative routines' share: their definitions (model stage) and their C.
        timings["derivatives_s"] = sum(v for k, v in sources.timings["routine_seconds"].items()
                                       if k.endswith("_derivatives"))
        say(f"emitted C for {len(routines.definitions)} routines in {timings['emit_s']:.2f} s (common-subexpression "
            f"elimination {timings['cse_s']:.2f} s; derivative routines {timings['derivatives_s']:.2f} s); "
            f"{sum(sources.operation_counts.values())} operations")
        say(f"compiled {compiled.entry.module_path.name}: {timings['emit_and_compile_s']:.2f} s for emission and "
            f"compilation together, the compiler running alongside the emission")
        say("self-checking the compiled module" if request.options.selfcheck else "self-check skipped (--no-selfcheck)")
        result = check_and_publish(compiled, routines, request, timings)
    except (ValueError, TypeError, KeyError, IndexError, ArithmeticError) as error:
        if isinstance(error, CodegenError):
            raise
        # The description passed its checks, so an error of these kinds from here on is the generator's own (a bug),
        # not an invalid input: said so (the command line's status 3), with the traceback behind it (--debug).
        raise BuildError(f"internal error of the generator on {request.path} (a bug in robodyn: please report it with "
                         f"the output of --debug): {type(error).__name__}: {error}") from error
    finally:
        binding.cancel()  # a no-op once the compile stage has its result
    result.timings["total_s"] = time.perf_counter() - started
    status = result.selfcheck.get("status", "passed")
    say(f"self-check {status} in {result.timings['selfcheck_s']:.2f} s; published {result.entry.directory} "
        f"(total {result.timings['total_s']:.1f} s)")
    return result
