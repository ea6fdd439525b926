"""Dynamics derivatives on the Franka Panda (7 joints, fingers locked) against Pinocchio, same run (issue 13).

    pytest benchmarks/test_bench_derivatives.py -n 0 --benchmark-enable

* inverse-dynamics derivatives: ``robot.inverse_dynamics_derivatives(q, qd, qdd)`` (dtau/dq, dtau/dqd), with
  and without ``out=``, against ``pinocchio.computeRNEADerivatives(model, data, q, qd, qdd)``;
* forward-dynamics derivatives: ``robot.forward_dynamics_derivatives(q, qd, tau)`` (dqdd/dq, dqdd/dqd, M^-1),
  with and without ``out=``, against ``pinocchio.computeABADerivatives(model, data, q, qd, tau)``.

Every implementation is first checked to give the same numbers (Pinocchio leaves the URDF's viscous damping
out: it is removed here with the URDF's own values, as in tests/test_pinocchio.py). Each round runs the call
``INNER`` times in a generated loop (test_bench_calls.py explains why); the end-of-session table gives the
median time per call and Pinocchio / robodyn. Issue 13 asks for at least 3x: ``test_derivatives_speedup`` asserts
it from the medians just measured (skipped when the benchmarks are disabled).

``test_derivative_generation_time`` reports how long the generator takes for the two derivative routines of the
Panda (their definitions in the model stage and their C, after the model is derived): the build prints the
same figure ("derivative routines ... s"), and the build manifest's timings hold it as ``derivatives_s``.

Instruction counts (deterministic, unlike these timings): ``python benchmarks/callgrind_calls.py panda.urdf
--lock panda_finger_joint1=0 --lock panda_finger_joint2=0 --only inverse_dynamics_derivatives
--only forward_dynamics_derivatives``.

Both routines' kernels are built twice, for x86-64-v3 (AVX2, FMA) and for the baseline, and the first runs
where the CPU has it (codegen.emit.sources._CLONE_OPERATIONS, GCC on x86-64 Linux): their straight-line code
is larger than the instruction cache and runs at the speed of its size. On a CPU without AVX2, or with another
compiler, expect about 1.5x the times (the baseline build: 2.4x to 2.6x Pinocchio's speed when it was the only
one).
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from test_bench_calls import INNER, _loop

from conftest import PANDA, PANDA_FINGERS, example_robot_data

PEERS = ("robodyn_out", "robodyn", "pinocchio")
MIN_SPEEDUP = 3.0
ROUTINES = {
    "inverse_dynamics_derivatives": ("computeRNEADerivatives", "qdd"),
    "forward_dynamics_derivatives": ("computeABADerivatives", "tau"),
}


@pytest.fixture(scope="session")
def derivative_results(summary_sections) -> dict:
    results: dict = {}
    summary_sections["dynamics derivatives on the Panda (7 joints): robodyn vs Pinocchio"] = (
        lambda: _summary(results))
    return results


def _summary(results: dict) -> list[str]:
    lines = []
    for routine, (peer, _) in ROUTINES.items():
        row = {impl: results.get((routine, impl)) for impl in PEERS}
        if row["pinocchio"] is None:
            continue
        lines.append(f"{routine} vs pinocchio.{peer}:")
        lines += [f"    {impl:<12} {row[impl] * 1e9:8.0f} ns per call" for impl in PEERS if row[impl] is not None]
        lines += [f"    pinocchio / {impl}: {row['pinocchio'] / row[impl]:.2f}x (issue 13 asks >= {MIN_SPEEDUP:g}x)"
                  for impl in ("robodyn_out", "robodyn") if row[impl]]
    generation = results.get("generation")
    if generation:
        lines.append("generation of the derivative routines (model stage + C, model derived): "
                     + ", ".join(f"{k} {v:.2f} s" for k, v in generation.items()))
    return lines


def _state(case):
    tau = case.robot.inverse_dynamics(case.q, case.qd, case.qdd)
    return {"q": case.q, "qd": case.qd, "qdd": case.qdd, "tau": tau}


def _pinocchio_reference(case, routine, state):
    """Pinocchio's result in robodyn's convention: the URDF's viscous damping D added back (dtau/dqd + D;
    dqdd/dqd - M^-1 D at the torque tau - D qd, which gives Pinocchio the same qdd)."""
    import pinocchio

    model, data, damping = case.model, case.data, np.diag(case.model.damping)
    if routine == "inverse_dynamics_derivatives":
        d_q, d_qd, _ = pinocchio.computeRNEADerivatives(model, data, state["q"], state["qd"], state["qdd"])
        return d_q.copy(), d_qd + damping
    tau = state["tau"] - case.model.damping * state["qd"]
    d_q, d_qd, m_inv = (m.copy() for m in pinocchio.computeABADerivatives(model, data, state["q"], state["qd"], tau))
    m_inv = np.triu(m_inv) + np.triu(m_inv, 1).T
    return d_q, d_qd - m_inv @ damping, m_inv


@pytest.mark.parametrize("impl", PEERS)
@pytest.mark.parametrize("routine", list(ROUTINES))
def test_derivatives_vs_pinocchio(benchmark, panda_case, derivative_results, routine, impl):
    case = panda_case
    robot, n = case.robot, case.robot.n
    peer, last = ROUTINES[routine]
    state = _state(case)
    arguments = f"q, qd, {last}"
    reference = _pinocchio_reference(case, routine, state)
    ours = getattr(robot, routine)(state["q"], state["qd"], state[last])
    for a, b in zip(ours, reference):
        assert np.max(np.abs(a - b)) <= 1e-9 * np.max(np.abs(b))
    if impl == "pinocchio":
        import pinocchio

        if routine == "forward_dynamics_derivatives":
            state = dict(state, tau=state["tau"] - case.model.damping * state["qd"])
        bindings = dict(state, f=getattr(pinocchio, peer), model=case.model, data=case.data)
        call = f"f(model, data, {arguments})"
    else:
        bindings = dict(state, f=getattr(robot, routine))
        call = f"f({arguments})"
        if impl == "robodyn_out":
            bindings["out"] = tuple(np.zeros((n, n)) for _ in ours)
            call = f"f({arguments}, out=out)"
    benchmark.group = f"panda ({n}-DOF, fingers locked): {routine}, time per {INNER} calls"
    benchmark.extra_info.update(calls_per_round=INNER, call=call, routine=routine)
    benchmark(_loop(call, bindings, INNER))
    if benchmark.stats:
        derivative_results[routine, impl] = benchmark.stats.stats.median / INNER


def test_derivatives_speedup(derivative_results):
    """Issue 13: both derivative routines from Python at least 3x faster than Pinocchio's, same run."""
    for routine in ROUTINES:
        times = {impl: derivative_results.get((routine, impl)) for impl in PEERS}
        if any(value is None for value in times.values()):
            pytest.skip("needs test_derivatives_vs_pinocchio run with --benchmark-enable in this session")
        for impl in ("robodyn_out", "robodyn"):
            assert times["pinocchio"] / times[impl] >= MIN_SPEEDUP, (routine, times)


def test_derivative_generation_time(derivative_results):
    """The two derivative routines' share of the Panda's generation: their definitions and their C."""
    import codegen
    from codegen.emit.sources import _body
    from codegen.model.routines import define_routines
    from robodyn.options import BuildOptions

    options = BuildOptions(method="recursive", lock={name: 0.0 for name in PANDA_FINGERS})
    started = time.perf_counter()
    model = codegen.derive(example_robot_data(PANDA), options)
    derive_s = time.perf_counter() - started
    routines = define_routines(model, options)
    figures = {"model derivation (all routines share it)": derive_s}
    for definition in routines.definitions:
        name = definition.routine.name
        if name.endswith("_derivatives"):
            started = time.perf_counter()
            _, operations, _ = _body(definition, routines)
            figures[name] = routines.seconds[name] + time.perf_counter() - started
            assert operations > 0
    derivative_results["generation"] = figures
    print("generation:", {k: round(v, 2) for k, v in figures.items()})
    assert set(figures) >= {"inverse_dynamics_derivatives", "forward_dynamics_derivatives"}
