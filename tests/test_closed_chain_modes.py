"""The dynamics compiled for the other assembly mode (--assembly-mode -1) against the NumPy oracles of
tests/closed_chain_reference.py in that mode (tests/test_closed_chain.py checks the default, +1)."""

from __future__ import annotations

import numpy as np
import pytest

import robodyn
from closed_chain_reference import Biglide, FiveBar
from conftest import ROBOTS


@pytest.fixture(scope="module", params=["biglide", "fivebar"])
def lower(request, cache_dir):
    robot = robodyn.load(ROBOTS / f"{request.param}.yaml", cache_dir=cache_dir, assembly_mode=-1, verbose=False)
    return robot, Biglide() if request.param == "biglide" else FiveBar()


def test_the_build_is_for_mode_minus_one(lower):
    robot, _ = lower
    assert robot.assembly_mode == -1 and robot.options.assembly_mode == -1
    assert robot.selfcheck["status"] == "passed"


def test_dynamics_and_kinematics_in_mode_minus_one(lower):
    robot, oracle = lower
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(300):
        qa = rng.uniform(-0.3, 0.3, 2) if isinstance(oracle, Biglide) else rng.uniform(-np.pi, np.pi, 2)
        try:
            xi = oracle.dgm(qa, -1)
        except ValueError:  # does not assemble
            continue
        if abs(oracle.type2_measure(qa, xi)) < 0.05 or abs(oracle.type1_measure(qa, xi)) < 0.05:
            continue
        qd, tau = rng.normal(size=2), rng.normal(size=2)
        pairs = {"dgm": (robot.dgm(qa), xi), "J": (robot.task_jacobian(qa), oracle.J(qa, xi)),
                 "b": (robot.task_bias(qa, qd), oracle.b(qa, qd, xi)),
                 "M": (robot.M(qa), oracle.mass_matrix(qa, -1)),
                 "C qd": (robot.C(qa, qd) @ qd, oracle.coriolis_vector(qa, qd, -1)),
                 "g": (robot.g(qa), oracle.gravity_vector(qa, -1)),
                 "FD": (robot.forward_dynamics(qa, qd, tau), oracle.forward_dynamics(qa, qd, tau, -1))}
        for name, (value, reference) in pairs.items():
            error = np.max(np.abs(value - reference)) / max(1.0, float(np.max(np.abs(reference))))
            assert error < 1e-10, (name, qa, error)
        checked += 1
    assert checked > 50
