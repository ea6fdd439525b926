"""--exact-angles (BuildOptions.exact_angles): an angle of the description within 1e-9 rad of a multiple of
pi/2 is taken as exactly that multiple, only when asked for.

The UR5 of example-robot-data writes rpy="0.0 1.57079632679 0.0" (cos = 4.9e-12, not 0): by default the
model keeps the file's angle, as Pinocchio does; with the option the quarter turns are exact, the routines
need fewer operations and still agree with Pinocchio to 1e-9. One UR5 build per setting, shared by the
module (the default one is the session cache's, as test_regressor's).
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import sympy as sp
import test_pinocchio
from test_pinocchio import TOLERANCE, UR5, _pinocchio_model, _relative, _states, _urdf

import robodyn
from codegen import geometry
from codegen.description import parse_source
from robodyn import cache
from robodyn.options import BuildOptions

ROOT = Path(__file__).resolve().parent.parent
ROUTINES = ("mass_matrix", "inverse_dynamics", "coriolis_matrix", "gravity", "forward_dynamics")
HALF_PI = math.pi / 2
STATES = 50
EXACT = BuildOptions(exact_angles=True)


@pytest.fixture(scope="module")
def ur5_path() -> Path:
    return _urdf(UR5)


@pytest.fixture(scope="module")
def ur5(ur5_path, cache_dir):
    return robodyn.load(ur5_path, cache_dir=cache_dir)


@pytest.fixture(scope="module")
def ur5_exact(ur5_path, cache_dir):
    return robodyn.load(ur5_path, cache_dir=cache_dir, exact_angles=True)


# --- the UR5 --------------------------------------------------------------------------------------

def test_default_keeps_the_files_angles(ur5_path):
    """Without the option nothing changes: the parsed model is the same as with exact_angles=False (the UR5's
    shoulder_lift placement keeps cos(1.57079632679) = 4.9e-12), and the options recorded in a default build's
    cache key say it is off."""
    data = ur5_path.read_bytes()
    default = parse_source(data, str(ur5_path))
    assert default == parse_source(data, str(ur5_path), BuildOptions(exact_angles=False))
    lift = next(joint for joint in default.joints if joint.name == "shoulder_lift_joint")
    assert 0 < float(lift.placement[0, 0]) < 1e-11 and float(lift.placement[0, 0]) == pytest.approx(
        math.cos(1.57079632679), rel=1e-12)
    exact = parse_source(data, str(ur5_path), EXACT)
    assert next(j for j in exact.joints if j.name == "shoulder_lift_joint").placement[:3, :3] == \
        sp.Matrix([[0, 0, 1], [0, 1, 0], [-1, 0, 0]])
    assert BuildOptions().as_dict()["exact_angles"] is False and BuildOptions().flags() == []
    assert cache.key_inputs(data, BuildOptions())["options"] == BuildOptions().as_dict()


def test_exact_angles_take_fewer_operations(ur5, ur5_exact, record_property):
    counts = {name: (ur5.operation_counts[name], ur5_exact.operation_counts[name]) for name in ROUTINES}
    record_property("operation_counts", counts)
    print("UR5 operations (default -> --exact-angles): "
          + ", ".join(f"{name} {before} -> {after}" for name, (before, after) in counts.items()))
    assert all(after < before for before, after in counts.values()), counts
    assert ur5_exact.metadata["options"]["exact_angles"] is True and ur5.metadata["options"]["exact_angles"] is False
    assert ur5_exact.options.exact_angles and not ur5.options.exact_angles


def test_exact_ur5_agrees_with_pinocchio(ur5, ur5_exact, ur5_path):
    """The snapped model moves the UR5's frames by at most 4.9e-12 rad: the file's model (Pinocchio's) still
    agrees to 1e-9 relative, by test_pinocchio's comparisons (M, C, g, friction, inverse and forward dynamics,
    tool pose and Jacobian at 200 random states; the inverse dynamics derivatives), and so does the default
    build."""
    pair = (ur5_exact, _pinocchio_model(ur5_path, ()))
    test_pinocchio.test_dynamics_agree_with_pinocchio(pair)
    test_pinocchio.test_inverse_dynamics_derivatives_agree_with_pinocchio(pair)
    worst = 0.0
    for q, qd, qdd, _ in _states(ur5_exact, pair[1], STATES, 1):
        worst = max(worst, _relative(ur5_exact.inverse_dynamics(q, qd, qdd), ur5.inverse_dynamics(q, qd, qdd)))
    assert worst <= TOLERANCE


def test_exact_angles_change_the_cache_key(ur5_path, ur5, ur5_exact):
    data = ur5_path.read_bytes()
    assert cache.cache_key(data, EXACT) != cache.cache_key(data, BuildOptions())
    assert ur5_exact.manifest["key"] == cache.cache_key(data, EXACT) != ur5.manifest["key"]
    assert ur5_exact.manifest["options"]["exact_angles"] is True
    assert BuildOptions.from_dict(EXACT.as_dict()) == EXACT and BuildOptions.from_dict(BuildOptions().as_dict()) \
        == BuildOptions()


# --- the command lines ----------------------------------------------------------------------------

def test_codegen_flag(ur5_path, ur5_exact, cache_dir):
    """``python -m codegen --exact-angles`` gives the options of robodyn.load(exact_angles=True), hence its cache
    entry (a cache hit here, unless the generator's sources changed since the fixture built it)."""
    import codegen.__main__ as cli
    from robodyn.options import from_arguments

    assert from_arguments(cli._parser().parse_args([str(ur5_path), "--exact-angles"])) == ur5_exact.options == EXACT
    assert from_arguments(cli._parser().parse_args([str(ur5_path)])) == BuildOptions()
    result = subprocess.run([sys.executable, "-m", "codegen", str(ur5_path), "--exact-angles", "--cache-dir",
                             str(cache_dir)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr
    module = Path(re.search(r"^(?:cache hit: |built )(\S+)", result.stdout, re.MULTILINE).group(1))
    assert json.loads((module.parent / cache.MANIFEST).read_text())["options"]["exact_angles"] is True
    assert "exact_angles=True" in result.stdout and "--exact-angles" in result.stdout


@pytest.mark.parametrize("argv", [
    ["demo", "robot.urdf"], ["simulate", "robot.urdf"], ["excite", "robot.urdf", "--out", "t.json"],
    ["measure", "robot.urdf", "t.json", "--out", "m.csv"], ["identify", "robot.yaml", "m.csv", "--out", "i.yaml"]],
    ids=lambda argv: argv[0])
def test_every_robodyn_subcommand_takes_the_flag(argv, monkeypatch):
    """Each ``python -m robodyn`` subcommand parses --exact-angles into its BuildOptions (the command itself is
    replaced: only the command line is under test)."""
    import robodyn.__main__ as cli
    from robodyn import errors
    from robodyn.options import from_arguments

    seen = []
    monkeypatch.setattr(errors, "run_command", lambda command, args, debug=False: seen.append(args) or 0)
    for flags, expected in (([], False), (["--exact-angles"], True)):
        assert cli.main(argv + flags) == 0
        assert from_arguments(seen[-1]).exact_angles is expected


def test_help_describes_the_flag():
    result = subprocess.run([sys.executable, "-m", "codegen", "--help"], capture_output=True, text=True, cwd=ROOT,
                            check=True)
    text = "".join(result.stdout.split())  # argparse wraps lines, at hyphens too
    assert "--exact-angles" in text and "1e-9radofamultipleofpi/2" in text


# --- which angles, and how close ------------------------------------------------------------------

def _urdf_text(angle: str, inertial: str = "0") -> bytes:
    link = ('<link name="{}"><inertial><origin xyz="0.1 0 0" rpy="0 {} 0"/><mass value="1"/>'
            '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.03"/></inertial></link>')
    joint = ('<joint name="{}" type="revolute"><parent link="{}"/><child link="{}"/>'
             '<origin xyz="0 0 0.1" rpy="0 {} 0"/><axis xyz="0 0 1"/><limit lower="-3" upper="3"/></joint>')
    return "\n".join(['<robot name="snap">', '<link name="base"/>', link.format("a", inertial), link.format("b", 0),
                      link.format("c", 0), joint.format("j1", "base", "a", 0), joint.format("j2", "a", "b", angle),
                      joint.format("j3", "b", "c", 0), "</robot>"]).encode()


def _yaml_text(angle: str) -> bytes:
    link = "{mass: 1, com: [0.1, 0, 0], inertia: {xx: 0.01, yy: 0.02, zz: 0.03}}"
    return f"""name: snap
joints:
  - {{name: j1, type: revolute, axis: [0, 0, 1], origin: {{xyz: [0, 0, 0.1], rpy: [0, {angle}, 0]}}, link: {link}}}
  - {{name: j2, type: revolute, dh: {{a: 0.2, alpha: {angle}, theta: {angle}}}, link: {link}}}
tool: {{rpy: [{angle}, 0, 0]}}
""".encode()


def _exact(matrix) -> bool:
    return not sp.Matrix(matrix).has(sp.Float)


def _origin(angle) -> sp.Matrix:
    return geometry.homogeneous(geometry.rpy(0, angle, 0), [0, 0, sp.Rational(1, 10)])


NEAR = [("1.57079632679", sp.pi / 2), ("-1.57079632679", -sp.pi / 2), ("3.14159265359", sp.pi),
        ("4.71238898038", 3 * sp.pi / 2), ("1e-12", 0), (repr(HALF_PI + 0.9e-9), sp.pi / 2),
        (repr(-HALF_PI - 0.9e-9), -sp.pi / 2)]
FAR = [repr(HALF_PI + 1e-6), repr(HALF_PI - 1e-6), repr(HALF_PI + 1.1e-9), "1e-6", "0.7853981634"]


@pytest.mark.parametrize("text, angle", NEAR, ids=[text for text, _ in NEAR])
def test_urdf_angles_near_quarter_turns_become_exact(text, angle):
    default = parse_source(_urdf_text(text), "snap.urdf")
    exact = parse_source(_urdf_text(text), "snap.urdf", EXACT)
    assert exact.joints[1].placement == _origin(angle)
    assert default.joints[1].placement != exact.joints[1].placement and not _exact(default.joints[1].placement)


@pytest.mark.parametrize("text, angle", NEAR, ids=[text for text, _ in NEAR])
def test_yaml_angles_near_quarter_turns_become_exact(text, angle):
    """Origin rpy, DH alpha and theta, the tool's rpy."""
    default = parse_source(_yaml_text(text), "snap.yaml")
    exact = parse_source(_yaml_text(text), "snap.yaml", EXACT)
    assert exact.joints[0].placement == _origin(angle)
    assert (exact.joints[1].placement, exact.joints[1].successor) == geometry.dh_standard(
        sp.Rational(1, 5), angle, 0, angle)
    assert exact.tool == geometry.homogeneous(geometry.rpy(angle, 0, 0))
    assert default.joints[0].placement != exact.joints[0].placement and default.tool != exact.tool


@pytest.mark.parametrize("text", FAR)
def test_angles_farther_than_1e9_are_kept(text):
    """1e-6 (or 1.1e-9) off a quarter turn is an angle the file means: the option leaves it as it is."""
    for source, path in ((_urdf_text(text, inertial=text), "snap.urdf"), (_yaml_text(text), "snap.yaml")):
        assert parse_source(source, path, EXACT) == parse_source(source, path)


def test_inertial_rpy_lock_positions_and_tool_offset_are_angles_too():
    near = "1.57079632679"
    default = parse_source(_urdf_text("0", inertial=near), "snap.urdf")
    exact = parse_source(_urdf_text("0", inertial=near), "snap.urdf", EXACT)
    # The link's inertia rotated a quarter turn about y: its principal moments swap, exactly.
    assert exact.joints[0].inertial.inertia == sp.diag(sp.Rational(3, 100), sp.Rational(2, 100), sp.Rational(1, 100))
    assert not _exact(default.joints[0].inertial.inertia)
    options = BuildOptions(lock={"j2": float(near)})
    locked = parse_source(_urdf_text("0"), "snap.urdf", options.replace(exact_angles=True))
    assert locked.joints[1].placement == _origin(0) * geometry.homogeneous(geometry.rot_z(sp.pi / 2)) * _origin(0)
    assert not _exact(parse_source(_urdf_text("0"), "snap.urdf", options).joints[1].placement)
    offset = BuildOptions(tool="c", tool_offset=(0, 0, 0.1, float(near), 0, 0))
    tool = parse_source(_urdf_text("0"), "snap.urdf", offset.replace(exact_angles=True)).tool
    assert tool == geometry.homogeneous(geometry.rot_x(sp.pi / 2), [0, 0, sp.Rational(1, 10)])
    assert parse_source(_urdf_text("0"), "snap.urdf", offset).tool != tool


def test_nearest_quarter_turn():
    assert geometry.nearest_quarter_turn(sp.Rational(157079632679, 10**11)) == sp.pi / 2
    assert geometry.nearest_quarter_turn(sp.pi / 3) is None and geometry.nearest_quarter_turn(sp.Symbol("a")) is None
    assert geometry.nearest_quarter_turn(-sp.pi) == -sp.pi and geometry.nearest_quarter_turn(sp.Integer(0)) == 0
    big = sp.Integer(10**6) * sp.pi / 2 + sp.Rational(1, 10**10)  # judged with enough digits for its magnitude
    assert geometry.nearest_quarter_turn(big) == sp.Integer(10**6) * sp.pi / 2
    assert geometry.nearest_quarter_turn(big + sp.Rational(1, 10**6)) is None
