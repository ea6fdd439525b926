"""Build of the runtime's native extension; everything else is in pyproject.toml.

robodyn._native (src/robodyn/_native.pyx + native/robodyn_sim.c) is compiled once,
here, at `pip install`: the argument checks and call path of every routine, the
control laws, integrators and the closed-loop simulation. Robot modules built later
by the generator hold only their generated C and a table of routines; the runtime
and they agree on the C layout through RD_ABI_HASH, the hash of the shared headers.
"""

import runpy
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

NATIVE = Path("src/robodyn/native")
ABI_HASH = runpy.run_path(str(Path("src/robodyn/_abi.py")))["abi_hash"](NATIVE)

extension = Extension(
    "robodyn._native",
    sources=["src/robodyn/_native.pyx", str(NATIVE / "robodyn_sim.c")],
    include_dirs=[numpy.get_include(), str(NATIVE)],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"), ("RD_ABI_HASH", f'"{ABI_HASH}"')],
    extra_compile_args=["-O2", "-fno-math-errno"],
)

setup(ext_modules=cythonize([extension], language_level=3, quiet=True))
