"""Regressor and base parameters (issue 11, points 1 and 2) against oracles that do not use robodyn's
regressor code: the compiled inverse dynamics, singular values computed here, Pinocchio's
``computeJointTorqueRegressor`` and its own dynamic parameters, and the planar RR arm's regressor
written out by hand from its Lagrangian.

* Y(q, q̇, q̈) π = inverse dynamics to 1e-12 (per state, relative to max |τ|) at random states, one state
  at a time and in batches, on the 2-link arm, the 3-DOF arm with rotors, a kinematic tree with rotors
  and a prismatic joint, a URDF tree with mimic joints, the UR5, and (slow) the Puma 560 and the Panda.
* Y_base π_base = inverse dynamics, Y = Y_base K, Y_base = the kept columns of Y, π_base = K π.
* The number of base parameters is the numerical rank of Y stacked over many random states (SVD of the
  column-normalised stack, with the gap reported), and the stacked base regressor has full column rank.
* URDF arms: the inertial base-parameter count equals the rank of Pinocchio's stacked regressor (Panda
  43, UR5 36, Unitree Z1 43); Pinocchio's columns and parameter values, mapped from its order
  [m, mx, my, mz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz] (about the joint frame) to ours, equal ours; Pinocchio's
  regressor times its own parameters plus the URDF's friction gives our torques; each library's columns
  lie in the span of the other's (with friction columns added to Pinocchio's).
* The RR arm of the notes: 6 inertial base parameters and 4 friction ones, the grouping a1²·M2 into ZZ1R,
  values at the defaults and at another a1 from a closed form written here, and Y_base equal to the
  hand-written regressor times the constant map between the two base sets (so the column spaces agree).
* base_parameter_expressions, evaluated with SymPy, give base_parameters() and K, also after a
  parameter changes at run time.
* Slotine-Li: Y_SL(q, q̇, q̇r, q̈r) π_base = M q̈r + C q̇r + g + friction(q̇) with the compiled M, C, g,
  friction; the M and C it contains satisfy Ṁ = C + Cᵀ (so sᵀ(Ṁ − 2C)s = 0), Ṁ by central differences.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio
import pytest
import sympy as sp
from test_pinocchio import FINGERS, PANDA, UR5, _pinocchio_friction, _pinocchio_model, _urdf

import robodyn

ROOT = Path(__file__).resolve().parent.parent
Z1 = "z1_description/urdf/z1.urdf"
#: name -> (source, lock): YAML examples by name (the session's ``load``), other files by path.
SOURCES = {
    "rr": ("rr", ()), "rrr": ("rrr", ()), "puma560": ("puma560", ()),
    "tree": (ROOT / "tests" / "data" / "branching.yaml", ()),
    "mimic": (ROOT / "tests" / "urdf" / "mimic_chain.urdf", ()),
    "ur5": (UR5, ()), "panda": (PANDA, FINGERS), "z1": (Z1, ()),
}
URDF_ARMS = {"ur5", "panda", "z1"}
SLOW = {"puma560", "panda", "z1"}  # builds of about 20 s each on 2 cores
FAST = ("rr", "rrr", "tree", "mimic", "ur5")
RELATIVE = 1e-12
#: Pinocchio's per-body order [m, mx, my, mz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz] -> ours (XX XY XZ YY YZ ZZ MX MY MZ M).
FROM_PINOCCHIO = [4, 5, 7, 6, 8, 9, 1, 2, 3, 0]
NOT_INERTIAL = ("Ia", "Fv", "Fs")


def _params(names):
    return [pytest.param(name, marks=pytest.mark.slow) if name in SLOW else name for name in names]


_robots: dict = {}


@pytest.fixture(scope="module")
def get(load, cache_dir):
    """get(name) -> the robot of SOURCES[name], built once per session, parameters at their defaults."""

    def _get(name: str):
        source, locked = SOURCES[name]
        if isinstance(source, str) and not source.endswith(".urdf"):
            return load(source)
        if name not in _robots:
            path = _urdf(source) if isinstance(source, str) else source
            _robots[name] = robodyn.load(path, cache_dir=cache_dir, lock={joint: 0.0 for joint in locked})
        robot = _robots[name]
        robot.params.reset()
        return robot

    return _get


def _states(robot, count: int, seed: int, zeros: bool = True):
    """Random states (count, n): revolute q on the circle, prismatic q in [0.2, 1]; with ``zeros``
    some velocities are exactly 0 (Coulomb friction's sgn(0) = 0 on both sides)."""
    rng = np.random.default_rng(seed)
    n = robot.n
    prismatic = np.array([kind == "prismatic" for kind in robot.joint_types])
    q = np.where(prismatic, rng.uniform(0.2, 1.0, (count, n)), rng.uniform(-np.pi, np.pi, (count, n)))
    qd, qdd = rng.uniform(-2, 2, (count, n)), rng.uniform(-2, 2, (count, n))
    if zeros:
        qd[::7, 0] = 0.0
    return q, qd, qdd


def _per_state_error(value, reference) -> float:
    """Worst over a batch (N, n) of max |value - reference| / max |reference| per state."""
    scale = np.maximum(np.abs(reference).max(axis=-1), 1e-300)
    return float((np.abs(value - reference).max(axis=-1) / scale).max())


def _normalised(W):
    """W with unit columns; a column at rounding level (below 1e-10 of the largest: a structurally zero
    column computed as 1e-15, e.g. through cos(pi/2)) set to zero rather than blown up to unit norm."""
    norms = np.linalg.norm(W, axis=0)
    keep = norms > 1e-10 * norms.max()
    return np.where(keep, W / np.where(keep, norms, 1.0), 0.0)


def _rank(W):
    """(numerical rank, singular values / largest) of W with its columns normalised (a column's scale,
    kr² for a rotor or 1 for friction, does not change the rank)."""
    s = np.linalg.svd(_normalised(W), compute_uv=False)
    s = s / s[0]
    return int(np.count_nonzero(s > 1e-9)), s


def _stacked(routine, states):
    """(N n, columns): a batch of regressors stacked state after state."""
    Y = routine(*states)
    return Y.reshape(-1, Y.shape[-1])


def _residual(A, B) -> float:
    """Largest relative least-squares residual of B's columns fitted by A's columns."""
    A, B = _normalised(A), _normalised(B)
    fit = np.linalg.lstsq(A, B, rcond=None)[0]
    return float(np.abs(A @ fit - B).max())


def _inertial_count(robot) -> int:
    return sum(not name.startswith(NOT_INERTIAL) for name in robot.base_parameter_names)


# --- 1. Y pi = inverse dynamics -------------------------------------------------------------------


@pytest.mark.parametrize("name", _params(["rr", "rrr", "tree", "mimic", "ur5", "puma560", "panda"]))
def test_regressor_times_dynamic_parameters_is_inverse_dynamics(get, name):
    robot = get(name)
    dims = robot.dimensions
    assert len(robot.dynamic_parameter_names) == dims["p"] == robot.dynamic_parameters().shape[0]
    q, qd, qdd = _states(robot, 200, 1)
    tau = robot.inverse_dynamics(q, qd, qdd)
    Y = robot.regressor(q, qd, qdd)
    assert Y.shape == (200, robot.n, dims["p"])
    errors = {"batch": _per_state_error(Y @ robot.dynamic_parameters(), tau)}
    single = np.array([robot.regressor(*state) @ robot.dynamic_parameters() for state in zip(q[:20], qd[:20], qdd[:20])])
    errors["single"] = _per_state_error(single, tau[:20])
    # At other parameter values (masses, lengths, gear ratios, friction) pi and Y follow.
    other = robot.copy()
    for key in other.params:
        other.params[key] = other.params[key] * 1.15 + 0.01
    errors["other parameters"] = _per_state_error(other.regressor(q, qd, qdd) @ other.dynamic_parameters(),
                                                  other.inverse_dynamics(q, qd, qdd))
    assert max(errors.values()) <= RELATIVE, errors
    # Every group of the layout is named and the layout covers pi once, in order.
    stops = [start for _, _, start, _ in robot.dynamic_parameter_layout] + [dims["p"]]
    assert stops[0] == 0 and all(stop == start for (_, _, _, stop), start in zip(robot.dynamic_parameter_layout,
                                                                                  stops[1:]))


def test_batches_and_out_buffers(get):
    """Every new routine: one state, an (N, n) batch equal to its rows, out= for both (the buffer is
    returned, nothing else written), and a wrong out shape raises ValueError."""
    robot = get("rrr")
    n, p, b = robot.n, robot.dimensions["p"], robot.dimensions["b"]
    q, qd, qdd = _states(robot, 6, 2)
    qdr, qddr = _states(robot, 6, 3)[1:]
    calls = {"regressor": ((q, qd, qdd), p), "base_regressor": ((q, qd, qdd), b),
             "slotine_li_regressor": ((q, qd, qdr, qddr), b)}
    for method, (arguments, columns) in calls.items():
        routine = getattr(robot, method)
        batch = routine(*arguments)
        assert batch.shape == (6, n, columns)
        rows = np.array([routine(*state) for state in zip(*arguments)])
        np.testing.assert_array_equal(batch, rows)
        out = np.full((n, columns), np.nan)
        assert routine(*(a[0] for a in arguments), out=out) is out
        np.testing.assert_array_equal(out, rows[0])
        out = np.full((6, n, columns), np.nan)
        assert routine(*arguments, out=out) is out
        np.testing.assert_array_equal(out, batch)
        for shape in [(n, columns + 1), (columns, n), (n * columns,), (5, n, columns)]:
            with pytest.raises(ValueError):
                routine(*(a[0] for a in arguments), out=np.empty(shape))
        with pytest.raises(ValueError):
            routine(*arguments, out=np.empty((5, n, columns)))
    for method, shape in (("dynamic_parameters", (p,)), ("base_parameter_matrix", (b, p))):
        routine = getattr(robot, method)
        out = np.full(shape, np.nan)
        assert routine(out=out) is out
        np.testing.assert_array_equal(out, routine())
        for wrong in [shape[::-1] + (1,), (shape[0] + 1,) + shape[1:]]:
            with pytest.raises(ValueError):
                routine(out=np.empty(wrong))


# --- 2. base parameters ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", _params(["rr", "rrr", "tree", "mimic", "ur5", "puma560", "panda"]))
def test_base_regressor_and_the_grouping_map(get, name):
    robot = get(name)
    p, b = robot.dimensions["p"], robot.dimensions["b"]
    columns = list(robot.base_parameter_columns)
    K = robot.base_parameter_matrix()
    assert len(robot.base_parameter_names) == b == len(columns) == K.shape[0] and K.shape[1] == p
    np.testing.assert_array_equal(K[:, columns], np.eye(b))  # a kept column stands for itself
    np.testing.assert_allclose(robot.base_parameters(), K @ robot.dynamic_parameters(), rtol=0,
                               atol=1e-14 * np.abs(K @ robot.dynamic_parameters()).max())
    q, qd, qdd = _states(robot, 200, 4)
    tau = robot.inverse_dynamics(q, qd, qdd)
    Y, Y_base = robot.regressor(q, qd, qdd), robot.base_regressor(q, qd, qdd)
    assert Y_base.shape == (200, robot.n, b)
    # The same expressions in two routines, each with its own common subexpressions: equal to rounding.
    np.testing.assert_allclose(Y_base, Y[:, :, columns], rtol=0, atol=4e-16 * np.abs(Y).max())
    errors = {"Y_base pi_base": _per_state_error(Y_base @ robot.base_parameters(), tau),
              "Y - Y_base K": float(np.abs(Y - Y_base @ K).max() / np.abs(Y).max())}
    assert max(errors.values()) <= RELATIVE, errors


@pytest.mark.parametrize("name", _params(["rr", "rrr", "tree", "mimic", "ur5", "puma560", "panda"]))
def test_base_parameter_count_is_the_numerical_rank(get, name):
    robot = get(name)
    p, b = robot.dimensions["p"], robot.dimensions["b"]
    states = _states(robot, max(40, 4 * p // robot.n), 5, zeros=False)
    rank, s = _rank(_stacked(robot.regressor, states))
    assert rank == b, (rank, b)
    # A clear gap: the b-th singular value is far from rounding, the next one is rounding.
    assert s[b - 1] > 1e-6 and (b == p or s[b] < 1e-13), (s[b - 1], s[b] if b < p else None)
    base_rank, s_base = _rank(_stacked(robot.base_regressor, states))
    assert base_rank == b and s_base[-1] > 1e-6


def test_base_parameters_are_structural_at_random_geometry(get):
    """The 3-DOF arm at random lengths and gear ratios: the same rank, and Y = Y_base K with K at the
    new values."""
    robot = get("rrr").copy()
    rng = np.random.default_rng(6)
    for _ in range(3):
        for key in ("d1", "a2", "a3", "kr"):
            robot.params[key] = robot.params.defaults[key] * rng.uniform(0.5, 1.5)
        states = _states(robot, 40, int(rng.integers(1000)), zeros=False)
        Y = _stacked(robot.regressor, states)
        assert _rank(Y)[0] == robot.dimensions["b"]
        residual = np.abs(Y - _stacked(robot.base_regressor, states) @ robot.base_parameter_matrix()).max()
        assert residual <= RELATIVE * np.abs(Y).max()


@pytest.mark.slow
def test_puma560_has_36_inertial_base_parameters(get):
    robot = get("puma560")
    assert _inertial_count(robot) == 36
    assert robot.dimensions["b"] == 36 + 4 + 12  # rotors 3-6 (1 and 2 group into link inertias), friction


# --- 3. Pinocchio --------------------------------------------------------------------------------


def _pinocchio_pair(get, name):
    source, locked = SOURCES[name]
    robot = get(name)
    model = _pinocchio_model(_urdf(source), locked)
    assert [model.names[i] for i in range(1, model.njoints)] == list(robot.joint_names)
    return robot, model


def _pinocchio_stack(model, states):
    data = model.createData()
    return np.vstack([pinocchio.computeJointTorqueRegressor(model, data, q, qd, qdd).copy() for q, qd, qdd in
                      zip(*states)])


def _to_ours(per_body, n: int):
    """Pinocchio's per-body blocks (…, 10 n) in our order."""
    order = np.concatenate([10 * k + np.array(FROM_PINOCCHIO) for k in range(n)])
    return per_body[..., order]


@pytest.mark.parametrize("name, expected", [pytest.param("panda", 43, marks=pytest.mark.slow), ("ur5", 36),
                                            pytest.param("z1", 43, marks=pytest.mark.slow)])
def test_inertial_base_count_and_columns_match_pinocchio(get, name, expected):
    robot, model = _pinocchio_pair(get, name)
    n, p = robot.n, robot.dimensions["p"]
    assert robot.dynamic_parameter_layout[n - 1][3] == 10 * n  # links first, no rotors in a URDF
    states = _states(robot, 60, 7, zeros=False)
    W_pin = _pinocchio_stack(model, states)
    W = _stacked(robot.regressor, states)
    pin_rank, s = _rank(W_pin)
    assert pin_rank == _inertial_count(robot) == expected, (pin_rank, _inertial_count(robot))
    assert s[pin_rank - 1] > 1e-6 and s[pin_rank] < 1e-13

    # Same parameter values and, column by column, the same regressor once Pinocchio's order is mapped.
    pi_pin = np.concatenate([model.inertias[i].toDynamicParameters() for i in range(1, model.njoints)])
    pi = robot.dynamic_parameters()
    np.testing.assert_allclose(pi[:10 * n], _to_ours(pi_pin, n), rtol=0, atol=1e-14 * np.abs(pi_pin).max())
    np.testing.assert_allclose(pi[10 * n:], np.concatenate([model.damping, model.friction]), rtol=0, atol=1e-15)
    assert np.abs(W[:, :10 * n] - _to_ours(W_pin, n)).max() <= 1e-12 * np.abs(W_pin).max()

    # Pinocchio's regressor times its own parameters, plus the URDF's friction, is our inverse dynamics.
    q, qd, qdd = states
    tau_pin = (W_pin @ pi_pin).reshape(-1, n) + _pinocchio_friction(model, qd)
    assert _per_state_error(tau_pin, robot.inverse_dynamics(q, qd, qdd)) <= RELATIVE

    # Cross-library span: Pinocchio's inertial columns with friction columns added span ours, and back.
    rows = np.arange(len(states[0]) * n)
    friction = np.zeros((len(rows), 2 * n))
    friction[rows, rows % n] = qd.ravel()
    friction[rows, n + rows % n] = np.sign(qd.ravel())
    W_pin_full = np.hstack([W_pin, friction])
    spans = {"ours by Pinocchio's": _residual(W_pin_full, W), "Pinocchio's by ours": _residual(W, W_pin_full)}
    assert max(spans.values()) <= 1e-9, spans
    assert _rank(np.hstack([W, W_pin_full]))[0] == robot.dimensions["b"] == _rank(W_pin_full)[0]
    assert W.shape[1] == p


# --- 4. the notes' RR arm, by hand -----------------------------------------------------------------


def rr_closed_form_regressor(q, qd, qdd, a1: float, g0: float) -> np.ndarray:
    """(N, 2, 10) regressor of the planar RR arm (gravity -g0 along y) from its Lagrangian, written out.

    Parameters θ: θ1 = J1 + m2 a1² (J1: link 1's inertia about joint 1), θ2 = m1 c1x + m2 a1, θ3 = m1 c1y
    (link 1's first moment in a frame at joint 1, x along the link), θ4 = J2 (about joint 2), θ5 = m2 c2x,
    θ6 = m2 c2y (in a frame at joint 2, x along link 2), then Fv1, Fv2, Fs1, Fs2. From
    T = ½ θ1 q̇1² + ½ θ4 (q̇1 + q̇2)² + a1 q̇1 (q̇1 + q̇2)(θ5 cos q2 − θ6 sin q2),
    P = g0 [θ2 sin q1 + θ3 cos q1 + θ5 sin(q1 + q2) + θ6 cos(q1 + q2)]."""
    q1, q2 = q[:, 0], q[:, 1]
    c1, s1, c2, s2, c12, s12 = np.cos(q1), np.sin(q1), np.cos(q2), np.sin(q2), np.cos(q1 + q2), np.sin(q1 + q2)
    (v1, v2), (a1dd, a2dd) = qd.T, qdd.T
    Y = np.zeros((len(q1), 2, 10))
    Y[:, 0, 0] = a1dd
    Y[:, 0, 1] = g0 * c1
    Y[:, 0, 2] = -g0 * s1
    Y[:, 0, 3] = Y[:, 1, 3] = a1dd + a2dd
    Y[:, 0, 4] = a1 * c2 * (2 * a1dd + a2dd) - a1 * s2 * (2 * v1 * v2 + v2**2) + g0 * c12
    Y[:, 0, 5] = -a1 * s2 * (2 * a1dd + a2dd) - a1 * c2 * (2 * v1 * v2 + v2**2) - g0 * s12
    Y[:, 1, 4] = a1 * c2 * a1dd + a1 * s2 * v1**2 + g0 * c12
    Y[:, 1, 5] = -a1 * s2 * a1dd + a1 * c2 * v1**2 - g0 * s12
    for j in range(2):
        Y[:, j, 6 + j] = qd[:, j]
        Y[:, j, 8 + j] = np.sign(qd[:, j])
    return Y


def rr_closed_form_parameters(params) -> np.ndarray:
    """θ of ``rr_closed_form_regressor`` from the description's values (centres of mass on the links,
    ac_i from joint i; I_i about the centre)."""
    m1, m2, a1, ac1, ac2, I1, I2, D = (params[k] for k in ("m1", "m2", "a1", "ac1", "ac2", "I1", "I2", "D"))
    return np.array([I1 + m1 * ac1**2 + m2 * a1**2, m1 * ac1 + m2 * a1, 0.0, I2 + m2 * ac2**2, m2 * ac2, 0.0,
                     D, D, 0.0, 0.0])


def rr_base_map(a1: float, a2: float) -> np.ndarray:
    """A (10 x 10) with robodyn's base parameters = A θ. Robodyn's link frames are standard DH (at the far
    end of each link), so about them ZZ1R = θ1 − 2 a1 θ2, MX1R = θ2, MY1 = θ3, ZZ2R = θ4 − 2 a2 θ5,
    MX2R = θ5, MY2 = θ6 (shifting inertia and first moments by a_i along x); friction unchanged."""
    A = np.eye(10)
    A[0, 1], A[3, 4] = -2 * a1, -2 * a2
    return A


RR_NAMES = ("ZZ1R", "MX1R", "MY1", "ZZ2R", "MX2R", "MY2", "Fv1", "Fv2", "Fs1", "Fs2")


def _rr_check(robot):
    """robodyn's base parameters and base regressor against the closed form at the robot's values."""
    params = robot.params
    theta = rr_closed_form_parameters(params)
    A = rr_base_map(params["a1"], params["a2"])
    assert robot.base_parameter_names == RR_NAMES
    np.testing.assert_allclose(robot.base_parameters(), A @ theta, rtol=1e-14, atol=1e-13)
    q, qd, qdd = _states(robot, 100, 8)
    Y_base = robot.base_regressor(q, qd, qdd)
    Y_hand = rr_closed_form_regressor(q, qd, qdd, params["a1"], params["g0"])
    # τ = Y_base A θ for every θ, so Y_hand = Y_base A: every column, not just the span.
    assert np.abs(Y_base @ A - Y_hand).max() <= RELATIVE * np.abs(Y_hand).max()
    assert _per_state_error(Y_hand @ theta, robot.inverse_dynamics(q, qd, qdd)) <= RELATIVE
    spans = (_residual(Y_hand.reshape(-1, 10), Y_base.reshape(-1, 10)),
             _residual(Y_base.reshape(-1, 10), Y_hand.reshape(-1, 10)))
    assert max(spans) <= 1e-10, spans


def test_rr_base_parameters_are_the_notes_combinations(get):
    robot = get("rr")
    names = robot.base_parameter_names
    assert _inertial_count(robot) == 6 and len(names) == 10
    expression = sp.sympify(robot.base_parameter_expressions["ZZ1R"],
                            locals={k: sp.Symbol(k) for k in ("ZZ1", "M1", "M2", "a1")})
    assert sp.simplify(expression.coeff(sp.Symbol("M2")) ** 2 - sp.Symbol("a1") ** 4) == 0  # ± a1² M2
    assert expression.coeff(sp.Symbol("ZZ1")) == 1
    _rr_check(robot)
    other = robot.copy()
    other.params["a1"] = 0.7  # geometry at run time: K, the base parameters and Y_base follow
    assert not np.allclose(other.base_parameter_matrix(), robot.base_parameter_matrix())
    _rr_check(other)
    other.params.update({"a2": 1.3, "m2": 20.0, "ac1": 0.4, "g0": 3.7, "D": 0.5})
    _rr_check(other)


@pytest.mark.parametrize("name", _params(["rr", "rrr", "tree", "mimic", "ur5", "puma560"]))
def test_base_parameter_expressions_evaluate_to_base_parameters(get, name):
    robot = get(name).copy()
    dynamic = robot.dynamic_parameter_names
    assert not set(dynamic) & set(robot.params), "a description parameter shadows a dynamic parameter"
    symbols = {key: sp.Symbol(key) for key in (*dynamic, *robot.params)}
    expressions = robot.base_parameter_expressions
    assert list(expressions) == list(robot.base_parameter_names)
    parsed = [sp.sympify(text, locals=symbols) for text in expressions.values()]
    assert all(e.free_symbols <= set(symbols.values()) for e in parsed)
    K_symbolic = sp.Matrix([[sp.diff(e, symbols[k]) for k in dynamic] for e in parsed])
    assert all(sp.diff(e, symbols[k], 2) == 0 for e in parsed for k in dynamic)  # linear in pi
    for step in range(2):
        if step:  # parameters changed at run time (geometry included): the expressions still hold
            for key in robot.params:
                robot.params[key] = robot.params[key] * 0.85 + 0.02
        values = {symbols[k]: robot.params[k] for k in robot.params}
        K = np.array(K_symbolic.xreplace(values).evalf(), dtype=float)
        # The text gives a coefficient that is not a short fraction with 12 significant digits
        # (1.33333333333*YZ3 in the mimic tree): 1e-11, not 1e-12.
        assert np.abs(K - robot.base_parameter_matrix()).max() <= 1e-11 * max(np.abs(K).max(), 1.0)
        values |= {symbols[k]: v for k, v in zip(dynamic, robot.dynamic_parameters())}
        evaluated = np.array([float(e.xreplace(values)) for e in parsed])
        base = robot.base_parameters()
        assert np.abs(evaluated - base).max() <= 1e-11 * max(np.abs(base).max(), 1.0), (evaluated, base)


# --- 5. Slotine-Li ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", _params(["rr", "rrr", "tree", "mimic", "puma560"]))
def test_slotine_li_regressor_is_the_adaptive_model(get, name):
    robot = get(name)
    q, qd, _ = _states(robot, 50, 9)
    qdr, qddr = _states(robot, 50, 10)[1:]
    theta = robot.base_parameters()
    Y = robot.slotine_li_regressor(q, qd, qdr, qddr)
    expected = np.array([robot.M(*s[:1]) @ s[3] + robot.C(s[0], s[1]) @ s[2] + robot.g(s[0]) + robot.friction(s[1])
                         for s in zip(q, qd, qdr, qddr)])
    assert _per_state_error(Y @ theta, expected) <= RELATIVE
    # With the reference equal to the motion it is the base regressor.
    qdd = _states(robot, 50, 11)[2]
    scale = np.abs(robot.base_regressor(q, qd, qdd)).max()
    assert np.abs(robot.slotine_li_regressor(q, qd, qd, qdd) - robot.base_regressor(q, qd, qdd)).max() <= 1e-13 * scale


@pytest.mark.parametrize("name", ["rr", "rrr", "tree", "mimic"])
def test_slotine_li_form_has_the_skew_property(get, name):
    """M and C read off the Slotine-Li regressor (it is affine in q̇r and q̈r): M equals the compiled M,
    and Ṁ = C + Cᵀ with Ṁ by central differences of M along q̇, hence sᵀ(Ṁ − 2C)s = 0."""
    robot = get(name)
    n, theta = robot.n, robot.base_parameters()
    zero, eye = np.zeros(n), np.eye(n)
    for q, qd, s in zip(*_states(robot, 10, 12)):
        bias = robot.slotine_li_regressor(q, qd, zero, zero) @ theta
        M = np.column_stack([robot.slotine_li_regressor(q, qd, zero, e) @ theta - bias for e in eye])
        C = np.column_stack([robot.slotine_li_regressor(q, qd, e, zero) @ theta - bias for e in eye])
        np.testing.assert_allclose(M, robot.M(q), rtol=0, atol=1e-12 * np.abs(M).max())
        np.testing.assert_allclose(C, robot.C(q, qd), rtol=0, atol=1e-12 * np.abs(M).max())
        h = 1e-5
        M_dot = (robot.M(q + h * qd) - robot.M(q - h * qd)) / (2 * h)
        scale = np.abs(M_dot).max() + 1e-300
        assert np.abs(M_dot - C - C.T).max() <= 1e-7 * scale
        assert abs(s @ (M_dot - 2 * C) @ s) <= 1e-7 * scale * (s @ s)


def test_the_regressor_derived_in_a_forked_process_is_the_one_derived_here(monkeypatch):
    """Large robots derive the identification pass in a forked child beside the model (codegen.model,
    PARALLEL_REGRESSOR_BODIES): what comes back is what this process would have derived, symbol for symbol and
    bit for bit in K. Forced here on the Puma 560 (the threshold lowered; the test workers' own threads, which the
    guard would see, do not touch what the child runs); and a child whose result is not wanted is stopped."""
    import os
    import signal
    import threading

    from codegen.description import parse_path
    from codegen.model import _RegressorBeside
    from codegen.model.regressor import derive_regressor

    description = parse_path(Path(__file__).resolve().parent.parent / "robots" / "puma560.yaml")
    monkeypatch.setattr("codegen.model.PARALLEL_REGRESSOR_BODIES", 1)
    monkeypatch.setattr(threading, "enumerate", lambda: [threading.current_thread()])
    beside = _RegressorBeside.start(description, None)
    if beside is None:
        pytest.skip("no fork or a single core here")
    try:
        forked = beside.future.result()  # the child's own (result() would derive it here if the child failed)
    finally:
        beside.close()
    local = derive_regressor(description)
    assert forked.names == local.names and forked.layout == local.layout
    assert forked.definitions == local.definitions
    assert forked.Y == local.Y and forked.slotine_li == local.slotine_li and forked.values == local.values
    assert forked.base.names == local.base.names and forked.base.independent == local.base.independent
    assert forked.base.matrix == local.base.matrix
    # A model that fails (or is interrupted) stops the child rather than waiting for it.
    beside = _RegressorBeside.start(description, None)
    (process,) = beside.processes
    beside.close()
    assert process.exitcode == -signal.SIGTERM
    # A child that does not answer in time is stopped, and the pass derived here.
    monkeypatch.setattr("codegen.model.CHILD_PATIENCE", (0.0, 0.0))
    beside = _RegressorBeside.start(description, None)
    (process,) = beside.processes
    try:
        late = beside.result()
    finally:
        beside.close()
    assert process.exitcode == -signal.SIGTERM
    assert late.Y == local.Y and late.base.matrix == local.base.matrix
    # A child that gives no result (here: none can be forked) leaves the pass to this process.
    monkeypatch.setattr(os, "fork", lambda: (_ for _ in ()).throw(OSError(12, "Cannot allocate memory")))
    assert _RegressorBeside.start(description, None) is None


def test_routines_defined_while_the_pass_is_derived_beside_are_those_defined_after(monkeypatch):
    """derive_model hands the model without its regressor to ``meanwhile`` while the identification pass is derived
    beside it; the routines define_early defines from it are those define_routines defines from the final model
    (forced on the Puma 560, as above). Without a child there is no wait to fill, and no call."""
    import threading

    from codegen.description import parse_path
    from codegen.model import derive_model
    from codegen.model.routines import define_early, define_routines
    from robodyn.options import BuildOptions

    description = parse_path(Path(__file__).resolve().parent.parent / "robots" / "puma560.yaml")
    options = BuildOptions()
    seen = []
    with monkeypatch.context() as patch:
        patch.setattr("codegen.model.PARALLEL_REGRESSOR_BODIES", 7)
        model = derive_model(description, options, meanwhile=seen.append)
    assert seen == []  # 6 bodies, fewer than the threshold: no child
    monkeypatch.setattr("codegen.model.PARALLEL_REGRESSOR_BODIES", 1)
    monkeypatch.setattr(threading, "enumerate", lambda: [threading.current_thread()])
    import multiprocessing
    import os

    if "fork" not in multiprocessing.get_all_start_methods() or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("no fork or a single core here")
    model = derive_model(description, options, meanwhile=seen.append)
    (partial,) = seen
    assert partial.regressor is None and model.regressor is not None
    early = define_early(partial, options)
    assert early and not {"regressor", "base_regressor", "dynamic_parameters"} & set(early)
    alone = define_routines(model, options)
    from codegen.model import routines

    def defined_already(model, options):
        raise AssertionError("defined twice")

    with monkeypatch.context() as patch:
        patch.setitem(routines.DEFINITIONS, "inverse_dynamics_derivatives", defined_already)
        together = define_routines(model, options, early=early)
    assert [d.routine.name for d in together.definitions] == [d.routine.name for d in alone.definitions]
    assert together.definitions == alone.definitions
    # A definition registered or replaced after import may read the regressor: it is defined late, with it.
    built_in = routines.DEFINITIONS["friction"]

    def friction_reading_the_regressor(model, options):
        assert model.regressor is not None
        return built_in(model, options)

    monkeypatch.setitem(routines.DEFINITIONS, "friction", friction_reading_the_regressor)
    early = define_early(partial, options)
    assert "friction" not in early and "mass_matrix" in early
    assert define_routines(model, options, early=early).definitions == alone.definitions


def test_rows_for_the_refined_solves_make_well_conditioned_square_systems(monkeypatch):
    """The rows of _RefinedSolver's square systems: LU's pivot rows, and pivoted QR's when those make an
    ill-conditioned system (forced here by an impossible threshold); either way a full-rank choice that solves a
    consistent tall system exactly."""
    import scipy.linalg

    from codegen.model import regressor

    rng = np.random.default_rng(5)
    A = rng.standard_normal((300, 12)) * np.exp(rng.uniform(-6, 6, 12))  # columns of very different scales
    A[rng.choice(300, 150, replace=False)] = 0.0  # equations where no column appears
    A[7] = A[3] * (1 + 1e-15)  # a near copy: never both
    with monkeypatch.context() as patch:
        patch.setattr(scipy.linalg, "qr", None)  # LU's rows do
        lu_rows, factors = regressor._chosen_rows(A)
    monkeypatch.setattr(regressor, "_ROW_CHOICE_RCOND", 2.0)  # no system passes: pivoted QR's rows
    qr_rows, none = regressor._chosen_rows(A)
    assert none is None
    _, pivots = scipy.linalg.qr(A.T, mode="r", pivoting=True)
    assert list(qr_rows) == sorted(pivots[:12])
    x = rng.standard_normal(12)
    for rows in (lu_rows, qr_rows):
        assert len(set(rows)) == 12 and not {3, 7} <= set(rows)
        assert np.linalg.cond(A[rows]) < 1e3 * np.linalg.cond(A)
        np.testing.assert_allclose(np.linalg.solve(A[rows], A[rows] @ x), x, rtol=1e-8)
    # LU's factors come with its rows: those of their square system.
    np.testing.assert_allclose(scipy.linalg.lu_solve(factors, A[lu_rows] @ x), x, rtol=1e-8)
