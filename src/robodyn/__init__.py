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
from .control import PD, ComputedTorque, FunctionController, NoControl, PDGravity, SlotineLi
from .options import BuildOptions
from .references import Hold, Quintic, Sine, Step
from .robot import Parameters, Robot
from .simulation import Harness, LoopStats, Plant, SimulatedPlant, Trajectory, simulate

__all__ = ["load", "Robot", "Parameters", "BuildOptions", "__version__",
           "simulate", "Harness", "Plant", "SimulatedPlant", "Trajectory", "LoopStats",
           "NoControl", "PD", "PDGravity", "ComputedTorque", "SlotineLi", "FunctionController",
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
    says so on stderr; ``verbose=True`` also reports every stage (and cache hits), ``False``
    nothing.
    """
    from . import cache

    if options is not None and not isinstance(options, BuildOptions):
        raise TypeError(f"options: expected a robodyn.BuildOptions, got {type(options).__name__} (the cache "
                        "directory is the keyword cache_dir=)")
    options = (options or BuildOptions()).replace(**option_values) if option_values else (options or BuildOptions())
    root = Path(cache_dir) if cache_dir is not None else cache.default_root()
    if not force:
        started = time.perf_counter()
        data = cache.read_description(path)
        found = cache.find(root, cache.cache_key(data, options))
        if found is not None:
            entry, manifest = found
            module = cache.import_extension(entry.module_name, entry.module_path)
            if verbose:
                print(f"[robodyn] cache hit: {entry.directory} ({(time.perf_counter() - started) * 1e3:.0f} ms)")
            return Robot(module, source=Path(path), options=options, manifest=manifest, selfcheck=entry.selfcheck(),
                         cache_dir=root)
    from codegen.pipeline import build

    if verbose is None:
        print(f"[robodyn] building {path} (first use; cached in {root})", file=sys.stderr, flush=True)
    built = build(path, options, cache_dir=root, force=force,
                  progress=(lambda message: print(f"[codegen] {message}", flush=True)) if verbose else None)
    if verbose is None:
        print(f"[robodyn] built {built.entry.robot} in {built.timings.get('total_s', 0.0):.1f} s, self-check "
              f"{'passed' if built.selfcheck.get('passed') else 'FAILED'}", file=sys.stderr, flush=True)
    module = cache.import_extension(built.entry.module_name, built.entry.module_path)
    return Robot(module, source=Path(path), options=options, manifest=built.manifest, selfcheck=built.selfcheck,
                 cache_dir=root)
