# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True, embedsignature=True, embedsignature.format=clinic, binding=False
"""robodyn's native runtime, compiled once at ``pip install``.

Every robot module built by the generator holds only its generated C and a
constant table of routines (``native/robodyn_abi.h``), exported as a capsule.
This module does everything else, for every robot:

* ``RobotCore``, the base of ``robodyn.Robot``: the robot's table, its live
  parameter vector, the GIL policy, and the one call path of every routine
  (argument checks, ``out=`` buffers, batches);
* ``routine_method``: the C method type that ``robodyn.Robot`` gets for each
  entry of the routine table (``robodyn/routines.py``);
* the compiled control laws (``ControlLaw``), integration steps and the
  closed-loop simulation (``native/robodyn_sim.c``).

Arrays are taken through the NumPy C API rather than typed memoryviews: a
memoryview costs ~0.2 us per argument, a checked raw pointer a few ns. Every
input must be a float64, C-contiguous, aligned, native-endian array of the
right shape with finite values; lists and tuples are converted (slower).

Per-call overhead (measure it with benchmarks/callgrind_calls.py): each call
first tries a fast path for the common case -- one state, exact ndarrays that
pass every check, ``out`` absent or exactly right. It only reads array headers
and sums the values (a finite sum proves every value finite): no Python object
is created, and no NumPy API is called unless the result must be allocated.
Anything else -- lists, batches, subclasses, and every error -- takes the
general path, which converts, loops over rows and raises with a precise
message. The fast path accepts a subset of what the general path accepts and
computes the same result.
"""

cimport cython
cimport numpy as cnp
from libc.math cimport isfinite
from libc.stdint cimport uintptr_t
from libc.string cimport memcpy, strcmp

from cpython.object cimport PyTypeObject
from cpython.ref cimport Py_CLEAR, Py_INCREF, PyObject, Py_XDECREF
from cpython.pycapsule cimport (PyCapsule_Destructor, PyCapsule_GetContext, PyCapsule_GetPointer,
                                PyCapsule_IsValid, PyCapsule_New, PyCapsule_SetContext)
from cpython.exc cimport PyErr_CheckSignals

cdef extern from "robodyn_abi.h" nogil:
    enum:
        RD_MAX_INPUTS
        RD_MAX_OUTPUTS
    ctypedef int (*rd_kernel)(const double* const* inputs, const double* p, double* const* out) noexcept
    ctypedef struct rd_routine:
        const char* name
        rd_kernel kernel
        int n_inputs
        int in_size[6]
        int n_outputs
        int out_rank[4]
        int out_shape[4][3]
        long operations
    ctypedef struct rd_robot:
        const char* robot
        int n
        int n_params
        const double* param_defaults
        const char* metadata_json
        int n_routines
        const rd_routine* routines

cdef extern from "robodyn_sim.h" nogil:
    ctypedef struct rd_model:
        int n
        int n_params
        const double* p
        rd_kernel mass_matrix
        rd_kernel coriolis_matrix
        rd_kernel gravity
        rd_kernel friction
        rd_kernel inverse_dynamics
        rd_kernel forward_dynamics
        int floating
    ctypedef struct rd_reference:
        int kind
        double t0
        double duration
        const double* a
        const double* b
        const double* omega
        const double* phase
    ctypedef struct rd_controller:
        int kind
        const rd_model* model
        const double* kp
        const double* kd
        const double* tau_limit
        int friction_at_reference
        const double* gain
        const double* tau_ref
    ctypedef struct rd_law:
        rd_controller controller
        rd_reference reference
    ctypedef struct rd_sim_config:
        double period
        long ticks
        int integrator
        int substeps
        const double* disturbance
        long disturbance_stride
        const double* wrench
        long wrench_stride
        int measure_time
        long first_sample
        long end_sample
        const double* actuation
    ctypedef struct rd_trajectory:
        double* q
        double* qd
        double* qdd
        double* tau
        double* q_ref
        double* qd_ref
        double* qdd_ref
        double* compute_time
    enum:
        RD_OK, RD_ERR_SINGULAR, RD_ERR_NONFINITE, RD_ERR_ARGUMENT, RD_ERR_DIVERGED
        RD_REF_HOLD, RD_REF_STEP, RD_REF_SINE, RD_REF_QUINTIC
        RD_CTRL_NONE, RD_CTRL_PD, RD_CTRL_PD_GRAVITY, RD_CTRL_COMPUTED_TORQUE, RD_CTRL_SLOTINE_LI, RD_CTRL_STATE_FEEDBACK
        RD_EULER, RD_SEMI_IMPLICIT_EULER, RD_RK4
    const double RD_DIVERGED
    long rd_workspace_size(int n)
    void rd_reference_eval(const rd_reference* ref, int n, double t, double* q, double* qd, double* qdd)
    int rd_control(const rd_controller* ctrl, const double* q, const double* qd, const double* q_r,
                   const double* qd_r, const double* qdd_r, double* tau, double* work)
    int rd_step(const rd_model* plant, int integrator, double dt, int substeps, double* q, double* qd,
                const double* tau, const double* h, double* work, double* qdd0)
    int rd_simulate(const rd_model* plant, const rd_controller* ctrl, const rd_reference* ref,
                    const rd_sim_config* config, const rd_trajectory* out, double* work, long* failed_tick)
    double rd_monotonic()

cdef extern from "robodyn_call.h":
    enum:
        RD_FAST_DONE, RD_FAST_DECLINED, RD_FAST_FAILED, RD_SPARES, RD_ROUTINE_SLOTS
    ctypedef struct rd_core_slot:
        const rd_routine* routine
        PyObject* spare[RD_SPARES]
        unsigned optional
        char heavy
        char release
    ctypedef struct rd_core:
        rd_core_slot slots[RD_ROUTINE_SLOTS]
        int n_slots
        double* p
        int n_params
        int gil_mode
    Py_ssize_t rd_loop(const rd_routine* r, const double** inputs, double** outputs, const double* p,
                       Py_ssize_t count, int batched) nogil
    ctypedef struct rd_shared_rows:
        const rd_routine* r
        const double* inputs[6]
        double* outputs[4]
        const double* p
        Py_ssize_t count
        Py_ssize_t chunk
        Py_ssize_t next
        Py_ssize_t failed
    void rd_run_shared(rd_shared_rows* rows) nogil
    void rd_stop_shared(rd_shared_rows* rows) nogil

cdef extern from "robodyn_method.h":
    ctypedef object (*rd_dispatch_fn)(object robot, int index, PyObject** args, int fast_status)
    Py_ssize_t rd_core_offset
    PyObject* rd_float64_descr
    PyTypeObject* rd_ndarray_type
    object rd_method_new(int index, const char* name, const char* doc, tuple names, int n_required,
                         PyTypeObject* owner, rd_dispatch_fn dispatch)

cdef extern from *:
    """
    /* The hash of robodyn_abi.h and robodyn_sim.h, defined by setup.py; robot modules and
       control-law capsules carry the same hash in their capsule names. */
    #ifndef RD_ABI_HASH
    #error "RD_ABI_HASH must be defined by the build (setup.py)"
    #endif
    static const char rd_robot_capsule_name[] = "robodyn.rd_robot:" RD_ABI_HASH;
    static const char rd_law_capsule_name[] = "robodyn.rd_law:" RD_ABI_HASH;
    static const char rd_abi_hash[] = RD_ABI_HASH;
    """
    const char* rd_robot_capsule_name
    const char* rd_law_capsule_name
    const char* rd_abi_hash

cdef extern from "numpy/arrayobject.h":
    PyTypeObject PyArray_Type
    # Steals a reference to descr.
    object PyArray_NewFromDescr(PyTypeObject* subtype, cnp.dtype descr, int nd, const cnp.npy_intp* dims,
                                const cnp.npy_intp* strides, void* data, int flags, object obj)

import json as _json
import numpy as np

from robodyn._arrays import real_sequence, refuse_masked

cnp.import_array()

#: Hash of the C layout shared with robot modules (robodyn_abi.h, robodyn_sim.h).
ABI_HASH = (<bytes>rd_abi_hash).decode("ascii")
#: The capsule name a robot module's ``table`` must have.
ROBOT_CAPSULE_NAME = (<bytes>rd_robot_capsule_name).decode("ascii")

cdef enum:
    WRENCH = 6

# Releasing and re-taking the GIL costs 30-50 ns and ~360 instructions per call, and a thread waiting for the GIL
# takes microseconds to wake: below about 2 us of work two threads calling routines run slower with it released
# than held (they hand the GIL back and forth), above it faster. Measured on a 2-core Xeon, with the operation counts
# of that time (ns per call, two threads each calling the same routine, released / held): Panda C (3,343
# operations) 480 / 270, Panda ID derivatives (6,743) 870 / 570, Talos M (8,085) 1,060 / 720, Panda FD derivatives
# (8,531) 1,000 / 1,010, Talos FD (16,157) 2,070 / 2,270, Talos C (27,635) 2,410 / 3,730, Talos ID derivatives
# (112,123) 13,300 / 22,500; one thread alone is always faster held. In "auto" mode the GIL is released for
# batches and for routines of at least this many operations.
HEAVY_OPERATIONS = 15000


# ---------------------------------------------------------------------------
# Fast-path checks: header reads only, no exceptions; a failure means "let the
# general path decide" (it converts, or raises with the precise reason).

cdef extern from "robodyn_call.h":
    # A finite sum proves every value finite (robodyn_call.h says why).
    double _sum "rd_sum"(const double* x, Py_ssize_t n) noexcept nogil
    bint _overlaps "rd_overlaps"(const double* a, Py_ssize_t na, const double* b, Py_ssize_t nb) noexcept nogil
    double* rd_array_data(PyObject* x, int rank, const int* dims, int flags) noexcept
    enum:
        RD_IN_FLAGS


cdef inline const double* _fast_vector(object x, int width) noexcept:
    """Data of x if it is an exact native float64 ndarray of shape (width,), C-contiguous and aligned,
    else NULL (the fast-path test of robodyn_call.h)."""
    return rd_array_data(<PyObject*>x, 1, &width, RD_IN_FLAGS)


cdef cnp.dtype _FLOAT64 = np.dtype(np.float64)


cdef extern from *:
    """
    /* A new reference as a Cython object without another INCREF. */
    static CYTHON_INLINE PyObject *robodyn_steal(PyObject *x) { return x; }
    """
    object _steal "robodyn_steal"(PyObject* x)


cdef inline cnp.ndarray _empty(int ndim, const cnp.npy_intp* dims):
    """A new uninitialised C-ordered float64 array: PyArray_EMPTY minus its dtype lookups (~100 instructions)."""
    Py_INCREF(_FLOAT64)
    return <cnp.ndarray>PyArray_NewFromDescr(&PyArray_Type, _FLOAT64, ndim, dims, NULL, NULL, 0, None)


# ---------------------------------------------------------------------------
# General path: converts, handles batches, raises.

cdef inline cnp.ndarray _as_array(object x, str name):
    """x itself if it is an exact ndarray; lists/tuples of real numbers are converted; a subclass is viewed as a
    plain ndarray, except a masked array with masked entries (its mask would be ignored); anything else is
    refused. Converting may run the elements' Python code (``__float__``), so callers convert every argument
    before they check any (a later argument's conversion could change an earlier, checked one)."""
    if cnp.PyArray_CheckExact(x):
        return <cnp.ndarray>x
    if isinstance(x, (list, tuple)):
        return real_sequence(x, name)
    if isinstance(x, np.ndarray):
        refuse_masked(x, name)
        return np.asarray(x)  # a subclass: view it as a plain ndarray
    raise TypeError(f"{name}: expected a numpy.ndarray of float64, got {type(x).__name__}")


cdef inline int _check_layout(cnp.ndarray a, str name, bint writable) except -1:
    if cnp.PyArray_TYPE(a) != cnp.NPY_DOUBLE:
        raise TypeError(f"{name}: expected dtype float64, got {a.dtype}")
    if not cnp.PyArray_IS_C_CONTIGUOUS(a) or not cnp.PyArray_ISALIGNED(a) or not cnp.PyArray_ISNOTSWAPPED(a):
        raise ValueError(f"{name}: array must be C-contiguous, aligned and native-endian "
                         "(use numpy.ascontiguousarray)")
    if writable and not cnp.PyArray_ISWRITEABLE(a):
        raise ValueError(f"{name}: array is read-only")
    return 0


cdef int _check_finite(const double* data, Py_ssize_t size, str name) except -1:
    cdef Py_ssize_t i
    if isfinite(_sum(data, size)):
        return 0
    for i in range(size):
        if not isfinite(data[i]):
            raise ValueError(f"{name}: contains NaN or infinity at flat index {i}")
    return 0


cdef int _prepare(cnp.ndarray a, str name, Py_ssize_t width, Py_ssize_t* batch, const double** ptr,
                  Py_ssize_t* size) except -1:
    """Check one array argument's layout and shape (not its values: the caller checks them last, when nothing
    else can change them); fix or check the batch size (-1 unknown, 0 single state, >0 rows)."""
    _check_layout(a, name, False)
    cdef int ndim = cnp.PyArray_NDIM(a)
    if ndim == 1 and cnp.PyArray_DIM(a, 0) == width:
        if batch[0] > 0:
            raise ValueError(f"{name}: expected shape ({batch[0]}, {width}) like the other arguments, "
                             f"got {(<object>a).shape}")
        batch[0] = 0
        size[0] = width
    elif ndim == 2 and cnp.PyArray_DIM(a, 1) == width:
        if batch[0] == 0 or (batch[0] > 0 and batch[0] != cnp.PyArray_DIM(a, 0)):
            raise ValueError(f"{name}: batch shape {(<object>a).shape} does not match the other arguments")
        if cnp.PyArray_DIM(a, 0) == 0:
            raise ValueError(f"{name}: empty batch")
        batch[0] = cnp.PyArray_DIM(a, 0)
        size[0] = batch[0] * width
    else:
        raise ValueError(f"{name}: expected shape ({width},) or (N, {width}), got {(<object>a).shape}")
    ptr[0] = <const double*>cnp.PyArray_DATA(a)
    return 0


cdef inline bint _shape_is(cnp.ndarray a, int ndim, cnp.npy_intp* dims) noexcept:
    cdef int k
    if cnp.PyArray_NDIM(a) != ndim:
        return False
    for k in range(ndim):
        if cnp.PyArray_DIM(a, k) != dims[k]:
            return False
    return True


cdef inline Py_ssize_t _out_size(const rd_routine* r, int k) noexcept nogil:
    return <Py_ssize_t>r.out_shape[k][0] * r.out_shape[k][1] * r.out_shape[k][2]


# ---------------------------------------------------------------------------
# Routine methods: robodyn.Robot gets one per entry of the routine table.

# A batch is split across threads when it holds at least this many operations (the generated routine's count
# times rows): handing a chunk to a pool thread and collecting it costs about 20-40 us, which a 1e6-operation batch
# (a few hundred microseconds) makes negligible.
PARALLEL_OPERATIONS = 1_000_000

# The threads of a batch take its rows in chunks of about this many operations (at least four chunks per thread):
# small enough that a thread slowed down leaves most of its share to the others, large enough that what a chunk
# costs -- an atomic addition on a shared counter, the cache lines it shares with the next chunk, the prefetchers
# starting over -- stays out of sight. The Panda's inverse dynamics on 1e5 states, two threads against one,
# medians of 15 interleaved rounds: chunks of 5e4 operations (36 rows) 1.37x and 1.79x in two runs, 1e6 1.84x and
# 1.89x, 3e6 1.85x and 1.91x, 1e7 1.89x and 1.89x.
CHUNK_OPERATIONS = 2_000_000


cpdef Py_ssize_t chunk_rows(long operations, Py_ssize_t count, int threads) noexcept:
    """Rows per chunk of a batch of ``count`` rows of a routine of ``operations`` operations on ``threads``
    threads: about CHUNK_OPERATIONS operations, and at least four chunks per thread."""
    cdef Py_ssize_t rows = max(1, <Py_ssize_t>(CHUNK_OPERATIONS // max(operations, 1)))
    return max(1, min(rows, count // (4 * threads)))


def usable_cores():
    """The CPUs this process may run on (its affinity mask where the platform has one)."""
    import os
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


cdef class _BatchRows:
    """One batch call's rows, shared by the threads that compute it (rd_shared_rows, robodyn_call.h): each takes
    the next chunk of rows until none are left. The arrays behind the pointers are held in ``keep`` until every
    thread is done."""

    cdef rd_shared_rows rows
    cdef object keep

    def run(self):
        """Compute chunks of rows without the GIL until none are left."""
        with nogil:
            rd_run_shared(&self.rows)


cdef object _POOL = None        # concurrent.futures.ThreadPoolExecutor for batch chunks, made on first use
cdef object _POOL_PID = None    # the process that made it: a forked child makes its own (threads do not fork)
cdef int _POOL_WORKERS = 0
cdef int _USABLE_CORES = usable_cores()


cdef object _pool(int workers):
    """A thread pool of at least ``workers`` threads, this process's own. A larger one replaces a smaller one
    without shutting it down: another thread's batch may be submitting to it (it then failed: "cannot schedule new
    futures after shutdown"); its idle threads end once the last batch holding it lets it go (concurrent.futures
    wakes them when the executor is collected)."""
    global _POOL, _POOL_PID, _POOL_WORKERS
    import os
    import threading
    if _POOL is None or _POOL_PID != os.getpid() or _POOL_WORKERS < workers:
        from concurrent.futures import ThreadPoolExecutor
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="robodyn-batch")
        # Its threads started now (each job waits for the others: one thread each), not by the batch's submits: an
        # exception raised in this thread (Ctrl-C) while a submit waits for a new thread to start could leave a job
        # queued whose future the batch never got to wait for.
        started = threading.Barrier(workers)
        for future in [pool.submit(started.wait, 60.0) for _ in range(workers)]:
            future.result()
        if _POOL is None or _POOL_PID != os.getpid() or _POOL_WORKERS < workers:  # not outgrown meanwhile
            _POOL, _POOL_PID, _POOL_WORKERS = pool, os.getpid(), workers
        return pool
    return _POOL


cdef Py_ssize_t _run_parallel(const rd_routine* r, const double** inputs, double** outputs, const double* p,
                              Py_ssize_t count, int threads, object keep) except -2:
    """A batch of ``count`` rows computed by this thread and ``threads`` - 1 pool threads, which take chunks of
    rows in turn (rd_run_shared): the result is the one of a serial loop, bit for bit. Returns the first failing
    row or -1."""
    cdef _BatchRows job = _BatchRows.__new__(_BatchRows)
    cdef int k
    job.rows.r = r
    job.rows.p = p
    job.keep = keep
    for k in range(r.n_inputs):
        job.rows.inputs[k] = inputs[k]
    for k in range(r.n_outputs):
        job.rows.outputs[k] = outputs[k]
    job.rows.count = count
    job.rows.chunk = chunk_rows(r.operations, count, threads)
    job.rows.next = 0
    job.rows.failed = count
    pool = _pool(threads - 1)
    futures = []
    try:
        for _ in range(1, threads):
            futures.append(pool.submit(job.run))
        job.run()
    except BaseException:  # interrupted (a signal's exception in this thread): no thread takes another chunk
        rd_stop_shared(&job.rows)
        _finish(job, futures)
        raise
    _finish(job, futures)
    return -1 if job.rows.failed >= count else job.rows.failed


cdef int _finish(_BatchRows job, list futures) except -1:
    """Wait for the pool threads' share of a batch, even when interrupted (Ctrl-C while waiting): they write into
    the caller's arrays. An interruption (or a pool thread's own failure) stops the batch -- no thread takes another
    chunk -- and is raised once every thread is done."""
    problem = None
    for future in futures:
        while True:
            try:
                future.result()
                break
            except BaseException as exc:  # KeyboardInterrupt while waiting, or the thread's own exception
                rd_stop_shared(&job.rows)
                if problem is None:
                    problem = exc
                if future.done():  # the thread's own exception (result() would raise it again): it is done
                    break
    if problem is not None:
        raise problem
    return 0


cdef class RobotCore

# Per routine-table index: argument names (tuple of str) and optional-argument flags,
# filled by make_method; read by the general path for messages.
cdef list _ARGUMENT_NAMES = []
cdef list _FAILURES = []
cdef list _METHOD_NAMES = []


cdef object _dispatch(object robot, int index, PyObject** args, int fast_status):
    """What a routine method (robodyn_method.h) hands on when its fast path did not produce the
    result: ``fast_status`` RD_FAST_FAILED (the kernel reported a failure) or RD_FAST_DECLINED (lists,
    batches, errors: the general path), or the routine is not in this robot (self is a RobotCore:
    rd_routine_vectorcall or the method descriptor checked it)."""
    cdef RobotCore core = <RobotCore>robot
    if core._core.slots[index].routine == NULL:
        return core._unavailable(index)
    if fast_status == RD_FAST_FAILED:
        return _routine_failed(index, 0, False, robot, args)
    return core._call_general(index, args)


# The C strings of each method's name and doc must outlive it: every pair made is kept here (a few kilobytes for
# the whole table, once per install).
cdef list _METHOD_STRINGS = []


def make_method(int index, str method, str doc, tuple argument_names, int n_required, failure, owner):
    """The routine method of ``owner`` for table entry ``index``, to set on the class (robodyn_method.h: a method
    descriptor behind an object CPython calls on its fast path; the plain descriptor for a class other than the
    first one given an index); ``doc`` starts with its text signature."""
    if not isinstance(owner, type) or not issubclass(owner, RobotCore):
        raise TypeError("owner must be a subclass of RobotCore")
    if not 0 <= index < RD_ROUTINE_SLOTS:
        raise ValueError(f"routine table: at most {RD_ROUTINE_SLOTS} routines")
    name_bytes, doc_bytes = method.encode("utf-8"), doc.encode("utf-8")
    # Kept for good before the C side points at them: a method made earlier at this index (and a failed attempt)
    # may still point at its own strings.
    _METHOD_STRINGS.append((name_bytes, doc_bytes))
    installed = rd_method_new(index, name_bytes, doc_bytes, argument_names + ("out",), n_required,
                              <PyTypeObject*>owner, _dispatch)
    while len(_ARGUMENT_NAMES) <= index:
        _ARGUMENT_NAMES.append(())
        _FAILURES.append(None)
        _METHOD_NAMES.append("")
    _ARGUMENT_NAMES[index] = argument_names
    _FAILURES[index] = failure
    _METHOD_NAMES[index] = method
    return installed


cdef object _routine_failed(int index, Py_ssize_t row, bint batched, object robot, PyObject** args):
    """Raise the routine's failure. A kernel also fails on a floating base's quaternion of other than unit norm:
    the robot's ``_input_problem`` (Python, only on this slow path) says when that was the cause."""
    where = f" (batch row {row})" if batched else ""
    failure = _FAILURES[index] or "the routine reported an error"
    cdef tuple names = <tuple>_ARGUMENT_NAMES[index]
    cdef int k
    explain = getattr(robot, "_input_problem", None)
    if explain is not None:
        for k in range(len(names)):
            if args[k] != NULL and <object>args[k] is not None:
                problem = explain(names[k], <object>args[k])
                if problem:
                    raise ValueError(f"{_METHOD_NAMES[index]}: {problem}")
    raise ValueError(f"{_METHOD_NAMES[index]}: {failure}{where}")


cdef const rd_routine* _find(const rd_robot* table, const char* name) noexcept:
    cdef int i
    for i in range(table.n_routines):
        if strcmp(table.routines[i].name, name) == 0:
            return &table.routines[i]
    return NULL


cdef class RobotCore:
    """The compiled side of a robodyn.Robot: its routine table, parameters and GIL policy.

    Not used directly: ``robodyn.Robot`` derives from it and gets the routine methods.
    """

    cdef object _extension          # the robot module: keeps its code loaded
    cdef const rd_robot* _table
    cdef int _n
    cdef int _nq                    # size of q: _n, or _n + 1 with a floating base (rd_model.floating)
    cdef cnp.ndarray _params
    cdef rd_core _core              # what a call needs (robodyn_call.h): slots, parameters, GIL mode
    cdef rd_model _model
    cdef bint _has_model
    cdef cnp.ndarray _step_work
    cdef int _threads               # batch threads: 0 for "auto" (usable_cores())

    def __dealloc__(self):
        self._free_core()

    cdef void _free_core(self) noexcept:
        """Clear the per-routine slots (and drop the spare results they hold)."""
        cdef int i, s
        for i in range(RD_ROUTINE_SLOTS):
            for s in range(RD_SPARES):
                Py_CLEAR(self._core.slots[i].spare[s])
            self._core.slots[i].routine = NULL
            self._core.slots[i].optional = 0
            self._core.slots[i].heavy = 0
            self._core.slots[i].release = 0
        self._core.n_slots = 0

    def _attach(self, extension, tuple routines):
        """Bind a robot module: ``routines`` is the routine table as (name, argument count, output count,
        optional flags) in table order. Called once by robodyn.Robot."""
        if self._table != NULL:
            raise RuntimeError("this robot is already bound to a module")
        capsule = getattr(extension, "table", None)
        if not PyCapsule_IsValid(capsule, rd_robot_capsule_name):
            raise ImportError(f"{getattr(extension, '__file__', extension)!s}: not a robot module of this robodyn "
                              f"runtime (expected a capsule {ROBOT_CAPSULE_NAME!r}; rebuild it)")
        cdef const rd_robot* table = <const rd_robot*>PyCapsule_GetPointer(capsule, rd_robot_capsule_name)
        cdef int count = len(routines)
        cdef int i, k
        cdef const rd_routine* r
        if count > RD_ROUTINE_SLOTS:
            raise ValueError(f"routine table: at most {RD_ROUTINE_SLOTS} routines")
        self._free_core()  # what an earlier attempt that failed set
        for i, (name, n_arguments, n_outputs, optional) in enumerate(routines):
            r = _find(table, (<str>name).encode("ascii"))
            if r == NULL:
                continue
            if (r.n_inputs != n_arguments or r.n_outputs != n_outputs or r.n_inputs > RD_MAX_INPUTS
                    or r.n_outputs > RD_MAX_OUTPUTS or r.kernel == NULL):
                raise ImportError(f"{extension.__name__}: routine {name} was built for another routine table "
                                  "(rebuild the robot)")
            self._core.slots[i].routine = r
            self._core.slots[i].heavy = r.operations >= HEAVY_OPERATIONS
            for k, flag in enumerate(optional):
                if flag:
                    self._core.slots[i].optional |= 1u << k
        self._core.n_slots = count
        self._extension = extension
        self._table = table
        self._n = table.n
        self._core.n_params = table.n_params
        self._params = np.array([table.param_defaults[i] for i in range(table.n_params)] or [0.0], dtype=np.float64)
        self._core.p = <double*>cnp.PyArray_DATA(self._params)
        # Written only through _core.p (by _set_parameter(s), which keep every value finite): read-only to NumPy,
        # so no view of it (parameter_values) can be made writable again.
        self._params.flags.writeable = False
        self._set_gil_mode(1)
        self._model.n = table.n
        self._model.n_params = table.n_params
        self._model.p = self._core.p
        self._model.mass_matrix = self._kernel(b"mass_matrix")
        self._model.coriolis_matrix = self._kernel(b"coriolis_matrix")
        self._model.gravity = self._kernel(b"gravity")
        self._model.friction = self._kernel(b"friction")
        self._model.inverse_dynamics = self._kernel(b"inverse_dynamics")
        self._model.forward_dynamics = self._kernel(b"forward_dynamics")
        self._has_model = (self._model.mass_matrix != NULL and self._model.coriolis_matrix != NULL
                           and self._model.gravity != NULL and self._model.friction != NULL
                           and self._model.inverse_dynamics != NULL and self._model.forward_dynamics != NULL)
        # The size of q is forward dynamics' first input: n, or n + 1 for a floating base (free flyer).
        r = _find(table, b"forward_dynamics")
        self._nq = table.n if r == NULL else r.in_size[0]
        self._model.floating = self._nq == table.n + 1 and table.n >= 6
        if self._nq != table.n and not self._model.floating:
            self._has_model = False  # a layout the integrators do not know
        self._step_work = np.zeros(rd_workspace_size(self._n), dtype=np.float64)

    cdef rd_kernel _kernel(self, const char* name) noexcept:
        cdef const rd_routine* r = _find(self._table, name)
        return NULL if r == NULL else r.kernel

    cdef int _require_model(self) except -1:
        if self._table == NULL:
            raise RuntimeError("robot not bound to a compiled module")
        if not self._has_model:
            raise RuntimeError(f"robot {(<bytes>self._table.robot).decode()!r}: its module lacks a routine the "
                               "control laws need")
        return 0

    # -- properties -------------------------------------------------------

    @property
    def n(self):
        """Number of joints."""
        return self._n

    @property
    def extension(self):
        """The compiled robot module."""
        return self._extension

    @property
    def routine_names(self):
        """Names of the routines this robot's module provides, in its table's order."""
        if self._table == NULL:
            return ()
        return tuple((<bytes>self._table.routines[i].name).decode("ascii") for i in range(self._table.n_routines))

    @property
    def operation_counts(self):
        """Operations (after CSE) of each compiled routine."""
        if self._table == NULL:
            return {}
        return {(<bytes>self._table.routines[i].name).decode("ascii"): self._table.routines[i].operations
                for i in range(self._table.n_routines)}

    @property
    def metadata_json(self):
        """The module's metadata (JSON text): joint names, types, limits, parameters, versions."""
        return "" if self._table == NULL else (<bytes>self._table.metadata_json).decode("utf-8")

    @property
    def parameter_values(self):
        """The live parameter vector (float64, order of the description), read-only: change it through
        ``robot.params`` (or ``_set_parameters``), which keeps every value finite, so calls need not check."""
        return self._params[:self._core.n_params]

    def _set_parameter(self, Py_ssize_t index, double value):
        """Set one parameter (finite values only)."""
        if not 0 <= index < self._core.n_params:
            raise IndexError(f"parameter index {index} out of range (this robot has {self._core.n_params})")
        if not isfinite(value):
            raise ValueError(f"parameter values must be finite, got {value}")
        self._core.p[index] = value

    def _set_parameters(self, values):
        """Set every parameter from a sequence of finite numbers, in description order."""
        array = np.ascontiguousarray(values, dtype=np.float64)
        if array.shape != (self._core.n_params,):
            raise ValueError(f"expected {self._core.n_params} parameter values, got shape {array.shape}")
        if not np.all(np.isfinite(array)):
            raise ValueError("parameter values must be finite")
        memcpy(self._core.p, cnp.PyArray_DATA(<cnp.ndarray>array), self._core.n_params * sizeof(double))

    @property
    def release_gil(self):
        """"auto" (default: batches and routines of 15,000 operations or more), True (every call) or False."""
        return {0: False, 1: "auto", 2: True}[self._core.gil_mode]

    @release_gil.setter
    def release_gil(self, value):
        if isinstance(value, str) and value == "auto":
            self._set_gil_mode(1)
        elif value is True or value is False:
            self._set_gil_mode(2 if value else 0)
        else:
            raise ValueError('release_gil must be "auto", True or False')

    cdef void _set_gil_mode(self, int mode):
        """The mode, and each routine's release flag under it (the call path reads one flag, not the policy)."""
        cdef int i
        self._core.gil_mode = mode
        for i in range(self._core.n_slots):
            self._core.slots[i].release = mode == 2 or (mode == 1 and self._core.slots[i].heavy)

    @property
    def threads(self):
        """Threads a large batch is split over: "auto" (default: the cores this process may use) or a number
        (1: every batch on the calling thread). Batches of at least PARALLEL_OPERATIONS operations (rows times the
        routine's operation count) are computed by that many threads, which take their rows in chunks as they go,
        without the GIL whatever ``release_gil`` says; the results do not depend on it, bit for bit."""
        return "auto" if self._threads == 0 else self._threads

    @threads.setter
    def threads(self, value):
        if isinstance(value, str) and value == "auto":
            self._threads = 0
        elif isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 256:
            self._threads = value
        else:
            raise ValueError(f'threads must be "auto" or a number from 1 to 256, got {value!r}')

    # -- the call path of every routine -------------------------------------

    cdef object _unavailable(self, int index):
        if self._table == NULL:
            raise RuntimeError("robot not bound to a compiled module")
        raise NotImplementedError(f"{_METHOD_NAMES[index]}: this robot's module has no such routine (its model "
                                  "does not define it, or it was built before the routine existed)")

    cdef object _call_general(self, int index, PyObject** args):
        """Validate inputs, allocate or check ``out``, call the kernel once or per batch row."""
        cdef const rd_routine* r = self._core.slots[index].routine
        cdef tuple names = <tuple>_ARGUMENT_NAMES[index]
        cdef const double* ptrs[6]
        cdef double* optrs[4]
        cdef Py_ssize_t sizes[6]
        cdef Py_ssize_t batch = -1
        cdef Py_ssize_t count, failed
        cdef int k, j, endim, threads
        cdef cnp.npy_intp edims[4]
        cdef cnp.npy_intp one[1]
        cdef double scalar_result = 0.0
        cdef cnp.ndarray o
        cdef object first = None  # the first output, or a list of them for several
        cdef list results = None
        cdef bint all_given = True  # every output given in out
        # The inputs as arrays (None where not given): converted arrays stay alive while their pointers are used.
        # Every one is converted before any is checked, as converting may run Python code (see _as_array).
        cdef list keep = [None] * r.n_inputs
        one[0] = 1
        for k in range(r.n_inputs):
            ptrs[k] = NULL
            sizes[k] = 0
            if args[k] == NULL or <object>args[k] is None:
                if not (self._core.slots[index].optional >> k) & 1u:
                    raise TypeError(f"{_METHOD_NAMES[index]}: {names[k]} must be an array, not None")
                continue
            keep[k] = _as_array(<object>args[k], names[k])
        for k in range(r.n_inputs):
            if keep[k] is not None:
                _prepare(<cnp.ndarray>keep[k], names[k], r.in_size[k], &batch, &ptrs[k], &sizes[k])
        count = batch if batch > 0 else 1

        out = None if args[r.n_inputs] == NULL else <object>args[r.n_inputs]
        if out is not None and r.n_outputs > 1:
            if not isinstance(out, tuple) or len(<tuple>out) != r.n_outputs:
                raise TypeError(f"out: expected a tuple of {r.n_outputs} arrays")
        for k in range(r.n_outputs):
            endim = 0
            if batch > 0:
                edims[endim] = batch
                endim += 1
            if r.out_rank[k] >= 1:
                edims[endim] = r.out_shape[k][0]
                endim += 1
            if r.out_rank[k] >= 2:
                edims[endim] = r.out_shape[k][1]
                endim += 1
            if r.out_rank[k] == 3:
                edims[endim] = r.out_shape[k][2]
                endim += 1
            name = "out" if r.n_outputs == 1 else f"out[{k}]"
            given = None if out is None else (out if r.n_outputs == 1 else (<tuple>out)[k])
            all_given = all_given and given is not None
            if given is None:
                if endim == 0:
                    o = None
                    optrs[k] = &scalar_result
                else:
                    o = _empty(endim, edims)
                    optrs[k] = <double*>cnp.PyArray_DATA(o)
            else:
                if not cnp.PyArray_Check(given):
                    raise TypeError(f"{name}: expected a numpy.ndarray, got {type(given).__name__}")
                o = <cnp.ndarray>given
                _check_layout(o, name, True)
                if not _shape_is(o, endim, edims) and not (endim == 0 and _shape_is(o, 1, one)):
                    expected = tuple([edims[j] for j in range(endim)])
                    raise ValueError(f"{name}: expected shape {expected}, got {(<object>o).shape}")
                optrs[k] = <double*>cnp.PyArray_DATA(o)
            for j in range(r.n_inputs):
                if ptrs[j] != NULL and _overlaps(ptrs[j], sizes[j], optrs[k], count * _out_size(r, k)):
                    raise ValueError(f"{name}: must not share memory with {names[j]}")
            for j in range(k):
                if _overlaps(optrs[j], count * _out_size(r, j), optrs[k], count * _out_size(r, k)):
                    raise ValueError(f"{name}: must not share memory with another output")
            if k == 0:
                first = o
            else:
                if results is None:
                    results = [first]
                results.append(o)

        # The values last: nothing from here on runs Python code that could change them.
        for k in range(r.n_inputs):
            if ptrs[k] != NULL:
                _check_finite(ptrs[k], sizes[k], names[k])
        _check_finite(self._core.p, self._core.n_params, "params")
        threads = min(_USABLE_CORES if self._threads == 0 else self._threads, count)
        if batch > 0 and threads > 1 and count * <double>r.operations >= PARALLEL_OPERATIONS:
            failed = _run_parallel(r, ptrs, optrs, self._core.p, count, threads,
                                   (tuple([<object>args[k] for k in range(r.n_inputs + 1) if args[k] != NULL]),
                                    keep, first, results))
        elif self._core.slots[index].release or (self._core.gil_mode == 1 and batch > 0):  # "auto" releases for batches
            with nogil:
                failed = rd_loop(r, ptrs, optrs, self._core.p, count, batch > 0)
        else:
            failed = rd_loop(r, ptrs, optrs, self._core.p, count, batch > 0)
        if failed >= 0:
            return _routine_failed(index, failed, batch > 0, self, args)
        if r.n_outputs == 1:
            return scalar_result if first is None else first
        if out is not None and all_given:
            return out  # every output given: the tuple itself, as the fast path returns it
        for k in range(r.n_outputs):
            if results[k] is None:
                results[k] = scalar_result
        return tuple(results)

    # -- simulation (robodyn.simulation documents the conventions) --------

    def _control_law(self, str controller, kp=None, kd=None, tau_limit=None, str reference="hold", double t0=0.0,
                    double duration=0.0, a=None, b=None, omega=None, phase=None, bint friction_at_reference=False,
                    gain=None, tau_ref=None):
        """A compiled control law that uses this robot as its model (see ControlLaw)."""
        self._require_model()
        return ControlLaw(self, controller, kp, kd, tau_limit, reference, t0, duration, a, b, omega, phase,
                          friction_at_reference, gain, tau_ref)

    def _step(self, q, qd, tau, h=None, double dt=1e-3, int substeps=1, str integrator="rk4", qdd0=None):
        """Advance the state arrays q and qd in place by ``substeps`` steps of dt, torque and wrench held;
        ``qdd0`` (optional, (n,)) receives the acceleration at the initial state. A floating base's q has nq =
        n + 1 values and moves on SE(3) x R^n (rk4: Runge-Kutta-Munthe-Kaas; semi-implicit-euler), exactly as
        robodyn.floating_step.ManifoldStepper; a step that diverges raises FloatingPointError."""
        self._require_model()
        method = INTEGRATORS.get(integrator)
        if method is None:
            raise ValueError(f"unknown integrator {integrator!r}; expected one of {', '.join(INTEGRATORS)}")
        if self._model.floating and method == RD_EULER:
            raise ValueError(f"{self._name()}: a floating base integrates with rk4 or semi-implicit-euler, got "
                             f"{integrator!r}")
        if not (dt > 0.0 and isfinite(dt)) or substeps < 1:
            raise ValueError("dt must be positive and finite and substeps at least 1")
        cdef int n = self._n, nq = self._nq
        # Fast path as for the routines: exact, writable, finite ndarrays that do not overlap.
        cdef double* qp = <double*>_fast_vector(q, nq)
        cdef double* qdp = <double*>_fast_vector(qd, n)
        cdef const double* taup = _fast_vector(tau, n)
        cdef const double* hp = NULL if h is None else _fast_vector(h, WRENCH)
        if (qp == NULL or qdp == NULL or taup == NULL or (h is not None and hp == NULL)
                or not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>q) or not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>qd)
                or _overlaps(qp, nq, qdp, n) or _overlaps(taup, n, qp, nq) or _overlaps(taup, n, qdp, n)
                or (hp != NULL and (_overlaps(hp, WRENCH, qp, nq) or _overlaps(hp, WRENCH, qdp, n)))
                or not isfinite(_sum(qp, nq) + _sum(qdp, n) + _sum(taup, n) + _sum(self._core.p, self._core.n_params)
                                + (0.0 if hp == NULL else _sum(hp, WRENCH)))):
            qp = _data(_checked(q, "q", -1, nq, True))
            qdp = _data(_checked(qd, "qd", -1, n, True))
            _check_finite(qp, nq, "q")
            _check_finite(qdp, n, "qd")
            tau = _checked(tau, "tau", -1, n, False)
            h = None if h is None else _checked(h, "h", -1, WRENCH, False)
            if _overlaps(qp, nq, qdp, n):
                raise ValueError("q and qd must not share memory")
            # Torque and wrench are held over the substeps while q and qd advance in place: a view of either is
            # copied first (else the torque would change from one substep to the next).
            if _overlaps(_data(tau), n, qp, nq) or _overlaps(_data(tau), n, qdp, n):
                tau = np.array(tau)
            if h is not None and (_overlaps(_data(h), WRENCH, qp, nq) or _overlaps(_data(h), WRENCH, qdp, n)):
                h = np.array(h)
            taup = _data(tau)
            hp = NULL if h is None else _data(h)
            _check_finite(self._core.p, self._core.n_params, "params")
        if self._model.floating:
            _check_quaternion(qp, "q")
        cdef double* accp = NULL
        if qdd0 is not None:
            accp = <double*>_fast_vector(qdd0, n)
            if accp == NULL or not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>qdd0):
                accp = _data(_checked(qdd0, "qdd0", -1, n, True))
            if (_overlaps(accp, n, qp, nq) or _overlaps(accp, n, qdp, n) or _overlaps(accp, n, taup, n)
                    or (hp != NULL and _overlaps(accp, n, hp, WRENCH))):
                raise ValueError("qdd0: must not share memory with q, qd, tau or h")
        cdef int status = rd_step(&self._model, method, dt, substeps, qp, qdp, taup, hp,
                                  <double*>cnp.PyArray_DATA(self._step_work), accp)
        if status == RD_ERR_DIVERGED:
            _raise_diverged(self._name(), qdp, n, dt, "")
        if status != RD_OK:
            _raise_status(status, "step")

    cdef str _name(self):
        return (<bytes>self._table.robot).decode("utf-8", "replace")

    def _simulate(self, law, q, qd, qdd, tau, q_ref, qd_ref, qdd_ref, compute_time, double period,
                 str integrator="rk4", int substeps=1, disturbance=None, wrench=None, bint measure_time=True,
                 actuation=None):
        """Closed-loop simulation over len(q) - 1 control periods, in C without the GIL.

        ``law``: a ControlLaw capsule (``ControlLaw.capsule()``, whose model may be another robot with
        the same n). q and qd: (ticks + 1, nq) and (ticks + 1, n) arrays whose first row is the initial
        state; the other outputs are (ticks + 1, n) arrays or None (compute_time: (ticks + 1,)). A floating
        base (nq = n + 1) is integrated as by ``_step`` and runs the law "none" only.
        ``actuation``: None (every joint has a motor) or n values, 1 on a motorised joint and 0 on a
        passive one, where the controller's torque is dropped.
        """
        self._require_model()
        cdef int n = self._n, nq = self._nq
        if integrator not in INTEGRATORS:
            raise ValueError(f"unknown integrator {integrator!r}; expected one of {', '.join(INTEGRATORS)}")
        if self._model.floating and INTEGRATORS[integrator] == RD_EULER:
            raise ValueError(f"{self._name()}: a floating base integrates with rk4 or semi-implicit-euler, got "
                             f"{integrator!r}")
        if not PyCapsule_IsValid(law, rd_law_capsule_name):
            raise TypeError("law: expected ControlLaw.capsule() from this robodyn runtime")
        cdef rd_law* c_law = <rd_law*>PyCapsule_GetPointer(law, rd_law_capsule_name)
        if c_law.controller.model.n != n:
            raise ValueError(f"law: its model has {c_law.controller.model.n} joints, this robot {n}")
        if self._model.floating and c_law.controller.kind != RD_CTRL_NONE:
            raise ValueError(f"law: {self._name()} has a floating base; the compiled loop runs it with the law "
                             "'none' only (the joint-space laws take q as n joint positions)")
        if not (period > 0.0 and isfinite(period)) or substeps < 1:
            raise ValueError("period must be positive and finite and substeps at least 1")
        if not cnp.PyArray_Check(q) or cnp.PyArray_NDIM(<cnp.ndarray>q) != 2:
            raise ValueError("q: expected an array of shape (ticks + 1, nq)")
        cdef Py_ssize_t rows = cnp.PyArray_DIM(<cnp.ndarray>q, 0)
        if rows < 1:
            raise ValueError("q: needs at least one row (the initial state)")
        arrays = [_checked(q, "q", rows, nq, True), _checked(qd, "qd", rows, n, True)]
        _check_finite(_data(arrays[0]), nq, "q[0]")
        _check_finite(_data(arrays[1]), n, "qd[0]")
        if self._model.floating:
            _check_quaternion(_data(arrays[0]), "q[0]")
        for name, value in (("qdd", qdd), ("tau", tau), ("q_ref", q_ref), ("qd_ref", qd_ref), ("qdd_ref", qdd_ref)):
            arrays.append(None if value is None else _checked(value, name, rows, n, True))
        if (q_ref is None) != (qd_ref is None) or (q_ref is None) != (qdd_ref is None):
            raise ValueError("q_ref, qd_ref and qdd_ref go together")
        cdef cnp.ndarray times = None
        if compute_time is not None:
            times = _checked(compute_time.reshape(rows, 1) if cnp.PyArray_Check(compute_time) else compute_time,
                             "compute_time", rows, 1, True)
        views = [a for a in arrays if a is not None] + ([] if times is None else [times])
        for i in range(len(views)):
            for j in range(i + 1, len(views)):
                if np.shares_memory(views[i], views[j]):
                    raise ValueError("output arrays must not share memory")
        cdef rd_sim_config config
        config.period = period
        config.ticks = rows - 1
        config.integrator = INTEGRATORS[integrator]
        config.substeps = substeps
        disturbance_array = _rows_or_constant(disturbance, "disturbance", rows, n, &config.disturbance_stride)
        wrench_array = _rows_or_constant(wrench, "wrench", rows, WRENCH, &config.wrench_stride)
        config.disturbance = _data(disturbance_array)
        config.wrench = _data(wrench_array)
        config.measure_time = measure_time and times is not None
        actuation_array = None if actuation is None else _checked(actuation, "actuation", -1, n, False)
        if actuation_array is not None and not np.all((actuation_array == 0.0) | (actuation_array == 1.0)):
            raise ValueError("actuation: expected 0 (passive) or 1 (motorised) per joint")
        config.actuation = _data(actuation_array)
        _check_finite(self._core.p, self._core.n_params, "params")
        _check_finite(c_law.controller.model.p, c_law.controller.model.n_params, "controller model params")
        cdef rd_trajectory out
        out.q = _data(arrays[0])
        out.qd = _data(arrays[1])
        out.qdd = _data(arrays[2])
        out.tau = _data(arrays[3])
        out.q_ref = _data(arrays[4])
        out.qd_ref = _data(arrays[5])
        out.qdd_ref = _data(arrays[6])
        out.compute_time = _data(times)
        cdef cnp.ndarray work = np.zeros(rd_workspace_size(n), dtype=np.float64)
        cdef double* work_data = _data(work)
        cdef long failed = -1
        cdef int status = RD_OK
        # In chunks, so that Ctrl-C (checked between chunks) stops a long run within milliseconds.
        config.end_sample = 0
        while status == RD_OK and config.end_sample <= config.ticks:
            config.first_sample = config.end_sample
            config.end_sample = min(config.first_sample + SIMULATION_CHUNK, config.ticks + 1)
            with nogil:
                status = rd_simulate(&self._model, &c_law.controller, &c_law.reference, &config, &out, work_data,
                                     &failed)
            if status == RD_OK:
                PyErr_CheckSignals()
        where = f"simulation stopped at tick {failed} (t = {failed * period:.6g} s)"
        if status == RD_ERR_DIVERGED:  # row failed + 1 holds the velocity that diverged
            _raise_diverged(self._name(), _data(arrays[1]) + (failed + 1) * n, n, period / substeps, f" ({where})")
        if status != RD_OK:
            _raise_status(status, where)


# The routine methods reach a robot's rd_core directly (robodyn_method.h): tell them where it is.
cdef _locate_core():
    cdef RobotCore probe = RobotCore.__new__(RobotCore)
    global rd_core_offset, rd_float64_descr, rd_ndarray_type
    rd_core_offset = <Py_ssize_t>(<char*>&probe._core - <char*><PyObject*>probe)
    rd_float64_descr = <PyObject*>_FLOAT64  # the module keeps it alive
    rd_ndarray_type = &PyArray_Type


_locate_core()


# ---------------------------------------------------------------------------
# Control laws (static C in robodyn_sim.c). These are the compiled back end of
# robodyn.control and robodyn.simulation, which document the laws, gains and
# conventions; the entry points here check every array they are given (shape,
# dtype, layout, finiteness) so a mistake raises, never crashes.

cdef long SIMULATION_CHUNK = 4096  # ticks between checks for Ctrl-C: ~2 ms (rr) to ~20 ms (6-joint arm)
INTEGRATORS = {"euler": RD_EULER, "semi-implicit-euler": RD_SEMI_IMPLICIT_EULER, "rk4": RD_RK4}
CONTROLLERS = {"none": RD_CTRL_NONE, "pd": RD_CTRL_PD, "pd-gravity": RD_CTRL_PD_GRAVITY,
               "computed-torque": RD_CTRL_COMPUTED_TORQUE, "slotine-li": RD_CTRL_SLOTINE_LI,
               "state-feedback": RD_CTRL_STATE_FEEDBACK}
REFERENCES = {"hold": RD_REF_HOLD, "step": RD_REF_STEP, "sine": RD_REF_SINE, "quintic": RD_REF_QUINTIC}


cdef cnp.ndarray _checked(object x, str name, Py_ssize_t rows, Py_ssize_t width, bint writable):
    """x as a float64 array of shape (width,) if rows < 0, else (rows, width); finite unless writable."""
    if not cnp.PyArray_Check(x):
        raise TypeError(f"{name}: expected a numpy.ndarray of float64, got {type(x).__name__}")
    cdef cnp.ndarray a = <cnp.ndarray>x
    _check_layout(a, name, writable)
    cdef tuple expected = (width,) if rows < 0 else (<object>rows, <object>width)
    if (<object>a).shape != expected:
        raise ValueError(f"{name}: expected shape {expected}, got {(<object>a).shape}")
    if not writable:
        _check_finite(<const double*>cnp.PyArray_DATA(a), cnp.PyArray_SIZE(a), name)
    return a


cdef inline double* _data(object a):
    return NULL if a is None else <double*>cnp.PyArray_DATA(<cnp.ndarray>a)


#: Beyond this speed (rad/s or m/s) a floating base's run has diverged (robodyn_sim.h; floating_step.DIVERGED).
DIVERGED = RD_DIVERGED
# A floating base's quaternion may be off unit norm by this much (declared once, in robodyn.floating_base; the
# generated kernels check the same bound).
from robodyn.floating_base import QUATERNION_TOLERANCE
cdef double _NORM2_LOW = (1.0 - QUATERNION_TOLERANCE) ** 2, _NORM2_HIGH = (1.0 + QUATERNION_TOLERANCE) ** 2


cdef int _check_quaternion(const double* q, str name) except -1:
    """Refuse a floating base's quaternion q[3:7] of other than unit norm, as the kernels would (they only
    report a failure, which the step could not tell from a singular M)."""
    cdef double norm2 = q[3] * q[3] + q[4] * q[4] + q[5] * q[5] + q[6] * q[6]
    if not (_NORM2_LOW <= norm2 <= _NORM2_HIGH):
        raise ValueError(f"{name}: the base quaternion q[3:7] (x, y, z, w) must have unit norm (within "
                         f"{QUATERNION_TOLERANCE:g}); its norm is {norm2 ** 0.5:.17g} — "
                         "robodyn.floating_base.normalize(q) rescales it")
    return 0


cdef object _raise_diverged(str robot, const double* qd, int n, double dt, str where):
    """floating_step.ManifoldStepper._check's error: the step outran a fast mode of the model."""
    cdef double largest = 0.0
    cdef int i
    for i in range(n):
        if not isfinite(qd[i]) or abs(qd[i]) > largest:
            largest = abs(qd[i])
            if not isfinite(largest):
                break
    raise FloatingPointError(f"{robot}: the integration diverged (a velocity reached {largest:.3g}) with steps "
                             f"of {dt:g} s{where}; the model has modes faster than that (stiff joint damping, "
                             "light links): use more substeps")


cdef object _raise_status(int status, str where):
    if status == RD_ERR_SINGULAR:
        raise FloatingPointError(f"{where}: the mass matrix is not positive definite; check the parameters")
    if status == RD_ERR_NONFINITE:
        raise FloatingPointError(f"{where}: the state or torque became NaN or infinite (the simulation diverged; "
                                 "try a smaller step, more substeps or lower gains)")
    raise ValueError(f"{where}: invalid argument (integrator, controller kind or step)")


cdef void _release_law(object capsule) noexcept:
    """Capsule destructor: drop the reference to the ControlLaw that owns the C structs."""
    Py_XDECREF(<PyObject*>PyCapsule_GetContext(capsule))


cdef cnp.ndarray _rows_or_constant(object x, str name, Py_ssize_t rows, Py_ssize_t width, long* stride):
    """None, a constant (width,) array (stride 0) or one row per sample (stride width)."""
    if x is None:
        stride[0] = 0
        return None
    if cnp.PyArray_Check(x) and cnp.PyArray_NDIM(<cnp.ndarray>x) == 2:
        stride[0] = width
        return _checked(x, name, rows, width, False)
    stride[0] = 0
    return _checked(x, name, -1, width, False)


@cython.final
cdef class ControlLaw:
    """A built-in control law bound to its model and reference, evaluated in C.

    Holds its own workspace: one object must not be called from two threads at once.
    """

    cdef rd_law _law
    cdef RobotCore _model
    cdef int _n
    cdef int _nq           # the model's q: n, or n + 1 for a floating base (the law "none" only)
    cdef tuple _arrays     # keeps gains and reference arrays alive
    cdef cnp.ndarray _work
    cdef cnp.ndarray _ref_q, _ref_qd, _ref_qdd

    def __cinit__(self, RobotCore model not None, str controller, kp, kd, tau_limit, str reference, double t0,
                  double duration, a, b, omega, phase, bint friction_at_reference=False, gain=None, tau_ref=None):
        model._require_model()
        if controller not in CONTROLLERS:
            raise ValueError(f"unknown controller {controller!r}; expected one of {', '.join(CONTROLLERS)}")
        if reference not in REFERENCES:
            raise ValueError(f"unknown reference {reference!r}; expected one of {', '.join(REFERENCES)}")
        cdef int n = model._n
        self._n = n
        self._nq = model._nq
        self._model = model
        self._law.controller.kind = CONTROLLERS[controller]
        if model._model.floating and self._law.controller.kind != RD_CTRL_NONE:
            raise ValueError(f"controller {controller!r}: {model._name()} has a floating base, whose q holds the "
                             "base's pose: the joint-space laws are for fixed bases ('none' runs on any; "
                             "robodyn.whole_body controls a floating base on contacts)")
        self._law.controller.model = &model._model
        arrays = []
        for name, value in (("kp", kp), ("kd", kd), ("tau_limit", tau_limit), ("a", a), ("b", b),
                            ("omega", omega), ("phase", phase)):
            arrays.append(None if value is None else _checked(value, name, -1, n, False))
        feedback = self._law.controller.kind == RD_CTRL_STATE_FEEDBACK
        gain_array = None if gain is None else _checked(gain, "gain", n, 2 * n, False)
        tau_ref_array = None if tau_ref is None else _checked(tau_ref, "tau_ref", -1, n, False)
        if feedback and (gain_array is None or tau_ref_array is None):
            raise ValueError("controller 'state-feedback' needs gain (n x 2n) and tau_ref (n)")
        if not feedback and (gain is not None or tau_ref is not None):
            raise ValueError("gain and tau_ref are for the controller 'state-feedback'")
        self._arrays = tuple(arrays) + (gain_array, tau_ref_array)
        for name, array in zip(("kp", "kd", "tau_limit"), arrays[:3]):
            if array is not None and np.any(array < 0.0):
                raise ValueError(f"{name}: must be non-negative")
        if self._law.controller.kind not in (RD_CTRL_NONE, RD_CTRL_STATE_FEEDBACK) and (
                arrays[0] is None or arrays[1] is None):
            raise ValueError(f"controller {controller!r} needs both gain vectors")
        self._law.controller.gain = _data(gain_array)
        self._law.controller.tau_ref = _data(tau_ref_array)
        self._law.controller.kp = _data(arrays[0])
        self._law.controller.kd = _data(arrays[1])
        self._law.controller.tau_limit = _data(arrays[2])
        self._law.controller.friction_at_reference = friction_at_reference
        kind = REFERENCES[reference]
        needed = {RD_REF_HOLD: (3,), RD_REF_STEP: (3, 4), RD_REF_SINE: (3, 4, 5, 6), RD_REF_QUINTIC: (3, 4)}[kind]
        for index in needed:
            if arrays[index] is None:
                raise ValueError(f"reference {reference!r} needs {('a', 'b', 'omega', 'phase')[index - 3]}")
        if kind == RD_REF_QUINTIC and not duration > 0.0:
            raise ValueError("reference 'quintic': duration must be positive")
        self._law.reference.kind = kind
        self._law.reference.t0 = t0
        self._law.reference.duration = duration
        self._law.reference.a = _data(arrays[3])
        self._law.reference.b = _data(arrays[4])
        self._law.reference.omega = _data(arrays[5])
        self._law.reference.phase = _data(arrays[6])
        self._work = np.zeros(rd_workspace_size(n), dtype=np.float64)
        self._ref_q = np.zeros(n)
        self._ref_qd = np.zeros(n)
        self._ref_qdd = np.zeros(n)

    def capsule(self):
        """The C law (rd_law*) for a robot's simulate(); the capsule keeps this law alive."""
        capsule = PyCapsule_New(&self._law, rd_law_capsule_name, <PyCapsule_Destructor>_release_law)
        Py_INCREF(self)
        PyCapsule_SetContext(capsule, <void*>self)
        return capsule

    def reference(self, double t):
        """(q_r, qd_r, qdd_r) at time t, as new arrays."""
        q = np.empty(self._n)
        qd = np.empty(self._n)
        qdd = np.empty(self._n)
        rd_reference_eval(&self._law.reference, self._n, t, _data(q), _data(qd), _data(qdd))
        return q, qd, qdd

    def __call__(self, double t, q, qd, out=None):
        """Joint torque for the state (q, qd) at time t (q of nq values: n + 1 for a floating base)."""
        cdef int n = self._n, nq = self._nq
        cdef const double* qp = _fast_vector(q, nq)
        cdef const double* qdp = _fast_vector(qd, n)
        cdef double* tp
        cdef cnp.ndarray result
        if qp == NULL or qdp == NULL or not isfinite(_sum(qp, nq) + _sum(qdp, n)):
            q, qd = _as_array(q, "q"), _as_array(qd, "qd")  # both converted before either is checked
            q = _checked(q, "q", -1, nq, False)
            qd = _checked(qd, "qd", -1, n, False)
            qp = _data(q)
            qdp = _data(qd)
        cdef cnp.npy_intp dims[1]
        if out is None:
            dims[0] = n
            result = _empty(1, dims)
        else:
            result = _checked(out, "out", -1, n, True)
            if _overlaps(_data(result), n, qp, nq) or _overlaps(_data(result), n, qdp, n):
                raise ValueError("out: must not share memory with q or qd")
        tp = <double*>cnp.PyArray_DATA(result)
        cdef double* work = <double*>cnp.PyArray_DATA(self._work)
        cdef double* rq = <double*>cnp.PyArray_DATA(self._ref_q)
        cdef double* rqd = <double*>cnp.PyArray_DATA(self._ref_qd)
        cdef double* rqdd = <double*>cnp.PyArray_DATA(self._ref_qdd)
        rd_reference_eval(&self._law.reference, n, t, rq, rqd, rqdd)
        cdef int status = rd_control(&self._law.controller, qp, qdp, rq, rqd, rqdd, tp, work)
        if status != RD_OK:
            _raise_status(status, "controller")
        return result

