"""The recursive route against the Euler-Lagrange route, on every example small enough for both."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from codegen import derive
from codegen.model import resolve_method
from codegen.model.program import needed_definitions
from conftest import LAGRANGE_EXAMPLES, ROBOTS


QUANTITIES = {
    "M": lambda m: m.M, "C": lambda m: m.C, "g": lambda m: m.g,
    "inverse_dynamics": lambda m: m.inverse_dynamics(with_wrench=True),
    "nonlinear_effects": lambda m: m.nonlinear_effects(),
    "kinetic_energy": lambda m: m.kinetic_energy, "potential_energy": lambda m: m.potential_energy,
    "tool_pose": lambda m: m.tool_pose, "tool_jacobian": lambda m: m.tool_jacobian,
}


TREE = ROBOTS.parent / "tests" / "data" / "branching.yaml"


@pytest.mark.parametrize("name", [*LAGRANGE_EXAMPLES, "branching"])
def test_routes_agree(name, derived):
    path = TREE if name == "branching" else ROBOTS / f"{name}.yaml"
    lagrange = derive(path, method="lagrange") if name == "branching" else derived(name)
    recursive = derive(path, method="recursive")
    assert recursive.method == "recursive" and recursive.definitions
    rng = np.random.default_rng(21)
    args_l = (lagrange.q, lagrange.qd, lagrange.qdd, lagrange.wrench)
    for quantity, get in QUANTITIES.items():
        expr_l, expr_r = get(lagrange), get(recursive)
        # The wrench symbols are shared by both models; give them numbers through q-independent args.
        f_l = sp.lambdify((*args_l, lagrange.parameters), expr_l, "numpy")
        prelude = needed_definitions(recursive.definitions, list(expr_r) if isinstance(expr_r, sp.MatrixBase)
                                     else [expr_r])
        f_r = sp.lambdify((recursive.q, recursive.qd, recursive.qdd, recursive.wrench, recursive.parameters),
                          expr_r, "numpy", cse=(lambda exprs, prelude=prelude: (prelude, exprs)))
        params = [p.default for p in lagrange.description.parameters]
        for _ in range(10):
            q, qd, qdd = rng.uniform(-2, 2, (3, lagrange.n))
            h = rng.normal(size=6)
            a = np.array(f_l(q, qd, qdd, h, params), dtype=float)
            b = np.array(f_r(q, qd, qdd, h, params), dtype=float)
            scale = max(np.abs(a).max(), 1e-300)
            assert np.abs(a - b).max() <= 1e-12 * scale, (quantity, a, b)


def test_auto_method_choice():
    assert resolve_method("auto", 3) == "lagrange"
    assert resolve_method("auto", 4) == "recursive"
    with pytest.raises(ValueError):
        resolve_method("newton", 2)


def test_tree_builds_and_is_sparse(tmp_path):
    """A branching robot compiles, passes its self-check, and M is zero between branches."""
    import robodyn

    robot = robodyn.load(TREE, cache_dir=tmp_path, method="recursive")
    assert robot.selfcheck["passed"]
    q = np.random.default_rng(3).uniform(-1, 1, robot.n)
    M = robot.M(q)
    # j3 hangs from j1, j4 from j2, j5 from the base: j3-j4, j3-j5, j4-j5, j2-j5 are unrelated.
    for i, j in ((2, 3), (2, 4), (3, 4), (1, 4), (1, 2), (0, 4)):
        assert M[i, j] == 0.0 and M[j, i] == 0.0
    qd, tau = np.ones(robot.n), np.arange(robot.n, dtype=float)
    np.testing.assert_allclose(robot.forward_dynamics(q, qd, tau),
                               np.linalg.solve(M, tau - robot.nonlinear_effects(q, qd)), rtol=1e-10, atol=1e-12)


def test_articulated_body_forward_dynamics_equals_ltdl(tmp_path):
    """The articulated-body variant of forward dynamics gives the L^T D L solve's numbers."""
    import robodyn

    path = ROBOTS.parent / "tests" / "urdf" / "three_joints.urdf"
    ltdl = robodyn.load(path, cache_dir=tmp_path, method="recursive")
    aba = robodyn.load(path, cache_dir=tmp_path, method="recursive", forward="aba")
    assert aba.selfcheck["passed"] and aba.manifest["key"] != ltdl.manifest["key"]
    # Two different algorithms were really generated (not the same L^T D L under another cache key).
    sources = [(Path(r.extension.__file__).parent / f"{r.name}_forward_dynamics.c").read_text() for r in (aba, ltdl)]
    assert "articulated-body" in sources[0] and "articulated-body" not in sources[1]
    assert "L^T D L" in sources[1]
    rng = np.random.default_rng(4)
    for _ in range(50):
        q, qd, tau, h = rng.uniform(-2, 2, ltdl.n), rng.normal(size=ltdl.n), rng.normal(size=ltdl.n), rng.normal(size=6)
        np.testing.assert_allclose(aba.forward_dynamics(q, qd, tau, h), ltdl.forward_dynamics(q, qd, tau, h),
                                   rtol=1e-10, atol=1e-12)
    from robodyn.errors import BuildError

    with pytest.raises(BuildError, match="articulated-body.*motor rotors"):
        robodyn.load(ROBOTS / "rrr.yaml", cache_dir=tmp_path, method="recursive", forward="aba")


def test_auto_recurses_for_generic_fixed_rotations():
    """A 3-joint URDF with generic rpy angles (cos(3/10) in every closed form) takes the recursive
    route under "auto": simplifying its Lagrange M took minutes. Exact angles keep the closed forms."""
    from pathlib import Path

    from codegen.description import parse_path
    from codegen.model import derive_model, exact_rotations

    here = Path(__file__).parent
    split = parse_path(here / "urdf" / "split_link.urdf")
    assert split.n == 3 and not exact_rotations(split)
    assert derive_model(split).method == "recursive"
    assert exact_rotations(parse_path(here.parent / "robots" / "rrr.yaml"))


def test_coriolis_blocks_of_a_body_and_their_move_to_the_parent():
    """The Coriolis matrix's per-body block Q (formed without the momentum's angular part) is the upper-left block of
    Echeandia & Wensing's B = ½[(v×*) I + (I v)×̄* − I (v×)], B's right half is zero and its lower-left block is −k×;
    the composite rule Q' = R Q Rᵀ − (R k) pᵀ + (p · R k) 1 is the upper-left block of Xᵀ B X, X the motion transform
    from the parent's coordinates to the child's. Numbers, against B and X written out here with numpy."""
    from codegen.model.recursive import body_k, body_q, moved_q

    rng = np.random.default_rng(7)
    for _ in range(5):
        a = rng.normal(size=(3, 3))
        mass, com = rng.uniform(0.5, 3.0), rng.normal(size=3)
        inertia = np.zeros((6, 6))  # about the frame's origin: [[I_c + m c× c×ᵀ, m c×], [m c×ᵀ, m 1]]
        inertia[:3, :3] = a @ a.T + 0.1 * np.eye(3) + mass * _skew(com) @ _skew(com).T
        inertia[:3, 3:] = mass * _skew(com)
        inertia[3:, :3] = mass * _skew(com).T
        inertia[3:, 3:] = mass * np.eye(3)
        v = rng.normal(size=6)
        b = _b_matrix(inertia, v)
        k = (inertia @ v)[3:]
        q = np.array(body_q(sp.Matrix(inertia), sp.Matrix(v)), float)
        assert np.allclose(np.array(body_k(sp.Matrix(inertia), sp.Matrix(v)), float).ravel(), k, atol=1e-12)
        assert np.allclose(q, b[:3, :3], atol=1e-12)
        assert np.allclose(b[3:, :3], -_skew(k), atol=1e-12)
        assert np.allclose(b[:, 3:], 0, atol=1e-12)
        R, p = _rotation(rng), rng.normal(size=3)
        X = np.zeros((6, 6))  # parent -> child: [[Rᵀ, 0], [−Rᵀ p×, Rᵀ]]
        X[:3, :3] = X[3:, 3:] = R.T
        X[3:, :3] = -R.T @ _skew(p)
        moved = X.T @ b @ X
        q_parent = moved_q(sp.Matrix(R), sp.Matrix(p), sp.Matrix(q), sp.Matrix(R @ k))
        assert np.allclose(np.array(q_parent, float), moved[:3, :3], atol=1e-12)
        assert np.allclose(moved[3:, :3], -_skew(R @ k), atol=1e-12)
        assert np.allclose(moved[:, 3:], 0, atol=1e-12)


def _b_matrix(inertia: np.ndarray, v: np.ndarray) -> np.ndarray:
    """B = ½[(v×*) I + (I v)×̄* − I (v×)] written out: v×* = −(v×)ᵀ, and (f ×̄*) v = v ×* f."""
    def motion_cross(x):
        w, u = x[:3], x[3:]
        out = np.zeros((6, 6))
        out[:3, :3] = out[3:, 3:] = _skew(w)
        out[3:, :3] = _skew(u)
        return out

    def force_bar_cross(f):
        n, k = f[:3], f[3:]
        out = np.zeros((6, 6))
        out[:3, :3] = -_skew(n)
        out[:3, 3:] = out[3:, :3] = -_skew(k)
        return out

    cross = motion_cross(v)
    return (-cross.T @ inertia + force_bar_cross(inertia @ v) - inertia @ cross) / 2


def _skew(x) -> np.ndarray:
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])


def _rotation(rng) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    return q * np.sign(np.diag(r)) * np.linalg.det(q * np.sign(np.diag(r)))
