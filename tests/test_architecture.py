"""The structure: one routine table drives everything, the runtime is compiled once, robot modules
are thin, the build options are the same on every command, robots pickle."""

from __future__ import annotations

import inspect
import pickle
import pydoc
import subprocess
import sys
import textwrap
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import robodyn
from robodyn import routines
from robodyn.options import BuildOptions
from conftest import ROBOTS, ROOT


def test_every_routine_is_a_real_method_with_signature_and_documentation():
    text = pydoc.render_doc(robodyn.Robot, renderer=pydoc.plaintext)
    for routine in routines.TABLE:
        method = vars(robodyn.Robot)[routine.method]  # on the class, not attached per instance
        assert method.__doc__ == routine.docstring()
        parameters = list(inspect.signature(method).parameters)
        assert parameters == ["self", *(a.name for a in routine.arguments), "out"]
        assert f"{routine.method}(self, " in text  # help() lists it with its signature
        assert routine.doc in text


def test_stub_matches_the_table():
    stub = (Path(robodyn.__file__).parent / "robot.pyi").read_text()
    begin = stub.index("\n", stub.index("# BEGIN ROUTINES")) + 1
    assert stub[begin:stub.index("    # END ROUTINES")] == routines.render_stub(), \
        "robot.pyi is stale: run python -c 'import robodyn.routines as r; r.write_stub()'"
    for name in ("copy", "total_energy", "joint_limits", "from_extension", "params", "options"):
        assert f" {name}" in stub


def test_runtime_is_compiled_once_and_robot_modules_are_thin(load):
    rr, rrr = load("rr"), load("rrr")
    native = sys.modules["robodyn._native"]
    assert Path(native.__file__).parent == Path(robodyn.__file__).parent  # installed with the package
    for robot in (rr, rrr):
        extension = robot.extension
        public = {name for name in vars(extension) if not name.startswith("_")}
        assert public == {"table", "metadata_json", "robot"}
        # Every routine of the table, except the closed-chain ones (a serial robot has no loops) and the floating
        # base's (its centre of mass and centroidal momentum).
        closed_chain = {r.name for r in routines.TABLE if r.arguments and r.arguments[0].name in ("x", "qt")} | {
            "direct_geometry", "passive_geometry", "loop_matrices", "task_jacobian", "task_jacobian_derivative",
            "task_bias", "passive_jacobian", "passive_jacobian_derivative", "singularity_measures"}
        floating_base = {"center_of_mass", "center_of_mass_jacobian", "centroidal_momentum_matrix",
                         "centroidal_momentum_bias"}
        assert set(robot.routine_names) == {r.name for r in routines.TABLE} - closed_chain - floating_base
        # The module's own code is the robot's C: far smaller than the runtime.
        assert Path(extension.__file__).stat().st_size < Path(native.__file__).stat().st_size


def test_imported_module_gives_the_same_robot(load):
    rr = load("rr")
    directory = Path(rr.extension.__file__).parent
    code = textwrap.dedent(f"""
        import sys, numpy as np
        sys.path.insert(0, {str(directory)!r})
        import {rr.extension.__name__} as module
        robot = module.robot()
        print(robot.name, robot.selfcheck["passed"], robot.manifest["key"] == {rr.manifest["key"]!r})
        print(repr(robot.inverse_dynamics(np.array([0.3, -0.5]), np.array([1.0, 2.0]), np.zeros(2)).tolist()))
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = result.stdout.splitlines()
    assert lines[0] == "rr True True"
    expected = rr.inverse_dynamics(np.array([0.3, -0.5]), np.array([1.0, 2.0]), np.zeros(2))
    np.testing.assert_array_equal(eval(lines[1]), expected)


def _torques(robot, q, qd, qdd):
    return robot.inverse_dynamics(q, qd, qdd)


@pytest.mark.slow
def test_robot_pickles_to_worker_processes(load):
    rr = load("rr")
    rr.params["m2"] = 61.5
    try:
        rng = np.random.default_rng(3)
        batches = [rng.uniform(-1, 1, (8, 2)) for _ in range(3)]
        copy = pickle.loads(pickle.dumps(rr))
        assert copy.params["m2"] == 61.5 and copy.manifest["key"] == rr.manifest["key"]
        with ProcessPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(_torques, [rr] * 3, batches, batches, batches))
        for batch, result in zip(batches, results):
            np.testing.assert_array_equal(result, rr.inverse_dynamics(batch, batch, batch))
        rr.params["m2"] = 50.0
        assert not np.allclose(results[0], rr.inverse_dynamics(batches[0], batches[0], batches[0]))
    finally:
        rr.params.reset()


DUMMY = textwrap.dedent("""
    import sys, numpy as np, sympy as sp
    from robodyn import routines
    from robodyn.routines import Argument, Output, Routine
    from codegen.model import routines as model_routines

    # The table entry ...
    routines.register(Routine(
        "dummy_power", "dummy_power",
        (Argument("q", "n", "joint positions"), Argument("qd", "n", "joint velocities")),
        (Output(("n",), "gravity torque times joint speed, per joint"), Output((), "their sum")),
        "Gravity power per joint and in all.", "O(n)"))
    # ... and its definition in the model stage: nothing else.
    def dummy_power(model, options):
        power = sp.Matrix([model.g[i] * model.qd[i] for i in range(model.n)])
        return model_routines.Expressions((sp.ImmutableMatrix(power), sp.ImmutableMatrix([[sum(power)]]))), "g * qd"
    model_routines.DEFINITIONS["dummy_power"] = dummy_power

    import robodyn
    robot = robodyn.load(sys.argv[1], cache_dir=sys.argv[2])
    rng = np.random.default_rng(0)
    q, qd = rng.uniform(-1, 1, (2, robot.n))
    per_joint, total = robot.dummy_power(q, qd)
    assert np.allclose(per_joint, robot.g(q) * qd, rtol=1e-13, atol=1e-12)
    assert np.isclose(total, np.dot(robot.g(q), qd), rtol=1e-13, atol=1e-12)
    Q, QD = rng.uniform(-1, 1, (2, 5, robot.n))
    out = (np.empty((5, robot.n)), np.empty(5))
    result = robot.dummy_power(Q, QD, out=out)
    assert result[0] is out[0] and np.allclose(out[1], np.sum(robot.g(Q) * QD, axis=1))
    checks = {c["name"]: c for c in robot.selfcheck["checks"]}
    assert checks["compiled_vs_symbolic_dummy_power"]["passed"]
    assert "dummy_power" in robot.routine_names
    assert "Gravity power per joint" in robot.dummy_power.__doc__
    print("ok")
""")


@pytest.mark.slow
def test_adding_a_routine_touches_only_the_table_and_the_model_stage(tmp_path):
    result = subprocess.run([sys.executable, "-c", DUMMY, str(ROBOTS / "rr.yaml"), str(tmp_path)],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stdout + result.stderr


@pytest.mark.parametrize("command", [["codegen"], ["robodyn", "demo"], ["robodyn", "simulate"]])
def test_every_command_takes_the_same_build_options(command):
    result = subprocess.run([sys.executable, "-m", *command, "--help"], capture_output=True, text=True, cwd=ROOT,
                            check=True)
    import dataclasses

    for spec in dataclasses.fields(BuildOptions):
        assert spec.metadata["flag"] in result.stdout, (command, spec.name)
    for flag in ("--cache-dir", "--force", "example"):
        assert flag in result.stdout


def test_version_in_one_place():
    import importlib.metadata

    assert robodyn.__version__ == importlib.metadata.version("robodyn")
    for command in (["codegen"], ["robodyn"]):
        result = subprocess.run([sys.executable, "-m", *command, "--version"], capture_output=True, text=True,
                                cwd=ROOT, check=True)
        assert result.stdout.split()[-1] == robodyn.__version__


def test_build_options_are_checked():
    assert BuildOptions(lock={"b": 1, "a": 0.5}).lock == (("a", 0.5), ("b", 1.0))
    for bad in ({"method": "newton"}, {"forward": "crba"}, {"lock": {"a": float("nan")}}, {"tool": "a b"},
                {"lock": {"a": "1"}}, {"simplify": "yes"}):
        with pytest.raises((ValueError, TypeError)):
            BuildOptions(**bad)
    with pytest.raises(TypeError, match="unknown build option"):
        robodyn.load(ROBOTS / "rr.yaml", methd="recursive")


@pytest.mark.slow
def test_tool_option_moves_the_tool_frame(load, tmp_path):
    rrr = load("rrr")
    elbow = robodyn.load(ROBOTS / "rrr.yaml", cache_dir=tmp_path, tool=rrr.metadata["link_names"][1])
    q = np.array([0.3, -0.4, 0.8])
    # The tool on link 2 does not move with joint 3, and the wrench then enters through J2 only.
    assert np.allclose(elbow.jacobian(q)[:, 2], 0.0)
    assert not np.allclose(rrr.jacobian(q)[:, 2], 0.0)
    h = np.array([1.0, -2.0, 3.0, 0.1, 0.2, -0.3])
    np.testing.assert_allclose(elbow.inverse_dynamics(q, q, q) - elbow.inverse_dynamics(q, q, q, h),
                               elbow.jacobian(q).T @ h, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_description_that_is_not_a_file_is_refused_at_once(tmp_path, kind):
    import os

    path = tmp_path / "robot.yaml"
    if kind == "directory":
        path.mkdir()
    else:
        os.mkfifo(path)  # reading it would block forever
    for command in (["codegen", str(path)], ["robodyn", "demo", str(path)]):
        result = subprocess.run([sys.executable, "-m", *command, "--cache-dir", str(tmp_path / "cache")],
                                capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert result.returncode == 1 and "robot.yaml" in result.stderr and "Traceback" not in result.stderr
        assert "regular file" in result.stderr or "directory" in result.stderr
    assert not (tmp_path / "cache").exists()


def test_simulate_checks_output_paths_before_running(tmp_path):
    (tmp_path / "a_file").write_text("")
    for option in ("--json", "--plot"):
        result = subprocess.run([sys.executable, "-m", "robodyn", "simulate", str(ROBOTS / "rr.yaml"), option,
                                 str(tmp_path / "a_file" / "out.file"), "--cache-dir", str(tmp_path / "cache")],
                                capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert result.returncode == 1 and "is not a directory" in result.stderr and "Traceback" not in result.stderr
        assert not (tmp_path / "cache").exists()  # refused before building anything


def test_submodules_are_reached_from_the_package_and_imported_only_when_used():
    """README writes robodyn.plotting.plot_trajectory(...) and robodyn.linearization.<...> after `import robodyn`;
    `import robodyn` itself loads neither SciPy, matplotlib, cvxpy nor SymPy (a control loop needs none)."""
    code = ("import sys, robodyn\n"
            "heavy = [m for m in ('scipy', 'matplotlib', 'cvxpy', 'sympy') if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "assert callable(robodyn.linearization.forward_dynamics_parameter_derivatives)\n"
            "assert callable(robodyn.lqr.LQR) and robodyn.identification.identify\n"
            "try:\n    robodyn.no_such_module\nexcept AttributeError as exc:\n    print(exc)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and "has no attribute 'no_such_module'" in result.stdout, result.stderr
