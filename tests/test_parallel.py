"""robodyn.parallel (issue 11, point 8): tasks on local processes and on a Dask cluster give the
serial results; robots travel to workers by their cache key, and a worker whose cache lacks the
build rebuilds it from the description."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from test_ident_excitation import StandInRR

from robodyn.parallel import executor, local_context, map_tasks

DESIGN = dict(duration=10, harmonics=2, starts=4, samples=40, seed=3)


def _gravity_in_worker(task):
    robot, q = task
    q = np.require(q, requirements=["C", "A"])  # Dask may deliver an unaligned array (robodyn refuses it)
    return os.getpid(), robot.g(q), dict(robot.params), robot.manifest.get("key")


def test_serial_map_keeps_order_and_reports_progress():
    calls = []
    assert map_tasks(math.factorial, [5, 3, 0], progress=lambda *p: calls.append(p)) == [120, 6, 1]
    assert calls == [(0, 3), (1, 3), (2, 3), (3, 3)]
    assert map_tasks(math.factorial, []) == []


def test_local_pool_gives_the_serial_results():
    serial = map_tasks(math.factorial, range(30))
    calls = []
    with executor(workers=2) as pool:
        assert map_tasks(math.factorial, range(30), executor=pool, progress=lambda *p: calls.append(p)) == serial
    assert calls[0] == (0, 30) and calls[-1] == (30, 30) and len(calls) == 31
    assert local_context().get_start_method() in ("forkserver", "spawn")


def test_a_failing_task_raises_in_the_caller():
    with executor(workers=2) as pool, pytest.raises(ValueError, match="factorial"):
        map_tasks(math.factorial, [3, -1, 4], executor=pool)


def test_multi_start_design_is_the_same_on_a_process_pool():
    """Seeds belong to the start, not to the process: same trajectory, bit for bit (same BLAS)."""
    robot = StandInRR()
    serial, report = _design(robot)
    with executor(workers=2) as pool:
        parallel, again = _design(robot, executor=pool)
    np.testing.assert_array_equal(parallel.a, serial.a)
    np.testing.assert_array_equal(parallel.b, serial.b)
    assert [s.cond for s in again.starts] == [s.cond for s in report.starts]


def _design(robot, **options):
    from robodyn.identification.excitation import design_excitation

    return design_excitation(robot, **DESIGN, **options)


def test_robots_travel_to_workers_with_their_parameters(load):
    rr = load("rr")
    rr.params["m2"] = 61.5
    q = np.random.default_rng(0).uniform(-1, 1, (4, 2))
    with executor(workers=2) as pool:
        results = map_tasks(_gravity_in_worker, [(rr, row) for row in q], executor=pool)
    assert {pid for pid, *_ in results} - {os.getpid()}
    for (pid, g, params, key), row in zip(results, q):
        np.testing.assert_array_equal(g, rr.g(row))
        assert params["m2"] == 61.5 and key == rr.manifest["key"]
    rr.params.reset()


@pytest.mark.slow
def test_a_worker_whose_cache_lacks_the_build_rebuilds_it(tmp_path):
    """A pickled robot names its cache directory and key; a worker that does not find the build there
    (another machine, a cleaned cache) builds it from the description: same key, same values."""
    import shutil

    import robodyn

    root = tmp_path / "cache"
    rr = robodyn.load(Path(__file__).resolve().parent.parent / "robots" / "rr.yaml", cache_dir=root, verbose=False)
    rr.params["m1"] = 42.0
    shutil.rmtree(root)
    with executor(workers=1) as pool:
        [(pid, g, params, key)] = map_tasks(_gravity_in_worker, [(rr, np.array([0.3, -0.2]))], executor=pool)
    assert key == rr.manifest["key"] and params["m1"] == 42.0 and pid != os.getpid()
    np.testing.assert_array_equal(g, rr.g(np.array([0.3, -0.2])))
    assert any(entry.name.startswith("rr-") for entry in root.iterdir())  # built again, by the worker


def test_dask_local_cluster_gives_the_serial_results(load):
    """Two worker processes of a distributed.LocalCluster, reached by its scheduler address (about 5 s)."""
    distributed = pytest.importorskip("distributed")
    robot = StandInRR()
    serial, report = _design(robot)
    rr = load("rr")
    q = np.array([[0.1, 0.2], [0.3, -0.4]])
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  worker_dashboard_address=None) as cluster:
        with executor(cluster.scheduler_address) as pool:
            trajectory, again = _design(robot, executor=pool)
            gravity = map_tasks(_gravity_in_worker, [(rr, row) for row in q], executor=pool)
    assert [s.index for s in again.starts] == [0, 1, 2, 3] and again.best == report.best
    if _has_threadpoolctl():  # the starts run BLAS on one thread here and there: bit for bit
        np.testing.assert_array_equal(trajectory.a, serial.a)
        assert [s.cond for s in again.starts] == [s.cond for s in report.starts]
    else:  # Dask's workers run BLAS on one thread, this process maybe not: sums may round differently
        np.testing.assert_allclose([s.cond for s in again.starts], [s.cond for s in report.starts], rtol=1e-3)
    for (pid, g, params, key), row in zip(gravity, q):
        np.testing.assert_array_equal(g, rr.g(row))
        assert key == rr.manifest["key"] and pid != os.getpid()


def _has_threadpoolctl() -> bool:
    try:
        import threadpoolctl  # noqa: F401
    except ImportError:
        return False
    return True


def _blas_threads_in_a_fresh_process(_):
    import threadpoolctl

    from robodyn.parallel import one_blas_thread

    with one_blas_thread():
        import scipy.optimize  # noqa: F401  (first import inside the context, as in a new worker)
        return [pool["num_threads"] for pool in threadpoolctl.threadpool_info()]


def test_blas_runs_on_one_thread_inside_a_start():
    pytest.importorskip("threadpoolctl")
    with executor(workers=1) as pool:
        [threads] = map_tasks(_blas_threads_in_a_fresh_process, [None], executor=pool)
    assert threads and set(threads) == {1}


def test_bad_executor_arguments(monkeypatch):
    for workers, error in ((0, ValueError), (1.5, TypeError), (True, TypeError)):
        with pytest.raises(error, match="workers"), executor(workers=workers):
            pass
    with pytest.raises(ValueError, match="scheduler or a number of local workers"), \
            executor("tcp://127.0.0.1:1", workers=2):
        pass
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if Dask were not installed
    with pytest.raises(ImportError, match=r'pip install "robodyn\[distributed\]"'), executor("tcp://127.0.0.1:1"):
        pass


def test_unreachable_scheduler_is_a_clear_error():
    pytest.importorskip("distributed")
    with pytest.raises(ValueError, match="cannot connect"), executor("tcp://127.0.0.1:9", connect_timeout=1):
        pass
