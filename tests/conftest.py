"""Shared fixtures: example robots are built once per test session into a private cache."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent

# A shell that starts the tests in the background (``.ci/run &``) makes them ignore SIGINT, and an
# ignored SIGINT is inherited by every subprocess: the Ctrl-C tests would see nothing to interrupt.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
ROBOTS = ROOT / "robots"
EXAMPLES = ("pendulum", "rr", "rp", "pr", "pp", "rrr", "puma560")
LAGRANGE_EXAMPLES = EXAMPLES[:-1]  # the Puma takes minutes by the Lagrange route


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """One cache for the session, shared by pytest-xdist's workers (the build lock makes a robot that
    two workers need at once build once)."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "robodyn-cache"
    root.mkdir(exist_ok=True)
    return root


_loaded: dict = {}


@pytest.fixture(scope="session")
def load(cache_dir):
    """load(name) -> robodyn.Robot for robots/<name>.yaml, built once per session."""
    import robodyn

    def _load(name: str):
        if name not in _loaded:
            _loaded[name] = robodyn.load(ROBOTS / f"{name}.yaml", cache_dir=cache_dir)
        robot = _loaded[name]
        robot.params.reset()
        return robot

    return _load


@pytest.fixture(scope="session")
def derived():
    """derived(name) -> SymbolicModel of robots/<name>.yaml (cached)."""
    import codegen

    models: dict = {}

    def _derive(name: str):
        if name not in models:
            models[name] = codegen.derive(ROBOTS / f"{name}.yaml")
        return models[name]

    return _derive


def random_state(robot, rng: np.random.Generator):
    q = np.empty(robot.n)
    for i, kind in enumerate(robot.joint_types):
        q[i] = rng.uniform(-np.pi, np.pi) if kind == "revolute" else rng.uniform(0.2, 1.0)
    qd = rng.uniform(-2, 2, robot.n)
    return q, qd


def random_floating_configuration(robot, rng: np.random.Generator) -> np.ndarray:
    """A floating-base q: the base anywhere in [-1, 1]³ with a random unit quaternion, joints in [-1, 1]."""
    q = robot.neutral()
    q[:3] = rng.uniform(-1.0, 1.0, 3)
    quaternion = rng.normal(size=4)
    q[3:7] = quaternion / np.linalg.norm(quaternion)
    q[7:] = rng.uniform(-1.0, 1.0, robot.nq - 7)
    return q


def rk4(rhs, state: np.ndarray, dt: float, steps: int, observe=None) -> np.ndarray:
    """Classic fixed-step RK4 of state' = rhs(state), in NumPy: the independent integrator the
    tests compare the compiled ones with. ``observe(state)`` is called after every step."""
    for _ in range(steps):
        k1 = rhs(state)
        k2 = rhs(state + dt / 2 * k1)
        k3 = rhs(state + dt / 2 * k2)
        k4 = rhs(state + dt * k3)
        state = state + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        if observe is not None:
            observe(state)
    return state
