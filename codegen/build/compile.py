"""Compile generated sources into a Python extension module with Cython + setuptools.

The compiler runs in a child process whose working directory is the build
directory (we never chdir ourselves); its whole output is kept and attached
to BuildError on failure.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from ..errors import BuildError
from .cache import BRIDGE_FLAGS, COMPILE_FLAGS

BRIDGE = Path(__file__).resolve().parent / "bridge.pyx"
# Static C shared by every robot module: simulation loop, integrators, control laws.
SIMULATION_SOURCES = tuple(Path(__file__).resolve().parent / name for name in ("robodyn_sim.h", "robodyn_sim.c"))

_SETUP_TEMPLATE = '''\
# Build script written by robodyn codegen; run as: python {script}
# The robot's C files are compiled in a thread while Cython translates the bridge, so
# the two largest steps overlap on a multi-core machine.
import threading

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools._distutils.ccompiler import new_compiler
from setuptools._distutils.sysconfig import customize_compiler

compiler = new_compiler()
customize_compiler(compiler)  # the same compiler and flags as build_ext
robot_objects, robot_errors = [], []


def compile_robot():
    try:
        robot_objects.extend(compiler.compile([{csource!r}, "robodyn_sim.c"], output_dir="build/robot", include_dirs=["."],
                                              extra_postargs={flags!r}))
    except Exception as exc:  # re-raised below, in the main thread
        robot_errors.append(exc)


worker = threading.Thread(target=compile_robot)
worker.start()
extension = Extension(
    {module!r},
    sources=[{pyx!r}],
    include_dirs=[numpy.get_include(), "."],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    extra_compile_args={bridge_flags!r},
)
modules = cythonize([extension], language_level=3, quiet=True)
worker.join()
if robot_errors:
    raise robot_errors[0]
modules[0].extra_objects = robot_objects
setup(name={module!r}, ext_modules=modules, script_args=["build_ext", "--inplace"])
'''


def simulation_abi() -> str:
    """Hash of robodyn_sim.h: the layout of the structs that robot modules pass to each other."""
    return hashlib.sha256(SIMULATION_SOURCES[0].read_bytes()).hexdigest()[:16]


def write_build_tree(directory: Path, module_name: str, files: dict[str, str], robot: str) -> Path:
    """Write generated files, the static bridge and the build script; return the script path."""
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8")
    (directory / f"{module_name}.pyx").write_bytes(BRIDGE.read_bytes())
    for source in SIMULATION_SOURCES:
        (directory / source.name).write_bytes(source.read_bytes())
    (directory / "robodyn_sim_abi.h").write_text(f'#define RD_SIM_ABI "{simulation_abi()}"\n', encoding="utf-8")
    script = directory / "build_module.py"
    script.write_text(_SETUP_TEMPLATE.format(script=script.name, module=module_name, pyx=f"{module_name}.pyx",
                                             csource=f"{robot}_dynamics.c", flags=list(COMPILE_FLAGS), bridge_flags=list(BRIDGE_FLAGS)),
                      encoding="utf-8")
    return script


def compile_module(directory: Path, script: Path, module_path: Path, timeout: float = 600.0) -> str:
    """Run the build script; return its log. Raises BuildError with the log on failure."""
    command = [sys.executable, script.name]
    try:
        result = subprocess.run(command, cwd=directory, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        log = (exc.stdout or "") + (exc.stderr or "") if isinstance(exc.stdout, str) else ""
        raise BuildError(f"compilation timed out after {timeout:.0f} s in {directory}", command, None, log) from None
    log = result.stdout + result.stderr
    if result.returncode != 0:
        raise BuildError(f"compilation failed in {directory}", command, result.returncode, log)
    if not module_path.is_file():
        raise BuildError(f"compilation produced no {module_path.name} in {directory}", command, result.returncode, log)
    return log
