"""Build of the runtime's native extension; everything else is in pyproject.toml.

robodyn._native (src/robodyn/_native.pyx + native/robodyn_sim.c) is compiled once,
here, at `pip install`: the argument checks and call path of every routine, the
control laws, integrators and the closed-loop simulation. Robot modules built later
by the generator hold only their generated C and a table of routines; the runtime
and they agree on the C layout through RD_ABI_HASH, the hash of the shared headers.

The robot modules' static Cython binding (codegen/extension/binding.pyx) is translated
here too, once (codegen/extension/translation.py): a robot's build then compiles that
C instead of running Cython, about 0.7 s of CPU per build.
"""

import runpy
import subprocess
import warnings
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_py import build_py

NATIVE = Path("src/robodyn/native")
ABI_HASH = runpy.run_path(str(Path("src/robodyn/_abi.py")))["abi_hash"](NATIVE)

extension = Extension(
    "robodyn._native",
    sources=["src/robodyn/_native.pyx", str(NATIVE / "robodyn_sim.c")],
    include_dirs=[numpy.get_include(), str(NATIVE)],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"), ("RD_ABI_HASH", f'"{ABI_HASH}"')],
    extra_compile_args=["-O2", "-fno-math-errno"],
)

TRANSLATION = runpy.run_path(str(Path("codegen/extension/translation.py")))


class build_py_with_binding(build_py):
    """The packages, plus the robot modules' binding translated once, into the runtime's native directory (in the
    source tree for an editable install, which imports robodyn from there)."""

    def run(self):
        super().run()
        relative = Path("robodyn/native") / TRANSLATION["TRANSLATED_NAME"]
        target = Path("src") / relative if getattr(self, "editable_mode", False) else Path(self.build_lib) / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            TRANSLATION["translate"](target, Path("codegen/extension/binding.pyx"))
        except (OSError, subprocess.CalledProcessError) as exc:  # builds then run Cython themselves
            warnings.warn(f"the robot modules' binding was not translated at install time ({exc}); each robot "
                          "build will run Cython on it", stacklevel=1)


setup(ext_modules=cythonize([extension], language_level=3, quiet=True), cmdclass={"build_py": build_py_with_binding})
