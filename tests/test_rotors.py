"""Rotor (motor) terms against an independent formulation.

Each rotor is modelled here as an extra rigid body: its pose is computed with
plain NumPy from the DH table of robots/rrr.yaml (rotor i sits on link i-1,
on joint i's axis, turned by gear_ratio * q_i), its linear and angular
velocities come from finite differences of that pose, and its kinetic and
potential energies are summed directly. The generated model, with and without
the motors, must differ by exactly those energies.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

import codegen
from codegen.description.parse import parse_text
from codegen.model.lagrange import derive_lagrange
from conftest import ROBOTS


def _dh(a, alpha, d, theta):
    ct, st, ca, sa = np.cos(theta), np.sin(theta), np.cos(alpha), np.sin(alpha)
    return np.array([[ct, -st * ca, st * sa, a * ct], [st, ct * ca, -ct * sa, a * st],
                     [0, sa, ca, d], [0, 0, 0, 1.0]])


def _rot_z(angle):
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])


def _rotor_poses(q, p):
    """World pose (R, centre) of each rotor of robots/rrr.yaml, from its DH table."""
    table = [(0.0, np.pi / 2, p["d1"]), (p["a2"], 0.0, 0.0), (p["a3"], 0.0, 0.0)]
    rotors = [  # (gear ratio, mass, centre in the joint frame, transverse inertia), as in rrr.yaml
        (p["kr"], 0.0, np.zeros(3), 0.0),
        (p["kr"], 0.3, np.array([0, 0, 0.05]), 1.0e-4),
        (p["kr"] / 2, 0.2, np.zeros(3), 5.0e-5),
    ]
    frame = np.eye(4)
    poses = []
    for i, ((a, alpha, d), (ratio, mass, centre, transverse)) in enumerate(zip(table, rotors)):
        # Standard DH: joint i turns about z of frame i-1, the frame of the link the rotor rides on.
        R = frame[:3, :3] @ _rot_z(ratio * q[i])
        poses.append((R, frame[:3, :3] @ centre + frame[:3, 3], mass, np.diag([transverse, transverse, p["Im"]])))
        frame = frame @ _dh(a, alpha, d, q[i])
    return poses


def _rotor_energies(q, qd, p, gravity):
    eps = 1e-6
    kinetic = potential = 0.0
    plus, minus, here = _rotor_poses(q + eps * qd, p), _rotor_poses(q - eps * qd, p), _rotor_poses(q, p)
    for (R_p, c_p, _, _), (R_m, c_m, _, _), (R, c, mass, inertia) in zip(plus, minus, here):
        velocity = (c_p - c_m) / (2 * eps)
        omega_hat = (R_p - R_m) / (2 * eps) @ R.T
        omega = np.array([omega_hat[2, 1], omega_hat[0, 2], omega_hat[1, 0]])
        kinetic += 0.5 * mass * velocity @ velocity + 0.5 * omega @ R @ inertia @ R.T @ omega
        potential -= mass * gravity @ c
    return kinetic, potential


@pytest.fixture(scope="module")
def models():
    with_motors = codegen.derive(ROBOTS / "rrr.yaml")
    text = (ROBOTS / "rrr.yaml").read_text()
    lines = [line for line in text.splitlines() if not line.strip().startswith("motor:")]
    without = derive_lagrange(parse_text("\n".join(lines).replace("  Im: 2.0e-4", "").replace("  kr: 100.0", ""),
                                         "rrr_without_motors.yaml"))
    return with_motors, without


def test_rotor_energy_matches_rigid_body_rotors(models):
    with_motors, without = models
    p = {param.name: param.default for param in with_motors.description.parameters}
    gravity = np.array([0, 0, -p["g0"]])
    args_with = (with_motors.q, with_motors.qd, with_motors.parameters)
    args_without = (without.q, without.qd, without.parameters)
    values_without = [p[s.name] for s in without.parameters]
    kinetic_with = sp.lambdify(args_with, with_motors.kinetic_energy)
    kinetic_without = sp.lambdify(args_without, without.kinetic_energy)
    potential_with = sp.lambdify(args_with, with_motors.potential_energy)
    potential_without = sp.lambdify(args_without, without.potential_energy)
    values_with = [p[s.name] for s in with_motors.parameters]
    rng = np.random.default_rng(5)
    for _ in range(20):
        q, qd = rng.uniform(-np.pi, np.pi, 3), rng.uniform(-2, 2, 3)
        kinetic, potential = _rotor_energies(q, qd, p, gravity)
        extra_kinetic = kinetic_with(q, qd, values_with) - kinetic_without(q, qd, values_without)
        extra_potential = potential_with(q, qd, values_with) - potential_without(q, qd, values_without)
        assert extra_kinetic == pytest.approx(kinetic, rel=1e-7)
        assert extra_potential == pytest.approx(potential, rel=1e-9, abs=1e-12)


def test_rotor_terms_go_beyond_the_diagonal(models):
    """The rotors add k_r² I_m on the diagonal, and coupling terms off it (seed 003)."""
    with_motors, without = models
    p = {param.symbol: param.default for param in with_motors.description.parameters}
    difference = (with_motors.M - without.M.subs({s: sp.Symbol(s.name, real=True) for s in without.parameters}))
    difference = difference.xreplace(p)
    q = {s: v for s, v in zip(with_motors.q, (0.3, -0.7, 1.1))}
    numeric = np.array(difference.xreplace(q).evalf(), dtype=float)
    kr, Im = 100.0, 2.0e-4
    assert numeric[0, 0] > kr**2 * Im  # diagonal includes k_r² I_m ...
    assert numeric[2, 2] == pytest.approx((kr / 2) ** 2 * Im, rel=1e-12)
    assert abs(numeric[1, 2]) > 0  # ... and rotor 3 couples with joint 2 (it rides on link 2)
    assert numeric[1, 2] == pytest.approx(kr / 2 * Im, rel=1e-12)
