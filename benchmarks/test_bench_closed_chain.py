"""Closed chains: the compiled biglide from Python, against Pinocchio's constraint dynamics and the
multiplier model, same run.

    pytest benchmarks/test_bench_closed_chain.py -n 0 --benchmark-enable

Forward dynamics of the biglide (robots/biglide.yaml, the notes' numbers) at one assembled state:

* ``robodyn_out`` / ``robodyn``: the compiled reduced model, ``robot.forward_dynamics(q, qd, tau[, out=])``
  (2 actuated accelerations);
* ``pinocchio``: ``pinocchio.constraintDynamics`` on the virtual tree (prismatic foot, revolute leg, twice)
  closed by a 3-D point constraint between the leg tips (the platform split half on each tip, so the
  legs need no fictitious inertia), proximal settings (1e-14, 1e-12, 200): 4 tree accelerations;
* ``kkt``: ``robodyn.closed_chain.ConstrainedDynamics.forward_dynamics``, the KKT system of the compiled
  tree routines solved by SciPy from Python (what a mechanism without a closed form runs on).

Each implementation is first checked to give the same actuated accelerations. The other routines
of the closed chain (geometry, Jacobians, singularity measures) are timed alone. The summary at the
end prints the medians per call and the ratios.
"""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

from conftest import ROOT
from test_bench_calls import INNER, _loop

FORWARD_PEERS = ("robodyn_out", "robodyn", "pinocchio", "kkt")
ROUTINES = ("M", "C", "inverse_dynamics", "dgm_modes", "igm_modes", "task_jacobian", "task_bias",
            "passive_jacobian", "singularity_measures")


def _reference():
    spec = importlib.util.spec_from_file_location("closed_chain_reference", ROOT / "tests" / "closed_chain_reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def biglide(bench_cache_dir):
    import robodyn

    robot = robodyn.load(ROOT / "robots" / "biglide.yaml", cache_dir=bench_cache_dir)
    q, qd = np.array([0.05, -0.08]), np.array([0.3, -0.2])
    tau = robot.inverse_dynamics(q, qd, np.array([1.0, -0.5]))
    return robot, q, qd, tau


@pytest.fixture(scope="session")
def closed_results(summary_sections) -> dict:
    results: dict = {}
    summary_sections["closed chain: the biglide from Python, median per call"] = lambda: _summary(results)
    return results


def _summary(results: dict) -> list[str]:
    lines = [f"forward dynamics {impl:<12} {results[impl] * 1e9:9.0f} ns" for impl in FORWARD_PEERS if impl in results]
    for peer in ("pinocchio", "kkt"):
        if peer in results and "robodyn_out" in results:
            lines.append(f"{peer} / robodyn_out: {results[peer] / results['robodyn_out']:.1f}x")
    lines += [f"{name:<22} {results[name] * 1e9:9.0f} ns" for name in ROUTINES if name in results]
    return lines


@pytest.mark.parametrize("impl", FORWARD_PEERS)
def test_forward_dynamics(benchmark, biglide, closed_results, impl):
    robot, q, qd, tau = biglide
    expected = robot.forward_dynamics(q, qd, tau)
    if impl == "pinocchio":
        pin = pytest.importorskip("pinocchio")
        reference = _reference()
        bg = reference.Biglide(**{k: robot.params[k] for k in ("d", "l", "mp", "mf")})
        model, constraint = reference.biglide_pinocchio(bg, leg_inertia=0.0, split_platform=True)
        data = model.createData()
        models, datas = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
        models.append(constraint)
        datas.append(constraint.createData())
        pin.initConstraintDynamics(model, data, models, datas)
        qt, qtd = robot.tree_positions(q), robot.tree_velocities(q, qd)
        tree_tau = np.zeros(4)
        tree_tau[[0, 2]] = tau
        settings = pin.ProximalSettings(1e-14, 1e-12, 200)
        bindings = dict(dynamics=pin.constraintDynamics, model=model, data=data, qt=qt, qtd=qtd, t=tree_tau,
                        cms=models, cds=datas, settings=settings)
        call = "dynamics(model, data, qt, qtd, t, cms, cds, settings)"
        result = eval(call, {}, dict(bindings))[[0, 2]]
    elif impl == "kkt":
        from robodyn.closed_chain import ConstrainedDynamics

        qt, qtd = robot.tree_positions(q), robot.tree_velocities(q, qd)
        bindings = dict(kkt=ConstrainedDynamics(robot, baumgarte=(0.0, 0.0)), qt=qt, qtd=qtd, tau=tau)
        call = "kkt.forward_dynamics(qt, qtd, tau)"
        result = eval(call, {}, dict(bindings))[0][[0, 2]]
    else:
        bindings = dict(robot=robot, q=q, qd=qd, tau=tau)
        if impl == "robodyn_out":
            bindings["out"] = np.empty(2)
            call = "robot.forward_dynamics(q, qd, tau, out=out)"
        else:
            call = "robot.forward_dynamics(q, qd, tau)"
        result = eval(call, {}, dict(bindings))
    np.testing.assert_allclose(result, expected, rtol=1e-8, atol=1e-10 * float(np.max(np.abs(expected))))
    benchmark.group = f"biglide: forward dynamics, time per {INNER} calls"
    benchmark.extra_info.update(calls_per_round=INNER, call=call)
    benchmark(_loop(call, bindings, INNER))
    if benchmark.stats:
        closed_results[impl] = benchmark.stats.stats.median / INNER


@pytest.mark.parametrize("method", ROUTINES)
def test_routine(benchmark, biglide, closed_results, method):
    robot, q, qd, tau = biglide
    arguments = {"C": "q, qd", "inverse_dynamics": "q, qd, qd", "igm_modes": "x", "task_bias": "q, qd"}.get(method, "q")
    bindings = dict(robot=robot, q=q, qd=qd, x=robot.dgm(q))
    call = f"robot.{method}({arguments})"
    assert np.all(np.isfinite(eval(call, {}, dict(bindings))))
    benchmark.group = f"biglide: {method}, time per {INNER} calls"
    benchmark.extra_info.update(calls_per_round=INNER, call=call)
    benchmark(_loop(call, bindings, INNER))
    if benchmark.stats:
        closed_results[method] = benchmark.stats.stats.median / INNER
