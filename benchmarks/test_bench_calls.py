"""Call benchmarks: robodyn's compiled routines against sympy.lambdify and plain NumPy.

How to run (from the repository root, with the test extra installed:
``pip install -e .[test]``)::

    pytest benchmarks --benchmark-enable                 # all benchmarks, tables + summary
    pytest benchmarks --benchmark-enable -k "rr and g"   # a subset
    pytest benchmarks --benchmark-enable --benchmark-columns=min,median,ops
    pytest benchmarks                                    # benchmarks disabled: each runs once, as a test

pyproject.toml passes ``--benchmark-disable`` by default, hence ``--benchmark-enable``;
``testpaths = ["tests"]`` keeps these out of the normal test run. The rr (2-DOF)
and rrr (3-DOF) robots are built once per session into a temporary cache (the
run takes about a minute: SymPy derivation, C compilation, self-check; set
``ROBODYN_BENCH_CACHE_DIR=/some/dir`` to reuse the compiled robots across runs).

What is compared, for g(q), M(q), inverse_dynamics(q, qd, qdd) and
forward_dynamics(q, qd, tau), one state at a time (the control-loop case);
each routine of each robot is one pytest-benchmark group:

* ``robodyn_out``  -- the compiled routine writing into a preallocated ``out=`` array;
* ``robodyn``      -- the same, allocating its result;
* ``lambdify``     -- ``sympy.lambdify(..., "numpy")`` of the same SymPy model
  (``codegen.derive``), parameters substituted with their defaults; forward
  dynamics is ``np.linalg.solve(M(q), tau - bias(q, qd))`` with both lambdified;
* ``lambdify_cse`` -- the same with ``cse=True`` (common subexpressions shared);
* ``numpy``        -- a plain-NumPy reference point, not a full implementation:
  g: one ufunc call ``np.cos(q, out=buf)`` (the floor of any NumPy call);
  M: ``np.multiply.outer(q, q, out=buf)``; inverse dynamics: ``M @ qdd + bias``
  and forward dynamics: ``np.linalg.solve(M, tau - bias)``, with M and bias
  already computed -- the linear algebra alone.

Every implementation is first checked to return the same values as robodyn
(except the g/M floors, which compute something else).

Each benchmark round runs the call ``INNER`` (100) times in a generated loop
with the arguments in local variables, because pytest-benchmark's per-round
call costs more than a robodyn call: the tables are in time per 100 calls,
the summary printed at the end is per call and gives robodyn / lambdify.

For deterministic numbers (instruction counts instead of noisy sub-microsecond
timings) use ``python benchmarks/callgrind_calls.py`` (needs valgrind).
"""

from __future__ import annotations

import numpy as np
import pytest

ROBOTS = ("rr", "rrr")
INNER = 100
ROUTINES = ("g", "M", "inverse_dynamics", "forward_dynamics")
IMPLEMENTATIONS = ("robodyn_out", "robodyn", "lambdify", "lambdify_cse", "numpy")


def _spec(case, routine: str, impl: str):
    """(call source, local bindings, expected result or None) for one benchmark."""
    robot, n = case.robot, case.n
    state = {"q": case.q, "qd": case.qd, "qdd": case.qdd, "tau": case.tau}
    M = robot.M(case.q)
    bias = robot.nonlinear_effects(case.q, case.qd)
    arguments = {"g": "q", "M": "q", "inverse_dynamics": "q, qd, qdd", "forward_dynamics": "q, qd, tau"}[routine]
    expected = {"g": robot.g(case.q), "M": M, "inverse_dynamics": case.tau, "forward_dynamics": case.qdd}[routine]
    if impl in ("robodyn_out", "robodyn"):
        bindings = dict(state, f=getattr(robot, routine))
        if impl == "robodyn_out":
            bindings["out"] = np.empty(expected.shape)
            return f"f({arguments}, out=out)", bindings, expected
        return f"f({arguments})", bindings, expected
    if impl in ("lambdify", "lambdify_cse"):
        cse = impl == "lambdify_cse"
        if routine == "forward_dynamics":
            bindings = dict(state, Mf=case.lambdified["M", cse], bias=case.lambdified["bias", cse],
                            solve=np.linalg.solve)
            return "solve(Mf(q), tau - bias(q, qd).ravel())", bindings, expected
        bindings = dict(state, f=case.lambdified[routine, cse])
        return f"f({arguments})", bindings, expected
    if impl == "numpy":
        if routine == "g":
            return "cos(q, out=out)", dict(state, cos=np.cos, out=np.empty(n)), None
        if routine == "M":
            return "outer(q, q, out=out)", dict(state, outer=np.multiply.outer, out=np.empty((n, n))), None
        if routine == "inverse_dynamics":
            return "M @ qdd + bias", dict(state, M=M, bias=bias), expected
        return "solve(M, tau - bias)", dict(state, M=M, bias=bias, solve=np.linalg.solve), expected
    raise ValueError(impl)


def _loop(call: str, bindings: dict, inner: int):
    """A function running ``call`` ``inner`` times, every name a local variable (default argument)."""
    namespace = dict(bindings, _r=range(inner))
    parameters = ", ".join(f"{name}={name}" for name in ["_r", *bindings])
    exec(f"def run({parameters}):\n    for _ in _r:\n        {call}\n", namespace)
    return namespace["run"]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("routine", ROUTINES)
@pytest.mark.parametrize("robot", ROBOTS)
def test_call(benchmark, robot_case, bench_results, robot, routine, impl):
    case = robot_case(robot)
    call, bindings, expected = _spec(case, routine, impl)
    if expected is not None:
        result = np.asarray(eval(call, {}, dict(bindings)))
        np.testing.assert_allclose(result.reshape(expected.shape), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())
    benchmark.group = f"{robot} ({case.n}-DOF): {routine}, time per {INNER} calls"
    benchmark.extra_info.update(calls_per_round=INNER, call=call)
    benchmark(_loop(call, bindings, INNER))
    if benchmark.stats:
        bench_results[robot, routine, impl] = benchmark.stats.stats.median / INNER


def test_loop_overhead(benchmark, bench_results):
    """The generated loop with an empty body: what the loop itself adds to each call above."""
    benchmark.group = "loop overhead"
    benchmark.extra_info.update(calls_per_round=INNER, call="pass")
    benchmark(_loop("pass", {}, INNER))
    if benchmark.stats:
        bench_results["-", "loop", "pass"] = benchmark.stats.stats.median / INNER
