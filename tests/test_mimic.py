"""Mimic joints: linear couplings q_tree = G q + b, checked against Pinocchio.

The oracle is Pinocchio's model of the whole tree with every mimic joint as a free joint
(``buildModelFromUrdf`` without mimic support), projected on the independent coordinates:

    τ = Gᵀ rnea(Gq + b, Gq̇, Gq̈),  M = Gᵀ crba(Gq + b) G,  C = Gᵀ C_tree G,  g = Gᵀ g_tree,

where G (one multiplier per row) and b come from the URDF's <mimic> tags, read here on their
own. Compared to 1e-9 relative on the Franka Panda of example-robot-data (its second finger
mimics the first) and on tests/urdf/mimic_chain.urdf (a chain of mimics with multipliers ≠ 1,
offsets ≠ 0, a prismatic mimic on another branch and damping on a mimic joint), by both
derivation routes; plus the identities (M symmetric positive definite, inverse ∘ forward
dynamics = identity) and the description's handling of chains, locks and errors.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pinocchio
import pytest

import robodyn
from codegen.description.urdf import parse_urdf_file, parse_urdf_text
from codegen.errors import DescriptionError
from test_pinocchio import PANDA, _urdf

CHAIN = Path(__file__).resolve().parent / "urdf" / "mimic_chain.urdf"
TOLERANCE = 1e-9
STATES = 60


def _coupling(path: Path, model) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(independent joint names, G, b) from the URDF's <mimic> tags, chains composed, for the
    joint order of the Pinocchio ``model`` (all joints one-dimensional)."""
    root = ET.parse(path).getroot()
    mimic = {}
    for joint in root.iter("joint"):
        tag = joint.find("mimic")
        if tag is not None:
            mimic[joint.get("name")] = (tag.get("joint"), float(tag.get("multiplier", 1)), float(tag.get("offset", 0)))

    def resolve(name):
        if name not in mimic:
            return name, 1.0, 0.0
        source, m, o = mimic[name]
        root_name, m2, o2 = resolve(source)
        return root_name, m * m2, m * o2 + o

    names = [model.names[i] for i in range(1, model.njoints)]
    assert model.nq == model.nv == len(names)
    independent = [name for name in names if name not in mimic]
    G, b = np.zeros((model.nv, len(independent))), np.zeros(model.nq)
    for row, name in enumerate(names):
        source, m, o = resolve(name)
        G[row, independent.index(source)] = m
        b[row] = o
    return independent, G, b


def _relative(a, b):
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)


def _damping(path: Path, names: list[str]) -> np.ndarray:
    """Viscous and Coulomb friction per joint of ``names``, from the URDF's <dynamics>."""
    values = {}
    for joint in ET.parse(path).getroot().iter("joint"):
        tag = joint.find("dynamics")
        if tag is not None:
            values[joint.get("name")] = (float(tag.get("damping", 0)), float(tag.get("friction", 0)))
    return np.array([values.get(name, (0.0, 0.0)) for name in names])


def _compare(robot, path: Path, seed: int = 0) -> dict:
    model = pinocchio.buildModelFromUrdf(str(path))  # mimic joints as free joints
    data = model.createData()
    independent, G, b = _coupling(path, model)
    assert list(robot.joint_names) == independent
    friction_tree = _damping(path, [model.names[i] for i in range(1, model.njoints)])
    rng = np.random.default_rng(seed)
    n = robot.n
    lower = np.array([-np.pi if lim["lower"] is None else lim["lower"] for lim in robot.joint_limits])
    upper = np.array([np.pi if lim["upper"] is None else lim["upper"] for lim in robot.joint_limits])
    tool_joint = model.njoints - 1  # the default tool: the last moving joint's link
    worst = dict.fromkeys(("M", "C", "g", "friction", "inverse", "forward", "fk", "jacobian", "energy"), 0.0)
    for _ in range(STATES):
        q, qd, qdd = rng.uniform(lower, upper), rng.uniform(-2, 2, n), rng.uniform(-5, 5, n)
        tau = rng.uniform(-20, 20, n)
        x, xd, xdd = G @ q + b, G @ qd, G @ qdd
        M = pinocchio.crba(model, data, x)
        M = np.triu(M) + np.triu(M, 1).T
        M_ref = G.T @ M @ G
        C_ref = G.T @ pinocchio.computeCoriolisMatrix(model, data, x, xd) @ G
        g_ref = G.T @ pinocchio.computeGeneralizedGravity(model, data, x)
        f_ref = G.T @ (friction_tree[:, 0] * xd + friction_tree[:, 1] * np.sign(xd))
        tau_ref = G.T @ pinocchio.rnea(model, data, x, xd, xdd) + f_ref
        qdd_ref = np.linalg.solve(M_ref, tau - C_ref @ qd - g_ref - f_ref)
        pinocchio.forwardKinematics(model, data, x, xd)
        pinocchio.computeJointJacobians(model, data, x)
        jacobian = pinocchio.getJointJacobian(model, data, tool_joint, pinocchio.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        energy = pinocchio.computeKineticEnergy(model, data, x, xd) + pinocchio.computePotentialEnergy(model, data, x)
        for key, ours, ref in (("M", robot.M(q), M_ref), ("C", robot.C(q, qd), C_ref), ("g", robot.g(q), g_ref),
                               ("friction", robot.friction(qd), f_ref),
                               ("inverse", robot.inverse_dynamics(q, qd, qdd), tau_ref),
                               ("forward", robot.forward_dynamics(q, qd, tau), qdd_ref),
                               ("fk", robot.fk(q), data.oMi[tool_joint].homogeneous),
                               ("jacobian", robot.jacobian(q), jacobian @ G),
                               ("energy", np.array([robot.total_energy(q, qd)]), np.array([energy]))):
            worst[key] = max(worst[key], _relative(ours, ref))
    return worst


def _identities(robot, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(20):
        q, qd, tau = rng.uniform(-1, 1, robot.n), rng.uniform(-2, 2, robot.n), rng.uniform(-10, 10, robot.n)
        M = robot.M(q)
        assert np.allclose(M, M.T, rtol=0, atol=1e-14 * np.abs(M).max())
        assert np.linalg.eigvalsh(M).min() > 0
        qdd = robot.forward_dynamics(q, qd, tau)
        assert _relative(robot.inverse_dynamics(q, qd, qdd), tau) < 1e-10


@pytest.fixture(scope="module")
def panda(tmp_path_factory):
    return robodyn.load(_urdf(PANDA), cache_dir=tmp_path_factory.mktemp("mimic"), verbose=False)


def test_panda_with_mimic_finger_agrees_with_pinocchio(panda):
    assert panda.n == 8 and panda.joint_names[-1] == "panda_finger_joint1"
    assert "panda_finger_joint2 = panda_finger_joint1" in panda.metadata["summary"]
    worst = _compare(panda, _urdf(PANDA))
    assert all(error <= TOLERANCE for error in worst.values()), worst
    _identities(panda)


@pytest.mark.parametrize("method", ["lagrange", "recursive"])
def test_mimic_chain_agrees_with_pinocchio(method, tmp_path):
    # Five bodies by Euler-Lagrange: without trigonometric simplification, which would take minutes.
    robot = robodyn.load(CHAIN, cache_dir=tmp_path, method=method, simplify=method != "lagrange", verbose=False)
    assert robot.joint_names == ("j1", "j2", "j5") and robot.metadata["method"] == method
    worst = _compare(robot, CHAIN)
    assert all(error <= TOLERANCE for error in worst.values()), worst
    _identities(robot)
    # The damping of the mimic joint j3 (0.7, at its own velocity -1.5 q̇2) shows in j2's friction.
    assert robot.friction(np.array([0.0, 1.0, 0.0]))[1] == pytest.approx(0.7 * 1.5**2 + 0.2 * 1.5)


def test_articulated_body_algorithm_refuses_couplings():
    from codegen.model import derive_model
    from codegen.model.routines import define_routines
    from robodyn.errors import BuildError
    from robodyn.options import BuildOptions

    options = BuildOptions(method="recursive", forward="aba")
    model = derive_model(parse_urdf_file(CHAIN), options)
    assert model.aba is None
    with pytest.raises(BuildError, match="mimic.*--forward ltdl"):
        define_routines(model, options)


# --- the description ------------------------------------------------------------------------------

def test_chain_is_resolved_to_its_independent_joint():
    description = parse_urdf_file(CHAIN)
    assert [j.name for j in description.joints] == ["j1", "j2", "j5"]
    assert [j.name for j in description.tree] == ["j1", "j2", "j3", "j4", "j5"]
    assert [(c, float(m), float(o)) for c, m, o in description.couplings] == [
        (0, 1, 0), (1, 1, 0), (1, -1.5, 0.3), (1, -0.03, 0.016), (2, 1, 0)]
    # j5 rides on j4, which moves with j2: M couples j5 with j2, so j2 is its parent for the LᵀDL.
    assert [j.parent for j in description.joints] == [-1, 0, 1]
    assert "j3 = -1.5*j2 + 0.3" in description.summary and "j4 = -0.03*j2 + 0.016" in description.summary


def test_coordinate_tree_has_no_fill_in():
    """Two independent joints on separate branches, both moved by one coupled coordinate: M couples them
    through it, and the elimination tree says so (their order decides which is the parent)."""
    from codegen.description.model import coordinate_parents

    text = CHAIN.read_text().replace('<parent link="l4"/><child link="l5"/>', '<parent link="l3"/><child link="l5"/>')
    description = parse_urdf_text(text, "moved.urdf")
    tree = description.tree
    coordinate = [c for c, _, _ in description.couplings]
    parents = coordinate_parents(tree, coordinate, description.n)
    assert parents == tuple(j.parent for j in description.joints)
    assert all(p < i for i, p in enumerate(parents))


def test_mimic_of_a_locked_joint_is_locked():
    description = parse_urdf_text(CHAIN.read_text(), "chain.urdf", lock={"j2": 0.2})
    # j3 = -1.5 * 0.2 + 0.3 = 0 and j4 = 0.02 * 0 + 0.01: both locked with j2.
    assert [j.name for j in description.joints] == ["j1", "j5"] and not description.bodies
    assert "j3=0" in description.summary and "j4=0.01" in description.summary


def test_locking_a_mimic_locks_what_it_follows():
    """A locked follower fixes its chain: j3 = -1.5 j2 + 0.3 locked at 0.1 puts j2 at 2/15, and j4 (which mimics
    j3) at 0.02 * 0.1 + 0.01; the model equals the one with j2 locked there, where the coupling holds."""
    description = parse_urdf_text(CHAIN.read_text(), "chain.urdf", lock={"j3": 0.1})
    assert [j.name for j in description.joints] == ["j1", "j5"] and not description.bodies
    assert "j2=0.133333" in description.summary and "j4=0.012" in description.summary
    by_source = parse_urdf_text(CHAIN.read_text(), "chain.urdf", lock={"j2": 2 / 15})
    assert "j3=0.1" in by_source.summary and "j4=0.012" in by_source.summary
    for a, b in zip(description.joints, by_source.joints):
        difference = (a.placement - b.placement).applyfunc(lambda e: abs(float(e)))
        assert max(difference) < 1e-12, (a.name, difference)
    # The same lock given twice is accepted; two locks the coupling cannot both meet are an error naming both.
    assert parse_urdf_text(CHAIN.read_text(), "chain.urdf", lock={"j3": 0.1, "j2": 2 / 15}).n == 2
    with pytest.raises(DescriptionError) as info:
        parse_urdf_text(CHAIN.read_text(), "chain.urdf", lock={"j3": 0.1, "j2": 0.0})
    message = str(info.value)
    assert "lock[j3]" in message and "'j2' is locked at 0" in message and "puts it at 0.3" in message, message


def test_a_mimic_lock_outside_what_it_follows_can_reach_is_an_error():
    # j4 = 0.02 j3 + 0.01 and j3 = -1.5 j2 + 0.3 compose to j4 = -0.03 j2 + 0.016: j4 = 0.0 puts j2 at 8/15.
    assert "j2=0.533333" in parse_urdf_text(CHAIN.read_text(), "chain.urdf", lock={"j4": 0.0}).summary
    # With j2's limits narrowed to [-0.5, 0.5] that lock is out of reach.
    narrow = CHAIN.read_text().replace('<limit lower="-1.5" upper="1.5"', '<limit lower="-0.5" upper="0.5"')
    with pytest.raises(DescriptionError) as info:
        parse_urdf_text(narrow, "chain.urdf", lock={"j4": 0.0})
    message = str(info.value)
    assert "lock[j4]" in message and "position 0.533333, which the lock of its mimic 'j4' gives 'j2'" in message, \
        message
    assert "outside the joint's limits [-0.5, 0.5]" in message, message
    # With a zero multiplier the mimic stays at its offset: locking it elsewhere is an error.
    text = CHAIN.read_text().replace('multiplier="0.02" offset="0.01"', 'multiplier="0" offset="0.01"')
    assert parse_urdf_text(text, "chain.urdf", lock={"j4": 0.01}).n == 3
    with pytest.raises(DescriptionError, match="the multiplier is 0, which puts it at 0.01"):
        parse_urdf_text(text, "chain.urdf", lock={"j4": 0.02})


def test_a_mimic_of_a_joint_with_a_problem_reports_that_problem_only():
    text = CHAIN.read_text().replace('<mimic joint="j2"', '<mimic joint="j2"', 1)
    start = text.index('<joint name="j2"')
    axis = text.index("<axis", start)
    text = text[:axis] + '<axis xyz="0 0 0"/>' + text[text.index("/>", axis) + 2:]
    error = _error(text)
    assert len(error.problems) == 1 and "zero vector" in str(error) and "not a joint" not in str(error), str(error)


def test_zero_multiplier_locks_the_joint():
    text = CHAIN.read_text().replace('multiplier="0.02" offset="0.01"', 'multiplier="0" offset="0.01"')
    description = parse_urdf_text(text, "chain.urdf")
    assert [j.name for j in description.tree] == ["j1", "j2", "j3", "j5"]


def _error(text: str) -> DescriptionError:
    with pytest.raises(DescriptionError) as info:
        parse_urdf_text(text, "chain.urdf")
    return info.value


def test_mimic_of_a_missing_joint():
    error = _error(CHAIN.read_text().replace('<mimic joint="j2"', '<mimic joint="elbow"'))
    assert error.field == "joint[j3].mimic" and error.line == 58
    assert "mimics 'elbow', which is not a joint of this URDF" in error.message


def test_a_locked_mimic_of_a_missing_joint_is_just_locked():
    """How a file with a broken mimic loads (alex_psyonic_hands.urdf, docs/urdf_sweep.md): lock the mimic."""
    description = parse_urdf_text(CHAIN.read_text().replace('<mimic joint="j2"', '<mimic joint="elbow"'),
                                  "chain.urdf", lock={"j3": 0.1})
    assert [j.name for j in description.joints] == ["j1", "j2", "j5"] and "j4=0.012" in description.summary


def test_mimic_of_a_missing_joint_suggests_a_prefixed_name():
    # alex_psyonic_hands.urdf writes mimic joint="index_q1" for the joint Left_index_q1.
    error = _error(CHAIN.read_text().replace('name="j2"', 'name="Left_j2"'))
    assert "did you mean 'Left_j2'?" in error.message


def test_mimic_of_a_fixed_joint():
    text = CHAIN.read_text().replace('<joint name="j2" type="revolute">', '<joint name="j2" type="fixed">')
    error = _error(text)
    assert error.field == "joint[j3].mimic" and "which is a fixed joint" in error.message


def test_mimic_cycle():
    text = CHAIN.read_text().replace('<limit lower="-1.5" upper="1.5" effort="50" velocity="2"/>',
                                     '<limit lower="-1.5" upper="1.5" effort="50" velocity="2"/>'
                                     '<mimic joint="j4"/>')
    error = _error(text)
    assert "mimic joints form a cycle" in str(error) and "j2" in str(error) and "j4" in str(error)


def test_mimic_without_a_joint_attribute():
    error = _error(CHAIN.read_text().replace('<mimic joint="j2"', '<mimic'))
    assert error.field == "joint[j3].mimic" and "missing attribute 'joint'" in error.message


def test_all_mimic_problems_are_reported_at_once():
    text = CHAIN.read_text().replace('<mimic joint="j2"', '<mimic joint="nope"').replace(
        '<mimic joint="j3" multiplier="0.02"', '<mimic joint="j1" multiplier="x"')
    error = _error(text)
    assert [p.field for p in error.problems] == ["joint[j4].mimic.multiplier", "joint[j3].mimic"]
