"""The closed-chain oracles (tests/closed_chain_reference.py) against each other, against finite
differences and against Pinocchio; both leg lengths of the biglide (the notes' text says 0.3606 m, the
authors' code uses 0.2828 m) and the five-bar."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from closed_chain_reference import (
    Biglide,
    FiveBar,
    biglide_kkt,
    biglide_pinocchio_qdd,
    biglide_state,
    fivebar_kkt,
    fivebar_state,
)
from scipy.optimize import brentq

MODES = (1, -1)
WORKING = tuple(itertools.product((1, -1), repeat=2))
MECHANISMS = {
    "biglide": Biglide(),
    "biglide_l0.2828": Biglide(l=0.2828),
    "biglide_gravity": Biglide(gravity=[0.7, -9.81]),
    "fivebar": FiveBar(),
}
GEOMETRIES = ("biglide", "biglide_l0.2828", "fivebar")


@pytest.fixture(params=list(MECHANISMS))
def mech(request):
    return MECHANISMS[request.param]


@pytest.fixture(params=GEOMETRIES)
def geo(request):
    return MECHANISMS[request.param]


def rel(a, b):
    return np.linalg.norm(np.asarray(a) - np.asarray(b)) / max(np.linalg.norm(b), 1e-300)


def wrap(a):
    return np.angle(np.exp(1j * np.asarray(a)))


def states(m, n, seed=0, margin=0.08):
    """n random (qa, q̇a, mode) that assemble, at least ``margin`` (normalised) from both loci."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        qa = rng.uniform(-0.3, 0.3, 2) if isinstance(m, Biglide) else rng.uniform(-np.pi, np.pi, 2)
        mode = MODES[len(out) % 2]
        try:
            xi = m.dgm(qa, mode)
        except ValueError:
            continue
        if min(abs(m.type1_measure(qa, xi)), abs(m.type2_measure(qa, xi))) < margin:
            continue
        out.append((qa, rng.normal(size=2), mode))
    return out


def workspace_points(m, n, seed=1):
    """Points every working mode reaches, away from the loci."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        xi = rng.uniform(-0.5, 0.5, 2)
        try:
            sols = [m.igm(xi, s) for s in WORKING]
        except ValueError:
            continue
        if all(min(abs(m.type1_measure(q, xi)), abs(m.type2_measure(q, xi))) > 0.05 for q in sols):
            out.append(xi)
    return out


# --------------------------------------------------------------------------------------------------
# geometry
# --------------------------------------------------------------------------------------------------
def test_dgm_closes_the_loop_and_igm_inverts_it(geo):
    for qa, _, mode in states(geo, 40):
        xi = geo.dgm(qa, mode)
        assert np.abs(geo.loop_residual(qa, xi)).max() < 1e-13
        assert geo.assembly_mode(qa, xi) == mode
        back = geo.igm(xi, geo.working_mode(qa, xi))
        assert np.abs(wrap(back - qa)).max() < 1e-12
        # the other assembly mode is another point (no double root away from type 2)
        assert np.linalg.norm(geo.dgm(qa, -mode) - xi) > 1e-3


def test_every_working_mode_and_its_assembly_mode(geo):
    seen = set()
    for xi in workspace_points(geo, 150):
        for sigma in WORKING:
            qa = geo.igm(xi, sigma)
            assert np.abs(geo.loop_residual(qa, xi)).max() < 1e-13
            assert geo.working_mode(qa, xi) == sigma
            omega = geo.assembly_mode(qa, xi)
            assert np.linalg.norm(geo.dgm(qa, omega) - xi) < 1e-12
            seen.add((omega, sigma))
    if isinstance(geo, Biglide):
        # both feet above P puts P below the feet line and conversely; the mixed modes allow either
        assert seen == {(o, s) for o in MODES for s in WORKING} - {(1, (1, 1)), (-1, (-1, -1))}
    else:
        assert seen == {(o, s) for o in MODES for s in WORKING}      # all eight pairs occur


@pytest.mark.parametrize("l", [0.3606, 0.2828])
def test_biglide_modes_geometric_meaning(l):
    bg = Biglide(l=l)
    for qa, _, mode in states(bg, 30):
        x, y = bg.dgm(qa, mode)
        line = qa[0] + (qa[1] - qa[0]) * (x + bg.d / 2) / bg.d      # feet line's height at x
        assert np.sign(y - line) == mode
        assert bg.working_mode(qa, (x, y)) == tuple(int(s) for s in np.sign(qa - y))


def test_fivebar_working_mode_geometric_meaning():
    fb = FiveBar()
    for qa, _, mode in states(fb, 30):
        xi = fb.dgm(qa, mode)
        E = fb.anchor(qa)
        for i, O in enumerate(fb.base()):
            side = np.sign((xi - O)[0] * (E[i] - O)[1] - (xi - O)[1] * (E[i] - O)[0])
            assert fb.working_mode(qa, xi)[i] == side        # +1: elbow to the left of ray O_i→P
        assert np.allclose(np.hypot(*(E - fb.base()).T), fb.L1)
        assert np.allclose(np.hypot(*(xi - E).T), fb.L2)


@pytest.mark.parametrize("l", [0.3606, 0.2828])
def test_biglide_passive_joints_close_the_joint_space_loop(l):
    bg = Biglide(l=l)
    for qa, _, mode in states(bg, 20):
        xi = bg.dgm(qa, mode)
        phi = bg.passive(qa, xi)
        assert np.abs(bg.passive_loop_residual(qa, phi)).max() < 1e-13
        Jp = -np.linalg.solve(bg.A_passive(qa, phi), bg.B_passive(qa, phi))
        assert rel(Jp, bg.Jp(qa, xi)) < 1e-12


def test_notes_printed_formulas_fail_their_residuals():
    """What the notes print, checked: the IGM with the feet's x swapped, the DGM with √(l² + a²), and the
    passive angles through arctan(2q/d ∓ y/x) do not close the loop; the corrected forms above do."""
    bg = Biglide()
    d, l = bg.d, bg.l
    x, y = 0.05, 0.25
    q1_printed = y + np.sqrt(l ** 2 - (x - d / 2) ** 2)
    q2_printed = y + np.sqrt(l ** 2 - (x + d / 2) ** 2)
    assert np.abs(bg.loop_residual([q1_printed, q2_printed], [x, y])).max() > 1e-3
    assert np.abs(bg.loop_residual(bg.igm([x, y], (1, 1)), [x, y])).max() < 1e-14
    qa = np.array([0.1, -0.05])
    A1, A2 = bg.anchor(qa)
    H = 0.5 * (A1 + A2)
    a = np.linalg.norm(H - A2)
    U = np.array([[0.0, -1.0], [1.0, 0.0]])
    for gamma in MODES:
        printed = H + gamma * np.sqrt(l ** 2 + a ** 2) / a * U @ (H - A2)
        assert np.abs(bg.loop_residual(qa, printed)).max() > 1e-2
        fixed = H + gamma * np.sqrt(l ** 2 - a ** 2) / a * U @ (H - A2)
        assert np.abs(bg.loop_residual(qa, fixed)).max() < 1e-14
        # with this U, γ = +1 puts P on the right of foot 1 → foot 2, i.e. our mode −1
        assert np.linalg.norm(fixed - bg.dgm(qa, -gamma)) < 1e-14
    xi = bg.dgm(qa, 1)
    phi_printed = np.arctan([2 * qa[0] / d + xi[1] / xi[0], 2 * qa[1] / d - xi[1] / xi[0]])
    assert np.abs(bg.passive_loop_residual(qa, phi_printed)).max() > 1e-2


# --------------------------------------------------------------------------------------------------
# kinematics against finite differences
# --------------------------------------------------------------------------------------------------
def test_A_B_J_Jp_against_finite_differences(geo):
    h = 1e-6
    for qa, _, mode in states(geo, 12, seed=3):
        xi = geo.dgm(qa, mode)
        E = np.eye(2)
        A_fd = np.column_stack([(geo.loop_residual(qa, xi + h * e) - geo.loop_residual(qa, xi - h * e)) / (2 * h)
                                for e in E])
        B_fd = np.column_stack([(geo.loop_residual(qa + h * e, xi) - geo.loop_residual(qa - h * e, xi)) / (2 * h)
                                for e in E])
        J_fd = np.column_stack([(geo.dgm(qa + h * e, mode) - geo.dgm(qa - h * e, mode)) / (2 * h) for e in E])
        Jp_fd = np.column_stack([wrap(geo.passive(qa + h * e, geo.dgm(qa + h * e, mode))
                                      - geo.passive(qa - h * e, geo.dgm(qa - h * e, mode))) / (2 * h) for e in E])
        assert rel(geo.A(qa, xi), A_fd) < 1e-8
        assert rel(geo.B(qa, xi), B_fd) < 1e-8
        assert rel(geo.J(qa, xi), J_fd) < 1e-7
        assert rel(geo.Jp(qa, xi), Jp_fd) < 1e-7


def test_b_and_J_dot_against_finite_differences(geo):
    h = 1e-4
    for qa, qad, mode in states(geo, 12, seed=4):
        xi = geo.dgm(qa, mode)
        # b = d²/dt² dgm(qa + t q̇a) at t = 0 (q̈a = 0), free of J
        b_fd = (geo.dgm(qa + h * qad, mode) - 2 * xi + geo.dgm(qa - h * qad, mode)) / h ** 2
        assert rel(geo.b(qa, qad, xi), b_fd) < 1e-5
        k = 1e-5
        Jd_fd = (geo.J(qa + k * qad, geo.dgm(qa + k * qad, mode))
                 - geo.J(qa - k * qad, geo.dgm(qa - k * qad, mode))) / (2 * k)
        assert rel(geo.J_dot(qa, qad, xi), Jd_fd) < 1e-6
        assert rel(geo.J_dot(qa, qad, xi) @ qad, geo.b(qa, qad, xi)) < 1e-12


# --------------------------------------------------------------------------------------------------
# singularity loci
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("l", [0.3606, 0.2828])
def test_biglide_singularity_loci(l):
    """Type 2 (det A = 0): |q1 − q2| = √(4l² − d²), the feet 2l apart with P at their midpoint. Type 1
    (det B = 0): |q1 − q2| = √(2ld − d²), one leg horizontal (leg 1 when q1 > q2 in mode +1)."""
    bg = Biglide(l=l)
    q1 = 0.05
    # type 2 is the edge of assembly: the measure vanishes there and the two modes meet
    qa = np.array([q1, q1 - bg.type2_gap()])
    assert abs(bg.type2_measure(qa, bg.dgm(qa, 1))) < 1e-6
    assert np.linalg.norm(bg.dgm(qa, 1) - bg.dgm(qa, -1)) < 1e-6
    with pytest.raises(ValueError):
        bg.dgm([q1, q1 - 1.001 * bg.type2_gap()], 1)
    for mode in MODES:
        f = lambda g, mode=mode: bg.type1_measure([q1, q1 - g], bg.dgm([q1, q1 - g], mode))
        s1 = brentq(f, 1e-9, bg.type2_gap() * (1 - 1e-9), xtol=1e-15)
        assert abs(s1 - bg.type1_gap()) < 1e-12
        qa = np.array([q1, q1 - s1])
        x, y = bg.dgm(qa, mode)
        leg = 0 if mode == 1 else 1
        assert abs(y - qa[leg]) < 1e-10 and abs(x - (l - bg.d / 2) * (1 if mode == 1 else -1)) < 1e-10


def test_fivebar_singularity_measures():
    fb = FiveBar()
    for qa, _, mode in states(fb, 20, margin=0.0):
        xi = fb.dgm(qa, mode)
        psi = fb.distal_angles(qa, xi)
        assert abs(fb.type2_measure(qa, xi) - np.sin(psi[1] - psi[0])) < 1e-12
        theta = fb.passive(qa, xi)                                   # elbow joint angles
        assert abs(fb.type1_measure(qa, xi) - np.sin(theta[0]) * np.sin(theta[1])) < 1e-12
    # type 1 at the reach boundary (arm stretched)
    xi = np.array([-0.1 + 0.3, 0.4])
    xi = fb.base()[0] + (fb.L1 + fb.L2) * (xi - fb.base()[0]) / np.linalg.norm(xi - fb.base()[0])
    qa = fb.igm(xi, (1, 1))
    assert abs(fb.type1_measure(qa, xi)) < 1e-6
    # type 2 needs collinear distal links of equal length: elbows 2 L2 apart (here only the stretched
    # pose q = (π, 0), where |E1E2| = 2a + 2L1 = 0.6) or coincident elbows, q = ±(π/3, 2π/3)
    assert abs(np.linalg.norm(np.diff(fb.anchor([np.pi, 0.0]), axis=0)) - 2 * fb.L2) < 1e-15
    for sign in (1, -1):
        for delta in (1e-4, 1e-6):
            qa = sign * np.array([np.pi / 3, 2 * np.pi / 3 + delta])
            for mode in MODES:
                assert abs(fb.type2_measure(qa, fb.dgm(qa, mode))) < 10 * delta


# --------------------------------------------------------------------------------------------------
# dynamics
# --------------------------------------------------------------------------------------------------
def test_biglide_notes_closed_forms_equal_the_point_mass_sum():
    for bg in (MECHANISMS["biglide"], MECHANISMS["biglide_l0.2828"]):
        for qa, qad, mode in states(bg, 10):
            assert rel(bg.notes_mass_matrix(qa, mode), bg.mass_matrix(qa, mode)) < 1e-14
            assert rel(bg.notes_coriolis_vector(qa, qad, mode), bg.coriolis_vector(qa, qad, mode)) < 1e-13


def _kkt(m):
    if isinstance(m, Biglide):
        return biglide_kkt(m), lambda qa, mode: biglide_state(m, qa, mode)
    return fivebar_kkt(m), lambda qa, mode: fivebar_state(m, qa, mode)


def test_reduced_model_agrees_with_kkt(mech):
    kkt, state = _kkt(mech)
    rng = np.random.default_rng(7)
    worst = 0.0
    for qa, qad, mode in states(mech, 40, seed=5):
        z = state(qa, mode)
        assert np.abs(kkt.h(z)).max() < 1e-13
        zd = kkt.velocity(z, qad)
        assert np.abs(kkt.H(z) @ zd).max() < 1e-12 and rel(kkt.S(z) @ zd, qad) < 1e-13
        tau = rng.normal(size=2) * 5
        qdd = mech.forward_dynamics(qa, qad, tau, mode)
        worst = max(worst, rel(kkt.actuated_acceleration(z, zd, tau), qdd))
        worst = max(worst, rel(kkt.inverse(z, zd, qdd), tau))
        qdd = rng.normal(size=2)
        worst = max(worst, rel(kkt.inverse(z, zd, qdd), mech.inverse_dynamics(qa, qad, qdd, mode)))
    assert worst < 1e-10


def test_inverse_of_forward_dynamics(mech):
    rng = np.random.default_rng(8)
    for qa, qad, mode in states(mech, 20, seed=6):
        tau = rng.normal(size=2)
        qdd = mech.forward_dynamics(qa, qad, tau, mode)
        assert rel(mech.inverse_dynamics(qa, qad, qdd, mode), tau) < 1e-12


def test_coriolis_matrix_skew_and_lagrange(mech):
    """c = C q̇a, Ṁ − 2C skew (Ṁ by finite differences), and c = Ṁq̇ − ½∂(q̇ᵀMq̇)/∂q (Lagrange)."""
    h = 1e-6
    for qa, qad, mode in states(mech, 10, seed=9):
        C = mech.coriolis_matrix(qa, qad, mode)
        c = mech.coriolis_vector(qa, qad, mode)
        assert rel(C @ qad, c) < 1e-12
        Md = (mech.mass_matrix(qa + h * qad, mode) - mech.mass_matrix(qa - h * qad, mode)) / (2 * h)
        N = Md - 2 * C
        assert np.abs(N + N.T).max() < 1e-7 * max(1.0, np.abs(Md).max())
        grad = np.array([(qad @ mech.mass_matrix(qa + h * e, mode) @ qad
                          - qad @ mech.mass_matrix(qa - h * e, mode) @ qad) / (2 * h) for e in np.eye(2)])
        assert rel(Md @ qad - 0.5 * grad, c) < 1e-6


def test_gravity_and_kinetic_energy_from_the_point_masses(mech):
    h = 1e-6
    for qa, qad, mode in states(mech, 10, seed=10):
        g_fd = np.array([(mech.potential_energy(qa + h * e, mode) - mech.potential_energy(qa - h * e, mode))
                         / (2 * h) for e in np.eye(2)])
        g = mech.gravity_vector(qa, mode)
        assert np.abs(g - g_fd).max() < 1e-7 * max(1.0, np.abs(g).max())

        def points(q, mode=mode):
            return np.vstack([mech.anchor(q), mech.dgm(q, mode)])

        v = (points(qa + h * qad) - points(qa - h * qad)) / (2 * h)
        T = 0.5 * (mech.m_anchor * (v[0] @ v[0] + v[1] @ v[1]) + mech.m_end * v[2] @ v[2])
        assert abs(mech.kinetic_energy(qa, qad, mode) - T) < 1e-8 * T


def test_fivebar_has_gravity_biglide_not():
    fb, bg = MECHANISMS["fivebar"], MECHANISMS["biglide"]
    (qa, _, mode), = states(fb, 1)
    assert np.abs(fb.gravity_vector(qa, mode)).max() > 0.1
    (qa, _, mode), = states(bg, 1)
    assert np.abs(bg.gravity_vector(qa, mode)).max() == 0.0


# --------------------------------------------------------------------------------------------------
# Pinocchio (constraintDynamics with a 3-D point contact between the leg tips)
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["biglide", "biglide_l0.2828", "biglide_gravity"])
def test_pinocchio_exact_split_platform(name):
    """Platform mass split between the two leg tips: exactly the massless-leg biglide, no fictitious
    inertia; observed agreement ~1e-15."""
    pytest.importorskip("pinocchio")
    bg = MECHANISMS[name]
    rng = np.random.default_rng(11)
    worst = 0.0
    for qa, qad, mode in states(bg, 10, seed=12):
        tau = rng.normal(size=2)
        a = biglide_pinocchio_qdd(bg, qa, qad, tau, mode, leg_inertia=0.0, split_platform=True)
        worst = max(worst, rel(a, bg.forward_dynamics(qa, qad, tau, mode)))
    assert worst < 1e-12


def test_pinocchio_tiny_leg_inertia():
    """The issue's recipe, mp on leg 1's tip and legs of mass/inertia ε: the gap is the legs' physics,
    proportional to ε (2e-5 and 2e-7 relative at worst over 100 states for ε = 1e-6 and 1e-8), until the
    KKT's conditioning (∝ 1/ε) takes over: at ε = 1e-12 it is round-off, up to 3e-5."""
    pytest.importorskip("pinocchio")
    bg = MECHANISMS["biglide"]
    rng = np.random.default_rng(13)
    for qa, qad, mode in states(bg, 4, seed=14):
        tau = rng.normal(size=2)
        ref = bg.forward_dynamics(qa, qad, tau, mode)
        gaps = {eps: rel(biglide_pinocchio_qdd(bg, qa, qad, tau, mode, leg_inertia=eps), ref)
                for eps in (1e-6, 1e-8, 1e-12)}
        assert 30 < gaps[1e-6] / gaps[1e-8] < 300
        assert gaps[1e-6] < 1e-4 and gaps[1e-8] < 1e-6 and gaps[1e-12] < 1e-4
