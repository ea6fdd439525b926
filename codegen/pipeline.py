"""The generator's pipeline, in one place.

    request     = read_request(path, options, cache_dir)   Request            reads the description
    description = describe(request)                         RobotDescription   (codegen.description)
    binding     = translate_binding(module name)            Cython, started now, in the background
    model       = derive_model(description, options)        SymbolicModel      (codegen.model)
    routines    = define_routines(model, options)           RoutineSet         (codegen.model.routines)
    sources     = emit(routines)                            GeneratedSources   (codegen.emit)
    compiled    = compile_extension(sources, request, binding)  CompiledExtension  writes a build directory
    result      = check_and_publish(compiled, routines, request)  BuildResult  writes the self-check, publishes

Each stage is a function from one plain dataclass to the next; only the first
reads input and only the last two write files. The one step that does not wait
for its turn is Cython's translation of the static binding, which depends only
on the module's name: it runs in a child process (writing only into its own
scratch directory) while SymPy derives the model, and the compile stage takes
its result.

``build`` runs them, after a cache lookup that needs neither SymPy nor a
compiler; after parsing and until publishing it holds a per-key lock, so processes
that need the same robot at once build it once. A build happens in a hidden
temporary directory next to its cache entry and becomes visible only by an
atomic rename after it compiled and passed the self-check, so a failed or
killed build never leaves an importable module behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from robodyn import cache
from robodyn.cache import MANIFEST, SELFCHECK, Entry
from robodyn.errors import BuildError, SelfCheckError
from robodyn.options import BuildOptions

Progress = Callable[[str], None]


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


def lookup(request: Request, started: float | None = None) -> BuildResult | None:
    """The cache entry for the request, if there is a complete one (no SymPy, no compiler)."""
    found = cache.find(request.root, request.key)
    if found is None:
        return None
    entry, manifest = found
    timings = {} if started is None else {"lookup_s": time.perf_counter() - started}
    return BuildResult(entry, manifest, entry.selfcheck(), True, timings)


def _remove_stale_temporaries(root: Path) -> None:
    """Delete build directories left by processes that no longer exist."""
    for directory in root.glob(".tmp-*"):
        parts = directory.name.split("-")
        try:
            pid = int(parts[-2])
        except (ValueError, IndexError):
            continue
        try:
            os.kill(pid, 0)
            alive = True
        except ProcessLookupError:
            alive = False
        except PermissionError:
            alive = True
        if not alive:
            shutil.rmtree(directory, ignore_errors=True)


def compile_extension(sources, request: Request, binding=None):
    """Stage 5: compile the sources in a private temporary directory under the cache root."""
    from .extension.compile import compile_extension as compile_in

    entry = Entry(request.root, sources.robot, request.key)
    try:
        request.root.mkdir(parents=True, exist_ok=True)
        _remove_stale_temporaries(request.root)
        workdir = Path(tempfile.mkdtemp(prefix=f"{entry.temporary_prefix()}{os.getpid()}-", dir=request.root))
    except OSError as exc:
        raise BuildError(f"cannot create a build directory in {request.root}: {exc.strerror}") from None
    try:
        return compile_in(sources, entry, workdir, binding)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise


def check_and_publish(compiled, routines, request: Request, timings: dict | None = None) -> BuildResult:
    """Stage 6: self-check the compiled module, write its report and manifest, publish it atomically."""
    from robodyn.robot import Robot

    from .extension.selfcheck import report, run_selfcheck

    timings = dict(timings or {})
    entry, workdir = compiled.entry, compiled.workdir
    try:
        started = time.perf_counter()
        module = cache.import_extension(entry.module_name, compiled.module_path, fresh=True)
        checks = run_selfcheck(Robot(module), routines)
        selfcheck = report(checks)
        timings["selfcheck_s"] = time.perf_counter() - started
        (workdir / SELFCHECK).write_text(json.dumps(selfcheck, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        if not selfcheck["passed"]:
            failed = [c for c in checks if not c.passed]
            detail = "\n".join(f"  {c.name}: error {c.error:.3e} > tolerance {c.tolerance:.1e}" for c in failed)
            raise SelfCheckError(f"self-check failed for {request.path}:\n{detail}", log=compiled.log)
        manifest = {
            "module_name": entry.module_name,
            "module_file": entry.module_path.name,
            "module_sha256": cache.file_sha256(compiled.module_path),
            "key": request.key,
            "built_from": request.key_inputs,
            "robot": compiled.sources.robot,
            "description_path": str(request.path.resolve()),
            "options": request.options.as_dict(),
            "metadata": compiled.sources.metadata,
            "operation_counts": compiled.sources.operation_counts,
            "timings": timings,
        }
        (workdir / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        # Keep the sources, the module, the manifest and the self-check; drop intermediates.
        shutil.rmtree(workdir / "build", ignore_errors=True)
        for leftover in (workdir / f"{entry.module_name}.c",):
            leftover.unlink(missing_ok=True)
        _publish(workdir, entry)
        module.__file__ = str(entry.module_path)  # imported from the build directory, now renamed
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return BuildResult(entry, manifest, selfcheck, False, timings)


def _publish(workdir: Path, entry: Entry) -> None:
    """Rename the build directory to the entry's. An existing entry (a forced rebuild, a broken
    entry, or another process that finished the same build first) is replaced: modules already
    imported from it stay valid, their files are unlinked, not changed."""
    try:
        os.rename(workdir, entry.directory)
    except OSError:
        if not entry.directory.exists():
            raise
        shutil.rmtree(entry.directory, ignore_errors=True)
        os.rename(workdir, entry.directory)


@contextlib.contextmanager
def _build_lock(request: Request):
    """One build of a key at a time across processes (workers that all load the same robot): the
    others wait, then find it in the cache. An advisory lock on a hidden file in the cache root."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock, concurrent builds stay correct
        yield
        return
    try:
        request.root.mkdir(parents=True, exist_ok=True)
        handle = open(request.root / f".lock-{request.key[:16]}", "a")
    except OSError as exc:
        raise BuildError(f"cannot write to the cache directory {request.root}: {exc.strerror}") from None
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build(path: str | Path, options: BuildOptions | None = None, *, cache_dir: str | Path | None = None,
          force: bool = False, progress: Progress | None = None) -> BuildResult:
    """Return the published module for a description, building it unless the cache has it."""
    started = time.perf_counter()
    request = read_request(path, options, cache_dir)
    found = None if force else lookup(request, started)
    if found is not None:
        return found
    say = progress or (lambda message: None)
    clock = time.perf_counter()
    description = describe(request)  # an invalid description fails here, before anything is written
    parse_s = time.perf_counter() - clock
    say(f"parsed {request.path} in {parse_s:.2f} s ({description.n} joints, "
        f"{len(description.parameters)} parameters)")
    with _build_lock(request):
        found = None if force else lookup(request, started)  # another process may have built it meanwhile
        if found is not None:
            return found
        return _build(request, description, say, started, parse_s)


def _build(request: Request, description, say: Progress, started: float, parse_s: float) -> BuildResult:
    """The stages after parsing, in order."""
    # Heavy imports (SymPy) only when building.
    from .emit.sources import emit
    from .extension.compile import translate_binding
    from .model import derive_model
    from .model.routines import define_routines

    timings: dict[str, float] = {"parse_s": parse_s}
    clock = time.perf_counter()

    def lap(name: str) -> float:
        nonlocal clock
        now = time.perf_counter()
        timings[name], clock = now - clock, now
        return timings[name]

    binding = translate_binding(Entry(request.root, description.name, request.key).module_name)
    try:
        model = derive_model(description, request.options)
        say(f"derived the {model.method} model in {lap('derive_s'):.2f} s")
        routines = define_routines(model, request.options)
        sources = emit(routines)
        timings["cse_s"] = sources.timings["cse_s"]
        say(f"emitted C for {len(routines.definitions)} routines in {lap('emit_s'):.2f} s (common-subexpression "
            f"elimination {timings['cse_s']:.2f} s); {sum(sources.operation_counts.values())} operations")
        compiled = compile_extension(sources, request, binding)
        say(f"compiled {compiled.entry.module_path.name} in {lap('compile_s'):.2f} s")
        result = check_and_publish(compiled, routines, request, timings)
    finally:
        binding.cancel()  # a no-op once the compile stage has its result
    result.timings["total_s"] = time.perf_counter() - started
    say(f"self-check {'passed' if result.selfcheck['passed'] else 'FAILED'} in {result.timings['selfcheck_s']:.2f} s; "
        f"published {result.entry.directory}")
    return result
