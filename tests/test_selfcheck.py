"""The post-build self-check: where joints are sampled, tolerances relative to the model's magnitudes,
and --no-selfcheck (skipped, recorded, reported)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from codegen.extension.selfcheck import joint_range, reach
from robodyn.cache import SELFCHECK

ROOT = Path(__file__).resolve().parent.parent
ROBOTS = ROOT / "robots"


def _joint(kind: str, lower=None, upper=None):
    return SimpleNamespace(kind=kind, limits=SimpleNamespace(lower=lower, upper=upper))


@pytest.mark.parametrize("joint, expected", [
    (_joint("revolute"), (-np.pi, np.pi)),
    (_joint("revolute", 0.0, 0.0), (-np.pi, np.pi)),  # placeholder limits of exporters
    (_joint("revolute", 1.0, 1.0), (-np.pi, np.pi)),
    (_joint("revolute", 0.5, -0.5), (-np.pi, np.pi)),  # inverted: no width either
    (_joint("revolute", -0.5, 1.0), (-0.5, 1.0)),
    (_joint("revolute", -0.5, None), (-0.5, -0.5 + 2 * np.pi)),
    (_joint("revolute", None, 0.3), (0.3 - 2 * np.pi, 0.3)),
    (_joint("revolute", -np.inf, np.inf), (-np.pi, np.pi)),
    (_joint("prismatic"), (-2.5, 2.5)),
    (_joint("prismatic", 0.0, 0.0), (-2.5, 2.5)),
    (_joint("prismatic", 0.1, 0.4), (0.1, 0.4)),
    (_joint("prismatic", 0.2, None), (0.2, 5.2)),
])
def test_joint_sampling_range(joint, expected):
    assert joint_range(joint, 2.5) == pytest.approx(expected)


def _description(path: Path):
    from codegen.pipeline import describe, read_request

    return describe(read_request(path))


def test_reach_is_the_robot_length_scale(tmp_path):
    assert reach(_description(ROBOTS / "rr.yaml")) == pytest.approx(2.0, rel=0.5)  # two 1 m links
    assert reach(_description(ROBOTS / "pp.yaml")) == 1.0  # no offsets at all: 1 m


def _scaled_rr(tmp_path: Path, mass: float, length: float) -> Path:
    """rr with masses times ``mass`` and lengths times ``length`` (inertias follow)."""
    text = (ROBOTS / "rr.yaml").read_text()
    factors = {"m1": mass, "m2": mass, "a1": length, "a2": length, "ac1": length, "ac2": length,
               "I1": mass * length ** 2, "I2": mass * length ** 2}
    for name, factor in factors.items():
        text = re.sub(rf"^(  {name}: )([0-9.eE+-]+)", lambda m, f=factor: f"{m.group(1)}{float(m.group(2)) * f!r}",
                      text, count=1, flags=re.M)
    path = tmp_path / f"rr_{mass:g}_{length:g}.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("mass, length", [(1e6, 1e-3), (1e-4, 1e2)])
def test_selfcheck_passes_at_any_scale(tmp_path, mass, length):
    """A robot in grams and metres-of-hundreds, or tonnes and millimetres, checks like the original: the
    tolerances are relative to its own magnitudes."""
    from codegen.pipeline import build

    result = build(_scaled_rr(tmp_path, mass, length), cache_dir=tmp_path / "cache")
    assert result.selfcheck["status"] == "passed", json.dumps(result.selfcheck, indent=1)
    errors = {c["name"]: c["error"] for c in result.selfcheck["checks"]}
    assert errors["inverse_forward"] < 1e-12 and errors["inverse_forward_wrench"] < 1e-12
    assert errors["skew"] < 1e-6


def test_zero_width_prismatic_limits_are_sampled_over_the_reach(tmp_path):
    from codegen.pipeline import build

    text = (ROBOTS / "pp.yaml").read_text().replace("link: {mass: m1}", "link: {mass: m1}\n    limits: {lower: 0, upper: 0}")
    path = tmp_path / "pp_placeholder.yaml"
    path.write_text(text)
    result = build(path, cache_dir=tmp_path / "cache")
    assert result.selfcheck["status"] == "passed"


def test_no_selfcheck_is_skipped_recorded_and_reported(tmp_path):
    import robodyn

    description = tmp_path / "pendulum_unchecked.yaml"
    description.write_text((ROBOTS / "pendulum.yaml").read_text() + "\n# unchecked\n")
    root = tmp_path / "cache"
    command = [sys.executable, "-m", "codegen", str(description), "--cache-dir", str(root), "--no-selfcheck"]
    first = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert first.returncode == 0, first.stderr
    assert "self-check skipped" in first.stdout and "--no-selfcheck" in first.stdout
    (entry,) = root.glob("pendulum-*")
    assert json.loads((entry / "manifest.json").read_text())["selfcheck"] == "skipped"
    assert json.loads((entry / SELFCHECK).read_text()) == {"status": "skipped", "passed": None, "checks": []}
    second = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert second.returncode == 0 and "cache hit" in second.stdout and "skipped" in second.stdout
    robot = robodyn.load(description, cache_dir=root, selfcheck=False, verbose=False)
    assert robot.selfcheck["status"] == "skipped" and robot.options.selfcheck is False
    demo = subprocess.run([sys.executable, "-m", "robodyn", "demo", str(description), "--cache-dir", str(root),
                           "--no-selfcheck"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert demo.returncode == 0 and "self-check of the compiled module: skipped" in demo.stdout, demo.stderr
    # The check is part of the key: with it, another entry is built and checked.
    checked = subprocess.run(command[:-1] + ["--quiet"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert checked.returncode == 0 and len(list(root.glob("pendulum-*"))) == 2


@pytest.mark.parametrize("error", [2e-5, 1e-3])
def test_the_difference_checks_catch_a_wrong_derivative(load, error):
    """The differences' own error (their change when the step doubles) is subtracted before comparing: that
    must not hide a derivative that is wrong by more than the tolerance."""
    from codegen.extension.selfcheck import DIFFERENCE_TOLERANCE, _derivative_identities, _forward_derivative_check

    robot = load("rr")
    rng = np.random.default_rng(3)
    values = {"q": rng.uniform(-2, 2, (4, robot.n)), "qd": rng.uniform(0.5, 2, (4, robot.n)),
              "qdd": rng.uniform(-2, 2, (4, robot.n))}
    values["tau"] = robot.inverse_dynamics(values["q"], values["qd"], values["qdd"])
    has = {"inverse_dynamics", "inverse_dynamics_derivatives", "forward_dynamics", "forward_dynamics_derivatives"}
    assert all(check.passed for check in _derivative_identities(robot, has, values))

    class Wrong:  # the robot with a perturbed entry in each derivative
        def __getattr__(self, name):
            return getattr(robot, name)

        def inverse_dynamics_derivatives(self, *args):
            d_q, d_qd = robot.inverse_dynamics_derivatives(*args)
            d_q[0, 0] += error * np.abs(robot.M(args[0])).max()
            return d_q, d_qd

        def forward_dynamics_derivatives(self, *args):
            d_q, d_qd, d_tau = robot.forward_dynamics_derivatives(*args)
            d_qd[-1, 0] += error * np.abs(d_qd).max()
            return d_q, d_qd, d_tau

    checks = _derivative_identities(Wrong(), has, values)
    assert [c.name for c in checks if not c.passed] == ["inverse_dynamics_derivatives_vs_differences",
                                                        "forward_dynamics_derivatives_vs_differences"]
    assert min(c.error for c in checks) > DIFFERENCE_TOLERANCE
    assert not _forward_derivative_check(Wrong(), values).passed


def test_vanishing_forward_derivatives_pass(tmp_path):
    """iris's four rotors spin about their symmetric axes on a fixed base: every forward-dynamics derivative but
    M⁻¹ vanishes, and the compiled ones are rounding noise (-M⁻¹ times differences of equal inertias). The check
    must judge that noise on M's scale, as it does the inverse-dynamics derivatives, not against itself."""
    import robodyn

    try:
        path = robodyn.example_robot_data("iris_description/robots/iris.urdf")
    except FileNotFoundError as missing:
        pytest.skip(str(missing))
    robot = robodyn.load(path, cache_dir=tmp_path, verbose=False)
    checks = {c["name"]: c for c in robot.selfcheck["checks"]}
    assert robot.selfcheck["passed"] is True
    assert checks["forward_dynamics_derivatives_vs_differences"]["error"] < 1e-9
    d_q, d_qd, inverse = robot.forward_dynamics_derivatives(np.zeros(robot.n), np.ones(robot.n), np.ones(robot.n))
    assert np.max(np.abs(d_q)) + np.max(np.abs(d_qd)) < 1e-12 * np.max(np.abs(inverse))


def test_routines_that_are_zero_but_for_rounding_pass(tmp_path):
    """g and C of tests/urdf/zero_gravity_torques.urdf vanish for every state (centres of mass on the joint axes,
    isotropic inertias), so the compiled and the symbolic values are both rounding noise: the comparison must judge
    that noise on the robot's magnitudes, not against itself (it failed the build with an error of 1.6)."""
    import robodyn

    robot = robodyn.load(ROOT / "tests" / "urdf" / "zero_gravity_torques.urdf", cache_dir=tmp_path, verbose=False)
    assert robot.selfcheck["passed"] is True
    q, qd = np.array([0.4, -1.1]), np.array([0.7, 2.0])
    assert np.max(np.abs(robot.g(q))) < 1e-14 and np.max(np.abs(robot.C(q, qd))) < 1e-14
    assert np.max(np.abs(robot.M(q))) > 0.1


def test_the_rounding_floor_of_an_output_comes_from_its_own_quantity():
    """rr in millimetres and grams: torques of 1e11, an inverse inertia of 1e-10. A floor from the largest value of
    any routine would let a wrong M⁻¹ pass; each output's comes from its quantity, M⁻¹ has none."""
    from codegen.extension.selfcheck import ZERO_FLOOR, rounding_floors

    references = {"gravity": [np.full((20, 2), 9.4e11)], "mass_matrix": [np.full((20, 2, 2), 1.4e11)],
                  "forward_dynamics": [np.full((20, 2), 10.0)],
                  "forward_dynamics_derivatives": [np.full((20, 2, 2), 3.0), np.full((20, 2, 2), 0.5),
                                                   np.full((20, 2, 2), 1.2e-10)],
                  "tool_pose": [np.full((20, 4, 4), 1e3)], "coriolis_matrix": None}
    floors = rounding_floors(references)
    assert floors["gravity"] == floors["mass_matrix"] == [ZERO_FLOOR * 9.4e11]
    assert floors["forward_dynamics_derivatives"] == [ZERO_FLOOR * 10.0, ZERO_FLOOR * 10.0, 0.0]
    assert floors["tool_pose"] == [0.0] and floors["coriolis_matrix"] == []
