"""robodyn: fast, verified rigid-body dynamics generated from a robot description.

    import robodyn
    rr = robodyn.load("robots/rr.yaml")   # builds on first use, then reuses the cache
    tau = rr.inverse_dynamics(q, qd, qdd)
"""

from __future__ import annotations

from pathlib import Path

from .control import PD, ComputedTorque, FunctionController, NoControl, PDGravity, SlotineLi
from .references import Hold, Quintic, Sine, Step
from .robot import Parameters, Robot
from .simulation import Harness, LoopStats, Plant, SimulatedPlant, Trajectory, simulate

__version__ = "0.1.0"
__all__ = ["load", "Robot", "Parameters", "__version__",
           "simulate", "Harness", "Plant", "SimulatedPlant", "Trajectory", "LoopStats",
           "NoControl", "PD", "PDGravity", "ComputedTorque", "SlotineLi", "FunctionController",
           "Hold", "Step", "Sine", "Quintic"]


def load(path, cache_dir=None, force: bool = False, verbose: bool = False, method: str = "auto",
         lock: dict | None = None, runtime_parameters: bool = False, forward: str = "ltdl") -> Robot:
    """Load a robot description, generating and compiling it on first use.

    ``cache_dir`` defaults to $ROBODYN_CACHE_DIR, else ~/.cache/robodyn;
    ``force`` rebuilds even when a cached module exists; ``method`` chooses the derivation
    route ("auto", "lagrange" or "recursive", see ``python -m codegen --help``). ``path`` may be
    a URDF file; ``lock`` maps its joint names to positions at which they are frozen
    (e.g. a gripper's fingers). A URDF's inertial values are compiled in as numbers unless
    ``runtime_parameters`` is true, which makes them entries of ``robot.params``. ``forward``
    selects how forward dynamics is computed: "ltdl" (default) or "aba" (articulated body).
    """
    from codegen.build import ensure_built, import_module

    progress = print if verbose else None
    built = ensure_built(path, out=cache_dir, force=force, progress=progress, method=method, lock=lock,
                         runtime_parameters=runtime_parameters, forward=forward)
    module = import_module(built.module_name, built.module_path)
    return Robot(module, built.manifest, built.selfcheck, Path(path))
