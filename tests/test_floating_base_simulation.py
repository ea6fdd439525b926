"""Floating bases end to end (issue 16): a YAML floating base against an independent model, free flight conserving
momentum and energy, the Solo12 and iCub examples, and the command line.

* robots/space_arm.yaml: M against the Hessian of a kinetic energy computed in this file from the bodies' world
  poses (no shared dynamics code: velocities by central differences of the poses along ``integrate``, itself
  checked against Pinocchio), g against the gradient of a potential computed here;
* Solo12 in free flight without gravity (its URDF has no joint friction): linear and angular momentum and energy
  conserved by the simulation, fourth-order convergence of the RKMK4 step;
* examples/solo12_standing.py (a push, recovered, the feet staying down) and examples/humanoid_free_fall.py;
* ``python -m robodyn simulate`` and ``demo`` on floating bases.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, ROBOTS

import robodyn
from test_floating_base_pinocchio import _urdf


def _example(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- an independent model of the space arm ---------------------------------------------------------------------

def _rotation(axis: str, angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    if axis == "y":
        return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def _quaternion_matrix(x, y, z, w) -> np.ndarray:
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _bodies(params: dict, q: np.ndarray):
    """(mass, centre of mass in the world, world rotation, inertia about the centre in body axes) per body."""
    l1, l2, m0, m1, m2 = (params[k] for k in ("l1", "l2", "m0", "m1", "m2"))
    R0, p0 = _quaternion_matrix(*q[3:7]), q[:3]
    R1 = R0 @ _rotation("z", q[7])
    p1 = p0 + R0 @ np.array([0.8, 0.0, 0.4])
    R2 = R1 @ _rotation("y", q[8])
    p2 = p1 + R1 @ np.array([l1, 0.0, 0.0])
    base_inertia = np.array([[40.0, 1.5, 0.0], [1.5, 36.0, 0.0], [0.0, 0.0, 28.0]])
    return [(m0, p0, R0, base_inertia),
            (m1, p1 + R1 @ np.array([l1 / 2, 0, 0]), R1, np.diag([0.02, m1 * l1**2 / 12, m1 * l1**2 / 12])),
            (m2, p2 + R2 @ np.array([l2 / 2, 0, 0]), R2, np.diag([0.01, m2 * l2**2 / 12, m2 * l2**2 / 12]))]


def _kinetic(robot, params, q, v, eps=1e-6) -> float:
    plus, minus = _bodies(params, robot.integrate(q, v, eps)), _bodies(params, robot.integrate(q, v, -eps))
    energy = 0.0
    for (m, c1, R1, inertia), (_, c0, R0, _) in zip(plus, minus):
        velocity = (c1 - c0) / (2 * eps)
        spin = R0.T @ R1  # body-frame rotation over 2 eps: its skew part is the body's angular velocity
        omega = np.array([spin[2, 1] - spin[1, 2], spin[0, 2] - spin[2, 0], spin[1, 0] - spin[0, 1]]) / (4 * eps)
        energy += 0.5 * m * velocity @ velocity + 0.5 * omega @ inertia @ omega
    return energy


def _potential(params, q, gravity) -> float:
    return -sum(m * gravity @ c for m, c, _, _ in _bodies(params, q))


def test_space_arm_matches_an_independent_model(cache_dir):
    robot = robodyn.load(ROBOTS / "space_arm.yaml", cache_dir=cache_dir)
    assert robot.is_floating_base and (robot.nq, robot.n) == (9, 8) and robot.base_link == "satellite"
    robot.params["g0"] = 9.81
    params = dict(robot.params)
    gravity = np.array([0.0, 0.0, -9.81])
    rng = np.random.default_rng(0)
    for _ in range(5):
        q = robot.neutral()
        q[:3] = rng.uniform(-1, 1, 3)
        quaternion = rng.normal(size=4)
        q[3:7] = quaternion / np.linalg.norm(quaternion)
        q[7:] = rng.uniform(-2, 2, 2)
        basis = np.eye(robot.n)
        single = [_kinetic(robot, params, q, e) for e in basis]
        M = np.array([[2 * single[i] if i == j else _kinetic(robot, params, q, basis[i] + basis[j]) - single[i]
                       - single[j] for j in range(robot.n)] for i in range(robot.n)])
        np.testing.assert_allclose(robot.M(q), M, rtol=0, atol=1e-6 * np.max(np.abs(M)))
        eps = 1e-6
        g = np.array([(_potential(params, robot.integrate(q, e, eps), gravity)
                       - _potential(params, robot.integrate(q, e, -eps), gravity)) / (2 * eps) for e in basis])
        np.testing.assert_allclose(robot.g(q), g, rtol=0, atol=1e-6 * np.max(np.abs(g)))
        np.testing.assert_allclose(robot.potential_energy(q), _potential(params, q, gravity), rtol=1e-12)
        # the base's weight: g's base rows are the gravity wrench in the base frame
        total = params["m0"] + params["m1"] + params["m2"]
        np.testing.assert_allclose(robot.g(q)[:3], -total * _quaternion_matrix(*q[3:7]).T @ gravity, rtol=1e-12)


# -- free flight -------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def solo(cache_dir):
    return robodyn.load(_urdf("solo_description/robots/solo12.urdf"), cache_dir=cache_dir, base="floating")


# Free flight (momentum and energy conserved): tests/test_floating_base_compiled_step.py, through the C loop.


def test_recorded_accelerations_and_contact_forces_are_those_of_each_sample(solo):
    """The run records q'' and the contact forces as it steps: each sample's are the constrained dynamics at its
    own state and torque (the last sample's computed after the run)."""
    from robodyn.contact import ContactDynamics
    from robodyn.whole_body import WholeBodyPD

    feet = ContactDynamics(solo, ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"], stiffness=400.0)
    q0 = solo.neutral()
    q0[7:] = 0.3
    run = robodyn.simulate(solo, WholeBodyPD(solo, q0, feet), duration=0.05, q0=q0, contacts=feet, substeps=2,
                           disturbance=lambda t: np.r_[0.0, 5.0, np.zeros(solo.n - 2)])
    assert run.contact_forces.shape == (len(run.t), 12)
    for k in (0, 17, len(run.t) - 1):
        applied = run.tau[k] + np.r_[0.0, 5.0, np.zeros(solo.n - 2)]
        solution = feet.forward_dynamics(run.q[k], run.qd[k], applied)
        np.testing.assert_allclose(run.qdd[k], solution.qdd, rtol=0, atol=1e-9 * np.max(np.abs(solution.qdd)))
        np.testing.assert_allclose(run.contact_forces[k], solution.forces, rtol=0,
                                   atol=1e-9 * np.max(np.abs(solution.forces)))


def test_a_diverging_run_stops_with_advice(solo):
    with pytest.raises(FloatingPointError, match="substeps"):
        robodyn.simulate(solo, duration=0.2, rate=50.0, qd0=np.full(solo.n, 50.0))


# -- the examples -------------------------------------------------------------------------------------------------

def test_solo12_standing_recovers_from_a_push(cache_dir, tmp_path):
    figures = _example("solo12_standing").run(push=10.0, cache_dir=cache_dir, out=tmp_path)
    assert (tmp_path / "solo12_push.png").stat().st_size > 10_000
    assert figures["max_displacement_mm"] > 1.0  # the push moved it
    assert np.isfinite(figures["recovered_at_s"]) and figures["recovered_at_s"] < 1.5
    assert figures["final_displacement_mm"] < 0.1
    assert 0.0 < figures["min_vertical_force_N"] < figures["weight_N"] / 4  # every foot stays down, unloaded


def test_humanoid_free_fall_conserves_momentum(cache_dir):
    figures = _example("humanoid_free_fall").run(duration=0.2, cache_dir=cache_dir, out=None)
    assert figures["angular_momentum_drift_rel"] < 1e-9
    assert figures["com_parabola_error_m"] < 1e-9
    assert figures["linear_momentum_vs_mg_rel"] < 1e-9
    assert figures["energy_balance_rel"] < 1e-4  # the damping's work by the trapezoidal rule at 1 kHz
    assert figures["energy_dissipated_J"] > 0.0


# -- the command line ---------------------------------------------------------------------------------------------

def _robodyn(cache_dir, *arguments) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "robodyn", *map(str, arguments), "--cache-dir", str(cache_dir)],
                          capture_output=True, text=True, timeout=600)


def test_command_line_on_floating_bases(cache_dir, tmp_path):
    demo = _robodyn(cache_dir, "demo", ROBOTS / "space_arm.yaml")
    assert demo.returncode == 0, demo.stderr
    assert "floating base 'satellite'" in demo.stdout and "recovers the qdd above" in demo.stdout
    solo12 = _urdf("solo_description/robots/solo12.urdf")
    summary = tmp_path / "run.json"
    standing = _robodyn(cache_dir, "simulate", solo12, "--base", "floating", "--contacts",
                        "FL_FOOT,FR_FOOT,HL_FOOT,HR_FOOT", "--duration", "0.3", "--json", summary,
                        "--q0", "0,0,0.3,0,0,0,1,0.1,0.8,-1.6,-0.1,0.8,-1.6,0.1,-0.8,1.6,-0.1,-0.8,1.6")
    assert standing.returncode == 0, standing.stderr
    result = json.loads(summary.read_text())
    assert result["controller"] == "standing" and result["base_displacement_max_m"] < 1e-3
    assert result["contact_force_vertical_min_N"] > 0.0
    wrong = _robodyn(cache_dir, "simulate", solo12, "--base", "floating", "--controller", "pd")
    assert wrong.returncode == 2 and "floating base" in wrong.stderr
    fixed = _robodyn(cache_dir, "simulate", ROBOTS / "rr.yaml", "--contacts", "x")
    assert fixed.returncode == 2 and "--contacts is for floating-base robots" in fixed.stderr
    yaml_floating = _robodyn(cache_dir, "demo", ROBOTS / "rr.yaml", "--base", "floating")
    assert yaml_floating.returncode != 0 and "declares its floating base" in yaml_floating.stderr
