"""Where compiled robots live, and how a cache entry is named.

The key hashes the description bytes, the generator (its version and the
text of its own sources, so a changed generator never reuses stale code), the
compiler flags and the Python ABI. A lookup needs no SymPy: a hit is a
directory check. Entries are published by renaming a finished temporary
directory, so a reader never sees a half-built module.
"""

from __future__ import annotations

import hashlib
import json
import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from .. import __version__

# -g0: Python's own CFLAGS ask for debug information, which costs a third of the compile time.
COMPILE_FLAGS = ("-O2", "-g0", "-fno-math-errno")
# The Cython bridge is mostly Python-object glue around the fast paths: -O1 halves its compile
# time (the critical path of a build) for a few percent more instructions per call.
BRIDGE_FLAGS = ("-O1", "-g0", "-fno-math-errno")
MANIFEST = "manifest.json"
SELFCHECK = "selfcheck.json"
_GENERATOR_ROOT = Path(__file__).resolve().parent.parent


def default_cache_root() -> Path:
    """$ROBODYN_CACHE_DIR, else $XDG_CACHE_HOME/robodyn, else ~/.cache/robodyn."""
    explicit = os.environ.get("ROBODYN_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "robodyn"


def generator_fingerprint() -> str:
    """Hash of the generator's version and source text (codegen/**.py, the bridge and the static C)."""
    digest = hashlib.sha256(__version__.encode())
    for path in sorted(_GENERATOR_ROOT.rglob("*")):
        if path.suffix in (".py", ".pyx", ".c", ".h") and "__pycache__" not in path.parts:
            digest.update(path.relative_to(_GENERATOR_ROOT).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_key(description_bytes: bytes, options: dict | None = None) -> str:
    digest = hashlib.sha256()
    for part in (description_bytes, generator_fingerprint().encode(), " ".join(COMPILE_FLAGS + BRIDGE_FLAGS).encode(),
                 str(sysconfig.get_config_var("EXT_SUFFIX")).encode(),
                 json.dumps(options or {}, sort_keys=True).encode()):
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()


@dataclass(frozen=True)
class CacheEntry:
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
        return self.directory / (self.module_name + str(sysconfig.get_config_var("EXT_SUFFIX")))

    def is_complete(self) -> bool:
        return (self.directory / MANIFEST).is_file() and self.module_path.is_file()

    def temporary_prefix(self) -> str:
        return f".tmp-{self.robot}-{self.key[:16]}-"
