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


# --- The compiled rrr module against the same rigid bodies (links and rotors), in NumPy. ---------

def _link_frames(q, p):
    """World frames 1..3 of robots/rrr.yaml's links (standard DH), and the tool frame."""
    table = [(0.0, np.pi / 2, p["d1"]), (p["a2"], 0.0, 0.0), (p["a3"], 0.0, 0.0)]
    frames, frame = [], np.eye(4)
    for (a, alpha, d), angle in zip(table, q):
        frame = frame @ _dh(a, alpha, d, angle)
        frames.append(frame)
    tool = frame @ np.array([[1, 0, 0, 0.05], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])
    return frames, tool


def _links(p):
    """(mass, centre in the link frame, inertia tensor about it), transcribed from robots/rrr.yaml."""
    return [(p["m1"], np.array([0, -p["d1"] / 2, 0]), np.diag([0.12, 0.03, 0.12])),
            (p["m2"], np.array([-p["a2"] / 2, 0, 0]), np.array([[0.01, 0.001, 0], [0.001, 0.11, 0], [0, 0, 0.11]])),
            (p["m3"], np.array([-p["a3"] / 2, 0, 0]), np.diag([0.005, 0.045, 0.045]))]


def _rigid_body_energies(q, qd, p, gravity):
    """Kinetic and potential energy of the three links (velocities by central differences of their
    DH poses) plus the rotors (``_rotor_energies``)."""
    eps = 1e-6
    kinetic, potential = _rotor_energies(q, qd, p, gravity)
    plus, minus, here = (_link_frames(x, p)[0] for x in (q + eps * qd, q - eps * qd, q))
    for (mass, centre, inertia), T_p, T_m, T in zip(_links(p), plus, minus, here):
        velocity = ((T_p[:3, :3] @ centre + T_p[:3, 3]) - (T_m[:3, :3] @ centre + T_m[:3, 3])) / (2 * eps)
        omega_hat = (T_p[:3, :3] - T_m[:3, :3]) / (2 * eps) @ T[:3, :3].T
        omega = np.array([omega_hat[2, 1], omega_hat[0, 2], omega_hat[1, 0]])
        R = T[:3, :3]
        kinetic += 0.5 * mass * velocity @ velocity + 0.5 * omega @ R @ inertia @ R.T @ omega
        potential -= mass * gravity @ (R @ centre + T[:3, 3])
    return kinetic, potential


def test_compiled_rrr_matches_rigid_bodies(load):
    """Energies, M (by polarisation of the kinetic energy), g (gradient of the potential), friction,
    tool pose and Jacobian of the compiled rrr module, against NumPy rigid bodies built from the
    YAML's numbers: nothing here comes from codegen, so a wrong product of inertia, rotor term, centre
    of mass, tool offset or friction law fails."""
    robot = load("rrr")
    p = robot.params.defaults
    gravity = np.array([0, 0, -p["g0"]])
    rng = np.random.default_rng(8)
    eye = np.eye(3)
    for _ in range(10):
        q, qd = rng.uniform(-np.pi, np.pi, 3), rng.uniform(-2, 2, 3)
        kinetic, potential = _rigid_body_energies(q, qd, p, gravity)
        assert robot.kinetic_energy(q, qd) == pytest.approx(kinetic, rel=1e-8)
        assert robot.potential_energy(q) == pytest.approx(potential, rel=1e-12, abs=1e-12)
        # M_ij from the kinetic energy of unit and paired joint speeds.
        single = [_rigid_body_energies(q, e, p, gravity)[0] for e in eye]
        M = np.array([[2 * single[i] if i == j else
                       _rigid_body_energies(q, eye[i] + eye[j], p, gravity)[0] - single[i] - single[j]
                       for j in range(3)] for i in range(3)])
        np.testing.assert_allclose(robot.M(q), M, rtol=1e-7, atol=1e-8 * np.abs(M).max())
        step = 1e-6
        gradient = [(_rigid_body_energies(q + step * e, qd, p, gravity)[1]
                     - _rigid_body_energies(q - step * e, qd, p, gravity)[1]) / (2 * step) for e in eye]
        np.testing.assert_allclose(robot.g(q), gradient, rtol=1e-7, atol=1e-7)
        frames, tool = _link_frames(q, p)
        np.testing.assert_allclose(robot.fk(q), tool, rtol=1e-13, atol=1e-14)
        origins = [np.zeros(3)] + [T[:3, 3] for T in frames[:-1]]
        axes = [np.array([0, 0, 1.0])] + [T[:3, 2] for T in frames[:-1]]
        jacobian = np.column_stack([np.concatenate([np.cross(z, tool[:3, 3] - o), z]) for z, o in zip(axes, origins)])
        np.testing.assert_allclose(robot.jacobian(q), jacobian, rtol=1e-13, atol=1e-14)
    qd = np.array([0.7, 0.0, -1.3])  # sgn(0) = 0: no Coulomb torque on a joint at rest
    np.testing.assert_allclose(robot.friction(qd), p["Fv"] * qd + p["Fs"] * np.sign(qd), rtol=1e-15)
    assert robot.friction(qd)[1] == 0.0
