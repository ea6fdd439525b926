"""Physical plausibility of mass properties (codegen/description/physical.py), in both front ends.

Tolerances scale with the tensor (1e-5 of its largest principal moment: rounded printing) and
with the mass (the inertia of the mass spread over a micrometre: noise on a point mass's zero
tensor); beyond them an impossible tensor is an error naming the link, the inequality and the
numbers, or, with ``accept_invalid_inertia``, a DescriptionWarning.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from codegen.description import parse_source
from codegen.description.parse import parse_text
from codegen.description.physical import RELATIVE_TOLERANCE, check_mass_properties, inertia_tolerance
from codegen.description.urdf import parse_urdf_file, parse_urdf_text
from codegen.errors import DescriptionError, DescriptionWarning
from robodyn.options import BuildOptions
from test_urdf import TREE, UNIT, _robots_dir

INVALID = Path(__file__).resolve().parent / "invalid"


def _rotated(moments) -> np.ndarray:
    """A full tensor with these principal moments (a generic rotation, so every entry is nonzero)."""
    c, s = np.cos(0.7), np.sin(0.7)
    rz = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])
    rx = np.array([[1, 0, 0], [0, c, -s], [0, s, c]])
    r = rz @ rx
    return r @ np.diag(moments) @ r.T


@pytest.mark.parametrize("factor, passes", [(0.9, True), (1.1, False)])
def test_triangle_inequality_at_the_edge(factor, passes):
    tolerance = inertia_tolerance(np.array([2.0]), 1.0)
    assert tolerance == pytest.approx(2 * RELATIVE_TOLERANCE + 1e-12 + 1e-18)
    tensor = _rotated([1.0, 1.0, 2.0 + factor * tolerance])
    violations = check_mass_properties(1.0, tensor)
    assert (not violations) == passes
    if not passes:
        assert [v.inequality for v in violations] == ["triangle inequality"]
        assert "1 + 1 = 2 < 2.00002" in violations[0].message


@pytest.mark.parametrize("factor, passes", [(0.9, True), (1.1, False)])
def test_positive_semi_definite_at_the_edge(factor, passes):
    tensor = _rotated([-factor * RELATIVE_TOLERANCE, 1.0, 1.0])
    violations = check_mass_properties(0.0, tensor)
    assert (not violations) == passes
    if not passes:
        assert violations[0].inequality == "positive semi-definite"
        assert "smallest principal moment -1.1e-05 < 0" in violations[0].message


def test_noise_on_a_point_mass_passes_but_not_on_a_massless_link():
    noise = np.array([[1.1e-15, 5e-17, -5e-17], [5e-17, 0, 8e-19], [-5e-17, 8e-19, 0]])
    assert check_mass_properties(1.264, noise) == []
    assert [v.inequality for v in check_mass_properties(0.0, noise)] == ["positive semi-definite",
                                                                        "triangle inequality"]


def test_negative_mass_and_planar():
    assert [v.inequality for v in check_mass_properties(-1.0, np.eye(3))] == ["mass >= 0"]
    assert check_mass_properties(1.0, np.diag([0, 0, 1.0]), planar=True) == []
    assert [v.inequality for v in check_mass_properties(1.0, np.diag([0, 0, -1.0]), planar=True)] == ["Izz >= 0"]


def _urdf_with(tensor: np.ndarray) -> str:
    entries = dict(ixx=tensor[0, 0], ixy=tensor[0, 1], ixz=tensor[0, 2], iyy=tensor[1, 1], iyz=tensor[1, 2],
                   izz=tensor[2, 2])
    inertia = " ".join(f'{k}="{float(v)!r}"' for k, v in entries.items())
    link = f'<inertial><mass value="1"/><inertia {inertia}/></inertial>'
    return TREE.replace(f'<link name="l2">{UNIT}', f'<link name="l2">{link}')


def test_urdf_edge_and_message():
    tolerance = inertia_tolerance(np.array([2.0]), 1.0)
    parse_urdf_text(_urdf_with(_rotated([1.0, 1.0, 2.0 + 0.9 * tolerance])), "edge.urdf")
    with pytest.raises(DescriptionError) as info:
        parse_urdf_text(_urdf_with(_rotated([1.0, 1.0, 2.0 + 1.1 * tolerance])), "edge.urdf")
    error = info.value
    assert error.field == "link[l2].inertial.inertia" and error.line == 4
    assert "link[l2]: inertia tensor violates the triangle inequality" in error.message
    assert "--accept-invalid-inertia" in error.message


def test_icub_rounding_noise_passes():
    """icub.urdf prints r_lower_leg's tensor as 1.1e-18 kg m² of exporter noise on a 1.264 kg link."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=".*looks like a mobile base")  # iCub is a humanoid
        description = parse_urdf_file(_robots_dir() / "icub_description" / "robots" / "icub.urdf")
    assert description.n == 32


ALLEGRO = "allegro_hand_description/urdf/allegro_left_hand.urdf"


def test_allegro_is_rejected_with_every_bad_link():
    with pytest.raises(DescriptionError) as info:
        parse_urdf_file(_robots_dir() / ALLEGRO)
    problems = info.value.problems
    assert len(problems) == 4, str(info.value)  # the four fingertip-side links share the impossible tensor
    assert all(p.field.endswith(".inertial.inertia") and "triangle inequality" in p.message for p in problems)
    assert "link[link_11.0]" in problems[0].message and "2.30064e-06 + 3.48527e-06" in problems[0].message


def test_allegro_loads_with_the_option_and_warns():
    path = _robots_dir() / ALLEGRO
    with pytest.warns(DescriptionWarning) as caught:
        description = parse_source(path.read_bytes(), str(path), BuildOptions(accept_invalid_inertia=True))
    said = [w.message for w in caught if "triangle inequality" in str(w.message)]
    assert len(said) == 4 and all("accepted (accept_invalid_inertia)" in w.message for w in said)
    assert description.n == 16


def test_yaml_uses_the_same_check():
    path = INVALID / "inertia_triangle_inequality.yaml"
    text = path.read_text()
    with pytest.raises(DescriptionError, match="violates the triangle inequality"):
        parse_text(text, str(path))
    with pytest.warns(DescriptionWarning, match="triangle inequality.*accepted"):
        parse_text(text, str(path), accept_invalid_inertia=True)
