"""Fixtures for the call benchmarks (see test_bench_calls.py for how to run them).

The rr (2-DOF) and rrr (3-DOF) robots are built once per session into a
private temporary cache; their SymPy models are derived once and lambdified
with the default parameter values substituted. The Franka Panda (URDF of
example-robot-data, fingers locked) is built the same way, with its Pinocchio
model, for the regressor against ``pinocchio.computeJointTorqueRegressor``. A ``RobotCase`` gives the
inputs and ``out=`` buffers of any routine of the routine table
(``robodyn.routines.TABLE``) from the sizes the table declares. At the end of
the session a short summary prints each implementation's median time per call
and the ratio robodyn / lambdify. Other benchmark modules print their own
end-of-session tables through ``summary_sections``.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent

_RESULTS = pytest.StashKey[dict]()
_SECTIONS = pytest.StashKey[dict]()


@dataclass
class RobotCase:
    """One robot: the compiled Robot, its lambdified SymPy model and a fixed random state
    (tau = inverse_dynamics(q, qd, qdd), so forward_dynamics(q, qd, tau) must give qdd back)."""

    name: str
    robot: object
    n: int
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray
    lambdified: dict = field(default_factory=dict)  # (method, cse) -> callable

    @property
    def dims(self) -> dict[str, int]:
        """The robot's dimensions, for the symbolic sizes and shapes of the routine table: n joints,
        p dynamic and b base parameters (``Robot.dimensions``)."""
        return self.robot.dimensions

    def arguments(self, routine) -> dict[str, np.ndarray]:
        """The required arguments of a table routine, by name (optional ones are left out, so None):
        the case's state for q, qd, qdd and tau, fixed random values of the declared size otherwise."""
        state = {"q": self.q, "qd": self.qd, "qdd": self.qdd, "tau": self.tau}
        rng = np.random.default_rng(zlib.crc32(routine.name.encode()))  # the same values in every run
        values = {}
        for argument in routine.arguments:
            if argument.optional:
                continue
            size = int(argument.size) if argument.size.isdigit() else self.dims[argument.size]
            value = state.get(argument.name)
            values[argument.name] = value if value is not None and value.shape == (size,) else rng.uniform(-1, 1, size)
        return values

    def outputs(self, routine):
        """``out=`` buffers for one state: an array, or a tuple of arrays for several outputs."""
        arrays = tuple(np.zeros(routine.shape(output, self.dims)) for output in routine.outputs)
        return arrays[0] if len(arrays) == 1 else arrays


def _lambdify_model(path: Path) -> dict:
    """SymPy lambdify (numpy backend) of g, M, inverse dynamics and the bias C qd + g + friction
    (keyed by the Robot method they stand for, and cse)."""
    import sympy as sp

    import codegen

    model = codegen.derive(path)
    defaults = {p.symbol: p.default for p in model.description.parameters}

    def sub(expr):
        return expr.subs(defaults)

    q, qd, qdd = list(model.q), list(model.qd), list(model.qdd)
    exprs = {
        "g": ([q], sub(model.g)),
        "M": ([q], sub(model.M)),
        "inverse_dynamics": ([q, qd, qdd], sub(model.inverse_dynamics(with_wrench=False))),
        "bias": ([q, qd], sub(model.coriolis_vector() + model.g + model.friction)),
    }
    functions = {}
    for routine, (args, expr) in exprs.items():
        for cse in (False, True):
            functions[routine, cse] = sp.lambdify(args, expr, "numpy", cse=cse)
    return functions


def _make_case(name: str, cache_dir: Path) -> RobotCase:
    import robodyn

    path = ROOT / "robots" / f"{name}.yaml"
    robot = robodyn.load(path, cache_dir=cache_dir)
    rng = np.random.default_rng(12345)
    n = robot.n
    q = np.array([rng.uniform(-np.pi, np.pi) if kind == "revolute" else rng.uniform(0.2, 1.0)
                  for kind in robot.joint_types])
    qd = rng.uniform(-2.0, 2.0, n)
    qdd = rng.uniform(-2.0, 2.0, n)
    tau = robot.inverse_dynamics(q, qd, qdd)
    return RobotCase(name, robot, n, q, qd, qdd, tau, _lambdify_model(path))


@pytest.fixture(scope="session")
def bench_cache_dir(tmp_path_factory) -> Path:
    """A fresh temporary cache, or $ROBODYN_BENCH_CACHE_DIR to reuse builds across runs."""
    explicit = os.environ.get("ROBODYN_BENCH_CACHE_DIR")
    if explicit:
        return Path(explicit)
    return tmp_path_factory.mktemp("robodyn-bench-cache")


@pytest.fixture(scope="session")
def robot_case(bench_cache_dir):
    """robot_case(name) -> RobotCase for robots/<name>.yaml, built (compiled + lambdified) once per session."""
    cases: dict = {}

    def get(name: str) -> RobotCase:
        if name not in cases:
            cases[name] = _make_case(name, bench_cache_dir)
        return cases[name]

    return get


@dataclass
class PinocchioCase:
    """The Panda with its fingers locked: the compiled Robot, Pinocchio's reduced model of the same URDF
    and a fixed random state within the joint limits."""

    robot: object
    model: object
    data: object
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray


PANDA = "panda_description/urdf/panda.urdf"
PANDA_FINGERS = ("panda_finger_joint1", "panda_finger_joint2")


def example_robot_data(relative: str) -> Path:
    """A file of example-robot-data (installed next to Pinocchio by the test extra)."""
    import pinocchio

    for parent in Path(pinocchio.__file__).resolve().parents:
        candidate = parent / "cmeel.prefix" / "share" / "example-robot-data" / "robots" / relative
        if candidate.is_file():
            return candidate
    pytest.fail(f"example-robot-data is not installed ({relative}); pip install '.[test]'")


@pytest.fixture(scope="session")
def panda_case(bench_cache_dir) -> PinocchioCase:
    """The Panda (fingers locked at 0) built once per session, and Pinocchio's model of it."""
    import pinocchio

    import robodyn

    path = example_robot_data(PANDA)
    robot = robodyn.load(path, cache_dir=bench_cache_dir, lock={name: 0.0 for name in PANDA_FINGERS})
    model = pinocchio.buildModelFromUrdf(str(path))
    model = pinocchio.buildReducedModel(model, [model.getJointId(name) for name in PANDA_FINGERS],
                                        pinocchio.neutral(model))
    assert [model.names[i] for i in range(1, model.njoints)] == list(robot.joint_names)
    rng = np.random.default_rng(12345)
    q = rng.uniform(model.lowerPositionLimit, model.upperPositionLimit)
    return PinocchioCase(robot, model, model.createData(), q, rng.uniform(-2.0, 2.0, robot.n),
                         rng.uniform(-2.0, 2.0, robot.n))


@pytest.fixture(scope="session")
def bench_results(pytestconfig) -> dict:
    """(robot, routine, implementation) -> median seconds per call, filled by the benchmarks for the summary."""
    return pytestconfig.stash.setdefault(_RESULTS, {})


@pytest.fixture(scope="session")
def summary_sections(pytestconfig) -> dict:
    """title -> function returning the lines of one more end-of-session table (none: no table)."""
    return pytestconfig.stash.setdefault(_SECTIONS, {})


@pytest.hookimpl(trylast=True)  # after pytest-benchmark's tables
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    write = terminalreporter.write_line
    for title, make_lines in config.stash.get(_SECTIONS, {}).items():
        lines = make_lines()
        if lines:  # nothing when the benchmarks were disabled
            terminalreporter.section(title)
            for line in lines:
                write(line)
    results = config.stash.get(_RESULTS, {})
    if not results:
        return
    terminalreporter.section("robodyn routines (vs sympy.lambdify where compared): median time per call")
    floor = results.get(("-", "loop", "pass"))
    implementations = sorted({key[2] for key in results if key[0] != "-"}, key=_implementation_order)
    header = f"{'robot':<6} {'routine':<18}" + "".join(f"{impl:>14}" for impl in implementations)
    write(header + f"{'robodyn/lambdify':>18}{'robodyn(out=)/lambdify':>24}")
    robots = list(dict.fromkeys(key[0] for key in results if key[0] != "-"))
    routines = list(dict.fromkeys(key[1] for key in results if key[0] != "-"))
    for robot in robots:
        for routine in routines:
            row = {impl: results.get((robot, routine, impl)) for impl in implementations}
            if not any(value is not None for value in row.values()):
                continue
            cells = "".join(f"{_ns(row[impl]):>14}" for impl in implementations)
            lam = row.get("lambdify")
            write(f"{robot:<6} {routine:<18}{cells}{_ratio(row.get('robodyn'), lam):>18}"
                  f"{_ratio(row.get('robodyn_out'), lam):>24}")
    write("ns per call (median); ratio < 1: robodyn is faster (0.05 = 20x faster)."
          + (f" The benchmark loop itself adds {floor * 1e9:.0f} ns per call to every column." if floor else ""))


def _implementation_order(name: str) -> tuple:
    order = ("robodyn_out", "robodyn", "lambdify", "lambdify_cse", "numpy")
    return (order.index(name) if name in order else len(order), name)


def _ns(seconds) -> str:
    return "-" if seconds is None else f"{seconds * 1e9:.0f} ns"


def _ratio(a, b) -> str:
    return "-" if a is None or b is None or b == 0 else f"{a / b:.3f}"
