"""Runtime fuzz: random good and bad calls of every routine of the routine table, from several threads at
once; the only outcomes allowed are a result or TypeError/ValueError (the documented exceptions).

Figures: CI runs FUZZ_CALLS (10^6) calls over rr and rrr in 4 threads, half of them with the GIL released on
every call; ``ROBODYN_SLOW=1`` runs 5 x 10^6. Plus pins for absurd simulation arguments.
"""

from __future__ import annotations

import math
import numbers
import warnings
import os
from fractions import Fraction
import threading
import time

import numpy as np
import pytest

import robodyn
from robodyn.routines import TABLE

SLOW = os.environ.get("ROBODYN_SLOW") == "1"
FUZZ_CALLS = 5_000_000 if SLOW else 1_000_000
THREADS = 4
DOCUMENTED = (TypeError, ValueError)


def _bad_vectors(rng: np.random.Generator, width: int) -> list:
    """Values for an argument of shape (width,): good ones and every kind of bad one."""
    good = rng.uniform(-1, 1, width)
    batch = rng.uniform(-1, 1, (3, width))
    with_nan, with_inf = good.copy(), batch.copy()
    with_nan[-1], with_inf[1, 0] = np.nan, -np.inf
    read_only = good.copy()
    read_only.flags.writeable = False
    fortran = np.asfortranarray(rng.uniform(-1, 1, (width, 3))).T  # (3, width), not C-contiguous
    return [
        good, batch, np.zeros((0, width)), read_only, good.tolist(), tuple(good), batch.tolist(),
        good.astype(np.float32), good.astype(np.int64), good.astype(complex), good.astype(object),
        good > 0, good.astype(">f8"), np.tile(good, 2)[::2], fortran, with_nan, with_inf,
        np.zeros(width + 1), np.zeros(max(width - 1, 0)), np.zeros((2, 2, width)), np.float64(1.0), 1, 1.0, True,
        None, "q", b"q", [10 ** 400] * width, [2 ** 64] * width, [1e308 * 10] * width, [1e308] * width,
        [None] * width, [[1.0] * width, [1.0]], {}, object(), np.zeros((width, 0)), np.array(3.0),
        np.zeros(width, dtype=np.float16), [1j] * width, np.ma.masked_array(good), memoryview(good),
        rng.uniform(-1e300, 1e300, width), np.full(width, 1e-320),
    ]


def _outs(rng: np.random.Generator, shape: tuple, inputs: list) -> list:
    outs = [None, np.empty(shape), np.empty((3,) + shape), np.empty(shape, np.float32), np.empty(shape, int),
            np.empty(shape + (2,))[..., 0], np.empty((1,) + shape), "out", 3, [0.0], np.empty(0)]
    read_only = np.empty(shape)
    read_only.flags.writeable = False
    outs.append(read_only)
    for value in inputs:  # aliasing an input
        if isinstance(value, np.ndarray) and value.dtype == np.float64 and value.flags.writeable:
            outs.append(value)
            outs.append(value.reshape(-1)[:int(np.prod(shape))].reshape(shape) if value.size >= max(
                int(np.prod(shape)), 1) and shape else value)
    return outs


def _calls(robot, rng: np.random.Generator, count: int) -> list:
    """``count`` random (method, args, kwargs) over every routine of the table."""
    dims = robot.dimensions
    pools = {"h": _bad_vectors(rng, 6)}
    calls = []
    for routine in TABLE:
        if routine.name not in robot.routine_names:  # a closed chain's routines on a serial robot
            continue
        method = getattr(robot, routine.method)
        shape = routine.shape(routine.outputs[0], dims)
        for _ in range(count // len(TABLE)):
            args = []
            for argument in routine.arguments:
                width = int(argument.size) if argument.size.isdigit() else dims[argument.size]
                pool = pools.get(argument.name) or pools.setdefault(argument.name, _bad_vectors(rng, width))
                if argument.optional and rng.random() < 0.3:
                    continue
                args.append(pool[rng.integers(len(pool))])
            if rng.random() < 0.05:  # too many or too few arguments, or keywords
                args = args[:-1] if rng.random() < 0.5 else args + [args[0] if args else None]
            kwargs = {}
            roll = rng.random()
            if roll < 0.5:
                outs = _outs(rng, shape, args)
                kwargs["out"] = outs[rng.integers(len(outs))]
            elif roll < 0.53:
                kwargs["bogus"] = 1
            calls.append((method, tuple(args), kwargs))
    names = list(robot.params)
    for value in (1.0, 2.5, 0.0, -3.0, np.nan, "x", 10 ** 400, None, np.float32(2)):  # parameters change meanwhile
        for name in names:
            calls.append((robot.params.__setitem__, (name, value), {}))
    return calls


@pytest.fixture(scope="module")
def robots(load):
    plain = [load("rr"), load("rrr"), load("biglide")]
    released = []
    for robot in plain:
        copy = robot.copy()
        copy.release_gil = True  # the no-GIL path on every call
        released.append(copy)
    return plain + released


def test_fuzz_every_routine_from_several_threads(robots):
    rng = np.random.default_rng(2024)
    calls = [call for robot in robots for call in _calls(robot, rng, 4000)]
    per_thread = FUZZ_CALLS // THREADS
    failures: list = []
    counts = [0] * THREADS
    outcomes = [{"ok": 0, "TypeError": 0, "ValueError": 0} for _ in range(THREADS)]

    def worker(index: int) -> None:
        order = np.random.default_rng(index).integers(len(calls), size=per_thread)
        ok = typed = valued = 0
        for i in order:
            method, args, kwargs = calls[i]
            try:
                method(*args, **kwargs)
                ok += 1
            except TypeError:
                typed += 1
            except ValueError:
                valued += 1
            except BaseException as error:  # noqa: BLE001 - anything else is a finding
                failures.append((method.__name__, args, kwargs, repr(error)))
                if len(failures) > 20:
                    return
        counts[index] = ok + typed + valued
        outcomes[index].update(ok=ok, TypeError=typed, ValueError=valued)

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    assert not failures, failures[:5]
    assert sum(counts) == per_thread * THREADS >= (5_000_000 if SLOW else 1_000_000) - THREADS
    totals = {key: sum(o[key] for o in outcomes) for key in outcomes[0]}
    assert all(totals.values()), totals  # every outcome happened
    print(f"\nfuzz: {sum(counts)} calls in {THREADS} threads, {elapsed:.1f} s, {totals}, 0 crashes")


def test_valid_calls_agree_with_and_without_out(robots):
    """The fuzz's good calls give the same numbers whichever way they are made."""
    rng = np.random.default_rng(7)
    for robot in robots:
        robot.params.reset()  # the fuzz above sets parameters to anything, 0 and -3 included
        q, qd, qdd = (rng.uniform(-1, 1, robot.n) for _ in range(3))
        if robot.is_closed_chain:  # where it assembles (elsewhere its dynamics are NaN)
            q *= 0.1
        out = np.empty(robot.n)
        assert np.array_equal(robot.inverse_dynamics(q, qd, qdd, None, out), robot.inverse_dynamics(list(q), qd, qdd))
        batch = rng.uniform(-1, 1, (5, robot.n)) * (0.1 if robot.is_closed_chain else 1.0)
        assert np.array_equal(robot.M(batch)[2], robot.M(batch[2]))


@pytest.mark.parametrize("value", [10 ** 400, -10 ** 400, 2 ** 64, float("nan"), float("inf"), "1", None, True,
                                   np.float32(1), 1j, [1.0]])
def test_parameter_values(load, value):
    robot = load("rr")
    name = next(iter(robot.params))
    try:
        robot.params[name] = value
    except DOCUMENTED:
        pass
    assert math.isfinite(robot.params[name])
    with pytest.raises(KeyError, match="unknown parameter"):
        robot.params["no_such"] = 1.0
    robot.params.reset()


def test_the_parameter_vector_cannot_be_made_writable_again(load):
    """parameter_values is the live vector, read-only: a NaN written through it would reach the fast path unchecked."""
    robot = load("rr").copy()
    values = robot.parameter_values
    with pytest.raises(ValueError):
        values.flags.writeable = True
    with pytest.raises(ValueError):
        values[0] = np.nan
    name = next(iter(robot.params))
    robot.params[name] = 7.5  # live: the view sees changes made through params
    assert values[0] == 7.5 and np.all(np.isfinite(robot.M(np.array([0.1, 0.2]))))
    robot._set_parameters(np.arange(1.0, len(values) + 1.0))  # every value at once, still through the checks
    assert np.array_equal(values, np.arange(1.0, len(values) + 1.0))


# -- absurd simulation arguments: a clear ValueError at once, never a hang ---------------------------

@pytest.mark.parametrize("rate", [0, -1, float("nan"), float("inf"), 1e-300, "1000", None, True])
def test_simulate_rate(load, rate):
    with pytest.raises(ValueError, match="rate|period"):
        robodyn.simulate(load("rr"), duration=0.1, rate=rate)


@pytest.mark.parametrize("duration", [-1.0, float("nan"), float("inf"), 1e300, None, "1", True])
def test_simulate_duration(load, duration):
    with pytest.raises(ValueError, match="duration"):
        robodyn.simulate(load("rr"), duration=duration)


@pytest.mark.parametrize("substeps", [0, -1, 1.5, 10 ** 12, "2", True, None])
def test_simulate_substeps(load, substeps):
    with pytest.raises(ValueError, match="substeps"):
        robodyn.simulate(load("rr"), duration=0.01, substeps=substeps)


@pytest.mark.parametrize("period", [1e300, 1e10, 0.0, -1e-3, float("nan"), float("inf"), "0.001", None])
@pytest.mark.parametrize("integrator", ["rk4", "RK45"])
def test_simulated_plant_period(load, period, integrator):
    started = time.monotonic()
    with pytest.raises(ValueError, match="period"):
        robodyn.SimulatedPlant(load("rr"), period, integrator=integrator)
    assert time.monotonic() - started < 1.0


def test_adaptive_integrator_over_a_long_period_is_bounded(load):
    """The largest allowed period with an adaptive method ends (an error or a result) in bounded time."""
    plant = robodyn.SimulatedPlant(load("rr"), 86400.0, integrator="RK45")
    started = time.monotonic()
    try:
        plant.write(np.zeros(2))
    except FloatingPointError as error:
        assert "evaluations" in str(error)
    assert time.monotonic() - started < 120


@pytest.mark.parametrize("kwargs", [dict(integrator="nope"), dict(integrator=3), dict(q0=[np.nan, 0]),
                                    dict(q0=[1, 2, 3]), dict(qd0="x"), dict(rtol=0), dict(atol=float("nan")),
                                    dict(disturbance=[np.inf, 0]), dict(wrench=[1, 2])])
def test_simulate_other_arguments(load, kwargs):
    with pytest.raises(DOCUMENTED):
        robodyn.simulate(load("rr"), duration=0.01, **kwargs)


def test_harness_ticks(load):
    robot = load("rr")
    harness = robodyn.Harness(robodyn.SimulatedPlant(robot, 1e-3), robodyn.NoControl(robot), 1000)
    for ticks in (-1, 1.5, 10 ** 12, "3"):
        with pytest.raises(ValueError, match="ticks"):
            harness.run(ticks=ticks)
    with pytest.raises(TypeError, match="realtime"):
        harness.run(0.01, realtime="yes")


@pytest.mark.parametrize("dt", [float("nan"), float("inf"), "2", True, None, 1j])
def test_integrate_refuses_a_step_that_is_not_a_finite_number(load, dt):
    robot = load("rr")
    with pytest.raises(ValueError, match="dt: expected a finite number"):
        robot.integrate(np.zeros(2), np.ones(2), dt)


def test_python_level_helpers_refuse_complex_and_masked_values_as_the_routines_do(load):
    """integrate, difference and tree_velocities would drop an imaginary part or ignore a mask."""
    robot = load("rr")
    with pytest.raises(TypeError, match="q: expected real numbers"):
        robot.integrate(np.array([0.1 + 1j, 0.2]), np.ones(2), 0.1)
    with pytest.raises(TypeError, match="complex"):
        robot.M(np.array([0.1 + 1j, 0.2]))  # the compiled routine's rule
    masked = np.ma.masked_array([0.1, 0.2], mask=[False, True])
    with pytest.raises(ValueError, match="q1: has masked entries"):
        robot.difference(np.zeros(2), masked)
    unmasked = np.ma.masked_array([0.1, 0.2], mask=[False, False])
    np.testing.assert_array_equal(robot.difference(np.zeros(2), unmasked), [0.1, 0.2])
    chain = load("biglide")
    with pytest.raises(TypeError, match="qd: expected real numbers"):
        chain.tree_velocities(np.array([0.1, 0.2]), np.array([1j, 0.0]))


def test_routines_refuse_masked_entries_and_lists_of_what_is_not_a_real_number(load):
    """A masked array's mask would be ignored; a list of strings, bools, complex numbers or None would be parsed or
    coerced by NumPy (to 0.3, 1.0 and NaN), where an array of those dtypes is refused."""
    robot = load("rr")
    with pytest.raises(ValueError, match="q: has masked entries"):
        robot.g(np.ma.masked_array([0.3, 99.0], mask=[False, True]))
    np.testing.assert_array_equal(robot.g(np.ma.masked_array([0.3, -0.5])), robot.g(np.array([0.3, -0.5])))
    for value, what in ((["0.3", "-0.5"], "strings"), ([True, False], "bool"), ([0.3, 1j], "complex"),
                        ([0.3, None], "NoneType"), ([0.3, Fraction(1, 2), "x"], "str")):
        with pytest.raises(TypeError, match=f"q: expected real numbers, got {what}"):
            robot.g(value)
    # Real numbers NumPy keeps as objects still convert.
    np.testing.assert_allclose(robot.g([0.3, Fraction(-1, 2)]), robot.g(np.array([0.3, -0.5])), rtol=0, atol=0)


def test_every_argument_is_converted_before_any_is_checked(load):
    """Converting a list runs its elements' __float__, which could change an argument already checked: a NaN put
    into an earlier argument by the conversion of a later one must be refused, not computed with."""
    robot = load("rr")
    spoiled = {}

    class Sneaky:
        def __float__(self):
            spoiled["target"][0] = np.nan
            return 0.1

    numbers.Real.register(Sneaky)
    q, qd = np.array([0.3, -0.5]), np.array([1.0, 2.0])
    spoiled["target"] = qd
    with pytest.raises(ValueError, match="qd: contains NaN"):
        robot.inverse_dynamics(q, qd, [Sneaky(), 0.2])
    law = robot._control_law("pd", kp=np.ones(2), kd=np.ones(2), a=np.zeros(2))  # the compiled law's own call
    q = np.array([0.3, -0.5])
    spoiled["target"] = q
    with pytest.raises(ValueError, match="q: contains NaN"):
        law(0.0, q, [Sneaky(), 0.2])


def test_several_outputs_given_in_out_return_that_tuple_on_either_path(load):
    """The fast path returns `out` itself; the general path (a list input) must too."""
    robot = load("rr")
    q, qd, qdd = np.array([0.3, -0.5]), np.array([1.0, 2.0]), np.array([0.5, -1.0])
    out = (np.empty((2, 2)), np.empty((2, 2)))
    assert robot.inverse_dynamics_derivatives(q, qd, qdd, out=out) is out
    expected = [a.copy() for a in out]
    out = (np.empty((2, 2)), np.empty((2, 2)))
    assert robot.inverse_dynamics_derivatives(list(q), qd, qdd, out=out) is out
    for a, b in zip(out, expected):
        np.testing.assert_array_equal(a, b)


def test_a_linearisation_step_too_long_for_the_motion_says_so(load):
    robot = load("rrr")
    q = np.array([0.3, -0.2, 0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning either
        with pytest.raises(ValueError, match=r"dt=1e\+300 s: .* use a shorter dt"):
            robot.linearize(q, q, q, dt=1e300)
    A, B = robot.linearize(q, q, q, dt=1e-3)
    assert np.all(np.isfinite(A)) and np.all(np.isfinite(B))
