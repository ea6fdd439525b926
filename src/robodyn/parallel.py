"""Running independent tasks (excitation starts, Monte-Carlo runs) on local processes or a Dask cluster.

    from robodyn.parallel import executor, map_tasks

    with executor() as pool:                                  # local processes, one per core
        results = map_tasks(work, items, executor=pool)
    with executor(scheduler="tcp://10.0.0.5:8786") as pool:   # a Dask distributed cluster
        results = map_tasks(work, items, executor=pool)

Tasks travel by pickling, so ``function`` must be importable (a module-level function) and each
item picklable. A ``robodyn.Robot`` pickles as a reference to its build (description path, build
options, cache directory, content-hash key) plus its parameter values: the receiving process
imports the build from that cache directory, and when the build is not there (another machine, a
cleaned cache) builds it from the description into that directory (a few seconds for a small arm;
the cache's build lock makes workers sharing the directory build it once). A worker on another
machine therefore needs the description file at the same path (or the same cache directory on a
shared file system) and the same robodyn, toolchain and compiler; otherwise unpickling fails with a
ValueError saying so. Arrays arriving through Dask may be unaligned, which robodyn's routines
refuse: pass them through ``numpy.require(x, requirements="CA")`` in the task, or compute them there.

Results do not depend on which worker runs a task: give every task its own seed
(``numpy.random.SeedSequence(seed, spawn_key=(index,))``), never seed per process. Local workers
reproduce a serial run bit for bit. Dask workers run BLAS on one thread, so a task that does not
fix its BLAS threads (``one_blas_thread``) can round differently there than in this process.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, as_completed
from typing import Any

__all__ = ["executor", "local_context", "map_tasks", "one_blas_thread"]

DISTRIBUTED_HINT = 'a scheduler address needs Dask distributed: pip install "robodyn[distributed]"'


def local_context():
    """The multiprocessing start method of local workers: "forkserver" where the platform has it,
    else "spawn". Not "fork": a forked child inherits the parent's threads and locks mid-state (the
    compiled robot modules are fine, but a parent running a Dask client or BLAS threads is not), and
    Python deprecates fork with threads. A forkserver child starts in about 0.3 s, a spawned one in
    about 0.7 s (2-link arm, this machine); both re-load robots from the cache. ``executor`` gives
    each worker the parent's environment and sys.path of the moment the pool is made, as spawn does."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def _like_the_parent(environment: dict, path: list) -> None:
    """Worker start: the parent's environment and import path as they are when the pool is made.
    A forkserver child copies the server, which froze them when the first pool of the process
    started; without this a later ROBODYN_CACHE_DIR (or sys.path) would not reach the workers."""
    os.environ.clear()
    os.environ.update(environment)
    sys.path[:] = path


def one_blas_thread():
    """A context in which NumPy's and SciPy's BLAS/LAPACK run on one thread (threadpoolctl).

    For many small linear-algebra calls (SVDs of a few hundred rows, SLSQP's subproblems): there a
    BLAS thread pool costs more than it gains (2-link excitation design, 8 starts: 8.5 s with the
    default two OpenBLAS threads, 2.5 s with one), and worker processes running side by side would
    oversubscribe the cores. It also makes results the same bit for bit wherever a task runs (Dask
    workers already use one thread). Without threadpoolctl installed this is a no-op."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    # threadpoolctl limits the libraries loaded when the context starts: load SciPy's own OpenBLAS
    # now (a first ``import scipy.optimize`` inside the context would bring it in unlimited).
    with contextlib.suppress(ImportError):
        import scipy.linalg  # noqa: F401
    return threadpool_limits(limits=1)


def _import_distributed():
    try:
        import distributed
    except ImportError as exc:
        raise ImportError(f"{DISTRIBUTED_HINT} ({exc})") from None
    return distributed


@contextlib.contextmanager
def executor(scheduler: Any = None, workers: int | None = None, *,
             connect_timeout: float = 10.0) -> Iterator[Executor]:
    """A ``concurrent.futures.Executor`` for independent tasks, shut down on exit.

    ``scheduler=None``: a local ``ProcessPoolExecutor`` with ``workers`` processes (default: the
    number of usable cores). ``scheduler`` an address such as ``"tcp://host:8786"`` (or a
    ``distributed.Client``, which stays open): the executor of a Dask distributed client connected
    to it; the cluster decides how many tasks run at once, so ``workers`` must then be None.
    Raises ImportError naming the ``robodyn[distributed]`` extra when Dask is missing, ValueError
    when no scheduler answers at the address within ``connect_timeout`` seconds.
    """
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)):
        raise TypeError(f"workers: expected a positive integer, got {workers!r}")
    if workers is not None and workers < 1:
        raise ValueError(f"workers: expected a positive integer, got {workers}")
    if scheduler is None:
        count = workers or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
        with ProcessPoolExecutor(max_workers=count, mp_context=local_context(), initializer=_like_the_parent,
                                 initargs=(dict(os.environ), list(sys.path))) as pool:
            yield pool
        return
    if workers is not None:
        raise ValueError("workers: the cluster at the scheduler address decides how many tasks run at once; "
                         "give either a scheduler or a number of local workers")
    distributed = _import_distributed()
    if isinstance(scheduler, distributed.Client):
        yield scheduler.get_executor()
        return
    if not isinstance(scheduler, str) or not scheduler.strip():
        raise TypeError(f"scheduler: expected an address such as 'tcp://127.0.0.1:8786', got {scheduler!r}")
    try:
        client = distributed.Client(scheduler, timeout=f"{connect_timeout}s")
    except OSError as exc:  # the scheduler is not there (distributed raises OSError on a timeout)
        raise ValueError(f"scheduler {scheduler}: cannot connect ({exc})") from None
    with client:
        yield client.get_executor()


def map_tasks(function: Callable, items: Iterable, executor: Executor | None = None,
              progress: Callable[[int, int], None] | None = None) -> list:
    """``[function(item) for item in items]``, on ``executor`` when given (else in this process, in
    order), results in the order of ``items``. ``progress(done, total)`` is called once before the
    first task ends (done = 0) and after each task ends, in this process. The first task to fail
    raises its exception here after the others are cancelled."""
    items = list(items)
    total = len(items)
    if progress is not None:
        progress(0, total)
    if executor is None:
        results = []
        for index, item in enumerate(items):
            results.append(function(item))
            if progress is not None:
                progress(index + 1, total)
        return results
    futures: list[Future] = [executor.submit(function, item) for item in items]
    try:
        for done, future in enumerate(as_completed(futures), 1):
            future.result()  # raise the first failure now
            if progress is not None:
                progress(done, total)
    except BaseException:
        for future in futures:
            future.cancel()
        raise
    return [future.result() for future in futures]
