"""Parameter identification: excitation design, measured data, estimators, and the loop back to a model.

The workflow (README, "Identifying a robot's parameters")::

    trajectory, report = design_excitation(robot, duration=20, harmonics=5)   # cond(W) minimised
    m = simulate_measurements(robot, *trajectory.sample(1000))               # or read_measurements(file)
    result = identify(robot, m)                                               # WLS, held-out check
    write_identified(robot, result, "rr.yaml", "rr.identified.yaml")          # then robodyn.load it

The model side is compiled with every robot: ``robot.regressor``, ``robot.base_regressor``,
``robot.slotine_li_regressor``, ``robot.dynamic_parameters()``, ``robot.base_parameters()`` and the
names and expressions of both parameter sets. Importing this package loads SciPy, not SymPy; the
consistent estimator needs ``pip install "robodyn[identify]"``.
"""

from .data import (Measurements, ProcessedData, TrueSignals, add_noise, process, read_measurements,
                   simulate_measurements, write_measurements)
from .estimate import Estimate, ordinary_least_squares, weighted_least_squares
from .excitation import ExcitationReport, FourierTrajectory, design_excitation, regressor_condition, single_sine
from .identify import Identification, identify, monte_carlo, standard_parameters, write_identified

__all__ = ["Measurements", "ProcessedData", "TrueSignals", "add_noise", "process", "read_measurements",
           "simulate_measurements", "write_measurements", "Estimate", "ordinary_least_squares",
           "weighted_least_squares", "ExcitationReport", "FourierTrajectory", "design_excitation",
           "regressor_condition", "single_sine", "Identification", "identify", "monte_carlo", "standard_parameters",
           "write_identified", "consistent_estimate"]


def consistent_estimate(*args, **kwargs):
    """The physically consistent estimate (robodyn.identification.consistent; cvxpy + Clarabel)."""
    from .consistent import consistent_estimate as estimate

    return estimate(*args, **kwargs)
