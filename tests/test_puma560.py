"""Puma 560 (robots/puma560.yaml) against an independent Newton-Euler reference
and against numbers published with Peter Corke's Robotics Toolbox.

The reference (tests/newton_euler_reference.py) is given the toolbox's
parameters transcribed here from petercorke/robotics-toolbox-matlab
models/mdl_puma560.m (= petercorke/robotics-toolbox-python
roboticstoolbox/models/DH/Puma560.py), not read from the YAML.

Published values: petercorke/robotics-toolbox-python tests/test_DHRobot.py
(test_gravload, test_inertia, test_rne), printed there to 4 decimals, computed
by the toolbox's rne, which keeps only the G² Jm q̈ motor term and uses the
asymmetric Coulomb friction |G| Tc⁺ for q̇ > 0. They are compared with the
reference in that toolbox mode, and g(q) (independent of motors and friction)
with the compiled model directly.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from conftest import random_state
from newton_euler_reference import SerialArm, dh_transform, gravity, mass_matrix, rnea

pi = np.pi

# --- The toolbox's Puma 560 (mdl_puma560.m), motor-side friction and motor data. ---
DH = np.array([  # a, alpha, d, theta offset
    [0, pi / 2, 0, 0],
    [0.4318, 0, 0, 0],
    [0.0203, -pi / 2, 0.15005, 0],
    [0, pi / 2, 0.4318, 0],
    [0, -pi / 2, 0, 0],
    [0, 0, 0, 0],
])
MASS = np.array([0, 17.4, 4.8, 0.82, 0.34, 0.09])
COM = np.array([[0, 0, 0], [-0.3638, 0.006, 0.2275], [-0.0203, -0.0141, 0.070],
                [0, 0.019, 0], [0, 0, 0], [0, 0, 0.032]])
INERTIA = np.array([np.diag(d) for d in ([0, 0.35, 0], [0.13, 0.524, 0.539], [0.066, 0.086, 0.0125],
                                         [1.8e-3, 1.3e-3, 1.8e-3], [0.3e-3, 0.4e-3, 0.3e-3],
                                         [0.15e-3, 0.15e-3, 0.04e-3])])
JM = np.array([200e-6, 200e-6, 200e-6, 33e-6, 33e-6, 33e-6])
GEAR = np.array([-62.6111, 107.815, -53.7063, 76.0364, 71.923, 76.686])
B = np.array([1.48e-3, 0.817e-3, 1.38e-3, 71.2e-6, 82.6e-6, 36.7e-6])
TC = np.array([[0.395, -0.435], [0.126, -0.071], [0.132, -0.105],
               [11.2e-3, -16.9e-3], [9.26e-3, -14.5e-3], [3.96e-3, -10.5e-3]])  # [Tc+, Tc-]
QZ = np.zeros(6)
QN = np.array([0, pi / 4, pi, 0, pi / 4, 0])

PUBLISHED_I3YY = 0.086        # the toolbox's link-3 yy; the YAML defaults to 0.0785 (see there)


def reference(I3yy=0.0785, toolbox=False) -> SerialArm:
    """Our model's conventions (rotor coupling, symmetric Coulomb |G| mean|Tc|), or
    toolbox=True: G² Jm only, Coulomb |G| Tc⁺ (valid for q̇ > 0 only)."""
    inertia = INERTIA.copy()
    inertia[2, 1, 1] = I3yy
    coulomb = np.abs(GEAR) * (TC[:, 0] if toolbox else np.abs(TC).mean(axis=1))
    return SerialArm(DH, MASS, COM, inertia, gravity=np.array([0, 0, -9.81]), Jm=JM, G=GEAR,
                     viscous=GEAR**2 * B, coulomb=coulomb, rotor_coupling=not toolbox)


# petercorke/robotics-toolbox-python tests/test_DHRobot.py
PUBLISHED_GRAVLOAD_QN = [-0.0000, 31.6399, 6.0351, 0.0000, 0.0283, 0]                  # gravload(qn)
PUBLISHED_INERTIA_QN = [                                                               # inertia(qn)
    [3.6594, -0.4044, 0.1006, -0.0025, 0.0000, -0.0000],
    [-0.4044, 4.4137, 0.3509, 0.0000, 0.0024, 0.0000],
    [0.1006, 0.3509, 0.9378, 0.0000, 0.0015, 0.0000],
    [-0.0025, 0.0000, 0.0000, 0.1925, 0.0000, 0.0000],
    [0.0000, 0.0024, 0.0015, 0.0000, 0.1713, 0.0000],
    [-0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.1941],
]
PUBLISHED_RNE_QN = [  # (qd, qdd, gravity on?, tau) for rne(qn, qd, qdd)
    (np.zeros(6), np.ones(6), True, [3.35311, 36.0025, 7.42596, 0.190043, 0.203441, 0.194133]),
    (np.ones(6), np.ones(6), True, [32.4952, 60.867, 17.7436, 1.45452, 1.29911, 0.713781]),
    (np.ones(6), np.zeros(6), True, [29.1421, 56.5044, 16.3528, 1.26448, 1.12392, 0.519648]),
    (np.ones(6), np.ones(6), False, [32.4952, 29.2271, 11.7085, 1.45452, 1.27086, 0.713781]),
]
# numpy.testing.assert_array_almost_equal(decimal=4), as the toolbox's tests use.
PUBLISHED_ATOL = 1.5e-4


@pytest.fixture(scope="module")
def puma(load):
    return load("puma560")


# --- The reference itself, against the published toolbox numbers. ---

def test_reference_reproduces_published_toolbox_numbers():
    arm = reference(I3yy=PUBLISHED_I3YY, toolbox=True)
    np.testing.assert_allclose(gravity(arm, QN), PUBLISHED_GRAVLOAD_QN, atol=PUBLISHED_ATOL, rtol=0)
    np.testing.assert_allclose(mass_matrix(arm, QN), PUBLISHED_INERTIA_QN, atol=PUBLISHED_ATOL, rtol=0)
    for qd, qdd, with_gravity, tau in PUBLISHED_RNE_QN:
        a = arm if with_gravity else replace(arm, gravity=np.zeros(3))
        # The toolbox prints 6 significant digits here: compare relatively too.
        np.testing.assert_allclose(rnea(a, QN, qd, qdd), tau, rtol=1e-5, atol=PUBLISHED_ATOL)


def _kinetic_energy_from_poses(arm, q, qd, eps=1e-6):
    """½ Σ (m|v_c|² + ωᵀIω) + Σ ½ Jm (z_{i-1}·ω_{i-1} + G q̇_i)², velocities by
    central differences of the DH poses along q̇."""
    def frames(q):
        T = [np.eye(4)]
        for i in range(arm.n):
            T.append(T[-1] @ dh_transform(*arm.dh[i, :3], q[i] + arm.dh[i, 3]))
        return T

    plus, minus, here = frames(q + eps * qd), frames(q - eps * qd), frames(q)
    omega = []
    for Tp, Tm, T in zip(plus, minus, here):
        W = (Tp[:3, :3] - Tm[:3, :3]) / (2 * eps) @ T[:3, :3].T
        omega.append(np.array([W[2, 1], W[0, 2], W[1, 0]]))
    energy = 0.0
    for i in range(1, arm.n + 1):
        centre = [T[:3, :3] @ arm.com[i - 1] + T[:3, 3] for T in (plus[i], minus[i])]
        v = (centre[0] - centre[1]) / (2 * eps)
        R = here[i][:3, :3]
        energy += 0.5 * arm.mass[i - 1] * v @ v + 0.5 * omega[i] @ R @ arm.inertia[i - 1] @ R.T @ omega[i]
        spin = here[i - 1][:3, 2] @ omega[i - 1] + arm.G[i - 1] * qd[i - 1]
        energy += 0.5 * arm.Jm[i - 1] * spin**2
    return energy


def test_reference_mass_matrix_matches_kinetic_energy():
    """The reference's rotor terms (and the rest of M) agree with the kinetic
    energy of the links and rotors, computed from poses only."""
    arm = reference()
    rng = np.random.default_rng(3)
    for _ in range(10):
        q, qd = rng.uniform(-pi, pi, 6), rng.uniform(-2, 2, 6)
        assert 0.5 * qd @ mass_matrix(arm, q) @ qd == pytest.approx(_kinetic_energy_from_poses(arm, q, qd), rel=1e-8)


# --- Compiled model against the reference. ---

def _states(robot, count, seed):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        q, qd = random_state(robot, rng)
        yield q, qd, rng.normal(0, 3, robot.n)


def _close(actual, expected, rtol=1e-9):
    scale = max(np.abs(expected).max(), 1e-12)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale)


@pytest.mark.parametrize("I3yy", [None, PUBLISHED_I3YY])
def test_matches_newton_euler_reference(puma, I3yy):
    """inverse_dynamics, M and g at 50 random states, at the YAML default and
    with the published (physically impossible) link-3 yy set at run time."""
    if I3yy is not None:
        puma.params["I3yy"] = I3yy
    arm = reference(I3yy=puma.params["I3yy"])
    for q, qd, qdd in _states(puma, 50, seed=20):
        _close(puma.inverse_dynamics(q, qd, qdd), rnea(arm, q, qd, qdd))
        _close(puma.M(q), mass_matrix(arm, q))
        _close(puma.g(q), gravity(arm, q))
    puma.params.reset()


def test_link_masses_are_runtime_parameters(puma):
    arm = reference()
    q = np.array([0.3, -0.4, 1.2, 0.5, -0.8, 0.2])
    for name, factor in (("m2", 1.5), ("m3", 0.5), ("m6", 3.0)):
        puma.params[name] = puma.params.defaults[name] * factor
    mass = MASS.copy()
    mass[[1, 2, 5]] *= [1.5, 0.5, 3.0]
    changed = replace(arm, mass=mass)
    _close(puma.g(q), gravity(changed, q))
    _close(puma.M(q), mass_matrix(changed, q))
    puma.params.reset()


# --- Identities. ---

def test_mass_matrix_symmetric_positive_definite(puma):
    for q, _, _ in _states(puma, 50, seed=21):
        M = puma.M(q)
        np.testing.assert_allclose(M, M.T, rtol=0, atol=1e-14 * np.abs(M).max())
        assert np.linalg.eigvalsh(M)[0] > 0


def test_mdot_minus_2c_is_skew(puma):
    eps = 1e-6
    for q, qd, _ in _states(puma, 30, seed=22):
        M_dot = (puma.M(q + eps * qd) - puma.M(q - eps * qd)) / (2 * eps)
        C = puma.C(q, qd)
        N = M_dot - 2 * C
        assert np.abs(N + N.T).max() <= 1e-7 * max(np.abs(M_dot).max(), np.abs(C).max())


def test_inverse_after_forward_is_identity(puma):
    rng = np.random.default_rng(23)
    for q, qd, _ in _states(puma, 50, seed=24):
        tau = rng.normal(0, 20, puma.n)
        qdd = puma.forward_dynamics(q, qd, tau)
        np.testing.assert_allclose(puma.inverse_dynamics(q, qd, qdd), tau, rtol=1e-9, atol=1e-9)


# --- Published toolbox numbers. ---

def test_gravity_at_qz_and_qn(puma):
    """g(qn) equals the toolbox's gravload(qn) (motors and friction do not enter g)."""
    arm = reference()
    for name, q in (("qz", QZ), ("qn", QN)):
        print(f"g({name}) compiled  = {np.array2string(puma.g(q), precision=5, suppress_small=True)}")
        print(f"g({name}) reference = {np.array2string(gravity(arm, q), precision=5, suppress_small=True)}")
        _close(puma.g(q), gravity(arm, q))
    print(f"g(qn) published   = {PUBLISHED_GRAVLOAD_QN}  (toolbox gravload(qn), 4 decimals)")
    np.testing.assert_allclose(puma.g(QN), PUBLISHED_GRAVLOAD_QN, atol=PUBLISHED_ATOL, rtol=0)
    # At qz the arm is an L: the upper arm horizontal, the forearm vertical.
    assert puma.g(QZ)[1] > 30 and abs(puma.g(QZ)[0]) < 1e-12


def test_mass_matrix_at_qn_is_published_plus_rotor_coupling(puma):
    """With the published link-3 yy, the compiled M(qn) minus the rotor coupling
    terms (our model's rotors minus the toolbox's G² Jm) is the toolbox's inertia(qn)."""
    puma.params["I3yy"] = PUBLISHED_I3YY
    coupling = mass_matrix(reference(PUBLISHED_I3YY), QN) - mass_matrix(reference(PUBLISHED_I3YY, toolbox=True), QN)
    np.testing.assert_allclose(puma.M(QN) - coupling, PUBLISHED_INERTIA_QN, atol=PUBLISHED_ATOL, rtol=0)
    assert np.abs(coupling).max() > 1e-3   # the coupling is not negligible at 4 decimals
    puma.params.reset()


def test_tool_pose_and_jacobian_follow_the_dh_table(puma):
    """fk is the product of the toolbox's DH transforms (no tool offset); the Jacobian's columns are
    z_{i-1} x (p - o_{i-1}) and z_{i-1}."""
    for q, _, _ in _states(puma, 20, seed=25):
        frames = [np.eye(4)]
        for i in range(6):
            frames.append(frames[-1] @ dh_transform(*DH[i, :3], q[i] + DH[i, 3]))
        tip = frames[-1][:3, 3]
        jacobian = np.column_stack([np.concatenate([np.cross(T[:3, 2], tip - T[:3, 3]), T[:3, 2]])
                                    for T in frames[:-1]])
        np.testing.assert_allclose(puma.fk(q), frames[-1], rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(puma.jacobian(q), jacobian, rtol=1e-12, atol=1e-14)
