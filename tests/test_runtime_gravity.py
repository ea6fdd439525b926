"""Gravity set at run time on URDF robots with a fixed base (issue 16, point 1): free flight, another planet, a
tilted set-up. Gravity is three parameters, gravity_x/y/z (defaults 0, 0, -9.81).

Oracles: Pinocchio with ``model.gravity`` set to the same vector (generalised gravity, RNEA); the gradient of the
compiled potential energy (a separate derivation); for the base parameters, whose grouping can depend on
gravity's direction, Y = Y_base K where they are claimed to hold and a clear error where they are not."""

from __future__ import annotations

import numpy as np
import pinocchio
import pytest

import robodyn

#: A spatial arm whose first axis is vertical (along gravity): its first link's first moments MX1, MY1 produce
#: no torque under the default gravity, so they are not base parameters there, but they do under a tilted one.
ARM = """<?xml version="1.0"?>
<robot name="tilt_arm">
  <link name="base"/>
  <link name="l1"><inertial><origin xyz="0.02 0.01 0.15"/><mass value="2.0"/>
    <inertia ixx="0.02" ixy="0.001" ixz="0.0" iyy="0.021" iyz="0.0" izz="0.01"/></inertial></link>
  <link name="l2"><inertial><origin xyz="0.2 0.0 0.01"/><mass value="1.5"/>
    <inertia ixx="0.004" ixy="0.0" ixz="0.0" iyy="0.03" iyz="0.0" izz="0.03"/></inertial></link>
  <link name="l3"><inertial><origin xyz="0.15 0.01 0.0"/><mass value="0.8"/>
    <inertia ixx="0.002" ixy="0.0" ixz="0.0" iyy="0.012" iyz="0.0" izz="0.012"/></inertial></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><origin xyz="0 0 0.1"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="50" velocity="3"/></joint>
  <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0 0 0.3" rpy="1.5707963267948966 0 0"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="50" velocity="3"/></joint>
  <joint name="j3" type="revolute"><parent link="l2"/><child link="l3"/><origin xyz="0.4 0 0"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="50" velocity="3"/></joint>
</robot>
"""

DEFAULT = np.array([0.0, 0.0, -9.81])
MOON = np.array([0.0, 0.0, -1.62])
TILTED = 9.81 * np.array([np.sin(0.4), 0.0, -np.cos(0.4)])  # the set-up turned 0.4 rad about y


@pytest.fixture(scope="module")
def arm(tmp_path_factory, cache_dir):
    path = tmp_path_factory.mktemp("urdf") / "tilt_arm.urdf"
    path.write_text(ARM)
    robot = robodyn.load(path, cache_dir=cache_dir)
    model = pinocchio.buildModelFromXML(ARM)
    return robot, model, model.createData()


def _set_gravity(robot, g) -> None:
    for axis, value in zip("xyz", g):
        robot.params[f"gravity_{axis}"] = float(value)


def _states(robot, count: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield rng.uniform(-2, 2, robot.n), rng.uniform(-2, 2, robot.n), rng.uniform(-3, 3, robot.n)


@pytest.mark.parametrize("gravity", [DEFAULT, MOON, TILTED, np.zeros(3)], ids=["earth", "moon", "tilted", "none"])
def test_gravity_and_inverse_dynamics_follow_the_parameters(arm, gravity):
    robot, model, data = arm
    assert robot.params.defaults["gravity_z"] == -9.81 and robot.params.defaults["gravity_x"] == 0.0
    _set_gravity(robot, gravity)
    model.gravity.linear = gravity
    try:
        for q, qd, qdd in _states(robot, 5, 1):
            expected = pinocchio.computeGeneralizedGravity(model, data, q)
            np.testing.assert_allclose(robot.g(q), expected, rtol=0, atol=1e-12 * max(1.0, np.abs(expected).max()))
            tau = pinocchio.rnea(model, data, q, qd, qdd)
            np.testing.assert_allclose(robot.inverse_dynamics(q, qd, qdd), tau, rtol=0, atol=1e-12 * np.abs(tau).max())
            # g = dP/dq, P from the compiled potential energy (its own derivation), by central differences
            step = 1e-6
            gradient = [(robot.potential_energy(q + step * e) - robot.potential_energy(q - step * e)) / (2 * step)
                        for e in np.eye(robot.n)]
            np.testing.assert_allclose(robot.g(q), gradient, rtol=0, atol=1e-7 * max(1.0, np.abs(expected).max()))
    finally:
        robot.params.reset()


def test_base_parameters_hold_along_the_default_gravity_and_refuse_a_tilted_one(arm):
    robot, _, _ = arm
    assert robot.base_parameter_gravity == (0.0, 0.0, -9.81)
    assert "MX1" not in robot.base_parameter_names and "MY1" not in robot.base_parameter_names
    K, pi = robot.base_parameter_matrix(), robot.dynamic_parameters()
    try:
        for gravity in (DEFAULT, MOON, -MOON, np.zeros(3)):  # parallel, either sense, or none: K still holds
            _set_gravity(robot, gravity)
            for q, qd, qdd in _states(robot, 4, 2):
                Y, Y_base = robot.regressor(q, qd, qdd), robot.base_regressor(q, qd, qdd)
                np.testing.assert_allclose(Y_base @ K, Y, rtol=0, atol=1e-12 * np.abs(Y).max())
                np.testing.assert_allclose(Y_base @ (K @ pi), robot.inverse_dynamics(q, qd, qdd), rtol=0,
                                           atol=1e-12 * np.abs(Y).max())
                np.testing.assert_allclose(robot.slotine_li_regressor(q, qd, qd, qdd), Y_base, rtol=0,
                                           atol=1e-12 * np.abs(Y).max())
        _set_gravity(robot, TILTED)
        q, qd, qdd = next(_states(robot, 1, 3))
        # The full regressor holds for any gravity; its first link's first moments now produce torque.
        Y = robot.regressor(q, qd, qdd)
        np.testing.assert_allclose(Y @ pi, robot.inverse_dynamics(q, qd, qdd), rtol=0, atol=1e-12 * np.abs(Y).max())
        assert np.abs(Y[:, robot.dynamic_parameter_names.index("MX1")]).max() > 0.1
        for call in (lambda: robot.base_regressor(q, qd, qdd), lambda: robot.slotine_li_regressor(q, qd, qd, qdd)):
            with pytest.raises(ValueError, match="not parallel to the gravity the base parameters were derived for"):
                call()
    finally:
        robot.params.reset()


def test_magnitude_only_gravity_keeps_base_parameters_for_any_value(cache_dir):
    """A YAML gravity [0, -g0, 0] cannot be tilted: no restriction, whatever g0."""
    from pathlib import Path

    robot = robodyn.load(Path(__file__).resolve().parents[1] / "robots" / "rr.yaml", cache_dir=cache_dir)
    assert robot.base_parameter_gravity is None
    K = robot.base_parameter_matrix()
    try:
        for g0 in (9.81, 1.62, 0.0, -3.0):
            robot.params["g0"] = g0
            for q, qd, qdd in _states(robot, 3, 4):
                Y = robot.regressor(q, qd, qdd)
                np.testing.assert_allclose(robot.base_regressor(q, qd, qdd) @ K, Y, rtol=0,
                                           atol=1e-12 * max(1.0, np.abs(Y).max()))
    finally:
        robot.params.reset()


def test_base_parameters_derived_without_gravity_refuse_any_gravity(cache_dir, tmp_path):
    """The RR arm with gravity [gx, gy, 0], default zero: without gravity the first link's first moment is
    invisible (no base parameter of its own); any gravity shows it, so the base-parameter routines refuse
    every nonzero gravity, and the full regressor still reproduces the torques."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "robots" / "rr.yaml").read_text()
    text = text.replace("  g0: 9.81     # gravity [m/s^2]\n", "  gx: 0.0\n  gy: 0.0\n")
    text = text.replace("gravity: [0, -g0, 0]", "gravity: [gx, gy, 0]")
    path = tmp_path / "rr_free.yaml"
    path.write_text(text)
    robot = robodyn.load(path, cache_dir=cache_dir, verbose=False)
    assert robot.base_parameter_gravity == (0.0, 0.0, 0.0)
    q, qd, qdd = next(_states(robot, 1, 5))
    K = robot.base_parameter_matrix()
    Y = robot.regressor(q, qd, qdd)
    np.testing.assert_allclose(robot.base_regressor(q, qd, qdd) @ K, Y, rtol=0, atol=1e-12 * np.abs(Y).max())
    robot.params["gy"] = -9.81
    Y = robot.regressor(q, qd, qdd)
    np.testing.assert_allclose(Y @ robot.dynamic_parameters(), robot.inverse_dynamics(q, qd, qdd), rtol=0,
                               atol=1e-12 * np.abs(Y).max())
    with pytest.raises(ValueError, match="not parallel"):
        robot.base_regressor(q, qd, qdd)
