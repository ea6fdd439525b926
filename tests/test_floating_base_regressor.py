"""The regressor and base parameters of floating-base robots (issue 16, point 5).

τ = Y(q, v, v̇) π with the base body's ten parameters first and the six base rows first in Y; checked against
the compiled inverse dynamics (a separate Newton-Euler derivation), against Pinocchio (the number of inertial
base parameters equals the rank of ``computeJointTorqueRegressor`` stacked over random states, Solo12), and for
the gravity claim: K, found with gravity at its default, still gives Y = Y_base K with gravity changed at run
time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio
import pytest
from conftest import random_floating_configuration

import robodyn

ROOT = Path(__file__).resolve().parents[1]


def _states(robot, count, seed):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        q = random_floating_configuration(robot, rng)
        yield q, rng.uniform(-2.0, 2.0, robot.n), rng.uniform(-5.0, 5.0, robot.n)


def _check_regressor(robot, seed):
    """Y π = τ, Y = Y_base K, and the Slotine-Li regressor (base columns) at (q̇r, q̈r) = (v, v̇) equal to Y_base."""
    pi, K = robot.dynamic_parameters(), robot.base_parameter_matrix()
    assert robot.dynamic_parameter_names[:10] == tuple(f"{stem}0" for stem in
                                                        ("XX", "XY", "XZ", "YY", "YZ", "ZZ", "MX", "MY", "MZ", "M"))
    for q, v, a in _states(robot, 10, seed):
        Y = robot.regressor(q, v, a)
        assert Y.shape == (robot.n, pi.size)
        tau = robot.inverse_dynamics(q, v, a)
        scale = float(np.max(np.abs(Y * pi)))
        np.testing.assert_allclose(Y @ pi, tau, rtol=0, atol=1e-12 * scale)
        Y_base = robot.base_regressor(q, v, a)
        np.testing.assert_allclose(Y_base @ K, Y, rtol=0, atol=1e-12 * np.max(np.abs(Y)))
        np.testing.assert_allclose(robot.slotine_li_regressor(q, v, v, a), Y_base, rtol=0,
                                   atol=1e-12 * np.max(np.abs(Y)))


def test_space_arm_regressor(cache_dir):
    robot = robodyn.load(ROOT / "robots" / "space_arm.yaml", cache_dir=cache_dir)
    _check_regressor(robot, 0)
    # The base body's mass column, at rest with v̇ = 0 and the base turned by R, is the wrench that holds a unit
    # mass at the base origin: force −Rᵀg on the base rows, no moment, nothing on the joints.
    robot.params["g0"] = 9.81
    try:
        q = robot.neutral()
        q[3:7] = [0.0, np.sin(0.3), 0.0, np.cos(0.3)]  # 0.6 rad about y
        column = robot.regressor(q, np.zeros(robot.n), np.zeros(robot.n))[:, robot.dynamic_parameter_names.index("M0")]
        R = robot.frame_placement(q, robot.base_link)[:3, :3]
        np.testing.assert_allclose(column[:3], -R.T @ np.array([0.0, 0.0, -9.81]), atol=1e-14)
        np.testing.assert_allclose(column[3:], 0.0, atol=1e-14)
        _check_regressor(robot, 4)
    finally:
        robot.params["g0"] = 0.0


def test_solo12_regressor_and_base_parameters_against_pinocchio(cache_dir):
    path = robodyn.example_robot_data("solo_description/robots/solo12.urdf")
    robot = robodyn.load(path, cache_dir=cache_dir, base="floating")
    _check_regressor(robot, 1)

    model = pinocchio.buildModelFromUrdf(str(path), pinocchio.JointModelFreeFlyer())
    data = model.createData()
    rng = np.random.default_rng(2)
    rows = []
    for _ in range(40):
        q = pinocchio.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq))
        rows.append(pinocchio.computeJointTorqueRegressor(model, data, q, rng.uniform(-2, 2, model.nv),
                                                          rng.uniform(-2, 2, model.nv)))
    singular = np.linalg.svd(np.vstack(rows), compute_uv=False)
    rank = int(np.sum(singular > 1e-9 * singular[0]))
    names = robot.base_parameter_names
    inertial = [name for name in names if not name.startswith(("Fv", "Fs"))]
    assert len(inertial) == rank == 94, (len(inertial), rank)

    # Gravity at run time: K was found at the default gravity and holds for any (the base sees g as an
    # acceleration), so Y = Y_base K and Y π = τ hold on "another planet" too.
    saved = dict(robot.params)
    robot.params["gravity_x"], robot.params["gravity_z"] = 1.5, -3.7
    try:
        _check_regressor(robot, 3)
    finally:
        robot.params.update(saved)


def test_identification_commands_refuse_a_floating_base_with_advice(capsys, tmp_path, cache_dir):
    from robodyn.__main__ import main

    code = main(["excite", str(ROOT / "robots" / "space_arm.yaml"), "--quiet", "--out", str(tmp_path / "x.csv"),
                 "--cache-dir", str(cache_dir)])
    err = capsys.readouterr().err
    assert code != 0 and "base_regressor" in err and "Traceback" not in err
