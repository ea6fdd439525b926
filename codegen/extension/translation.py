"""The robot modules' static binding (binding.pyx), translated by Cython once, at ``pip install``.

Every robot module is the same few lines of Cython (binding.pyx) plus the robot's C; only the module's name
differs, and Cython's C text depends on it. Translating it for each build cost about 0.7 s of CPU, most of it
Cython's start-up. So setup.py translates it once, under the name TRANSLATED_MODULE, into the runtime package's
native directory (robodyn/native/TRANSLATED_NAME: every build imports the installed runtime, while codegen may come
from a source tree), and a build compiles that C with ``-DPyInit_<TRANSLATED_MODULE>=PyInit_<module name>``: the
initialisation function is the only symbol Python looks up by the module's name, and the module takes its name
from the import (multi-phase initialisation, PEP 489). Names Cython compiled in (a traceback's, the ``robot``
function's ``__module__``) read TRANSLATED_MODULE.

The file's first line records the SHA-256 of the binding.pyx it came from, the Python version it was made for (its
C API) and the SHA-256 of the C text after that line: a file translated from another binding.pyx (a source tree
edited after installing), for another Python (two environments sharing an editable tree) or damaged is not used, and
the build runs Cython itself (``codegen.extension.compile.BindingTranslation``). Cython registers a module in
``sys.modules`` under its compiled-in name too: robodyn.cache.import_extension takes that entry out again.

This module imports nothing from robodyn or codegen: setup.py runs it before either is built.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

BINDING = Path(__file__).resolve().parent / "binding.pyx"
TRANSLATED_NAME = "binding_translated.c"
TRANSLATED_MODULE = "robodyn_robot_binding"
_MARK = ("/* robodyn: Cython's C for binding.pyx, sha256 {binding}, for Python {python}; "
         "sha256 of the C text below {text} */")


def _python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def translate(target: Path, binding: Path = BINDING) -> None:
    """Run Cython on ``binding`` under TRANSLATED_MODULE's name and write ``target`` (the hash line first); a
    CalledProcessError if Cython fails."""
    target = Path(target)
    scratch = target.with_name(target.name + ".tmp.c")
    try:
        subprocess.run([sys.executable, "-m", "cython", "-3", "--module-name", TRANSLATED_MODULE, "-o", str(scratch),
                        str(binding)], check=True)
        text = scratch.read_text(encoding="utf-8")
    finally:
        scratch.unlink(missing_ok=True)
    mark = _MARK.format(binding=_sha256(Path(binding).read_bytes()), python=_python(),
                        text=_sha256(text.encode("utf-8")))
    target.write_text(mark + "\n" + text, encoding="utf-8")


def pretranslated(translated: Path, binding: Path = BINDING) -> str | None:
    """The install-time translation's C text, if ``translated`` holds one of this ``binding`` and is intact;
    else None."""
    try:
        text = Path(translated).read_bytes().decode("utf-8")
        source = Path(binding).read_bytes()
    except (OSError, UnicodeDecodeError):
        return None
    first, newline, rest = text.partition("\n")
    if not newline or first != _MARK.format(binding=_sha256(source), python=_python(),
                                            text=_sha256(rest.encode("utf-8"))):
        return None
    return rest
