"""Closed-loop simulation speed at a 1 kHz control rate: compiled loop against Python loops.

How to run (from the repository root, test extra installed)::

    pytest benchmarks/test_bench_simulation.py -n 0 --benchmark-enable            # tables + summary
    pytest benchmarks/test_bench_simulation.py -n 0 --benchmark-enable -k "rr and not realtime"
    ROBODYN_BENCH_CACHE_DIR=/tmp/robodyn-bench pytest benchmarks/test_bench_simulation.py -n 0 --benchmark-enable

rr (2-DOF) and puma560 (6-DOF) are built once per session into conftest.py's private cache
(a few seconds each; ``ROBODYN_BENCH_CACHE_DIR`` keeps the builds). Every loop
integrates with RK4, one step per 1 ms control period, and every controller tracks the same
0.5 Hz sine from the same start (realtime_loop.scenario). One pytest-benchmark group per
robot; each round is a whole run of ``SIMULATED[robot][kind]`` seconds:

* ``none``, ``pd``, ``pd-gravity``, ``computed-torque``, ``slotine-li``: ``robodyn.simulate``
  with the built-in controller, so the whole horizon runs in C (robodyn_sim.c);
* ``callable-c-law``: the compiled computed-torque law handed over as a plain callable
  (``FunctionController``), so the harness's Python tick loop runs it: that loop's cost;
* ``callable-numpy-law``: computed torque written in Python (``reference.evaluate``,
  ``robot.M``, ``robot.nonlinear_effects``) as the controller: what a user's own law costs;
  the baseline of the summary's speed-up column;
* ``numpy-rk4``: no harness, a plain Python loop: the same NumPy law, RK4 with
  ``robot.forward_dynamics`` per stage.

Before timing, the computed-torque trajectories of all four routes are checked to agree (same
law, same integrator). The summary printed at the end gives, per loop, simulated seconds per
wall second and microseconds per control tick (median round / ticks), and the speed-ups
against ``callable-numpy-law`` and ``numpy-rk4``. ``test_realtime_1khz`` runs rr for 10 s
paced to the wall clock (benchmarks/realtime_loop.py) and adds its jitter and deadline misses.
For instruction counts per tick instead of noisy timings: benchmarks/callgrind_simulation.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from realtime_loop import microseconds, report_lines, run, scenario

import robodyn

ROBOTS = Path(__file__).resolve().parent.parent / "robots"
RATE = 1000.0
PERIOD = 1.0 / RATE
BUILTIN_LOOPS = ("none", "pd", "pd-gravity", "computed-torque", "slotine-li")
PYTHON_LOOPS = ("callable-c-law", "callable-numpy-law", "numpy-rk4")
# Simulated seconds per round, so that a round takes roughly 10-100 ms on the 2-core machine.
SIMULATED = {"rr": {"compiled": 40.0, "python": 2.0}, "puma560": {"compiled": 10.0, "python": 2.0}}
REALTIME_SECONDS = 10.0


class NumpyComputedTorque:
    """tau = M(q) (qdd_r + Kd ed + Kp e) + n(q, qd): the built-in law in Python, compiled M and n."""

    def __init__(self, builtin):
        robot = builtin.model
        self.reference, self.kp, self.kd = builtin.reference, builtin.kp, builtin.kd
        self.M, self.nonlinear_effects = robot.M, robot.nonlinear_effects

    def __call__(self, t, q, qd):
        q_r, qd_r, qdd_r = self.reference.evaluate(t)
        return self.M(q) @ (qdd_r + self.kd * (qd_r - qd) + self.kp * (q_r - q)) + self.nonlinear_effects(q, qd)


def numpy_rk4(robot, law, q0, qd0, ticks: int):
    """(q, qd) at ticks + 1 samples: the law once per period, RK4 over the period, all in Python."""
    forward = robot.forward_dynamics
    q_log, qd_log = np.empty((ticks + 1, robot.n)), np.empty((ticks + 1, robot.n))
    q, qd = q0.copy(), qd0.copy()
    h, half, sixth = PERIOD, 0.5 * PERIOD, PERIOD / 6.0
    q_log[0], qd_log[0] = q, qd
    for k in range(ticks):
        tau = law(k * h, q, qd)
        a1 = forward(q, qd, tau)
        v2 = qd + half * a1
        a2 = forward(q + half * qd, v2, tau)
        v3 = qd + half * a2
        a3 = forward(q + half * v2, v3, tau)
        v4 = qd + h * a3
        a4 = forward(q + h * v3, v4, tau)
        q = q + sixth * (qd + 2.0 * (v2 + v3) + v4)
        qd = qd + sixth * (a1 + 2.0 * (a2 + a3) + a4)
        q_log[k + 1], qd_log[k + 1] = q, qd
    return q_log, qd_log


def _runner(robot, kind: str, duration: float):
    """A no-argument function doing one whole run of ``kind``, returning (q, qd) per sample."""
    ticks = round(duration * RATE)
    controller, q0, qd0 = scenario(robot, "computed-torque" if kind in PYTHON_LOOPS else kind, duration)
    if kind == "numpy-rk4":
        law = NumpyComputedTorque(controller)
        return lambda: numpy_rk4(robot, law, q0, qd0, ticks)
    if kind == "callable-c-law":
        controller = robodyn.FunctionController(controller, controller.reference)
    elif kind == "callable-numpy-law":
        controller = robodyn.FunctionController(NumpyComputedTorque(controller), controller.reference)

    def simulate():
        trajectory = robodyn.simulate(robot, controller, duration=duration, rate=RATE, q0=q0, qd0=qd0)
        return trajectory.q, trajectory.qd

    return simulate


@pytest.fixture(scope="session")
def sim_robot(bench_cache_dir):
    """sim_robot(name) -> robodyn.Robot for robots/<name>.yaml, built once per session."""
    robots: dict = {}

    def get(name: str):
        if name not in robots:
            robots[name] = robodyn.load(ROBOTS / f"{name}.yaml", cache_dir=bench_cache_dir)
        return robots[name]

    return get


@pytest.fixture(scope="session")
def sim_results(summary_sections) -> dict:
    """(robot, loop) -> (median seconds per round, ticks per round); "realtime" -> loop summary."""
    results: dict = {}
    summary_sections["robodyn closed loop at 1 kHz, RK4: simulated time per wall time"] = lambda: _summary(results)
    return results


@pytest.mark.parametrize("robot_name", list(SIMULATED))
def test_loops_agree(sim_robot, robot_name):
    """The four computed-torque routes simulate the same trajectory (else their timings compare nothing)."""
    robot = sim_robot(robot_name)
    duration = 0.5
    reference_q, reference_qd = _runner(robot, "computed-torque", duration)()
    for kind in PYTHON_LOOPS:
        q, qd = _runner(robot, kind, duration)()
        np.testing.assert_allclose(q, reference_q, rtol=0, atol=1e-9, err_msg=kind)
        np.testing.assert_allclose(qd, reference_qd, rtol=0, atol=1e-7, err_msg=kind)


@pytest.mark.parametrize("kind", BUILTIN_LOOPS + PYTHON_LOOPS)
@pytest.mark.parametrize("robot_name", list(SIMULATED))
def test_simulation_speed(benchmark, sim_robot, sim_results, robot_name, kind):
    robot = sim_robot(robot_name)
    duration = SIMULATED[robot_name]["python" if kind in PYTHON_LOOPS else "compiled"]
    ticks = round(duration * RATE)
    benchmark.group = f"{robot_name} ({robot.n}-DOF): closed loop, 1 kHz RK4, time per round"
    benchmark.extra_info.update(simulated_s=duration, ticks=ticks)
    benchmark(_runner(robot, kind, duration))
    if benchmark.stats:
        sim_results[robot_name, kind] = (benchmark.stats.stats.median, ticks)


def test_realtime_1khz(benchmark, sim_robot, sim_results):
    """rr, computed torque, 10 s paced to the wall clock: one round; jitter and misses go to the summary."""
    robot = sim_robot("rr")
    benchmark.group = "rr: real time, 1 kHz"
    result = benchmark.pedantic(run, args=(robot, "computed-torque", RATE, REALTIME_SECONDS), rounds=1,
                                iterations=1)
    benchmark.extra_info.update(result["loop"])
    sim_results["realtime"] = result


def _summary(results: dict) -> list[str]:
    if not results:
        return []
    lines = []
    if any(key != "realtime" for key in results):  # benchmarks disabled: only the real-time run has a result
        header = f"{'robot':<8} {'loop':<20}{'sim s / wall s':>16}{'us / tick':>12}{'x callable-numpy-law':>22}"
        lines.append(header + f"{'x numpy-rk4':>13}")
        for robot in SIMULATED:
            per_tick = {kind: results[robot, kind][0] / results[robot, kind][1]
                        for kind in BUILTIN_LOOPS + PYTHON_LOOPS if (robot, kind) in results}
            for kind, seconds in per_tick.items():
                lines.append(f"{robot:<8} {kind:<20}{PERIOD / seconds:>16.0f}{seconds * 1e6:>12.2f}"
                             f"{_speedup(per_tick.get('callable-numpy-law'), seconds):>22}"
                             f"{_speedup(per_tick.get('numpy-rk4'), seconds):>13}")
        lines.append("median round / ticks; x: how many times faster than that Python loop. The compiled rows "
                     "include simulate()'s recording (q, qd, qdd, tau, reference, compute time per tick).")
    realtime = results.get("realtime")
    if realtime:
        loop = realtime["loop"]
        lines.append(f"real time, {realtime['robot']} {realtime['controller']}, {realtime['duration_s']:g} s at "
                     f"{realtime['rate_hz']:g} Hz (load average {realtime['load_average_before'][0]:.2f}; "
                     f"period {microseconds(loop['period_s'])}):")
        lines += ["  " + line for line in report_lines(loop)]
    return lines


def _speedup(baseline, seconds) -> str:
    return "-" if baseline is None else f"{baseline / seconds:.1f}"
