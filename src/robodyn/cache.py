"""Where compiled robots live, how an entry is keyed, and how it is found and loaded.

The generator (``codegen``) publishes entries here; the runtime reads them
without importing the generator or SymPy, so a cache hit takes milliseconds.

An entry is a directory ``<root>/<robot>-<key[:16]>`` holding the robot's
generated C, its compiled module ``robodyn_<robot>_<key[:12]><EXT_SUFFIX>``,
``manifest.json`` (what the entry was built from) and ``selfcheck.json``. The
key is a SHA-256 over everything the module depends on:

* the description's bytes and the build options;
* the generator: its version and the text of its sources (a changed generator
  never reuses a stale module);
* the runtime interface: the hash of the C layout (``native/robodyn_abi.h``,
  ``robodyn_sim.h``) and the routine table;
* the toolchain: the C compiler (its command and ``--version``), Python's
  compile flags, Cython's version, NumPy's major version and the Python ABI.

The manifest also records the module file's size and SHA-256, checked (size
first, then hash) before every import: a truncated or overwritten module is
rebuilt, never loaded (loading a damaged shared library crashes the
interpreter). The module file it names must be the entry's own, a plain file
inside the entry's directory.

Entries are published by an atomic rename of a finished temporary directory, so
a reader never sees a half-built module. An entry whose manifest or self-check
report is unreadable or inconsistent, whose key differs or whose module file is
missing or damaged is not a hit: ``inspect`` says why, and the generator
replaces it.

Builds hold a per-key advisory lock (``lock``) in the cache root and work in
``.tmp-<robot>-<key>-<pid>-*`` directories; every run (a cache hit too)
removes temporaries whose process is gone (``tidy``), never those of a live one.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from ._version import __version__
from .options import BuildOptions

__all__ = ["MANIFEST", "SELFCHECK", "Entry", "default_root", "read_description", "key_inputs", "cache_key", "find",
           "inspect", "import_extension", "toolchain", "generator_fingerprint", "lock", "tidy", "discard",
           "writable_root", "remove_stale_temporaries"]

MANIFEST = "manifest.json"
SELFCHECK = "selfcheck.json"
_ENTRY_NAME = re.compile(r"^[a-z][a-z0-9_]*-[0-9a-f]{16}$")


def default_root() -> Path:
    """$ROBODYN_CACHE_DIR (``~`` expanded), else $XDG_CACHE_HOME/robodyn, else ~/.cache/robodyn.

    An empty variable counts as unset; a relative $XDG_CACHE_HOME is ignored (the XDG rule);
    StorageError if there is no home directory to fall back on."""
    from .errors import StorageError

    explicit = os.environ.get("ROBODYN_CACHE_DIR", "").strip()
    if explicit:
        try:
            return Path(explicit).expanduser()
        except RuntimeError:  # ~user of no such user, or ~ without a home
            raise StorageError(f"cache directory $ROBODYN_CACHE_DIR={explicit!r}: cannot expand "
                               f"{explicit.split(os.sep)[0]!r} (no such user or home directory)") from None
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "robodyn"
    try:
        home = Path.home()
    except (RuntimeError, KeyError, OSError):
        home = None
    if home is None or not str(home).strip() or not home.is_absolute():
        raise StorageError("no cache directory: $HOME is not set and no $ROBODYN_CACHE_DIR or absolute "
                           "$XDG_CACHE_HOME is given; pass --cache-dir (cache_dir=)")
    return home / ".cache" / "robodyn"


def writable_root(root: Path) -> Path:
    """``root`` as a directory robodyn can build in (created if missing); StorageError saying why not."""
    from .errors import StorageError

    root = Path(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise StorageError(f"cache directory {root}: exists and is not a directory") from None
    except OSError as exc:
        raise StorageError(f"cannot create the cache directory {root}: {exc.strerror}") from None
    if not root.is_dir():
        raise StorageError(f"cache directory {root}: is not a directory")
    if not os.access(root, os.W_OK | os.X_OK):
        raise StorageError(f"cache directory {root}: not writable (permission denied)")
    return root


def ext_suffix() -> str:
    return str(sysconfig.get_config_var("EXT_SUFFIX") or ".so")


@functools.lru_cache(maxsize=None)
def toolchain() -> dict:
    """The compiler and the Python build a robot module depends on (asked once per process)."""
    cc = sysconfig.get_config_var("CC") or "cc"
    command = shlex.split(cc)
    try:
        result = subprocess.run(command + ["--version"], capture_output=True, text=True, timeout=30)
        version = (result.stdout or result.stderr).strip().splitlines()[0] if result.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError, IndexError):
        version = ""
    try:
        cython = importlib.metadata.version("Cython")
    except importlib.metadata.PackageNotFoundError:
        cython = ""
    import numpy

    return {
        "cc": cc,
        "cc_path": shutil.which(command[0]) or "",
        "cc_version": version or "unavailable",
        "cflags": sysconfig.get_config_var("CFLAGS") or "",
        "cython": cython or "unavailable",
        "numpy_major": numpy.__version__.split(".")[0],
        "python": sys.implementation.cache_tag,
        "ext_suffix": ext_suffix(),
    }


#: The module name the robot modules' binding is translated under at install time (codegen.extension.translation
#: TRANSLATED_MODULE; the runtime does not import the generator).
SHARED_BINDING_NAME = "robodyn_robot_binding"


@functools.lru_cache(maxsize=None)
def generator_fingerprint() -> str:
    """Version and source text of the generator package (found without importing it)."""
    digest = hashlib.sha256(__version__.encode())
    spec = importlib.util.find_spec("codegen")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in map(Path, roots):
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".pyx", ".c", ".h") and "__pycache__" not in path.parts:
                digest.update(path.relative_to(root).as_posix().encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def key_inputs(description: bytes, options: BuildOptions) -> dict:
    """Everything a robot module depends on (recorded in its manifest)."""
    from . import _native
    from .routines import table_fingerprint

    return {
        "description_sha256": hashlib.sha256(description).hexdigest(),
        "options": options.as_dict(),
        "generator_version": __version__,
        "generator_sha256": generator_fingerprint(),
        "abi": _native.ABI_HASH,
        "routine_table": table_fingerprint(),
        "toolchain": toolchain(),
    }


def cache_key(description: bytes, options: BuildOptions) -> str:
    return hashlib.sha256(json.dumps(key_inputs(description, options), sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Entry:
    """One robot module in the cache (it may not exist yet)."""

    root: Path
    robot: str
    key: str

    @property
    def directory(self) -> Path:
        return self.root / f"{self.robot}-{self.key[:16]}"

    @property
    def module_name(self) -> str:
        return f"robodyn_{self.robot}_{self.key[:12]}"

    @property
    def module_path(self) -> Path:
        return self.directory / (self.module_name + ext_suffix())

    @property
    def manifest_path(self) -> Path:
        return self.directory / MANIFEST

    def temporary_prefix(self) -> str:
        return f".tmp-{self.robot}-{self.key[:16]}-"

    def manifest(self) -> dict | None:
        """The parsed manifest if this entry is complete and consistent, else None (see ``inspect``)."""
        manifest, _ = self.inspect()
        return manifest

    def inspect(self) -> tuple[dict | None, str | None]:
        """(manifest, None) for a complete, consistent entry, else (None, why not). The module file
        must be the one the build published (its size, then its SHA-256): importing a truncated or
        overwritten shared library would crash the interpreter instead of raising."""
        manifest = _read_json(self.manifest_path)
        if isinstance(manifest, str):
            return None, f"{MANIFEST}: {manifest}"
        if manifest.get("key") != self.key:
            return None, f"{MANIFEST}: key differs"
        name = manifest.get("module_file")
        if not isinstance(name, str) or name != self.module_path.name or os.sep in name or name in (".", ".."):
            return None, f"{MANIFEST}: module_file {name!r} is not this entry's module"
        try:
            size = os.lstat(self.module_path)
        except OSError as exc:
            return None, f"module {name}: {exc.strerror}"
        import stat

        if not stat.S_ISREG(size.st_mode):
            return None, f"module {name}: not a regular file"
        expected_size = manifest.get("module_size")
        if isinstance(expected_size, bool) or not isinstance(expected_size, int):
            return None, f"{MANIFEST}: no module_size"
        if size.st_size != expected_size:
            return None, f"module {name}: {size.st_size} bytes, {expected_size} expected"
        try:
            digest = file_sha256(self.module_path)
        except OSError as exc:
            return None, f"module {name}: {exc.strerror}"
        if manifest.get("module_sha256") != digest:
            return None, f"module {name}: SHA-256 differs"
        selfcheck = _read_json(self.directory / SELFCHECK)
        if isinstance(selfcheck, str):
            return None, f"{SELFCHECK}: {selfcheck}"
        status = selfcheck_status(selfcheck)
        if status is None or status != manifest.get("selfcheck", status) or status == "failed":
            return None, f"{SELFCHECK}: inconsistent"
        return manifest, None

    def selfcheck(self) -> dict:
        value = _read_json(self.directory / SELFCHECK)
        return {} if isinstance(value, str) else value


def selfcheck_status(report: dict) -> str | None:
    """"passed", "skipped" (built with selfcheck=False), "failed", or None for a malformed report."""
    if report.get("status") == "skipped" and report.get("passed") is None:
        return "skipped"
    checks, passed = report.get("checks"), report.get("passed")
    if not isinstance(checks, list) or not checks or not isinstance(passed, bool) or not all(
            _well_formed_check(c) for c in checks):
        return None
    if passed != all(c["passed"] for c in checks) or report.get("status", "passed" if passed else "failed") != (
            "passed" if passed else "failed"):
        return None
    return "passed" if passed else "failed"


def _well_formed_check(check) -> bool:
    """One entry of a self-check report: a name, a finite error and tolerance, and the verdict they give."""
    import math

    if not isinstance(check, dict) or not isinstance(check.get("name"), str) or not isinstance(check.get("passed"), bool):
        return False
    error, tolerance = check.get("error"), check.get("tolerance")
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (error, tolerance))
    if not numbers or not math.isfinite(tolerance) or math.isnan(error):
        return False
    return check["passed"] == (math.isfinite(error) and error <= tolerance)


def _read_json(path: Path) -> dict | str:
    """The JSON object in ``path``, or a short reason why there is none."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    except (UnicodeDecodeError, ValueError, RecursionError):
        return "not valid JSON"
    return value if isinstance(value, dict) else "not a JSON object"


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


#: Descriptions larger than this are refused before they are read (the parsers' own limits are
#: lower: 1 MB of YAML, 10 MB of URDF); the largest real URDFs are a few hundred kilobytes.
MAX_DESCRIPTION_BYTES = 10_000_000


def read_description(path) -> bytes:
    """The bytes of a description file; DescriptionError if it is not a readable regular file
    (a directory or a FIFO would fail late or block) or is larger than MAX_DESCRIPTION_BYTES."""
    import stat

    from .errors import DescriptionError

    path = Path(path)
    if "\x00" in str(path):
        raise DescriptionError(str(path).replace("\x00", "\\0"), None, "", "a file name cannot contain a NUL byte")
    try:
        status = path.stat()
        mode = status.st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise DescriptionError(str(path), None, "", f"cannot read the description: {kind}")
        data = b""
        if status.st_size <= MAX_DESCRIPTION_BYTES:
            with path.open("rb") as stream:
                data = stream.read(MAX_DESCRIPTION_BYTES + 1)  # a file growing meanwhile is caught too
        if status.st_size > MAX_DESCRIPTION_BYTES or len(data) > MAX_DESCRIPTION_BYTES:
            raise DescriptionError(str(path), None, "", f"the file is larger than {MAX_DESCRIPTION_BYTES} bytes, "
                                   "too large for a robot description")
        return data
    except OSError as exc:
        raise DescriptionError(str(path), None, "", f"cannot read the description: {exc.strerror}") from None


def find(root: Path, key: str) -> tuple[Entry, dict] | None:
    """The complete entry for ``key`` under ``root`` and its manifest, or None."""
    return inspect(root, key)[0]


def inspect(root: Path, key: str) -> tuple[tuple[Entry, dict] | None, list[tuple[Entry, str]]]:
    """(the complete entry for ``key`` and its manifest, or None; the damaged entries of ``key``, each
    with the reason)."""
    try:
        candidates = sorted(Path(root).glob(f"*-{key[:16]}")) if Path(root).is_dir() else []
    except OSError:
        return None, []
    damaged = []
    for directory in candidates:
        if not _ENTRY_NAME.match(directory.name) or not directory.is_dir():
            continue
        entry = Entry(Path(root), directory.name[:-17], key)
        manifest, problem = entry.inspect()
        if manifest is not None:
            return (entry, manifest), damaged
        damaged.append((entry, problem))
    return None, damaged


def discard(entry: Entry) -> None:
    """Remove a damaged entry (hold its key's lock): renamed aside first, so no reader sees it half-removed."""
    aside = entry.root / f"{entry.temporary_prefix()}{os.getpid()}-discarded"
    try:
        os.rename(entry.directory, aside)
    except OSError:
        return
    _remove(aside)


def _remove(path: Path) -> None:
    """Delete a build directory or whatever took its name (a symbolic link, which rmtree refuses: only the link
    goes, never its target; a plain file); best effort."""
    try:
        if path.is_symlink() or not path.is_dir():
            path.unlink(missing_ok=True)
            return
    except OSError:
        return
    shutil.rmtree(path, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def remove_stale_temporaries(root: Path) -> list[Path]:
    """Delete build directories (``.tmp-<robot>-<key>-<pid>-*``) whose process no longer exists; a live
    process's directory is never touched. Returns what was removed."""
    removed = []
    try:
        candidates = list(Path(root).glob(".tmp-*"))
    except OSError:
        return removed
    for directory in candidates:
        parts = directory.name.split("-")
        try:
            pid = int(parts[-2])
        except (ValueError, IndexError):
            continue
        if pid > 0 and pid != os.getpid() and not _pid_alive(pid):
            _remove(directory)
            removed.append(directory)
    return removed


@contextlib.contextmanager
def lock(root: Path, key: str, blocking: bool = True):
    """One build of a key at a time across processes: an advisory lock on ``<root>/.lock-<key[:16]>``
    (the file stays; flock releases with its holder, so a lock file is never stale). Yields True when
    held; with ``blocking=False`` yields False at once if another process holds it. StorageError if
    the lock file cannot be created."""
    from .errors import StorageError

    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock, concurrent builds stay correct
        yield True
        return
    try:
        handle = open(Path(root) / f".lock-{key[:16]}", "a")
    except OSError as exc:
        raise StorageError(f"cannot write to the cache directory {root}: {exc.strerror}") from None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def tidy(root: Path, key: str) -> None:
    """Best effort, for every run (a cache hit too): under ``key``'s lock, if it is free at once, remove
    stale temporaries. A cache that is missing or read-only is left alone."""
    root = Path(root)
    try:
        if not root.is_dir() or not os.access(root, os.W_OK | os.X_OK) or not any(root.glob(".tmp-*")):
            return
        with lock(root, key, blocking=False) as held:
            if held:
                remove_stale_temporaries(root)
    except Exception:  # noqa: BLE001 - tidying must never fail a load
        return


def import_extension(module_name: str, module_path: Path, fresh: bool = False):
    """Import an extension module from an explicit file path (no sys.path changes). A module of that
    name already imported is returned as it is, unless ``fresh`` (a rebuild): then the new file is
    loaded and replaces it in sys.modules (robots holding the old one keep it)."""
    existing = sys.modules.get(module_name)
    if existing is not None and not fresh:
        return existing
    loader = importlib.machinery.ExtensionFileLoader(module_name, str(module_path))
    spec = importlib.util.spec_from_file_location(module_name, str(module_path), loader=loader)
    if spec is None:
        raise ImportError(f"cannot import {module_path}")
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[module_name] = module
    # A binding translated at install time under one name for every robot (codegen.extension.translation) also
    # registers the module under that name, as Cython's modules do under their own: not a module to keep there.
    if sys.modules.get(SHARED_BINDING_NAME) is module:
        del sys.modules[SHARED_BINDING_NAME]
    return module
