"""Description stage: the three kinematic conventions agree, expressions parse as documented."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import sympy as sp

from codegen.description.expressions import ExpressionError, parse_expression
from codegen.description.parse import parse_text
from codegen.model.lagrange import derive_lagrange
from conftest import ROBOTS, ROOT

RR_HEAD = """
name: rr
parameters: {m1: 50.0, m2: 50.0, a1: 1.0, a2: 1.0, ac1: 0.5, ac2: 0.5, I1: 10.0, I2: 10.0, g0: 9.81}
gravity: [0, -g0, 0]
joints:
"""

RR_MODIFIED_DH = RR_HEAD + """
  - name: shoulder
    type: revolute
    mdh: {}
    link: {mass: m1, com: [ac1, 0, 0], inertia: {zz: I1}}
  - name: elbow
    type: revolute
    mdh: {a: a1}
    link: {mass: m2, com: [ac2, 0, 0], inertia: {zz: I2}}
tool: {xyz: [a2, 0, 0]}
"""

RR_URDF_STYLE = RR_HEAD + """
  - name: shoulder
    type: revolute
    axis: [0, 0, 1]
    link: {mass: m1, com: [ac1, 0, 0], inertia: {zz: I1}}
  - name: elbow
    type: revolute
    origin: {xyz: [a1, 0, 0]}
    axis: [0, 0, 1]
    link: {mass: m2, com: [ac2, 0, 0], inertia: {zz: I2}}
tool: {xyz: [a2, 0, 0]}
"""

# The same arm rotated: the base turned by +90° about x, the joint axes along -y in the base.
RR_ROTATED = RR_HEAD.replace("gravity: [0, -g0, 0]", "gravity: [0, 0, -g0]\nbase: {rpy: [pi/2, 0, 0]}") + """
  - name: shoulder
    type: revolute
    dh: {a: a1}
    link: {mass: m1, com: [ac1 - a1, 0, 0], inertia: {zz: I1}}
  - name: elbow
    type: revolute
    dh: {a: a2}
    link: {mass: m2, com: [ac2 - a2, 0, 0], inertia: {zz: I2}}
"""


def _same_dynamics(a, b, names=("M", "C", "g", "tool_pose", "tool_jacobian")):
    for name in names:
        difference = (getattr(a, name) - getattr(b, name)).applyfunc(lambda e: sp.simplify(sp.expand_trig(e)))
        assert difference == sp.zeros(*difference.shape), (name, difference)


@pytest.fixture(scope="module")
def rr_dh():
    return derive_lagrange(parse_text((ROBOTS / "rr.yaml").read_text(), "rr.yaml"))


@pytest.mark.parametrize("text", [RR_MODIFIED_DH, RR_URDF_STYLE], ids=["modified-dh", "urdf-style"])
def test_conventions_agree(rr_dh, text):
    _same_dynamics(rr_dh, derive_lagrange(parse_text(text, "variant.yaml")))


def test_base_rotation_with_matching_gravity_changes_nothing(rr_dh):
    # Rotating the base by +90° about x maps base y to world z, so gravity -z in the world
    # is gravity -y in the arm's plane, as in rr.yaml.
    _same_dynamics(rr_dh, derive_lagrange(parse_text(RR_ROTATED, "rotated.yaml")), ("M", "C", "g"))


def test_defaults_and_tool():
    description = parse_text("joints:\n  - {name: j, type: prismatic, axis: [0, 0, 2], link: {mass: 1}}\n",
                             "/some/where/slider.yaml")
    assert description.name == "slider"
    assert list(description.gravity) == [0, 0, sp.Rational(-981, 100)]
    assert list(description.joints[0].axis) == [0, 0, 1]  # normalised
    model = derive_lagrange(description)
    assert model.M == sp.Matrix([[1]])
    assert model.g == sp.Matrix([sp.Rational(981, 100)])


@pytest.mark.parametrize("text, value", [
    ("2 + 3*4^2", 50), ("-2^2", -4), ("2^3^2", 512), ("(1 + 2) * 3", 9), ("10 / 4", sp.Rational(5, 2)),
    ("0.1 + 0.2", sp.Rational(3, 10)), ("2.5e-1", sp.Rational(1, 4)), ("sqrt(16) + abs(-1)", 5),
    ("cos(pi)", -1), ("2**-1", sp.Rational(1, 2)), ("+ 3", 3),
])
def test_expression_values(text, value):
    assert parse_expression(text, {}) == value


def test_expression_symbols():
    a, b = sp.symbols("a b", real=True)
    assert parse_expression("a - b/2", {"a": a, "b": b}) == a - b / 2


@pytest.mark.parametrize("text, message", [
    ("a +* 2", "column"), ("2 $ 3", "unexpected character"), ("sin 1", "expected '('"), ("(1 + 2", "expected ')'"),
    ("1 / 0", "division by zero"), ("x", "unknown name 'x'"), ("", "empty"), ("2 ^ 100", "exponent"),
    ("2 ^ a", "exponent"), ("1e400", "out of range"), ("__import__('os')", "unexpected character"),
    ("1 2", "unexpected '2'"), ("-" * 60 + "1", "nested too deeply"), ("1" * 501, "longer than"),
])
def test_expression_errors(text, message):
    a = sp.Symbol("a", real=True)
    with pytest.raises(ExpressionError, match=re.escape(message)):
        parse_expression(text, {"a": a})


def test_print_shows_the_symbolic_model():
    result = subprocess.run([sys.executable, "-m", "codegen", str(ROBOTS / "rr.yaml"), "--print"],
                            capture_output=True, text=True, cwd=ROOT, check=True)
    assert "M(q) =" in result.stdout and "C(q, qd) =" in result.stdout and "g(q) =" in result.stdout
    assert "cos(q₂)" in result.stdout or "cos(q2)" in result.stdout
