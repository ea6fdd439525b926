"""python -m robodyn simulate on closed chains (issue 12): by default the platform goes round a circle through its
starting point, tracked by computed torque in the actuated coordinates (robodyn.task_space); the summary adds the
platform's tracking error and the smallest singularity measures, --plot draws the path in the plane, and a run into
a type-2 singularity ends in one line on stderr with status 1."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROBOTS, ROOT

from robodyn.errors import EXIT_INPUT, EXIT_USAGE

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
NUMBER = r"([-+0-9.e]+)"


def _simulate(robot: str, *arguments, cache_dir) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "robodyn", "simulate", str(ROBOTS / f"{robot}.yaml"),
                           "--cache-dir", str(cache_dir), *map(str, arguments)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300, env=dict(os.environ))


def _one_line_error(result: subprocess.CompletedProcess, status: int, *texts: str) -> str:
    assert result.returncode == status, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1, result.stderr
    for text in texts:
        assert text in errors[0], errors[0]
    return errors[0]


@pytest.fixture(scope="module")
def built(load):
    """Build both robots once in the session's cache (the commands then only load them)."""
    return {name: load(name) for name in ("biglide", "fivebar")}


# Computed torque on the exact model: the error is the zero-order hold's (the torque is held over each 1 ms
# period while the reference moves on), O(period): 9.1e-7 m (biglide) and 5.7e-6 m (fivebar) at 1 kHz and the
# default 20 rad/s; a wider bandwidth takes the five-bar below 1e-6 m (2.1e-7 m at 100 rad/s).
@pytest.mark.parametrize("robot, arguments, bound", [
    ("biglide", [], 2e-6),
    ("fivebar", [], 1e-5),
    ("fivebar", ["--omega", "100"], 1e-6),
])
def test_the_platform_goes_round_a_circle_under_computed_torque(built, cache_dir, tmp_path, robot, arguments, bound):
    plot, summary_file = tmp_path / "run.png", tmp_path / "run.json"
    result = _simulate(robot, *arguments, "--plot", plot, "--json", summary_file, cache_dir=cache_dir)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert re.search(r"platform path: a circle of radius 0\.03 m through \(x = [^)]*\) in 4 s, working mode", out)
    error = float(re.search(rf"platform tracking error \(x, y\): max {NUMBER} m", out).group(1))
    assert 0.0 < error < bound, out
    type2, type1 = map(float, re.search(rf"type 2 \(det A\) {NUMBER}, type 1 \(det B\) {NUMBER}", out).groups())
    assert 0.05 < type2 <= 1.0 and 0.05 < type1 <= 1.0  # the path was checked to keep away from both
    summary = json.loads(summary_file.read_text())
    assert summary["reference"] == "circle" and summary["controller"] == "computed-torque"
    assert summary["platform_tracking_error_max"] == pytest.approx(error, rel=1e-3)
    assert summary["singularity_type2_min"] == pytest.approx(type2, rel=1e-2)
    assert summary["path"]["radius"] == 0.03 and summary["path"]["duration_s"] == 4.0
    assert plot.read_bytes().startswith(PNG_SIGNATURE) and plot.stat().st_size > 20_000
    assert f"plot written to {plot}" in out


def test_a_joint_reference_on_a_closed_chain_reports_the_platform_too(built, cache_dir):
    result = _simulate("biglide", "--reference", "quintic", "--duration", "1", cache_dir=cache_dir)
    assert result.returncode == 0, result.stderr
    assert "platform path" not in result.stdout  # the joints' quintic, through the compiled loop
    assert re.search(rf"platform tracking error \(x, y\): max {NUMBER} m", result.stdout)
    assert "smallest normalised singularity measures" in result.stdout


def test_a_path_near_a_singularity_is_refused_before_the_run(built, cache_dir):
    _one_line_error(_simulate("biglide", "--q0", "0.30005,-0.30005", cache_dir=cache_dir), EXIT_INPUT,
                    "comes near a type-2 singularity", "at t = 0 s", "choose a smaller path or another start")


def test_a_run_into_a_type2_singularity_is_one_line_with_its_time(built, cache_dir):
    """The controller's model has longer legs (0.4 m for 0.3606 m): the circle it plans, fine for the model, drives
    the real biglide's legs into alignment. The Python loop checks the measure after every step."""
    result = _simulate("biglide", "--model-set", "l=0.4", "--radius", "0.05", "--q0", "0.25,-0.25",
                       "--integrator", "semi-implicit-euler", cache_dir=cache_dir)
    line = _one_line_error(result, EXIT_INPUT, "type-2 (parallel) singularity at t = ", "--q0")
    assert 1.3 < float(re.search(rf"at t = {NUMBER} s", line).group(1)) < 1.7
    assert "this error's t, q, qd" not in line  # the Python API's pointer stays out of the command line
    assert not result.stdout.strip()  # no summary of a run that did not finish


def test_a_joint_motion_through_the_locus_is_reported_as_a_singularity(built, cache_dir):
    result = _simulate("biglide", "--reference", "quintic", "--q0", "0.25,-0.25", cache_dir=cache_dir)
    _one_line_error(result, EXIT_INPUT, "type-2 (parallel) singularity at t = 1.25")


def test_usage_errors_of_the_circle(tmp_path):
    cache = tmp_path / "cache"
    for robot, arguments, text in [("biglide", ["--controller", "pd", "--reference", "circle"], "computed-torque"),
                                   ("biglide", ["--radius", "0"], "--radius"),
                                   ("biglide", ["--radius", "nan"], "--radius")]:
        result = _simulate(robot, *arguments, cache_dir=cache)
        assert result.returncode == EXIT_USAGE and text in result.stderr, result.stderr
    assert not cache.exists()  # refused before building


def test_a_circle_needs_a_closed_chain(load, cache_dir):
    load("rr")
    result = _simulate("rr", "--reference", "circle", cache_dir=cache_dir)
    assert result.returncode == EXIT_USAGE and "rr is not a closed chain" in result.stderr, result.stderr


# -- robodyn.task_space in-process ------------------------------------------------------------------------


def test_the_task_reference_is_consistent_with_the_path(built):
    from robodyn.task_space import TaskReference, platform_circle

    for robot in built.values():
        reference = platform_circle(robot, [0.0, 0.0], radius=0.03, duration=2.0)
        assert isinstance(reference, TaskReference)
        t = np.linspace(0.0, 2.5, 2501)
        q, qd, qdd = reference.evaluate(t)
        x, xd, xdd = reference.path.evaluate(t)
        assert np.allclose(q[0], 0.0, atol=1e-12) and np.allclose(q[-1], q[0], atol=1e-12)
        assert np.allclose(robot.dgm(q), x, atol=1e-12)
        assert np.allclose(np.einsum("kij,kj->ki", robot.task_jacobian(q), qd), xd, atol=1e-12)
        assert np.allclose(np.einsum("kij,kj->ki", robot.task_jacobian(q), qdd) + robot.task_bias(q, qd), xdd,
                           atol=1e-10)
        assert np.abs(np.gradient(q, t, axis=0) - qd).max() < 1e-5 * np.abs(qd).max()
        assert np.abs(np.gradient(qd, t, axis=0) - qdd).max() < 1e-2 * np.abs(qdd).max()
        assert np.array_equal(reference.evaluate(1.0)[0], reference.evaluate(np.array([1.0]))[0][0])
        with pytest.raises(TypeError, match="TaskComputedTorque"):
            reference.c_arguments()  # a compiled controller cannot run it


def test_task_computed_torque_and_its_figure_in_process(built, load, tmp_path):
    import robodyn
    from robodyn.plotting import plot_platform
    from robodyn.task_space import TaskComputedTorque, platform_circle, platform_tracking

    biglide = built["biglide"]
    reference = platform_circle(biglide, [0.0, 0.0], radius=0.02, duration=0.8)
    run = robodyn.simulate(biglide, TaskComputedTorque(biglide, reference), duration=1.0, q0=[0.0, 0.0])
    assert run.q_ref is not None and np.abs(run.tracking_error).max() < 1e-4  # a fast circle: 5.3e-5 m
    assert platform_tracking(biglide, run.q, reference.path.evaluate(run.t)[0]).max() < 1e-4
    with pytest.raises(TypeError, match="TaskComputedTorque"):
        robodyn.ComputedTorque(biglide, reference)
    # Without x_ref the figure takes the platform of the joint reference.
    path = plot_platform(run, tmp_path / "figures" / "biglide.png", title="biglide")
    assert path.read_bytes().startswith(PNG_SIGNATURE) and path.stat().st_size > 20_000
    assert [p.name for p in path.parent.iterdir()] == ["biglide.png"]
    rr = load("rr")
    with pytest.raises(ValueError, match="closed chain"):
        plot_platform(robodyn.simulate(rr, None, duration=0.01), tmp_path / "rr.png")
    with pytest.raises(ValueError, match="x_ref"):
        plot_platform(run, tmp_path / "x.png", x_ref=np.zeros((3, 2)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figures"]


def test_paths_out_of_reach_or_near_a_singularity_are_refused(built):
    from robodyn.task_space import platform_circle

    biglide = built["biglide"]
    with pytest.raises(ValueError, match=r"leaves the workspace at t = .* s, x = .*, y = .*working mode \(-1, -1\)"):
        platform_circle(biglide, [0.0, 0.0], radius=0.2)
    with pytest.raises(ValueError, match=r"comes near a type-1 singularity \(normalised det B = 0.023"):
        platform_circle(biglide, [0.1, 0.45])
    with pytest.raises(ValueError, match="beyond its limits"):
        platform_circle(biglide, [0.7, 0.7])  # the start itself
    with pytest.raises(ValueError, match="cannot be assembled"):
        platform_circle(biglide, [0.5, -0.5])
