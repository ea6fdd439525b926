"""Stage 4: compile, self-check and publish a robot module; or find it in the cache.

This is the only stage that writes files. A build happens in a private
temporary directory next to its final place and becomes visible only by an
atomic rename after compiling and passing the self-check, so an interrupted
or failed build never leaves an importable module behind.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import BuildError, DescriptionError, SelfCheckError
from .cache import MANIFEST, SELFCHECK, CacheEntry, cache_key, default_cache_root


@dataclass(frozen=True)
class BuiltModule:
    directory: Path
    module_name: str
    module_path: Path
    manifest: dict
    selfcheck: dict
    cache_hit: bool
    timings: dict = field(default_factory=dict)


def _read_description(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DescriptionError(str(path), None, "", f"cannot read the description: {exc.strerror}") from None


def find_cached(root: Path, key: str) -> BuiltModule | None:
    if not root.is_dir():
        return None
    for directory in sorted(root.glob(f"*-{key[:16]}")):
        manifest_path = directory / MANIFEST
        if not manifest_path.is_file():
            continue
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        module_path = directory / manifest["module_file"]
        if manifest.get("key") != key or not module_path.is_file():
            continue
        selfcheck_path = directory / SELFCHECK
        selfcheck = json.loads(selfcheck_path.read_text(encoding="utf-8")) if selfcheck_path.is_file() else {}
        return BuiltModule(directory, manifest["module_name"], module_path, manifest, selfcheck, True)
    return None


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


def import_module(module_name: str, module_path: Path):
    """Import an extension module from an explicit file path (no sys.path changes)."""
    existing = sys.modules.get(module_name)
    if existing is not None:
        return existing
    loader = importlib.machinery.ExtensionFileLoader(module_name, str(module_path))
    spec = importlib.util.spec_from_file_location(module_name, str(module_path), loader=loader)
    if spec is None:
        raise BuildError(f"cannot import {module_path}")
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[module_name] = module
    return module


def ensure_built(path: str | Path, out: str | Path | None = None, force: bool = False,
                 progress: Callable[[str], None] | None = None, simplify: bool = True,
                 method: str = "auto", lock: dict | None = None, runtime_parameters: bool = False,
                 forward: str = "ltdl") -> BuiltModule:
    """Return the compiled module for a description, building it if needed."""
    say = progress or (lambda message: None)
    path = Path(path)
    start = time.perf_counter()
    data = _read_description(path)
    root = Path(out) if out is not None else default_cache_root()
    lock = {str(k): float(v) for k, v in (lock or {}).items()}
    options = {"simplify": simplify, "method": method, "lock": lock, "runtime_parameters": runtime_parameters,
               "forward": forward}
    key = cache_key(data, options)
    if not force:
        cached = find_cached(root, key)
        if cached is not None:
            return BuiltModule(cached.directory, cached.module_name, cached.module_path, cached.manifest,
                               cached.selfcheck, True, {"lookup_s": time.perf_counter() - start})

    # Heavy imports only when we really build.
    from ..description import parse_source
    from ..emit.routines import emit
    from .. import derive_model, resolve_method
    from .compile import compile_module, write_build_tree
    from .selfcheck import report, run_selfcheck

    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    description = parse_source(data, str(path), lock, runtime_parameters)
    timings["parse_s"] = time.perf_counter() - t0
    say(f"parsed {path} ({description.n} joints, {len(description.parameters)} parameters)")

    t0 = time.perf_counter()
    route = resolve_method(method, description.n)
    model = derive_model(description, method=route, simplify=simplify)
    timings["derive_s"] = time.perf_counter() - t0
    name = "Euler-Lagrange" if route == "lagrange" else "recursive (Newton-Euler, CRBA, Coriolis)"
    say(f"derived the {name} model in {timings['derive_s']:.2f} s")

    t0 = time.perf_counter()
    if forward == "aba" and model.aba is None:
        raise BuildError("forward dynamics by the articulated-body algorithm needs the recursive route "
                         "and a robot without motor rotors; use the default (ltdl)")
    sources = emit(model, forward=forward)
    timings["emit_s"] = time.perf_counter() - t0
    timings["cse_s"] = sources.timings["cse_s"]
    total_ops = sum(sources.operation_counts.values())
    say(f"emitted C in {timings['emit_s']:.2f} s (common-subexpression elimination {timings['cse_s']:.2f} s); "
        f"{total_ops} operations in all routines")

    entry = CacheEntry(root, description.name, key)
    root.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(root)
    workdir = Path(tempfile.mkdtemp(prefix=f"{entry.temporary_prefix()}{os.getpid()}-", dir=root))
    try:
        t0 = time.perf_counter()
        script = write_build_tree(workdir, entry.module_name, sources.files, description.name)
        built_path = workdir / entry.module_path.name
        log = compile_module(workdir, script, built_path)
        timings["compile_s"] = time.perf_counter() - t0
        say(f"compiled {entry.module_path.name} in {timings['compile_s']:.2f} s")

        t0 = time.perf_counter()
        module = import_module(entry.module_name, built_path)
        checks = run_selfcheck(module.Dynamics(), model)
        selfcheck = report(checks)
        timings["selfcheck_s"] = time.perf_counter() - t0
        (workdir / SELFCHECK).write_text(json.dumps(selfcheck, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        if not selfcheck["passed"]:
            failed = [c for c in checks if not c.passed]
            detail = "\n".join(f"  {c.name}: error {c.error:.3e} > tolerance {c.tolerance:.1e}" for c in failed)
            raise SelfCheckError(f"self-check failed for {path}:\n{detail}", log=log)

        manifest = {
            "module_name": entry.module_name,
            "module_file": entry.module_path.name,
            "key": key,
            "robot": description.name,
            "description_path": str(path.resolve()),
            "metadata": sources.metadata,
            "operation_counts": sources.operation_counts,
            "timings": timings,
        }
        (workdir / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        # Drop build intermediates; keep sources, module, manifest and self-check.
        shutil.rmtree(workdir / "build", ignore_errors=True)
        for leftover in workdir.glob(f"{entry.module_name}.c"):
            leftover.unlink()
        try:
            os.rename(workdir, entry.directory)
        except OSError:
            if entry.is_complete() and not force:  # someone else published the same key first
                shutil.rmtree(workdir, ignore_errors=True)
            elif entry.directory.exists():
                # A forced rebuild, or a broken entry: replace it. Modules already imported from
                # it stay valid (their files are unlinked, not changed).
                shutil.rmtree(entry.directory, ignore_errors=True)
                os.rename(workdir, entry.directory)
            else:
                raise
        say(f"published {entry.directory}")
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    timings["total_s"] = time.perf_counter() - start
    return BuiltModule(entry.directory, entry.module_name, entry.module_path, manifest, selfcheck, False, timings)
