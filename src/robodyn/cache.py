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

The manifest also records the module file's SHA-256, checked before every
import: a truncated or overwritten module is rebuilt, never loaded (loading a
damaged shared library crashes the interpreter).

Entries are published by an atomic rename of a finished temporary directory, so
a reader never sees a half-built module; an entry whose manifest is unreadable,
whose key differs or whose module file is missing is not a hit.
"""

from __future__ import annotations

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

__all__ = ["MANIFEST", "SELFCHECK", "Entry", "default_root", "read_description", "key_inputs", "cache_key", "find", "import_extension",
           "toolchain", "generator_fingerprint"]

MANIFEST = "manifest.json"
SELFCHECK = "selfcheck.json"
_ENTRY_NAME = re.compile(r"^[a-z][a-z0-9_]*-[0-9a-f]{16}$")


def default_root() -> Path:
    """$ROBODYN_CACHE_DIR, else $XDG_CACHE_HOME/robodyn, else ~/.cache/robodyn."""
    explicit = os.environ.get("ROBODYN_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "robodyn"


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
        """The parsed manifest if this entry is complete and consistent, else None. The module file
        must be the one the build published (its SHA-256): importing a truncated or overwritten
        shared library would crash the interpreter instead of raising."""
        try:
            manifest = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return None
        if (not isinstance(manifest, dict) or manifest.get("key") != self.key
                or manifest.get("module_file") != self.module_path.name or not self.module_path.is_file()):
            return None
        try:
            if manifest.get("module_sha256") != file_sha256(self.module_path):
                return None
        except OSError:
            return None
        return manifest

    def selfcheck(self) -> dict:
        try:
            value = json.loads((self.directory / SELFCHECK).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read_description(path) -> bytes:
    """The bytes of a description file; DescriptionError if it is not a readable regular file
    (a directory or a FIFO would fail late or block)."""
    import stat

    from .errors import DescriptionError

    path = Path(path)
    try:
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise DescriptionError(str(path), None, "", f"cannot read the description: {kind}")
        return path.read_bytes()
    except OSError as exc:
        raise DescriptionError(str(path), None, "", f"cannot read the description: {exc.strerror}") from None


def find(root: Path, key: str) -> tuple[Entry, dict] | None:
    """The complete entry for ``key`` under ``root`` and its manifest, or None."""
    try:
        candidates = sorted(root.glob(f"*-{key[:16]}")) if root.is_dir() else []
    except OSError:
        return None
    for directory in candidates:
        if not _ENTRY_NAME.match(directory.name):
            continue
        entry = Entry(root, directory.name[:-17], key)
        manifest = entry.manifest()
        if manifest is not None:
            return entry, manifest
    return None


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
    return module
