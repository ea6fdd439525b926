"""URDF front end (codegen.description.urdf): structure, merging, locking, Pinocchio, invalid files.

Every file in tests/invalid_urdf/ is a URDF with exactly one mistake, with a header of XML comments
that mirrors tests/invalid/*.yaml (see test_invalid_descriptions.py)::

    <!-- expect: <field path> | <substring of the message> -->
    <!-- line: <1-based line the error must point at> -->
    <!-- case: <what is wrong> -->          (optional, for humans)

An empty field path means the error is about the whole file (malformed XML).
"""

from __future__ import annotations

import hashlib
import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from codegen.description.urdf import parse_urdf_file, parse_urdf_text
from codegen.description.model import Limits
from codegen.errors import DescriptionError, DescriptionWarning
from codegen.model.lagrange import derive_lagrange

HERE = Path(__file__).resolve().parent
URDFS = HERE / "urdf"
CORPUS = HERE / "invalid_urdf"
SEED = 20240611  # each test draws from its own generator: the states do not depend on test order (-n auto)


def _rng() -> np.random.Generator:
    return np.random.default_rng(SEED)


# --- numeric helpers (independent of the parser's SymPy code) ------------------------------------

def to_float(matrix) -> np.ndarray:
    return np.array(sp.Matrix(matrix).evalf(30).tolist(), dtype=float)


def rpy_matrix(roll, pitch, yaw) -> np.ndarray:
    cr, sr = math.cos(roll), math.sin(roll)
    cp, sp_ = math.cos(pitch), math.sin(pitch)
    cy, sy = math.cos(yaw), math.sin(yaw)
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp_], [0, 1, 0], [-sp_, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return rz @ ry @ rx


def matrix_rpy(r: np.ndarray) -> tuple[float, float, float]:
    pitch = math.asin(-r[2, 0])
    return math.atan2(r[2, 1], r[2, 2]), pitch, math.atan2(r[1, 0], r[0, 0])


def rodrigues(axis, angle) -> np.ndarray:
    axis = np.asarray(axis, dtype=float)
    axis = axis / np.linalg.norm(axis)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * k @ k


def transform(rotation=None, translation=None) -> np.ndarray:
    t = np.eye(4)
    if rotation is not None:
        t[:3, :3] = rotation
    if translation is not None:
        t[:3, 3] = translation
    return t


def origin_text(t: np.ndarray) -> str:
    xyz = " ".join(repr(float(v)) for v in t[:3, 3])
    rpy = " ".join(repr(float(v)) for v in matrix_rpy(t[:3, :3]))
    return f'<origin xyz="{xyz}" rpy="{rpy}"/>'


def frames(description, q) -> list[np.ndarray]:
    """World pose of each joint's child link: T_parent @ placement @ screw(q) @ successor."""
    result = []
    for i, joint in enumerate(description.joints):
        parent = to_float(description.base) if joint.parent < 0 else result[joint.parent]
        axis = to_float(joint.axis)[:, 0]
        if joint.kind == "revolute":
            motion = transform(rodrigues(axis, q[i]))
        else:
            motion = transform(None, axis * q[i])
        result.append(parent @ to_float(joint.placement) @ motion @ to_float(joint.successor))
    return result


def numeric_dynamics(description):
    model = derive_lagrange(description, simplify=False)
    mass = sp.lambdify(model.q, model.M, "numpy")
    gravity = sp.lambdify(model.q, model.g.xreplace(description.defaults), "numpy")  # gravity at its defaults
    return (lambda q: np.array(mass(*q), dtype=float)), (lambda q: np.array(gravity(*q), dtype=float).ravel())

def assert_equivalent(first, second, states):
    """Same inertials and placements joint by joint, and the same M and g at ``states``."""
    for a, b in zip(first.joints, second.joints):
        assert float(a.inertial.mass) == pytest.approx(float(b.inertial.mass), rel=1e-14)
        np.testing.assert_allclose(to_float(a.inertial.com), to_float(b.inertial.com), atol=1e-14)
        np.testing.assert_allclose(to_float(a.inertial.inertia), to_float(b.inertial.inertia), atol=1e-14)
        np.testing.assert_allclose(to_float(a.placement), to_float(b.placement), atol=1e-14)
    mass_a, gravity_a = numeric_dynamics(first)
    mass_b, gravity_b = numeric_dynamics(second)
    for q in states:
        np.testing.assert_allclose(mass_a(q), mass_b(q), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(gravity_a(q), gravity_b(q), rtol=1e-10, atol=1e-12)



# --- 1. the planar RR arm against its closed form ---------------------------------------------------

def test_rr_matches_closed_form():
    description = parse_urdf_file(URDFS / "rr.urdf")
    assert description.name == "rr"
    assert description.summary == "from URDF rr.urdf"
    assert [p.name for p in description.parameters] == ["gravity_x", "gravity_y", "gravity_z"]  # settable gravity
    assert [p.default for p in description.parameters] == [0.0, 0.0, -9.81]
    assert [j.name for j in description.joints] == ["shoulder", "elbow"]
    assert [j.parent for j in description.joints] == [-1, 0]
    assert [j.kind for j in description.joints] == ["revolute", "revolute"]
    assert [j.link_name for j in description.joints] == ["upper", "fore"]
    assert description.gravity == sp.ImmutableMatrix([p.symbol for p in description.parameters])
    assert description.tool == sp.eye(4) and description.base == sp.eye(4)
    shoulder, elbow = description.joints
    assert elbow.axis == sp.ImmutableMatrix([0, -1, 0])  # normalised from 0 -2 0
    assert shoulder.limits.lower is None and shoulder.limits.upper is None  # continuous
    limits = elbow.limits
    assert (limits.lower, limits.upper, limits.velocity, limits.effort) == (-2.5, 2.5, 3.0, 100.0)
    assert (shoulder.viscous, shoulder.coulomb) == (sp.Rational(1, 2), sp.Rational(1, 4))
    assert (elbow.viscous, elbow.coulomb) == (0, 0)
    assert shoulder.line == 21 and elbow.line == 27
    assert elbow.inertial.mass == 50 and isinstance(elbow.inertial.mass, sp.Integer)
    assert elbow.inertial.com == sp.ImmutableMatrix([sp.Rational(1, 2), 0, 0])
    data = (URDFS / "rr.urdf").read_bytes()
    assert description.source_sha256 == hashlib.sha256(data).hexdigest()

    mass, gravity = numeric_dynamics(description)
    m, inertia, a, ac, g0 = 50.0, 10.0, 1.0, 0.5, 9.81
    for q1, q2 in _rng().uniform(-math.pi, math.pi, size=(5, 2)):
        c2 = math.cos(q2)
        expected_m = np.array([
            [m * ac**2 + inertia + m * (a**2 + ac**2 + 2 * a * ac * c2) + inertia, m * (ac**2 + a * ac * c2) + inertia],
            [m * (ac**2 + a * ac * c2) + inertia, m * ac**2 + inertia]])
        expected_g = np.array([(m * ac + m * a) * g0 * math.cos(q1) + m * ac * g0 * math.cos(q1 + q2),
                               m * ac * g0 * math.cos(q1 + q2)])
        np.testing.assert_allclose(mass([q1, q2]), expected_m, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(gravity([q1, q2]), expected_g, rtol=1e-12, atol=1e-12)


# --- 2. fixed joints are merged --------------------------------------------------------------------

def _inertial(mass, xyz, rpy, tensor):
    """(mass, com, inertia about the com in the link axes) of a URDF <inertial>."""
    r = rpy_matrix(*rpy)
    return mass, np.array(xyz, dtype=float), r @ tensor @ r.T


def _tensor(ixx, ixy, ixz, iyy, iyz, izz):
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]], dtype=float)


def _inertia_text(mass, com, inertia):
    i = inertia
    values = dict(ixx=i[0, 0], ixy=i[0, 1], ixz=i[0, 2], iyy=i[1, 1], iyz=i[1, 2], izz=i[2, 2])
    attributes = " ".join(f'{k}="{float(v)!r}"' for k, v in values.items())
    return (f'<inertial><origin xyz="{" ".join(repr(float(c)) for c in com)}"/>'
            f'<mass value="{float(mass)!r}"/><inertia {attributes}/></inertial>')


def _merged_split_link_text() -> str:
    """split_link.urdf with link2a + weld + link2b replaced by one link, merged here with NumPy."""
    weld = transform(rpy_matrix(0.5, -0.4, 1.2), [0.35, 0.02, -0.01])
    ma, ca, ia = _inertial(1.5, [0.2, 0.01, 0], [0.3, 0.2, -0.1],
                           _tensor(0.01, -0.0005, 0.001, 0.025, 0.0007, 0.03))
    mb, cb, ib = _inertial(0.8, [0.05, -0.03, 0.02], [-0.7, 0.25, 0.9],
                           _tensor(0.004, 0.0003, -0.0002, 0.006, 0.0001, 0.008))
    rw = weld[:3, :3]
    cb, ib = rw @ cb + weld[:3, 3], rw @ ib @ rw.T
    mass = ma + mb
    com = (ma * ca + mb * cb) / mass
    inertia = np.zeros((3, 3))
    for m, c, i in ((ma, ca, ia), (mb, cb, ib)):
        d = c - com
        inertia += i + m * (d @ d * np.eye(3) - np.outer(d, d))
    j3 = weld @ transform(rpy_matrix(0, 0.3, 0), [0.1, 0, 0])
    return f"""<robot name="merged">
  <link name="base"/>
  <link name="link1">
    <inertial><origin xyz="0.1 0 0.05"/><mass value="2"/>
      <inertia ixx="0.02" ixy="0.001" ixz="-0.002" iyy="0.03" iyz="0.0015" izz="0.04"/></inertial>
  </link>
  <link name="link2">{_inertia_text(mass, com, inertia)}</link>
  <link name="link3">
    <inertial><origin xyz="0.03 0.01 -0.02" rpy="0.1 0 0"/><mass value="0.5"/>
      <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.002" iyz="0" izz="0.0025"/></inertial>
  </link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="link1"/>
    <origin xyz="0 0 0.3"/><axis xyz="0 0 1"/></joint>
  <joint name="j2" type="revolute"><parent link="link1"/><child link="link2"/>
    <origin xyz="0.4 0 0"/><axis xyz="0 1 0"/></joint>
  <joint name="j3" type="prismatic"><parent link="link2"/><child link="link3"/>
    {origin_text(j3)}<axis xyz="1 0 0"/></joint>
</robot>
"""


def test_fixed_joint_merging_matches_single_link():
    split = parse_urdf_file(URDFS / "split_link.urdf")
    merged = parse_urdf_text(_merged_split_link_text(), "merged.urdf")
    assert [j.name for j in split.joints] == ["j1", "j2", "j3"]
    assert [j.parent for j in split.joints] == [-1, 0, 1]
    assert split.joints[1].link_name == "link2a"
    assert split.joints[2].kind == "prismatic"
    assert_equivalent(split, merged, _rng().uniform(-1, 1, size=(5, 3)))


def test_merged_inertial_is_exact():
    """Exact numbers survive merging: masses add up as rationals, the massless flange adds nothing."""
    split = parse_urdf_file(URDFS / "split_link.urdf")
    assert split.joints[1].inertial.mass == sp.Rational(23, 10)
    assert split.joints[2].inertial.mass == sp.Rational(1, 2)
    assert split.joints[0].inertial.inertia == sp.ImmutableMatrix(
        [[sp.Rational(2, 100), sp.Rational(1, 1000), sp.Rational(-2, 1000)],
         [sp.Rational(1, 1000), sp.Rational(3, 100), sp.Rational(15, 10000)],
         [sp.Rational(-2, 1000), sp.Rational(15, 10000), sp.Rational(4, 100)]])


# --- 3. locking ---------------------------------------------------------------------------------

MIDDLE = re.compile(r'<joint name="middle" type="revolute">.*?</joint>', re.DOTALL)


def test_locking_equals_fixed_joint():
    text = (URDFS / "three_joints.urdf").read_text()
    angle = 0.4
    locked = parse_urdf_text(text, "three_joints.urdf", lock={"middle": angle})
    fixed_origin = transform(rpy_matrix(0.2, 0, 0), [0, 0, 0.4]) @ transform(rodrigues([0, 1, 1], angle))
    fixed_text = MIDDLE.sub(f'<joint name="middle" type="fixed"><parent link="a"/><child link="b"/>'
                            f'{origin_text(fixed_origin)}</joint>', text)
    assert fixed_text != text
    fixed = parse_urdf_text(fixed_text, "three_fixed.urdf")
    assert [j.name for j in locked.joints] == ["first", "last"] == [j.name for j in fixed.joints]
    assert [j.parent for j in locked.joints] == [-1, 0]
    assert "locked middle=0.4" in locked.summary
    assert_equivalent(locked, fixed, _rng().uniform(-2, 2, size=(5, 2)))


def test_lock_errors():
    path = URDFS / "three_joints.urdf"
    with pytest.raises(DescriptionError) as info:
        parse_urdf_file(path, lock={"midle": 0.0})
    assert info.value.field == "lock[midle]" and "no joint named 'midle'" in info.value.message
    with pytest.raises(DescriptionError) as info:
        parse_urdf_file(path, lock={"middle": 1.5})
    assert info.value.field == "lock[middle]" and "outside the joint's limits [-1, 1]" in info.value.message
    with pytest.raises(DescriptionError) as info:
        parse_urdf_file(path, lock={"middle": float("nan")})
    assert info.value.field == "lock[middle]"
    with pytest.raises(DescriptionError) as info:
        parse_urdf_file(URDFS / "split_link.urdf", lock={"weld": 0.0})
    assert info.value.field == "lock[weld]" and "only moving joints can be locked" in info.value.message
    with pytest.raises(DescriptionError) as info:
        parse_urdf_file(path, lock={"first": 0.0, "middle": 0.0, "last": 0.0})
    assert "no moving joint" in info.value.message


def test_lock_angle_is_exact():
    description = parse_urdf_file(URDFS / "three_joints.urdf", lock={"first": math.pi / 2})
    # Locking 'first' at pi/2 turns the world placement of 'middle' by an exact quarter turn.
    placement = description.joints[0].placement
    assert placement[:3, :3] * sp.Matrix([1, 0, 0]) == sp.Matrix([0, 1, 0])


# --- 4. real robots against Pinocchio -------------------------------------------------------------

def _robots_dir() -> Path:
    # Pinocchio ("pin") and example-robot-data come with the test extra: missing, they fail the test
    # (a skip would let CI pass without ever comparing with Pinocchio).
    import pinocchio as pin

    prefix = Path(pin.__file__).resolve().parents[4]  # .../cmeel.prefix/lib/python3.X/site-packages/pinocchio
    robots = prefix / "share" / "example-robot-data" / "robots"
    assert robots.is_dir(), f"example-robot-data is not installed (looked in {robots}); pip install '.[test]'"
    return robots


def _compare_with_pinocchio(description, model):
    import pinocchio as pin

    assert model.nq == description.n
    ids = [model.getJointId(j.name) for j in description.joints]
    assert all(0 < i < model.njoints for i in ids)
    for joint, jid in zip(description.joints, ids):
        parent = model.parents[jid]
        assert (joint.parent < 0 and parent == 0) or ids[joint.parent] == parent, joint.name
        inertia = model.inertias[jid]
        assert abs(float(joint.inertial.mass) - inertia.mass) < 1e-12, joint.name
        np.testing.assert_allclose(to_float(joint.inertial.com)[:, 0], inertia.lever, atol=1e-12, err_msg=joint.name)
        np.testing.assert_allclose(to_float(joint.inertial.inertia), inertia.inertia, atol=1e-12, err_msg=joint.name)

    # The base's own mass does not move: leave it out of Pinocchio's centre of mass, as the description does.
    model.inertias[0] = pin.Inertia.Zero()
    data = model.createData()
    masses = np.array([float(j.inertial.mass) for j in description.joints])
    coms = [to_float(j.inertial.com)[:, 0] for j in description.joints]
    low = np.array([j.limits.lower if j.limits.lower is not None else -math.pi for j in description.joints])
    high = np.array([j.limits.upper if j.limits.upper is not None else math.pi for j in description.joints])
    for q in _rng().uniform(low, high, size=(4, description.n)):
        q_pin = np.zeros(model.nq)
        for value, jid in zip(q, ids):
            q_pin[model.joints[jid].idx_q] = value
        pin.forwardKinematics(model, data, q_pin)
        ours = frames(description, q)
        for joint, jid, frame in zip(description.joints, ids, ours):
            np.testing.assert_allclose(frame, data.oMi[jid].homogeneous, atol=1e-12, err_msg=joint.name)
        com = pin.centerOfMass(model, data, q_pin)
        world_coms = [frame[:3, :3] @ c + frame[:3, 3] for frame, c in zip(ours, coms)]
        our_com = sum(m * c for m, c in zip(masses, world_coms)) / masses.sum()
        np.testing.assert_allclose(our_com, com, atol=1e-12)
        assert abs(masses.sum() - data.mass[0]) < 1e-12


def test_panda_matches_pinocchio():
    import pinocchio as pin

    path = _robots_dir() / "panda_description" / "urdf" / "panda.urdf"
    fingers = ("panda_finger_joint1", "panda_finger_joint2")
    description = parse_urdf_file(path, lock={name: 0.0 for name in fingers})
    assert description.name == "panda"
    assert description.n == 7
    assert [j.name for j in description.joints] == [f"panda_joint{i}" for i in range(1, 8)]
    assert [j.parent for j in description.joints] == list(range(-1, 6))
    assert all(j.kind == "revolute" for j in description.joints)
    assert description.joints[3].limits.upper == -0.0698
    # The quarter turns of the Panda's URDF are exact multiples of pi: no sin/cos of constants left.
    assert all(not j.placement.atoms(sp.sin, sp.cos) for j in description.joints)
    full = pin.buildModelFromUrdf(str(path))
    model = pin.buildReducedModel(full, [full.getJointId(name) for name in fingers], pin.neutral(full))
    _compare_with_pinocchio(description, model)


def test_ur5_matches_pinocchio():
    import pinocchio as pin

    path = _robots_dir() / "ur_description" / "urdf" / "ur5_robot.urdf"
    description = parse_urdf_file(path)
    assert description.name == "ur5"
    assert description.n == 6
    assert [j.parent for j in description.joints] == list(range(-1, 5))
    _compare_with_pinocchio(description, pin.buildModelFromUrdf(str(path)))


def test_panda_mimic_finger_is_a_coupling():
    """The second finger mimics the first: 8 coordinates, 9 bodies (tests/test_mimic.py compares the
    dynamics with Pinocchio). Locking either finger locks both."""
    path = _robots_dir() / "panda_description" / "urdf" / "panda.urdf"
    description = parse_urdf_file(path)
    assert description.n == 8 and description.joints[-1].name == "panda_finger_joint1"
    assert [j.name for j in description.tree][-2:] == ["panda_finger_joint1", "panda_finger_joint2"]
    assert description.tree[-1].mimic.source == 7 and description.tree[-1].mimic.multiplier == 1
    assert description.joints[-1].parent == 6
    # Locking the mimicking finger locks the finger it mimics where the coupling puts it (the two stay coupled).
    description = parse_urdf_file(path, lock={"panda_finger_joint2": 0.02})
    assert description.n == 7 and not description.bodies and "panda_finger_joint1=0.02" in description.summary
    # Locking the finger it mimics locks it as well.
    description = parse_urdf_file(path, lock={"panda_finger_joint1": 0.02})
    assert description.n == 7 and not description.bodies and "panda_finger_joint2=0.02" in description.summary


def test_placeholder_limits_are_no_limits():
    """double_pendulum.urdf writes lower = upper = effort = velocity = 0 on both joints."""
    description = parse_urdf_file(_robots_dir() / "double_pendulum_description" / "urdf" / "double_pendulum.urdf")
    assert [j.limits for j in description.joints] == [Limits(None, None, None, None)] * 2
    text = TREE.replace('<axis xyz="0 0 1"/></joint>', '<axis xyz="0 0 1"/><limit lower="0.5" upper="0.5" '
                        'effort="3" velocity="2"/></joint>', 1)
    assert parse_urdf_text(text, "tree.urdf").joints[0].limits == Limits(None, None, 2.0, 3.0)
    assert parse_urdf_text(TREE, "tree.urdf").joints[0].limits == Limits(None, None, None, None)


MOBILE = ["solo_description/robots/solo12.urdf", "anymal_b_simple_description/robots/anymal.urdf",
          "go2_description/urdf/go2.urdf", "talos_data/robots/talos_reduced.urdf",
          "tiago_description/robots/tiago_no_hand.urdf", "iris_description/robots/iris.urdf",
          "icub_description/robots/icub.urdf", "bolt_description/robots/bolt.urdf"]
FIXED = ["panda_description/urdf/panda.urdf", "ur_description/urdf/ur5_robot.urdf",
         "kinova_description/robots/kinova.urdf", "baxter_description/urdf/baxter.urdf",
         "double_pendulum_description/urdf/double_pendulum_continuous.urdf", "z1_description/urdf/z1.urdf",
         "so_arm_description/urdf/so100.urdf", "talos_data/robots/talos_left_arm.urdf",
         "finger_edu_description/robots/finger_edu.urdf", "alex_description/urdf/alex_nub_hands.urdf"]


@pytest.mark.parametrize("relative", MOBILE + FIXED)
def test_mobile_base_is_said_to_be_fixed(relative):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parse_urdf_file(_robots_dir() / relative)
    said = [w.message for w in caught if isinstance(w.message, DescriptionWarning)]
    if relative in FIXED:
        assert not said, said
        return
    assert len(said) == 1, said
    assert "fixed to the world" in said[0].message and "base='floating'" in said[0].message
    assert "--base floating" in said[0].message
    assert said[0].field.startswith("link[") and said[0].line is not None
    with warnings.catch_warnings(record=True) as caught:  # asked for a floating base: nothing to warn about
        warnings.simplefilter("always")
        floating = parse_urdf_text((_robots_dir() / relative).read_bytes(), relative, floating=True,
                                   accept_invalid_inertia=True)
    assert floating.floating_base is not None and not [w for w in caught if isinstance(w.message, DescriptionWarning)
                                                       and "mobile base" in str(w.message)]


def test_mobile_base_signs():
    assert parse_urdf_text(TREE, "tree.urdf")  # a Y of two arms on a massless torso: no warning
    legs = TREE.replace('"l2"', '"l_foot"').replace('"r2"', '"r_foot"')
    with pytest.warns(DescriptionWarning, match=r"2 of its 2 limbs have leg parts"):
        parse_urdf_text(legs, "tree.urdf")
    wheel = TREE.replace('name="left" type="revolute"', 'name="left_wheel_joint" type="continuous"')
    with pytest.warns(DescriptionWarning, match=r"wheels \(left_wheel_joint\)"):
        parse_urdf_text(wheel, "tree.urdf")
    with pytest.warns(DescriptionWarning, match="its name 'base_footprint'"):
        parse_urdf_text(TREE.replace('"torso"', '"base_footprint"'), "tree.urdf")
    # Welded to a link named world: said explicitly, no warning whatever the limbs.
    welded = legs.replace('<link name="torso"/>', '<link name="world"/><link name="torso"/><joint name="weld" '
                          'type="fixed"><parent link="world"/><child link="torso"/></joint>')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parse_urdf_text(welded, "tree.urdf")


@pytest.mark.parametrize("relative, message", [
    ("hector_description/robots/quadrotor_base.urdf", "has no moving joint"),
    ("iris_description/robots/iris_simple.urdf", "has no moving joint"),
    ("ur_description/urdf/ur3.urdf", "has no <link>"),
])
def test_nothing_to_model_is_one_clear_line(relative, message):
    with pytest.raises(DescriptionError) as info:
        parse_urdf_file(_robots_dir() / relative)
    assert message in info.value.message and "\n" not in str(info.value) and info.value.line is not None


# --- smaller behaviours ---------------------------------------------------------------------------

UNIT = '<inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial>'
TREE = f"""<robot name="Y-Shape 2">
  <link name="torso"/>
  <link name="l1">{UNIT}</link>
  <link name="l2">{UNIT}</link>
  <link name="r1">{UNIT}</link>
  <link name="r2">{UNIT}</link>
  <joint name="r2_joint" type="revolute"><parent link="r1"/><child link="r2"/></joint>
  <joint name="left" type="revolute"><parent link="torso"/><child link="l1"/><axis xyz="0 0 1"/></joint>
  <joint name="right" type="prismatic"><parent link="torso"/><child link="r1"/><axis xyz="0 0 1"/></joint>
  <joint name="l2_joint" type="revolute"><parent link="l1"/><child link="l2"/><axis xyz="0 1 0"/></joint>
</robot>
"""


def test_tree_is_ordered_depth_first():
    description = parse_urdf_text(TREE, "tree.urdf")
    assert description.name == "y_shape_2"
    assert [j.name for j in description.joints] == ["left", "l2_joint", "right", "r2_joint"]
    assert [j.parent for j in description.joints] == [-1, 0, -1, 2]
    assert description.joints[3].axis == sp.ImmutableMatrix([1, 0, 0])  # the URDF default
    assert description.source_sha256 == hashlib.sha256(TREE.encode()).hexdigest()


@pytest.mark.parametrize("raw, expected", [("Panda", "panda"), ("ur5e-arm", "ur5e_arm"), ("2dof", "r_2dof"),
                                           ("__x__", "x"), ("a" * 50, "a" * 40), ("***", "tree")])
def test_robot_name_is_sanitised(raw, expected):
    assert parse_urdf_text(TREE.replace("Y-Shape 2", raw), "tree.urdf").name == expected


def test_quarter_turns_are_exact():
    text = TREE.replace('<joint name="left" type="revolute"><parent link="torso"/>',
                        '<joint name="left" type="revolute"><parent link="torso"/>'
                        '<origin rpy="1.5707963267948966 0 -0.7853981633974483" xyz="0 0 0.1"/>')
    placement = parse_urdf_text(text, "tree.urdf").joints[0].placement
    assert placement[:3, :3] == sp.Matrix([[sp.sqrt(2) / 2, 0, -sp.sqrt(2) / 2],
                                           [-sp.sqrt(2) / 2, 0, -sp.sqrt(2) / 2],
                                           [0, 1, 0]])
    # A rounded angle means what it says: its cosine is a 30-digit Float of the exact decimal's cosine.
    text = text.replace("1.5707963267948966", "1.5707963")
    placement = parse_urdf_text(text, "tree.urdf").joints[0].placement
    assert isinstance(placement[2, 2], sp.Float) and placement[2, 2]._prec >= 99
    assert abs(placement[2, 2] - sp.cos(sp.Rational(15707963, 10**7))) < 1e-29


def test_every_problem_is_reported_at_once():
    negative = UNIT.replace('mass value="1"', 'mass value="-1"')
    text = (TREE.replace(f'<link name="l1">{UNIT}', f'<link name="l1">{negative}')
            .replace('<joint name="r2_joint" type="revolute">', '<joint name="r2_joint" type="spherical">')
            .replace('<parent link="l1"/><child link="l2"/><axis xyz="0 1 0"/>',
                     '<parent link="l1"/><child link="l2"/><axis xyz="0 one 0"/>'))
    with pytest.raises(DescriptionError) as info:
        parse_urdf_text(text, "tree.urdf")
    problems = [(p.line, p.field) for p in info.value.problems]
    assert problems == [(3, "link[l1].inertial.mass"), (7, "joint[r2_joint].type"), (10, "joint[l2_joint].axis")]
    assert str(info.value).startswith("3 problems:") and "tree.urdf:7: joint[r2_joint].type: " in str(info.value)
    # Once they parse, the physics of every moving link is checked, again all in one run.
    flat = UNIT.replace('izz="1"', 'izz="3"')
    text = TREE.replace(f'<link name="l1">{UNIT}', f'<link name="l1">{flat}').replace(
        f'<link name="r2">{UNIT}', f'<link name="r2">{flat}')
    with pytest.raises(DescriptionError) as info:
        parse_urdf_text(text, "tree.urdf")
    assert [p.field for p in info.value.problems] == ["link[l1].inertial.inertia", "link[r2].inertial.inertia"]


def test_nameless_robot_is_named_after_the_file():
    assert parse_urdf_text(TREE.replace(' name="Y-Shape 2"', ""), "/somewhere/My Arm.urdf").name == "my_arm"


def test_only_moving_inertias_are_checked():
    """A link welded to the fixed base is dropped, so its (here impossible) tensor is not checked."""
    bad = '<inertial><mass value="1"/><inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="1"/></inertial>'
    text = TREE.replace('<link name="torso"/>', f'<link name="torso">{bad}</link>')
    parse_urdf_text(text, "tree.urdf")
    text = TREE.replace('<link name="torso"/>', f'<link name="torso"/><link name="plate">{bad}</link>'
                        '<joint name="weld" type="fixed"><parent link="l1"/><child link="plate"/></joint>')
    with pytest.raises(DescriptionError) as info:
        parse_urdf_text(text, "tree.urdf")
    assert info.value.field == "link[plate].inertial.inertia" and info.value.line == 2


def test_unreadable_file():
    with pytest.raises(DescriptionError) as info:
        parse_urdf_file(URDFS / "no_such_file.urdf")
    assert "cannot read the URDF" in info.value.message


def test_entities_are_refused():
    text = '<?xml version="1.0"?>\n<!DOCTYPE robot [<!ENTITY a "aaaa">]>\n<robot name="x"/>\n'
    with pytest.raises(DescriptionError) as info:
        parse_urdf_text(text, "bomb.urdf")
    assert info.value.line == 2 and "entity" in info.value.message


def test_xacro_is_refused_with_a_hint():
    text = ('<robot name="x" xmlns:xacro="http://www.ros.org/wiki/xacro">\n'
            '  <xacro:property name="a" value="1"/>\n</robot>\n')
    with pytest.raises(DescriptionError) as info:
        parse_urdf_text(text, "arm.urdf.xacro")
    assert info.value.line == 2 and "xacro" in info.value.message


# --- 5. the corpus of invalid URDFs ---------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    path: Path
    field: str
    message: str
    line: int


def _read_case(path: Path) -> Case:
    lines = path.read_text(encoding="utf-8").splitlines()
    first = re.fullmatch(r"<!-- expect:([^|]*)\|(.*)-->", lines[0].strip()) if lines else None
    second = re.fullmatch(r"<!-- line:\s*(\d+)\s*-->", lines[1].strip()) if len(lines) > 1 else None
    if not first or not second or not first.group(2).strip():
        raise ValueError(f"{path}: the first two lines must be '<!-- expect: FIELD | MESSAGE -->' "
                         "and '<!-- line: N -->'")
    return Case(path, first.group(1).strip(), first.group(2).strip(), int(second.group(1)))


CASES = {path.stem: _read_case(path) for path in sorted(CORPUS.glob("*.urdf"))}


def test_corpus_is_present():
    assert len(CASES) >= 14, f"expected at least 14 invalid URDFs in {CORPUS}, found {len(CASES)}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_invalid_urdf_is_rejected(name):
    case = CASES[name]
    with pytest.raises(DescriptionError) as info:
        parse_urdf_file(case.path)
    error = info.value
    shown = str(error)
    assert error.path == str(case.path) and str(case.path) in shown
    assert error.field == case.field, shown
    assert case.message in error.message, shown
    assert error.line == case.line, shown
    assert f"{case.path}:{case.line}: " in shown
    if case.field:
        assert f" {case.field}: " in shown


def test_mutated_urdfs_fail_only_with_description_errors():
    """Hand-made damage (odd attribute values, missing attributes and elements, changed joint types,
    mimic tags pointing anywhere) to the test URDFs: a DescriptionError or a description, nothing else."""
    import random
    import xml.etree.ElementTree as ET

    values = ["", "nan", "inf", "-1", "1e400", "abc", "0 0", "0", "1 2 3", "-0", "j1", "1e30"]
    rng = random.Random(0)
    sources = sorted(URDFS.glob("*.urdf")) + sorted(CORPUS.glob("*.urdf"))
    for path in sources:
        try:
            original = ET.parse(path).getroot()
        except ET.ParseError:
            continue  # malformed on purpose
        for _ in range(8):
            root = ET.fromstring(ET.tostring(original))
            elements = list(root.iter())
            for _ in range(rng.randint(1, 3)):
                element, roll = rng.choice(elements), rng.random()
                if roll < 0.5 and element.attrib:
                    element.attrib[rng.choice(list(element.attrib))] = rng.choice(values)
                elif roll < 0.65 and element.attrib:
                    del element.attrib[rng.choice(list(element.attrib))]
                elif roll < 0.8 and len(element):
                    element.remove(rng.choice(list(element)))
                elif element.tag == "joint":
                    names = [j.get("name", "") for j in root.iter("joint")] + ["nowhere"]
                    ET.SubElement(element, "mimic", joint=rng.choice(names), multiplier=rng.choice(values + ["2"]))
            for options in ({}, {"runtime_parameters": True}, {"accept_invalid_inertia": True}):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DescriptionWarning)
                    try:
                        parse_urdf_text(ET.tostring(root), path.name, **options)
                    except DescriptionError:
                        pass
