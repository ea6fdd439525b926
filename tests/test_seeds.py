"""The lecture notes' closed forms and numbers, symbolically and through the compiled modules.

Symbolic checks compare the derived SymPy model with the notes' formulas after
simplification; numeric checks evaluate the compiled module at random states
and random parameter values (set at run time) against the same formulas.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from conftest import random_state


def _symbols(model):
    names = {p.name: p.symbol for p in model.description.parameters}
    return names, model.q, model.qd


def _assert_zero(matrix):
    difference = sp.Matrix(matrix).applyfunc(lambda e: sp.simplify(sp.expand_trig(e)))
    assert difference == sp.zeros(*difference.shape), difference


# --- pendulum (seed 000, example 1): I θ'' + d θ' + m g L sin θ = τ -------------------------------


def test_pendulum_symbolic(derived):
    model = derived("pendulum")
    p, (theta,), (theta_d,) = _symbols(model)
    _assert_zero(model.M - sp.Matrix([[p["I"]]]))
    _assert_zero(model.g - sp.Matrix([p["m"] * p["g0"] * p["L"] * sp.sin(theta)]))
    _assert_zero(model.friction - sp.Matrix([p["d"] * theta_d]))
    _assert_zero(model.C)
    # The notes' potential m g L (1 - cos θ) differs from ours only by a constant.
    difference = model.potential_energy - p["m"] * p["g0"] * p["L"] * (1 - sp.cos(theta))
    assert sp.simplify(difference.diff(theta)) == 0


def test_pendulum_numeric(load):
    robot = load("pendulum")
    rng = np.random.default_rng(1)
    for _ in range(20):
        m, L, d = rng.uniform(0.5, 3), rng.uniform(0.1, 1), rng.uniform(0, 1)
        inertia = m * L**2 + rng.uniform(0.01, 1)
        robot.params.update(m=m, L=L, d=d, I=inertia)
        theta, theta_d, theta_dd = rng.uniform(-3, 3, 3)
        tau = robot.inverse_dynamics(np.array([theta]), np.array([theta_d]), np.array([theta_dd]))
        expected = inertia * theta_dd + d * theta_d + m * 9.81 * L * np.sin(theta)
        assert tau[0] == pytest.approx(expected, rel=1e-12, abs=1e-12)


# --- 2-DOF planar arm (seed 000, example 2) ----------------------------------------------------


def _rr_closed_form(p, q, qd):
    m1, m2, a1, ac1, ac2, I1, I2, g = (p[k] for k in ("m1", "m2", "a1", "ac1", "ac2", "I1", "I2", "g0"))
    c2, s2 = sp.cos(q[1]), sp.sin(q[1])
    M = sp.Matrix([
        [m1 * ac1**2 + m2 * (a1**2 + ac2**2 + 2 * a1 * ac2 * c2) + I1 + I2, m2 * (ac2**2 + a1 * ac2 * c2) + I2],
        [m2 * (ac2**2 + a1 * ac2 * c2) + I2, m2 * ac2**2 + I2],
    ])
    h = -m2 * a1 * ac2 * s2
    C = sp.Matrix([[h * qd[1], h * (qd[0] + qd[1])], [-h * qd[0], 0]])
    g_vec = sp.Matrix([(m1 * ac1 + m2 * a1) * g * sp.cos(q[0]) + m2 * g * ac2 * sp.cos(q[0] + q[1]),
                       m2 * g * ac2 * sp.cos(q[0] + q[1])])
    return M, C, g_vec


def test_rr_symbolic_matches_notes(derived):
    model = derived("rr")
    p, q, qd = _symbols(model)
    M, C, g_vec = _rr_closed_form(p, q, qd)
    _assert_zero(model.M - M)
    _assert_zero(model.C - C)
    _assert_zero(model.g - g_vec)
    # The notes' N = Ṁ − 2C for this arm, h = −m2 a1 ac2 sin q2.
    h = -p["m2"] * p["a1"] * p["ac2"] * sp.sin(q[1])
    M_dot = sum((model.M.diff(q[k]) * qd[k] for k in range(2)), sp.zeros(2, 2))
    N = sp.Matrix([[0, -2 * h * qd[0] - h * qd[1]], [2 * h * qd[0] + h * qd[1], 0]])
    _assert_zero(M_dot - 2 * model.C - N)


def test_rr_compiled_matches_notes_with_runtime_parameters(load, derived):
    robot = load("rr")
    model = derived("rr")
    p, q, qd = _symbols(model)
    functions = [sp.lambdify((q, qd, list(p.values())), expr) for expr in _rr_closed_form(p, q, qd)]
    rng = np.random.default_rng(2)
    for _ in range(20):
        values = {name: rng.uniform(0.2, 5.0) for name in p if name != "g0"}
        values["g0"] = 9.81
        robot.params.update(values)
        state_q, state_qd = random_state(robot, rng)
        args = (state_q, state_qd, [values[name] for name in p])
        M, C, g_vec = (np.array(f(*args), dtype=float) for f in functions)
        np.testing.assert_allclose(robot.M(state_q), M, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(robot.C(state_q, state_qd), C, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(robot.g(state_q), g_vec.ravel(), rtol=1e-12, atol=1e-12)


def test_rr_inertia_bounds_from_notes(load):
    """m1 = m2 = 50, I1 = I2 = 10, a = 1, ac = 0.5: λmin = 6.2399, λmax = 161.2601, M1 = 117.5, M2 = 192.5."""
    robot = load("rr")
    robot.params.update(m1=50, m2=50, I1=10, I2=10, a1=1, a2=1, ac1=0.5, ac2=0.5)
    q2 = np.linspace(-np.pi, np.pi, 20001)
    Q = np.column_stack([np.full_like(q2, 0.7), q2])
    eigenvalues = np.linalg.eigvalsh(robot.M(Q))
    assert eigenvalues[:, 0].min() == pytest.approx(6.2399, abs=5e-5)
    assert eigenvalues[:, 1].max() == pytest.approx(161.2601, abs=5e-5)
    # 1-norm bounds over θ2 ∈ [−π/2, π/2] (the notes' range).
    q2 = np.linspace(-np.pi / 2, np.pi / 2, 20001)
    Q = np.column_stack([np.zeros_like(q2), q2])
    norms = np.abs(robot.M(Q)).sum(axis=1).max(axis=1)
    assert norms.min() == pytest.approx(117.5, abs=1e-9)
    assert norms.max() == pytest.approx(192.5, abs=1e-9)


# --- RP, PR, PP arms (seed 001) ----------------------------------------------------------------


def _check_equations_of_motion(model, M, V, G):
    """M, V (= C q̇) and G against the derived model, exactly."""
    _assert_zero(model.M - M)
    _assert_zero(model.C * sp.Matrix(model.qd) - V)
    _assert_zero(model.g - G)


def test_rp_equations_of_motion(derived):
    model = derived("rp")
    p, (theta1, d2), (theta1_d, d2_d) = _symbols(model)
    m1, m2, l1, I1, I2, g = (p[k] for k in ("m1", "m2", "l1", "Izz1", "Izz2", "g0"))
    M = sp.Matrix([[m1 * l1**2 + I1 + m2 * d2**2 + I2, 0], [0, m2]])
    V = sp.Matrix([2 * m2 * d2 * theta1_d * d2_d, -m2 * d2 * theta1_d**2])
    G = sp.Matrix([(m1 * l1 + m2 * d2) * g * sp.cos(theta1), m2 * g * sp.sin(theta1)])
    _check_equations_of_motion(model, M, V, G)


def test_pr_equations_of_motion(derived):
    model = derived("pr")
    p, (q1, q2), (q1_d, q2_d) = _symbols(model)
    m1, m2, d, I2, g = (p[k] for k in ("m1", "m2", "d", "Izz2", "g0"))
    M = sp.Matrix([[m1 + m2, -m2 * d * sp.sin(q2)], [-m2 * d * sp.sin(q2), I2 + m2 * d**2]])
    V = sp.Matrix([-m2 * d * sp.cos(q2) * q2_d**2, 0])
    G = sp.Matrix([0, d * sp.cos(q2) * m2 * g])
    _check_equations_of_motion(model, M, V, G)


def test_pp_equations_of_motion(derived):
    model = derived("pp")
    p, _, _ = _symbols(model)
    m1, m2, g = p["m1"], p["m2"], p["g0"]
    _check_equations_of_motion(model, sp.Matrix([[m1 + m2, 0], [0, m2]]), sp.zeros(2, 1),
                               sp.Matrix([(m1 + m2) * g, 0]))


def _seed_001_numeric(name, p, q, qd):
    """The notes' M, V = C q̇, G and tool pose of the RP, PR and PP arms, in NumPy."""
    g = p["g0"]
    if name == "rp":
        (theta, d2), (theta_d, d2_d) = q, qd
        M = np.diag([p["m1"] * p["l1"]**2 + p["Izz1"] + p["m2"] * d2**2 + p["Izz2"], p["m2"]])
        V = np.array([2 * p["m2"] * d2 * theta_d * d2_d, -p["m2"] * d2 * theta_d**2])
        G = np.array([(p["m1"] * p["l1"] + p["m2"] * d2) * g * np.cos(theta), p["m2"] * g * np.sin(theta)])
        c, s = np.cos(theta), np.sin(theta)
        pose = np.array([[c, -s, 0, d2 * c], [s, c, 0, d2 * s], [0, 0, 1, 0], [0, 0, 0, 1]])
    elif name == "pr":
        (x, q2), (_, q2_d) = q, qd
        m1, m2, d = p["m1"], p["m2"], p["d"]
        M = np.array([[m1 + m2, -m2 * d * np.sin(q2)], [-m2 * d * np.sin(q2), p["Izz2"] + m2 * d**2]])
        V = np.array([-m2 * d * np.cos(q2) * q2_d**2, 0.0])
        G = np.array([0.0, d * np.cos(q2) * m2 * g])
        c, s = np.cos(q2), np.sin(q2)
        pose = np.array([[c, -s, 0, x], [s, c, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
    else:
        M = np.diag([p["m1"] + p["m2"], p["m2"]])
        V = np.zeros(2)
        G = np.array([(p["m1"] + p["m2"]) * g, 0.0])
        pose = np.eye(4)
        pose[:3, 3] = [q[1], 0.0, q[0]]
    return M, V, G, pose


@pytest.mark.parametrize("name", ["rp", "pr", "pp"])
def test_seed_001_compiled_inverse_dynamics(name, load):
    """Compiled τ, M, C q̇, g and the tool pose equal the notes' closed forms (written in NumPy, not
    taken from the generated model) at random states and random parameter values set at run time."""
    robot = load(name)
    rng = np.random.default_rng(3)
    for _ in range(20):
        values = {key: rng.uniform(0.2, 3.0) for key in robot.params}
        robot.params.update(values)
        q, qd = random_state(robot, rng)
        qdd = rng.normal(size=robot.n)
        M, V, G, pose = _seed_001_numeric(name, values, q, qd)
        np.testing.assert_allclose(robot.inverse_dynamics(q, qd, qdd), M @ qdd + V + G, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(robot.M(q), M, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(robot.C(q, qd) @ qd, V, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(robot.g(q), G, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(robot.fk(q), pose, rtol=1e-12, atol=1e-12)


def test_pendulum_and_rr_tool_pose(load):
    """fk against the geometry: the pendulum's tool at its centre of mass, the RR arm's at the tip."""
    pendulum, rr = load("pendulum"), load("rr")
    rng = np.random.default_rng(4)
    for theta, q1, q2 in rng.uniform(-np.pi, np.pi, (10, 3)):
        L = pendulum.params["L"]
        c, s = np.cos(theta), np.sin(theta)
        expected = np.array([[c, -s, 0, L * s], [s, c, 0, -L * c], [0, 0, 1, 0], [0, 0, 0, 1]])
        np.testing.assert_allclose(pendulum.fk(np.array([theta])), expected, rtol=1e-13, atol=1e-15)
        c12, s12 = np.cos(q1 + q2), np.sin(q1 + q2)
        tip = [np.cos(q1) + c12, np.sin(q1) + s12]  # a1 = a2 = 1
        expected = np.array([[c12, -s12, 0, tip[0]], [s12, c12, 0, tip[1]], [0, 0, 1, 0], [0, 0, 0, 1]])
        np.testing.assert_allclose(rr.fk(np.array([q1, q2])), expected, rtol=1e-13, atol=1e-15)
