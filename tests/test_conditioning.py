"""Classes the URDF sweep and an adversarial review found, pinned on small robots that build in
seconds: exporters' rounding noise in axes, wide spreads of mass (ill-conditioned M), parameter
expressions the Lagrange route's simplification did not expect, and oversized attributes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sympy as sp

import robodyn
from codegen.description.urdf import parse_urdf_text

ROOT = Path(__file__).resolve().parent.parent

# A joint axis as exporters write it: 0 -1 6.12323e-17 (cos(pi/2) in double precision), as in iCub.
NOISY_AXIS = """<robot name="noisy_axis"><link name="base"/>
  <link name="l1"><inertial><mass value="1"/><origin xyz="0.1 0 0"/>
    <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="l2"><inertial><mass value="1"/><origin xyz="0.1 0 0"/>
    <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
  <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0.2 0 0"/>
    <axis xyz="0 -1 6.12323e-17"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
</robot>
"""

# The RR arm with a second link a million times lighter than the first: cond(M) ~ 1e7.
ILL_CONDITIONED = """name: light_tip
gravity: [0, -9.81, 0]
joints:
  - {name: shoulder, type: revolute, dh: {a: 1.0}, link: {mass: 50.0, com: [-0.5, 0, 0], inertia: {zz: 10.0}}}
  - {name: elbow, type: revolute, dh: {a: 1.0}, link: {mass: 5.0e-6, com: [-0.5, 0, 0], inertia: {zz: 1.0e-6}}}
"""


def test_noisy_axis_is_a_unit_vector_of_plain_numbers():
    """Normalising 0 -1 6.12323e-17 exactly would leave sqrt of a 45-digit integer in the model,
    which NumPy cannot evaluate (the self-check failed on it) and no C double holds exactly."""
    axis = parse_urdf_text(NOISY_AXIS, "noisy_axis.urdf").joints[1].axis
    assert not axis.atoms(sp.Pow), axis
    assert abs(float(sum(c**2 for c in axis)) - 1.0) < 1e-15
    assert float(axis[1]) == -1.0 and abs(float(axis[2]) - 6.12323e-17) < 1e-30


def test_noisy_axis_builds_and_passes_its_selfcheck(tmp_path):
    path = tmp_path / "noisy_axis.urdf"
    path.write_text(NOISY_AXIS)
    robot = robodyn.load(path, cache_dir=tmp_path / "cache", verbose=False)
    assert robot.selfcheck["passed"]
    q = np.array([0.3, -0.7])
    assert np.allclose(robot.M(q), robot.M(q).T) and np.linalg.eigvalsh(robot.M(q))[0] > 0


def test_selfcheck_tolerates_the_rounding_of_an_ill_conditioned_solve(tmp_path):
    """Forward dynamics solves M q̈ = τ − bias: the compiled LᵀDL and NumPy's LU differ by about
    cond(M) ulps, so the comparison's tolerance scales with cond(M) (human.urdf, cond ~ 5e3, failed
    at a fixed 1e-12). The identity ID(FD(τ)) = τ, judged in torques, stays at its fixed tolerance."""
    path = tmp_path / "light_tip.yaml"
    path.write_text(ILL_CONDITIONED)
    robot = robodyn.load(path, cache_dir=tmp_path / "cache", verbose=False)
    assert robot.selfcheck["passed"]
    checks = {c["name"]: c for c in robot.selfcheck["checks"]}
    forward = checks["compiled_vs_symbolic_forward_dynamics"]
    assert forward["tolerance"] > 1e-9  # 1e-12 times a condition number of millions
    assert checks["compiled_vs_symbolic_mass_matrix"]["tolerance"] == pytest.approx(1e-12)
    assert checks["inverse_forward"]["tolerance"] == pytest.approx(1e-9)
    assert np.linalg.cond(robot.M(np.array([0.0, 0.5]))) > 1e5


def test_skew_check_still_sees_a_wrong_coriolis_matrix(load):
    """The rounding floor of the finite-difference skew check does not hide a C that is off by 0.1 %."""
    from types import SimpleNamespace

    from codegen.extension.selfcheck import _identities

    rr = load("rr")

    class WrongC:
        def __getattr__(self, name):
            return getattr(rr, name)

        def C(self, q, qd):
            C = rr.C(q, qd)
            return C + 1e-3 * np.max(np.abs(C)) * np.array([[0.0, 1.0], [0.0, 0.0]])

    rng = np.random.default_rng(3)
    values = {"q": rng.uniform(-3, 3, (8, 2)), "qd": rng.uniform(-2, 2, (8, 2)), "tau": rng.uniform(-1, 1, (8, 2)),
              "h": rng.uniform(-1, 1, (8, 6))}
    routines = SimpleNamespace(definitions=[SimpleNamespace(routine=SimpleNamespace(name=name))
                                            for name in ("mass_matrix", "coriolis_matrix")])
    checks = {c.name: c for c in _identities(rr, routines, values)}
    assert checks["skew"].passed
    checks = {c.name: c for c in _identities(WrongC(), routines, values)}
    assert not checks["skew"].passed, checks["skew"]


def test_parameter_expressions_outside_polynomials_build_by_the_lagrange_route(tmp_path):
    """The Lagrange route simplifies M coefficient by coefficient of the parameters' monomials; a
    mass sqrt(m1), an offset sqrt(a1) or a gravity g0/(a1 + a2) are no polynomials (PolynomialError,
    exit 3, before): they stay expanded, and the robot builds and passes its self-check."""
    text = (ROOT / "robots" / "rr.yaml").read_text()
    text = text.replace("link: {mass: m1,", "link: {mass: sqrt(m1),").replace("dh: {a: a2}", "dh: {a: a2, theta: sqrt(a1)}")
    text = text.replace("gravity: [0, -g0, 0]", "gravity: [0, -g0/(a1+a2), 0]").replace("m2: 50.0", "m2: 5e1")
    path = tmp_path / "rr_roots.yaml"
    path.write_text(text)
    robot = robodyn.load(path, cache_dir=tmp_path / "cache", verbose=False, method="lagrange")
    assert robot.selfcheck["passed"]
    assert robot.params["m2"] == 50.0  # 5e1: a YAML 1.1 string, read as the number it spells


def test_huge_attribute_is_not_echoed_whole():
    from codegen.errors import DescriptionError

    text = ('<robot name="a"><link name="b"/><link name="c"/><joint name="j" type="revolute"><parent link="b"/>'
            '<child link="c"/><axis xyz="' + "0 " * 100000 + '"/></joint></robot>')
    with pytest.raises(DescriptionError) as caught:
        parse_urdf_text(text, "huge_attribute.urdf")
    assert len(str(caught.value)) < 2000 and "more characters" in str(caught.value)


def test_a_model_double_precision_cannot_verify_is_refused_with_a_hint(tmp_path):
    """Found by the description fuzzer (seed 7, case 47): the PR arm with d = 0.4e99 m beside lengths
    of 0.1 m. Such a length is now refused where it is written (beyond MAX_QUANTITY, 1e15); one within that
    bound, 0.4e14 m, still cannot be verified in doubles: the build refuses it (exit 3), publishes nothing,
    and says what to look at."""
    from codegen.errors import DescriptionError, SelfCheckError

    for value, error, match in (("0.4e99", DescriptionError, r"pr_huge\.yaml:\d+: .* is beyond 1e\+15"),
                                ("0.4e14", SelfCheckError, "check its units")):
        text = (ROOT / "robots" / "pr.yaml").read_text().replace("  d: 0.4\n", f"  d: {value}\n")
        assert value in text
        path = tmp_path / "pr_huge.yaml"
        path.write_text(text)
        with pytest.raises(error, match=match):
            robodyn.load(path, cache_dir=tmp_path / "cache", verbose=False)
        assert not [p for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".lock-")]


def test_a_robot_that_moves_no_mass_is_refused_with_a_hint(tmp_path):
    """Found by the adversarial review: the RR arm with every mass and inertia 0 parsed, compiled and
    ended in a runtime ValueError from forward dynamics (no file, exit 1). The description now refuses it
    at the first link that nothing massive hangs on; a singular M the description cannot see (the elbow's mass
    a point on its own axis, no inertia) is recorded by the self-check as failed checks, and the build says
    what to look at (exit 3, nothing published)."""
    from codegen.errors import DescriptionError, SelfCheckError

    text = (ROOT / "robots" / "rr.yaml").read_text()
    massless = text
    for name, value in (("m1", "50.0"), ("m2", "50.0"), ("I1", "10.0"), ("I2", "10.0")):
        massless = massless.replace(f"  {name}: {value}", f"  {name}: 0.0")
    path = tmp_path / "rr_massless.yaml"
    path.write_text(massless)
    with pytest.raises(DescriptionError, match=r"rr_massless\.yaml:\d+: joints\[0\]\.link: joint 'shoulder' moves "
                                               "nothing massive"):
        robodyn.load(path, cache_dir=tmp_path / "cache", verbose=False)
    on_axis = text.replace("  ac2: 0.5", "  ac2: 0.0").replace("  I2: 10.0", "  I2: 0.0")
    assert on_axis.count("0.0") > text.count("0.0")
    path.write_text(on_axis)
    with pytest.raises(SelfCheckError, match="moves no mass") as caught:
        robodyn.load(path, cache_dir=tmp_path / "cache", verbose=False)
    assert "positive_definite" in str(caught.value)
    assert not [p for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".lock-")]
