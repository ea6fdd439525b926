"""Inverse-dynamics derivatives (issue 13, first part): the compiled dtau/dq, dtau/dqd against central
differences of the compiled inverse dynamics, on both derivation routes, with rotors, Coulomb friction and
a closed chain; and the routine conventions (batches, out=). Pinocchio's computeRNEADerivatives is the
oracle on the Panda and the UR5 in test_pinocchio.py."""

from __future__ import annotations

import numpy as np
import pytest

ROBOTS = ["pendulum", "rr", "rrr", "puma560", "biglide"]


def _states(robot, count: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        q = rng.uniform(-0.2, 0.2, robot.n) if robot.is_closed_chain else rng.uniform(-np.pi, np.pi, robot.n)
        qd = rng.uniform(0.2, 2.0, robot.n) * rng.choice([-1.0, 1.0], robot.n)  # away from Coulomb's jump
        yield q, qd, rng.uniform(-3.0, 3.0, robot.n)


def _differences(robot, q, qd, qdd, which: int, step: float = 1e-6) -> np.ndarray:
    columns = []
    for k in range(robot.n):
        plus, minus = [q.copy(), qd.copy(), qdd], [q.copy(), qd.copy(), qdd]
        plus[which][k] += step
        minus[which][k] -= step
        columns.append((robot.inverse_dynamics(*plus) - robot.inverse_dynamics(*minus)) / (2 * step))
    return np.column_stack(columns)


@pytest.mark.parametrize("name", ROBOTS)
def test_derivatives_match_central_differences(load, name):
    robot = load(name)
    worst = 0.0
    for q, qd, qdd in _states(robot, 20, 0):
        d_q, d_qd = robot.inverse_dynamics_derivatives(q, qd, qdd)
        scale = max(float(np.max(np.abs(robot.M(q)))), 1.0)
        for which, derivative in ((0, d_q), (1, d_qd)):
            reference = _differences(robot, q, qd, qdd, which)
            worst = max(worst, float(np.max(np.abs(derivative - reference))) / max(scale, np.max(np.abs(reference))))
    assert worst < 1e-6, worst


def test_a_pendulums_derivatives_in_closed_form(load):
    """One link: tau = (I + m l²) qdd + m g l sin q + D qd, so dtau/dq = m g l cos q, dtau/dqd = D (C = 0)."""
    robot = load("pendulum")
    q, qd, qdd = np.array([0.4]), np.array([0.7]), np.array([-1.2])
    d_q, d_qd = robot.inverse_dynamics_derivatives(q, qd, qdd)
    g = robot.g
    assert d_q[0, 0] == pytest.approx((g(q + 1e-7)[0] - g(q - 1e-7)[0]) / 2e-7, rel=1e-7)
    assert d_qd[0, 0] == pytest.approx(robot.friction(np.array([1.0]))[0] - robot.friction(np.array([0.0]))[0],
                                       rel=1e-12, abs=1e-15)


def test_batches_and_out_buffers(load):
    robot = load("rrr")
    rng = np.random.default_rng(3)
    q, qd, qdd = (rng.uniform(-1, 1, (5, 3)) for _ in range(3))
    d_q, d_qd = robot.inverse_dynamics_derivatives(q, qd, qdd)
    assert d_q.shape == d_qd.shape == (5, 3, 3)
    out = (np.empty((3, 3)), np.empty((3, 3)))
    result = robot.inverse_dynamics_derivatives(q[2], qd[2], qdd[2], out=out)
    assert result[0] is out[0] and np.array_equal(out[0], d_q[2]) and np.array_equal(out[1], d_qd[2])


# Forward-dynamics derivatives (issue 13): the compiled routine forward_dynamics_derivatives(q, qd, tau).

TESTS = __import__("pathlib").Path(__file__).resolve().parent
FORWARD_ROBOTS = ["pendulum", "rr", "rrr", "puma560", "biglide", "acrobot"]
OTHER_ROBOTS = {"branching": TESTS / "data" / "branching.yaml", "mimic_chain": TESTS / "urdf" / "mimic_chain.urdf"}


@pytest.fixture(scope="module")
def any_robot(load, cache_dir):
    """any_robot(name): robots/<name>.yaml, or the branching tree and the mimic chain of the tests' data."""
    import robodyn

    built = {}

    def get(name: str):
        if name not in OTHER_ROBOTS:
            return load(name)
        if name not in built:
            built[name] = robodyn.load(OTHER_ROBOTS[name], cache_dir=cache_dir, verbose=False)
        return built[name]

    return get


def _forward_differences(robot, q, qd, tau, which: int, step: float = 1e-6) -> np.ndarray:
    columns = []
    for k in range(robot.n):
        plus, minus = [q.copy(), qd.copy(), tau.copy()], [q.copy(), qd.copy(), tau.copy()]
        plus[which][k] += step
        minus[which][k] -= step
        columns.append((robot.forward_dynamics(*plus) - robot.forward_dynamics(*minus)) / (2 * step))
    return np.column_stack(columns)


def _torques(robot, q, qd, qdd):
    return robot.inverse_dynamics(q, qd, qdd)


@pytest.mark.parametrize("name", FORWARD_ROBOTS + list(OTHER_ROBOTS))
def test_forward_derivatives_match_central_differences(any_robot, name):
    """Serial robots (rotors, Coulomb friction), a passive joint, a tree, mimic couplings and a closed chain's
    reduced model: each of the three derivatives within 1e-6 of central differences of forward_dynamics,
    relative to the largest entry."""
    robot = any_robot(name)
    worst = 0.0
    for q, qd, qdd in _states(robot, 8, 5):
        tau = _torques(robot, q, qd, qdd)
        derivatives = robot.forward_dynamics_derivatives(q, qd, tau)
        for which, derivative in enumerate(derivatives):
            reference = _forward_differences(robot, q, qd, tau, which)
            scale = max(float(np.max(np.abs(reference))), 1e-300)
            worst = max(worst, float(np.max(np.abs(derivative - reference))) / scale)
    assert worst < 1e-6, worst


@pytest.mark.parametrize("name", ["rrr", "puma560", "biglide", "branching", "mimic_chain"])
def test_forward_derivatives_equal_the_formula_with_scipy(any_robot, name):
    """-M^-1 dID/dq, -M^-1 dID/dqd and M^-1 at qdd = FD(q, qd, tau), by SciPy's Cholesky from the compiled
    M, FD and ID derivatives: the same numbers up to rounding."""
    from scipy.linalg import cho_factor, cho_solve

    robot = any_robot(name)
    for q, qd, qdd in _states(robot, 5, 6):
        tau = _torques(robot, q, qd, qdd)
        qdd = robot.forward_dynamics(q, qd, tau)
        d_q, d_qd = robot.inverse_dynamics_derivatives(q, qd, qdd)
        factor = cho_factor(robot.M(q))
        expected = (-cho_solve(factor, d_q), -cho_solve(factor, d_qd), cho_solve(factor, np.eye(robot.n)))
        for ours, theirs in zip(robot.forward_dynamics_derivatives(q, qd, tau), expected):
            assert np.max(np.abs(ours - theirs)) <= 1e-10 * max(float(np.max(np.abs(theirs))), 1.0)


def test_forward_derivatives_batches_out_buffers_and_the_python_entry(load):
    from robodyn.linearization import forward_dynamics_derivatives

    robot = load("rrr")
    rng = np.random.default_rng(4)
    q, qd, tau = (rng.uniform(-1, 1, (5, 3)) for _ in range(3))
    batch = robot.forward_dynamics_derivatives(q, qd, tau)
    assert len(batch) == 3 and all(d.shape == (5, 3, 3) for d in batch)
    out = tuple(np.empty((3, 3)) for _ in range(3))
    result = robot.forward_dynamics_derivatives(q[2], qd[2], tau[2], out=out)
    assert all(r is o for r, o in zip(result, out))
    assert all(np.array_equal(o, b[2]) for o, b in zip(out, batch))
    out_batch = tuple(np.empty((5, 3, 3)) for _ in range(3))
    robot.forward_dynamics_derivatives(q, qd, tau, out=out_batch)
    assert all(np.array_equal(o, b) for o, b in zip(out_batch, batch))
    # robodyn.linearization's function is the compiled routine (lists accepted)
    python = forward_dynamics_derivatives(robot, list(q[1]), list(qd[1]), list(tau[1]))
    assert all(np.array_equal(a, b[1]) for a, b in zip(python, batch))
    with pytest.raises(ValueError):
        robot.forward_dynamics_derivatives(q[0], qd[0], tau[0], out=(out[0], out[0], out[1]))  # shared memory
    with pytest.raises(TypeError):
        robot.forward_dynamics_derivatives(q[0], qd[0], tau[0], out=out[0])


def test_forward_derivatives_of_a_pendulum_in_closed_form(load):
    """One link, tau = J qdd + m g l sin q + D qd: dqdd/dq = -m g l cos q / J, dqdd/dqd = -D / J, M^-1 = 1/J."""
    robot = load("pendulum")
    q, qd = np.array([0.4]), np.array([0.7])
    tau = np.array([0.3])
    d_q, d_qd, m_inv = robot.forward_dynamics_derivatives(q, qd, tau)
    inertia = robot.M(q)[0, 0]
    assert m_inv[0, 0] == pytest.approx(1.0 / inertia, rel=1e-14)
    dg = (robot.g(q + 1e-7)[0] - robot.g(q - 1e-7)[0]) / 2e-7
    assert d_q[0, 0] == pytest.approx(-dg / inertia, rel=1e-7)
    damping = robot.friction(np.array([1.0]))[0] - robot.friction(np.array([0.0]))[0]
    assert d_qd[0, 0] == pytest.approx(-damping / inertia, rel=1e-12, abs=1e-15)


def test_a_constrained_closed_chain_has_no_forward_derivatives(load):
    """A closed chain without a closed-form reduced model has no forward dynamics routine, nor its derivatives
    (robodyn.closed_chain solves the loops)."""
    robot = load("fourbar")
    if "forward_dynamics" in robot.routine_names:
        pytest.skip("fourbar has a closed-form reduced model")
    assert "forward_dynamics_derivatives" not in robot.routine_names
    with pytest.raises(NotImplementedError):
        robot.forward_dynamics_derivatives(np.zeros(robot.n), np.zeros(robot.n), np.zeros(robot.n))


def test_forward_derivatives_call_the_inverse_derivatives_kernel():
    """The forward-dynamics derivatives' C calls the inverse-dynamics derivatives' kernel (and returns its failure)
    instead of carrying a second copy of that program, and the table's operation count of the caller includes the
    callee's (sources only: nothing is compiled)."""
    from pathlib import Path

    from codegen.emit.sources import emit
    from codegen.model import derive_model
    from codegen.model.routines import define_routines
    from codegen.pipeline import describe, read_request

    request = read_request(Path(__file__).resolve().parent.parent / "robots" / "puma560.yaml")
    routines = define_routines(derive_model(describe(request), request.options), request.options)
    sources = emit(routines)
    prefix = sources.robot
    caller = sources.files[f"{prefix}_forward_dynamics_derivatives.c"]
    callee = sources.files[f"{prefix}_inverse_dynamics_derivatives.c"]
    kernel = f"{prefix}_inverse_dynamics_derivatives_kernel"
    assert f"int {kernel}(const double *const *inputs" in caller  # its prototype
    assert f"const int called = {kernel}(at, p, into);" in caller and "if (called != 0) return called;" in caller
    assert len(caller) < len(callee)
    counts = sources.operation_counts
    own = int(caller.split("Operations after common-subexpression elimination: ")[1].split(",")[0])
    assert counts["forward_dynamics_derivatives"] == own + counts["inverse_dynamics_derivatives"]
