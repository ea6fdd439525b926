"""Stage 2: RobotDescription -> SymbolicModel, by the Euler-Lagrange or the recursive route."""

from __future__ import annotations

import os

from robodyn.options import BuildOptions

# The Euler-Lagrange route gives readable closed forms but differentiates M, which
# grows quickly with the number of joints; beyond this many joints "auto" recurses.
LAGRANGE_MAX_JOINTS = 3


def resolve_method(method: str, n: int, exact_rotations: bool = True) -> str:
    """The route "auto" stands for: Lagrange up to LAGRANGE_MAX_JOINTS joints whose fixed rotations are
    exact (see ``exact_rotations``), recursive otherwise."""
    from robodyn.options import METHODS

    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if method == "auto":
        return "lagrange" if n <= LAGRANGE_MAX_JOINTS and exact_rotations else "recursive"
    return method


def exact_rotations(description) -> bool:
    """Whether every fixed rotation and axis of the tree is exact, with angles that are right angles or
    rational multiples of pi.

    Generic angles (URDF rpy such as 0.3 rad) leave cos(3/10) and sin(3/10) in the closed forms, and
    simplifying M with them takes minutes even for three joints, with nothing readable to show for it:
    such robots take the recursive route."""
    import sympy as sp

    for joint in description.tree:
        if sp.Matrix(joint.axis).has(sp.Float):  # an axis normalised in floating point
            return False
        for transform in (joint.placement, joint.successor):
            for entry in sp.Matrix(transform)[:3, :3]:
                if not entry.is_number:
                    continue  # a symbolic parameter: the user asked for closed forms in it
                if entry.has(sp.Float):
                    return False
                for trig in entry.atoms(sp.sin, sp.cos, sp.tan):
                    if not (trig.args[0] / sp.pi).is_rational:
                        return False
    return True


def derive_model(description, options: BuildOptions | None = None, progress=None, regressor: bool = True,
                 meanwhile=None):
    """RobotDescription -> SymbolicModel by the route the options choose; ``progress(message)`` hears
    each step of the derivation (per joint on the Lagrange route, per algorithm on the recursive one).
    A closed chain (``description.closure``) gets its reduced model in actuated coordinates
    (``closed_chain.derive_closed_chain``); ``regressor=False`` skips the identification pass.
    ``meanwhile(model)``, if given, is called with the model without its regressor while the identification pass
    is still being derived beside it (a forked child): work that does not need the regressor (defining the
    routines, codegen.model.routines.define_early) then fills the wait."""
    import dataclasses

    from .closed_chain import derive_closed_chain
    from .lagrange import derive_lagrange
    from .recursive import derive_recursive
    from .regressor import derive_regressor, regressor_messages

    options = options or BuildOptions()
    if description.closure is not None:
        return derive_closed_chain(description, options, progress=progress)
    method = resolve_method(options.method, len(description.tree),  # bodies, coupled or not
                            options.method != "auto" or exact_rotations(description))
    if description.floating_base is not None:
        if method == "lagrange" and options.method == "lagrange":
            from robodyn.errors import BuildError

            raise BuildError("a floating base takes the recursive route (--method recursive or auto): its "
                             "orientation is a quaternion, which the Euler-Lagrange closed forms do not handle")
        method = "recursive"
    # The regressor comes from its own Newton-Euler pass whatever the route: one formulation to verify. So it
    # does not wait for the model, and from PARALLEL_REGRESSOR_BODIES bodies on it is derived beside it, in a
    # forked process.
    beside = _RegressorBeside.start(description, progress) if regressor else None
    try:
        if method == "lagrange":
            model = derive_lagrange(description, simplify=options.simplify, progress=progress)
        else:
            model = derive_recursive(description, progress=progress, articulated=options.forward == "aba")
        if not regressor:
            return model
        if beside is None:
            regressor = derive_regressor(description, progress=progress)
        else:
            if meanwhile is not None:
                meanwhile(model)
            regressor = beside.result()
            if progress is not None:
                for message in regressor_messages(regressor, "derived beside the model"):
                    progress(message)
    finally:
        if beside is not None:
            beside.close()
    timings = dict(model.timings, regressor_s=regressor.seconds - regressor.base.seconds,
                   base_parameters_s=regressor.base.seconds)
    return dataclasses.replace(model, regressor=regressor, timings=timings)


#: From this many bodies the identification pass (its Newton-Euler pass and the base parameters' numerical rank
#: decisions) runs in a forked process while this one derives the model and defines the routines that do not need it
#: (``meanwhile``), on the core that would otherwise idle until emission: TIAGo's (48 joints) derivation took
#: 21-25 s in one process, the identification pass 13 s of it. With the definitions in the wait small robots gain
#: too (fresh builds, medians of interleaved runs, in one process -> forked): the Panda 4.67 -> 4.08 s and
#: 4.93 -> 4.52 s, the UR5 3.56 -> 3.06 s, the RRR arm 4.08 -> 3.49 s, the RR arm 1.67 -> 1.42 s; the pendulum (one
#: body) 1.02 and 0.97 s, so it stays in one process.
PARALLEL_REGRESSOR_BODIES = 2
#: How long the parent waits for the child once its own model is done: this many seconds plus this many times what
#: the model took (TIAGo's child needs 13 s beside a model of 11 s). A child that has not answered by then (one
#: stuck in a native thread pool that fork left without its threads) is stopped and the pass derived here.
CHILD_PATIENCE = (60.0, 4.0)


class _RegressorBeside:
    """derive_regressor(description) in a forked child (concurrent.futures, one worker), its result pickled
    back; the child reports no progress (the caller reports its result) and ignores Ctrl-C (the caller stops it).
    Only with fork (a spawned child would import the caller's main module again), more than one usable core, and
    no other thread in this process but timers (forking copies the locks other threads may hold; a timer, such as
    the delayed progress's (codegen.pipeline), holds none that the child takes). Whatever goes wrong with the
    child (no fork, a child killed or out of memory, a result that cannot come back) the pass is derived here."""

    _job: tuple = ()

    def __init__(self, executor, future, job: tuple):
        import time

        self.executor, self.future, self.job = executor, future, job
        self.started = time.perf_counter()
        # The worker, forked at submit: stopped by close() when its result is not wanted.
        self.processes = list((getattr(executor, "_processes", None) or {}).values())

    @classmethod
    def start(cls, description, progress) -> "_RegressorBeside | None":
        import multiprocessing
        import threading
        from concurrent.futures import ProcessPoolExecutor

        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        current = threading.current_thread()
        alone = all(thread is current or isinstance(thread, threading.Timer) for thread in threading.enumerate())
        if (len(description.tree) < PARALLEL_REGRESSOR_BODIES or cores < 2 or not alone
                or "fork" not in multiprocessing.get_all_start_methods()):
            return None
        # The child inherits the job rather than receiving it pickled (the worker forks at submit).
        cls._job = (description,)
        executor = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"),
                                       initializer=_child_setup, initargs=(os.getpid(),))
        try:
            future = executor.submit(_derive_inherited_regressor)
        except OSError:  # no fork (out of memory, a process limit): the pass is derived here
            executor.shutdown(wait=False, cancel_futures=True)
            return None
        except BaseException:
            executor.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            cls._job = ()
        return cls(executor, future, (description, progress))

    def result(self):
        """The child's regressor; derived here if the child gave none (died, ran out of memory, its result could
        not be pickled back, or it did not answer within CHILD_PATIENCE; an error of the derivation itself is then
        raised here again)."""
        import time

        from .regressor import derive_regressor

        base, factor = CHILD_PATIENCE
        try:
            return self.future.result(timeout=base + factor * (time.perf_counter() - self.started))
        except Exception:
            self._stop()
            description, progress = self.job
            return derive_regressor(description, progress=progress)

    def close(self) -> None:
        """Wait for the child; stop it first if its result is not wanted (the model failed or was interrupted)."""
        self._stop()
        self.executor.shutdown(wait=True, cancel_futures=True)

    def _stop(self) -> None:
        if not self.future.done():
            for process in self.processes:
                process.terminate()
            for process in self.processes:
                process.join()


def _child_setup(parent: int) -> None:
    """The child's initializer. Ctrl-C reaches the whole process group, and the parent, which handles it, stops the
    child (an idle child would otherwise print a traceback of its own), so the child ignores it. SIGTERM, the
    parent's way to stop it (``_stop``), kills it again: the command line's handler (robodyn.errors.run_command),
    inherited through the fork, would raise inside the worker, which reports an exception of its task and waits
    for the next one while the parent waits for it to end. A parent that dies otherwise (SIGTERM, SIGKILL) takes
    the child with it: an orphaned worker would wait for work forever, holding the build's cache lock it inherited,
    and every later build of the robot would wait for that lock."""
    import signal
    import sys

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        import ctypes

        try:  # PR_SET_PDEATHSIG (1): the kernel sends SIGKILL when the parent dies
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            _watch_parent(parent)
    else:
        _watch_parent(parent)
    if os.getppid() != parent:  # it died before the signal was armed
        os._exit(1)


def _watch_parent(parent: int) -> None:
    """Without PR_SET_PDEATHSIG: a daemon thread ends the process once its parent is gone (checked each 0.2 s)."""
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(1)

    threading.Thread(target=watch, name="robodyn-parent-watch", daemon=True).start()


def _derive_inherited_regressor():
    from .regressor import derive_regressor

    (description,) = _RegressorBeside._job
    return derive_regressor(description)
