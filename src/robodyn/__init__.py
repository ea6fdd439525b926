"""robodyn: fast, verified rigid-body dynamics generated from a robot description.

    import robodyn
    rr = robodyn.load("robots/rr.yaml")   # builds on first use, then reuses the cache
    tau = rr.inverse_dynamics(q, qd, qdd)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ._version import __version__
from .control import PD, AdaptiveSlotineLi, ComputedTorque, FunctionController, NoControl, PDGravity, SlotineLi
from .options import BuildOptions
from .references import Hold, Quintic, Sine, Step
from .robot import Parameters, Robot
from .simulation import Harness, LoopStats, Plant, SimulatedPlant, Trajectory, simulate

__all__ = ["load", "example_robot_data", "Robot", "Parameters", "BuildOptions", "__version__",
           "simulate", "Harness", "Plant", "SimulatedPlant", "Trajectory", "LoopStats",
           "NoControl", "PD", "PDGravity", "ComputedTorque", "SlotineLi", "AdaptiveSlotineLi", "FunctionController",
           "Hold", "Step", "Sine", "Quintic"]


def load(path, options: BuildOptions | None = None, *, cache_dir=None, force: bool = False,
         verbose: bool | None = None, **option_values) -> Robot:
    """Load a robot description (YAML or URDF), generating and compiling it on first use.

    ``options`` (a ``BuildOptions``) or its fields as keywords choose how the model is built:
    ``method`` ("auto", "lagrange" or "recursive"), ``forward`` ("ltdl" or "aba"), ``lock``
    (URDF joints frozen at positions, e.g. a gripper's fingers), ``runtime_parameters`` (URDF
    inertial values as settable parameters), ``tool`` (the link carrying the tool frame),
    ``simplify``. ``cache_dir`` defaults to $ROBODYN_CACHE_DIR, else $XDG_CACHE_HOME/robodyn,
    else ~/.cache/robodyn; ``force`` rebuilds even when the cache holds the robot.

    A cache hit needs neither SymPy nor a compiler run: it imports the module (milliseconds).
    A miss runs the generator (``codegen.pipeline.build``), a few seconds for a small robot, and
    says so on stderr, with its stages (parse, derivation, emission, compilation, self-check), once
    it has taken more than a second (a description refused at once prints only the error), and
    then what it built; ``verbose=True`` reports every stage at once (and cache hits),
    ``False`` nothing. A damaged cache entry is reported and rebuilt. Description warnings are
    issued with ``warnings.warn`` (robodyn.errors.DescriptionWarning).

    Raises DescriptionError (invalid description), BuildError (compiler or self-check),
    StorageError (cache directory unusable, disk full), TypeError/ValueError (bad arguments).
    """
    import os

    from . import cache

    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a file name (str or os.PathLike), got {type(path).__name__}")
    if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike)):
        raise TypeError(f"cache_dir: expected a directory name (str or os.PathLike), got {type(cache_dir).__name__}")
    if not str(path) or (cache_dir is not None and not str(cache_dir)):
        raise ValueError("path and cache_dir must not be empty")
    for name, value in (("force", force), ("verbose", verbose)):
        if not isinstance(value, bool) and not (name == "verbose" and value is None):
            raise TypeError(f"{name}: expected True or False, got {value!r}")
    if options is not None and not isinstance(options, BuildOptions):
        raise TypeError(f"options: expected a robodyn.BuildOptions, got {type(options).__name__} (the cache "
                        "directory is the keyword cache_dir=)")
    options = (options or BuildOptions()).replace(**option_values) if option_values else (options or BuildOptions())
    root = Path(cache_dir) if cache_dir is not None else cache.default_root()
    if not force:
        started = time.perf_counter()
        data = cache.read_description(path)
        key = cache.cache_key(data, options)
        cache.tidy(root, key)
        found = cache.find(root, key)
        if found is not None:
            entry, manifest = found
            try:
                module = cache.import_extension(entry.module_name, entry.module_path)
            except ImportError as exc:  # its manifest vouches for a module that does not import: build it again
                if verbose is not False:
                    print(f"[robodyn] cache entry {entry.directory} cannot be imported ({exc}); rebuilding",
                          file=sys.stderr, flush=True)
                force = True
            else:
                if verbose:
                    print(f"[robodyn] cache hit: {entry.directory} ({(time.perf_counter() - started) * 1e3:.0f} ms)",
                          file=sys.stderr, flush=True)
                return Robot(module, source=Path(path), options=options, manifest=manifest,
                             selfcheck=entry.selfcheck(), cache_dir=root)
    import codegen.description  # noqa: F401 - SymPy's import, before the announcement's second starts
    from codegen.pipeline import build, delayed_progress, stderr_writer

    say = stderr_writer("[robodyn]")
    progress = delayed = None
    if verbose is None:  # the announcement and the stages after a second: a description refused at once prints none
        delayed = delayed_progress(lambda line: print(line, file=sys.stderr, flush=True))
        delayed(f"[robodyn] building {path} (first use; cached in {root})")

        def progress(message: str) -> None:
            delayed(f"[codegen] {message}")
    elif verbose:
        progress = stderr_writer()
    try:
        built = build(path, options, cache_dir=root, force=force, progress=progress,
                      notice=None if verbose is False else say)
    finally:
        getattr(delayed, "cancel", lambda: None)()
    if verbose is None:
        say(f"built {built.entry.robot} in {built.timings.get('total_s', 0.0):.1f} s, self-check "
            f"{built.selfcheck.get('status', 'passed')}")
    module = cache.import_extension(built.entry.module_name, built.entry.module_path)
    return Robot(module, source=Path(path), options=options, manifest=built.manifest, selfcheck=built.selfcheck,
                 cache_dir=root)


def example_robot_data(relative: str) -> Path:
    """The path of a file of the example-robot-data package (its URDFs: "solo_description/robots/solo12.urdf"),
    installed under its cmeel prefix by ``pip install example-robot-data`` (the test extra has it).
    FileNotFoundError, with the pip command, when the package or the file is missing."""
    from importlib import metadata

    try:
        path = Path(metadata.distribution("example-robot-data").locate_file(
            f"cmeel.prefix/share/example-robot-data/robots/{relative}"))
    except metadata.PackageNotFoundError:
        raise FileNotFoundError(f"{relative}: the example-robot-data package is not installed "
                                "(pip install example-robot-data)") from None
    if not path.is_file():
        raise FileNotFoundError(f"{relative} is not in the installed example-robot-data ({path.parent})")
    return path


def __getattr__(name: str):
    """A submodule on first use (``robodyn.plotting.plot_trajectory(...)`` after ``import robodyn``), not at
    ``import robodyn``: some need optional packages (matplotlib, cvxpy) or SciPy, which a control loop that only
    loads a robot does not."""
    import importlib.util

    if name.isidentifier() and not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
