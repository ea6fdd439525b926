# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True, embedsignature=True, embedsignature.format=clinic, binding=False
"""Python bridge to one robot's generated dynamics.

This file is static: it is the same for every robot. The generated
``robot_api.pxd`` maps the names used here to the robot's prefixed C symbols.

Arrays are taken through the NumPy C API rather than typed memoryviews: a
memoryview costs ~0.2 us per argument, a checked raw pointer a few ns.
Every input must be a float64, C-contiguous, aligned, native-endian array of
the right shape with finite values; lists and tuples are converted (slower).

The GIL is released around the compiled work for batches and heavy routines
(see ``release_gil``).

Per-call overhead (measure it with benchmarks/callgrind_calls.py):

* Each call first tries a fast path for the common case -- one state, exact
  ndarrays that pass every check, ``out`` absent or exactly right. It only
  reads array headers and sums the values (a finite sum proves every value
  finite): no Python object is created, and no NumPy API is called unless the
  result must be allocated. Anything else -- lists, batches, subclasses, and
  every error -- takes the general path, which converts, loops over rows and
  raises with a precise message. The fast path accepts a subset of what the
  general path accepts and computes the same result.
* ``binding=False``: the methods are builtin methods, which CPython calls
  through a specialised vectorcall rather than a CyFunction bound method;
  ``embedsignature.format=clinic`` keeps ``inspect.signature`` working.
* Robot dimensions are compile-time constants, so the checks unroll.
"""

cimport cython
cimport numpy as cnp
from libc.math cimport isfinite
from libc.stdint cimport uintptr_t

from cpython.object cimport PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.pycapsule cimport (PyCapsule_Destructor, PyCapsule_GetContext, PyCapsule_GetPointer,
                                PyCapsule_IsValid, PyCapsule_New, PyCapsule_SetContext)
from cpython.ref cimport PyObject, Py_XDECREF
from cpython.exc cimport PyErr_CheckSignals

cimport robot_api as api
cdef extern from "robodyn_sim.h" nogil:
    ctypedef struct rd_model:
        int n
        int n_params
        const double* p
        void (*mass_matrix)(const double*, const double*, double*) noexcept
        void (*coriolis_matrix)(const double*, const double*, const double*, double*) noexcept
        void (*gravity)(const double*, const double*, double*) noexcept
        void (*friction)(const double*, const double*, double*) noexcept
        void (*inverse_dynamics)(const double*, const double*, const double*, const double*, const double*,
                                 double*) noexcept
        int (*forward_dynamics)(const double*, const double*, const double*, const double*, const double*,
                                double*) noexcept
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
        RD_OK, RD_ERR_SINGULAR, RD_ERR_NONFINITE, RD_ERR_ARGUMENT
        RD_REF_HOLD, RD_REF_STEP, RD_REF_SINE, RD_REF_QUINTIC
        RD_CTRL_NONE, RD_CTRL_PD, RD_CTRL_PD_GRAVITY, RD_CTRL_COMPUTED_TORQUE, RD_CTRL_SLOTINE_LI
        RD_EULER, RD_SEMI_IMPLICIT_EULER, RD_RK4
    long rd_workspace_size(int n)
    void rd_reference_eval(const rd_reference* ref, int n, double t, double* q, double* qd, double* qdd)
    int rd_control(const rd_controller* ctrl, const double* q, const double* qd, const double* q_r,
                   const double* qd_r, const double* qdd_r, double* tau, double* work)
    int rd_step(const rd_model* plant, int integrator, double dt, int substeps, double* q, double* qd,
                const double* tau, const double* h, double* work, double* qdd0)
    int rd_simulate(const rd_model* plant, const rd_controller* ctrl, const rd_reference* ref,
                    const rd_sim_config* config, const rd_trajectory* out, double* work, long* failed_tick)
    double rd_monotonic()



cdef extern from "numpy/arrayobject.h":
    PyTypeObject PyArray_Type
    # Steals a reference to descr.
    object PyArray_NewFromDescr(PyTypeObject* subtype, cnp.dtype descr, int nd, const cnp.npy_intp* dims,
                                const cnp.npy_intp* strides, void* data, int flags, object obj)

import json as _json
import numpy as np

cnp.import_array()

metadata = _json.loads((<bytes>api.METADATA_JSON).decode("utf-8"))

# Compile-time constants of this robot (enums in robot_api.pxd): loops over them unroll.
cdef enum:
    N = api.NDOF
    NP = api.NPARAMS
    WRENCH = 6

# Releasing and re-taking the GIL costs ~75 ns here, several times the work of a
# small robot's routine. In "auto" mode it is released for batches and for
# routines whose operation count makes the work worth it.
cdef enum:
    K_MASS, K_CORIOLIS, K_GRAVITY, K_FRICTION, K_NLE, K_ID, K_FD, K_KE, K_PE, K_POSE, K_JAC, K_COUNT
_KERNEL_ROUTINES = ("mass_matrix", "coriolis_matrix", "gravity", "friction", "nonlinear_effects",
                    "inverse_dynamics", "forward_dynamics", "kinetic_energy", "potential_energy",
                    "tool_pose", "tool_jacobian")
HEAVY_OPERATIONS = 1000
cdef bint HEAVY[K_COUNT]
for _k, _name in enumerate(_KERNEL_ROUTINES):
    _ops = sum(v for key, v in metadata.get("operation_counts", {}).items() if key.startswith(_name))
    HEAVY[_k] = _ops >= HEAVY_OPERATIONS

ctypedef int (*kernel_t)(const double** inputs, const double* p, double* out) noexcept nogil

# Uniform wrappers: inputs[k] is the k-th array argument (NULL for an absent wrench).
cdef int k_mass_matrix(const double** x, const double* p, double* out) noexcept nogil:
    api.mass_matrix(x[0], p, out)
    return 0
cdef int k_coriolis_matrix(const double** x, const double* p, double* out) noexcept nogil:
    api.coriolis_matrix(x[0], x[1], p, out)
    return 0
cdef int k_gravity(const double** x, const double* p, double* out) noexcept nogil:
    api.gravity(x[0], p, out)
    return 0
cdef int k_friction(const double** x, const double* p, double* out) noexcept nogil:
    api.friction(x[0], p, out)
    return 0
cdef int k_nonlinear_effects(const double** x, const double* p, double* out) noexcept nogil:
    api.nonlinear_effects(x[0], x[1], p, out)
    return 0
cdef int k_inverse_dynamics(const double** x, const double* p, double* out) noexcept nogil:
    api.inverse_dynamics(x[0], x[1], x[2], x[3], p, out)
    return 0
cdef int k_forward_dynamics(const double** x, const double* p, double* out) noexcept nogil:
    return api.forward_dynamics(x[0], x[1], x[2], x[3], p, out)
cdef int k_kinetic_energy(const double** x, const double* p, double* out) noexcept nogil:
    api.kinetic_energy(x[0], x[1], p, out)
    return 0
cdef int k_potential_energy(const double** x, const double* p, double* out) noexcept nogil:
    api.potential_energy(x[0], p, out)
    return 0
cdef int k_tool_pose(const double** x, const double* p, double* out) noexcept nogil:
    api.tool_pose(x[0], p, out)
    return 0
cdef int k_tool_jacobian(const double** x, const double* p, double* out) noexcept nogil:
    api.tool_jacobian(x[0], p, out)
    return 0


# Static description of each method: which kernel, how many n-vectors it takes
# (before the optional wrench), and the shape of one result.
ctypedef struct Routine:
    int kid
    kernel_t kernel
    int nin        # number of n-vector inputs, 1..3
    int rows
    int cols
    int out_ndim   # 0: scalar, 1: (rows,), 2: (rows, cols)

cdef Routine ROUTINES[K_COUNT]
ROUTINES[K_MASS] = Routine(K_MASS, k_mass_matrix, 1, N, N, 2)
ROUTINES[K_CORIOLIS] = Routine(K_CORIOLIS, k_coriolis_matrix, 2, N, N, 2)
ROUTINES[K_GRAVITY] = Routine(K_GRAVITY, k_gravity, 1, N, 1, 1)
ROUTINES[K_FRICTION] = Routine(K_FRICTION, k_friction, 1, N, 1, 1)
ROUTINES[K_NLE] = Routine(K_NLE, k_nonlinear_effects, 2, N, 1, 1)
ROUTINES[K_ID] = Routine(K_ID, k_inverse_dynamics, 3, N, 1, 1)
ROUTINES[K_FD] = Routine(K_FD, k_forward_dynamics, 3, N, 1, 1)
ROUTINES[K_KE] = Routine(K_KE, k_kinetic_energy, 2, 1, 1, 0)
ROUTINES[K_PE] = Routine(K_PE, k_potential_energy, 1, 1, 1, 0)
ROUTINES[K_POSE] = Routine(K_POSE, k_tool_pose, 1, 4, 4, 2)
ROUTINES[K_JAC] = Routine(K_JAC, k_tool_jacobian, 1, 6, N, 2)

# Argument names per routine, for error messages (index 3: the wrench).
cdef tuple _Q = ("q",)
cdef tuple _QD = ("qd",)
cdef tuple _Q_QD = ("q", "qd")
cdef tuple _ID = ("q", "qd", "qdd", "h")
cdef tuple _FD = ("q", "qd", "tau", "h")
cdef tuple _NAMES = (_Q, _Q_QD, _Q, _QD, _Q_QD, _ID, _FD, _Q_QD, _Q, _Q, _Q)

cdef enum:
    _LAYOUT = cnp.NPY_ARRAY_C_CONTIGUOUS | cnp.NPY_ARRAY_ALIGNED
    _OUT_LAYOUT = cnp.NPY_ARRAY_C_CONTIGUOUS | cnp.NPY_ARRAY_ALIGNED | cnp.NPY_ARRAY_WRITEABLE


# ---------------------------------------------------------------------------
# Fast-path checks: header reads only, no exceptions; a failure means "let the
# general path decide" (it converts, or raises with the precise reason).

cdef inline bint _is_double_layout(object x, int flags) noexcept:
    """The ndarray x holds native-endian float64 and has all the ``flags`` (layout, writability)."""
    return (cnp.PyArray_TYPE(<cnp.ndarray>x) == cnp.NPY_DOUBLE
            and (cnp.PyArray_FLAGS(<cnp.ndarray>x) & flags) == flags
            and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>x))


cdef inline const double* _fast_vector(object x, Py_ssize_t width) noexcept:
    """Data of x if it is an exact ndarray of shape (width,) with a valid layout, else NULL."""
    if (cnp.PyArray_CheckExact(x) and cnp.PyArray_NDIM(<cnp.ndarray>x) == 1
            and cnp.PyArray_DIMS(<cnp.ndarray>x)[0] == width and _is_double_layout(x, _LAYOUT)):
        return <const double*>cnp.PyArray_DATA(<cnp.ndarray>x)
    return NULL


cdef inline double* _fast_out(object out, const Routine* r) noexcept:
    """Data of ``out`` if it is a writable float64 array of exactly one result's shape, else NULL."""
    if not cnp.PyArray_Check(out) or cnp.PyArray_NDIM(<cnp.ndarray>out) != r.out_ndim:
        return NULL
    cdef cnp.npy_intp* dims = cnp.PyArray_DIMS(<cnp.ndarray>out)
    if r.out_ndim >= 1 and dims[0] != r.rows:
        return NULL
    if r.out_ndim == 2 and dims[1] != r.cols:
        return NULL
    if not _is_double_layout(out, _OUT_LAYOUT):
        return NULL
    return <double*>cnp.PyArray_DATA(<cnp.ndarray>out)


cdef extern from *:
    """
    /* Sum of x[0:n], two accumulators. If every x[i] is finite the sum is finite, except
       for an overflow near 1e308; any NaN or infinity makes it NaN or infinite. So a finite
       sum proves all values finite, and a non-finite one sends the call to the general
       path, which checks the values one by one (and accepts an overflowing sum).
       One add per element; n is a compile-time constant in the fast path, so it unrolls. */
    static CYTHON_INLINE double robodyn_sum(const double *x, Py_ssize_t n) {
        double a0 = 0.0, a1 = 0.0;
        Py_ssize_t i = 0;
    #if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 8
    #pragma GCC unroll 8
    #elif defined(__clang__)
    #pragma clang loop unroll_count(8)
    #endif
        for (; i + 1 < n; i += 2) {
            a0 += x[i];
            a1 += x[i + 1];
        }
        if (i < n)
            a0 += x[i];
        return a0 + a1;
    }
    """
    double _sum "robodyn_sum"(const double* x, Py_ssize_t n) noexcept nogil


cdef cnp.dtype _FLOAT64 = np.dtype(np.float64)


cdef inline cnp.ndarray _empty(int ndim, const cnp.npy_intp* dims):
    """A new uninitialised C-ordered float64 array: PyArray_EMPTY minus its dtype lookups (~100 instructions)."""
    Py_INCREF(_FLOAT64)
    return <cnp.ndarray>PyArray_NewFromDescr(&PyArray_Type, _FLOAT64, ndim, dims, NULL, NULL, 0, None)


# ---------------------------------------------------------------------------
# General path: converts, handles batches, raises.

cdef inline cnp.ndarray _as_array(object x, str name):
    """x itself if it is an exact ndarray; lists/tuples are converted; anything else is refused."""
    if cnp.PyArray_CheckExact(x):
        return <cnp.ndarray>x
    if isinstance(x, (list, tuple)):
        try:
            return np.array(x, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name}: cannot convert to a float64 array ({exc})") from None
    if isinstance(x, np.ndarray):
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


cdef inline bint _overlaps(const double* a, Py_ssize_t na, const double* b, Py_ssize_t nb) noexcept nogil:
    return <uintptr_t>a < <uintptr_t>(b + nb) and <uintptr_t>b < <uintptr_t>(a + na)


cdef cnp.ndarray _prepare(object x, str name, Py_ssize_t width, Py_ssize_t* batch,
                          const double** ptr, Py_ssize_t* size):
    """Check one array argument; fix or check the batch size (-1 unknown, 0 single state, >0 rows)."""
    cdef cnp.ndarray a = _as_array(x, name)
    _check_layout(a, name, False)
    cdef int ndim = cnp.PyArray_NDIM(a)
    if ndim == 1 and cnp.PyArray_DIM(a, 0) == width:
        if batch[0] > 0:
            raise ValueError(f"{name}: expected shape ({batch[0]}, {width}) like the other arguments, got {(<object>a).shape}")
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
    _check_finite(ptr[0], size[0], name)
    return a


cdef inline Py_ssize_t _loop(kernel_t kernel, const double** ptrs, const Py_ssize_t* step, const double* p,
                             double* optr, Py_ssize_t stride_out, Py_ssize_t count) noexcept nogil:
    """Run the kernel on each batch row; return the first failing row, or -1."""
    cdef Py_ssize_t i, k
    for i in range(count):
        if kernel(ptrs, p, optr + i * stride_out) != 0:
            return i
        for k in range(4):
            ptrs[k] = ptrs[k] + step[k]
    return -1


cdef inline bint _shape_is(cnp.ndarray a, int ndim, cnp.npy_intp* dims) noexcept:
    cdef int k
    if cnp.PyArray_NDIM(a) != ndim:
        return False
    for k in range(ndim):
        if cnp.PyArray_DIM(a, k) != dims[k]:
            return False
    return True


cdef inline object _not_positive_definite(Py_ssize_t row, bint batched):
    where = f" (batch row {row})" if batched else ""
    raise ValueError(f"mass matrix is not positive definite at this state{where}; check the parameters")


@cython.final
cdef class Dynamics:
    """Compiled dynamics of one robot, with its own parameter vector.

    Methods take 1-D states of length n, or 2-D batches of shape (N, n), and
    accept ``out=`` to write into a preallocated float64 array.
    """

    cdef cnp.ndarray _params
    cdef double* _p
    cdef int _gil_mode
    cdef rd_model _model
    cdef cnp.ndarray _step_work

    def __cinit__(self):
        defaults = [entry["default"] for entry in metadata["parameters"]]
        self._params = np.array(defaults if defaults else [0.0], dtype=np.float64)
        self._p = <double*>cnp.PyArray_DATA(self._params)
        self._gil_mode = 1
        _fill_model(&self._model, self._p)
        self._step_work = np.zeros(rd_workspace_size(N), dtype=np.float64)

    @property
    def release_gil(self):
        """"auto" (default: batches and heavy routines), True (every call) or False (never)."""
        return {0: False, 1: "auto", 2: True}[self._gil_mode]

    @release_gil.setter
    def release_gil(self, value):
        if value == "auto":
            self._gil_mode = 1
        elif value is True or value is False:
            self._gil_mode = 2 if value else 0
        else:
            raise ValueError('release_gil must be "auto", True or False')

    @property
    def n(self):
        return N

    @property
    def parameter_values(self):
        """The live parameter vector (float64 array, order of metadata['parameters']); writes take effect at once."""
        return self._params[:NP]

    cdef object _run(self, const Routine* r, object a0, object a1, object a2, object h, object out):
        """Fast path for one valid state; everything else goes to ``_run_general``."""
        cdef const double* ptrs[4]
        cdef double* optr
        cdef double scalar_result = 0.0
        cdef double total
        cdef cnp.ndarray o
        cdef cnp.npy_intp dims[2]
        cdef Py_ssize_t out_size = r.rows * r.cols
        cdef int status
        ptrs[0] = _fast_vector(a0, N)
        if ptrs[0] == NULL:
            return self._run_general(r, a0, a1, a2, h, out)
        total = _sum(ptrs[0], N)
        ptrs[1] = ptrs[2] = ptrs[3] = NULL
        if r.nin > 1:
            ptrs[1] = _fast_vector(a1, N)
            if ptrs[1] == NULL:
                return self._run_general(r, a0, a1, a2, h, out)
            total += _sum(ptrs[1], N)
            if r.nin > 2:
                ptrs[2] = _fast_vector(a2, N)
                if ptrs[2] == NULL:
                    return self._run_general(r, a0, a1, a2, h, out)
                total += _sum(ptrs[2], N)
        if h is not None:
            ptrs[3] = _fast_vector(h, WRENCH)
            if ptrs[3] == NULL:
                return self._run_general(r, a0, a1, a2, h, out)
            total += _sum(ptrs[3], WRENCH)
        total += _sum(self._p, NP)
        if not isfinite(total):  # some value is NaN or infinite (or the sum overflowed)
            return self._run_general(r, a0, a1, a2, h, out)

        if out is not None:
            optr = _fast_out(out, r)
            if (optr == NULL
                    or _overlaps(ptrs[0], N, optr, out_size)
                    or (ptrs[1] != NULL and _overlaps(ptrs[1], N, optr, out_size))
                    or (ptrs[2] != NULL and _overlaps(ptrs[2], N, optr, out_size))
                    or (ptrs[3] != NULL and _overlaps(ptrs[3], WRENCH, optr, out_size))):
                return self._run_general(r, a0, a1, a2, h, out)
        elif r.out_ndim == 0:
            optr = &scalar_result
        else:
            dims[0] = r.rows
            dims[1] = r.cols
            o = _empty(r.out_ndim, dims)
            optr = <double*>cnp.PyArray_DATA(o)

        if self._gil_mode == 2 or (self._gil_mode == 1 and HEAVY[r.kid]):
            with nogil:
                status = r.kernel(ptrs, self._p, optr)
        else:
            status = r.kernel(ptrs, self._p, optr)
        if status != 0:
            return _not_positive_definite(0, False)
        if out is not None:
            return out
        if r.out_ndim == 0:
            return scalar_result
        return o

    cdef object _run_general(self, const Routine* r, object a0, object a1, object a2, object h, object out):
        """Validate inputs, allocate or check ``out``, call the kernel once or per batch row."""
        cdef tuple names = <tuple>_NAMES[r.kid]
        cdef int nin = r.nin
        cdef int out_ndim = r.out_ndim
        cdef const double* ptrs[4]
        cdef Py_ssize_t sizes[4]
        cdef Py_ssize_t batch = -1
        cdef Py_ssize_t i, k, out_size
        cdef cnp.ndarray o
        cdef double* optr
        cdef Py_ssize_t stride_out = r.rows * r.cols
        # Keep the (possibly converted) arrays alive while their pointers are used.
        cdef cnp.ndarray x0 = None, x1 = None, x2 = None, x3 = None
        ptrs[0] = ptrs[1] = ptrs[2] = ptrs[3] = NULL
        sizes[0] = sizes[1] = sizes[2] = sizes[3] = 0
        x0 = _prepare(a0, names[0], N, &batch, &ptrs[0], &sizes[0])
        if nin > 1:
            x1 = _prepare(a1, names[1], N, &batch, &ptrs[1], &sizes[1])
        if nin > 2:
            x2 = _prepare(a2, names[2], N, &batch, &ptrs[2], &sizes[2])
        if h is not None:
            x3 = _prepare(h, names[3], WRENCH, &batch, &ptrs[3], &sizes[3])
        _check_finite(self._p, NP, "params")

        cdef Py_ssize_t count = batch if batch > 0 else 1
        cdef double scalar_result = 0.0
        cdef int endim = 0
        cdef cnp.npy_intp edims[3]
        cdef cnp.npy_intp one[1]
        one[0] = 1
        if batch > 0:
            edims[endim] = batch
            endim += 1
        if out_ndim >= 1:
            edims[endim] = r.rows
            endim += 1
        if out_ndim == 2:
            edims[endim] = r.cols
            endim += 1
        cdef bint scalar = out_ndim == 0
        if out is None:
            if scalar and batch <= 0:
                o = None
                optr = &scalar_result
            else:
                o = _empty(endim, edims)
                optr = <double*>cnp.PyArray_DATA(o)
        else:
            if not cnp.PyArray_Check(out):
                raise TypeError(f"out: expected a numpy.ndarray, got {type(out).__name__}")
            o = <cnp.ndarray>out
            _check_layout(o, "out", True)
            if not _shape_is(o, endim, edims) and not (scalar and batch <= 0 and _shape_is(o, 1, one)):
                expected = tuple([edims[k] for k in range(endim)])
                raise ValueError(f"out: expected shape {expected}, got {(<object>o).shape}")
            optr = <double*>cnp.PyArray_DATA(o)
        out_size = count * stride_out
        for k in range(4):
            if ptrs[k] != NULL and _overlaps(ptrs[k], sizes[k], optr, out_size):
                raise ValueError(f"out: must not share memory with {names[k]}")

        cdef Py_ssize_t step[4]
        for k in range(4):
            step[k] = 0 if (ptrs[k] == NULL or batch <= 0) else (WRENCH if k == 3 else N)
        cdef Py_ssize_t failed
        if self._gil_mode == 2 or (self._gil_mode == 1 and (batch > 0 or HEAVY[r.kid])):
            with nogil:
                failed = _loop(r.kernel, ptrs, step, self._p, optr, stride_out, count)
        else:
            failed = _loop(r.kernel, ptrs, step, self._p, optr, stride_out, count)
        if failed >= 0:
            return _not_positive_definite(failed, batch > 0)
        if o is None:
            return scalar_result
        return o

    def M(self, q, out=None):
        """Joint-space inertia matrix M(q), shape (n, n)."""
        return self._run(&ROUTINES[K_MASS], q, None, None, None, out)

    def C(self, q, qd, out=None):
        """Coriolis/centrifugal matrix C(q, qd) from Christoffel symbols (Mdot - 2C is skew)."""
        return self._run(&ROUTINES[K_CORIOLIS], q, qd, None, None, out)

    def g(self, q, out=None):
        """Gravity torques g(q) = dP/dq."""
        return self._run(&ROUTINES[K_GRAVITY], q, None, None, None, out)

    def friction(self, qd, out=None):
        """Friction torques Fv qd + Fs sgn(qd)."""
        return self._run(&ROUTINES[K_FRICTION], qd, None, None, None, out)

    def nonlinear_effects(self, q, qd, out=None):
        """C(q, qd) qd + g(q) + friction(qd)."""
        return self._run(&ROUTINES[K_NLE], q, qd, None, None, out)

    def inverse_dynamics(self, q, qd, qdd, h=None, out=None):
        """tau = M qdd + C qd + g + friction - J^T h (h: wrench on the tool from the environment)."""
        return self._run(&ROUTINES[K_ID], q, qd, qdd, h, out)

    def forward_dynamics(self, q, qd, tau, h=None, out=None):
        """qdd solving M qdd = tau + J^T h - C qd - g - friction (sparse L^T D L, no inverse)."""
        return self._run(&ROUTINES[K_FD], q, qd, tau, h, out)

    def kinetic_energy(self, q, qd, out=None):
        """0.5 qd^T M(q) qd; a float for one state, shape (N,) for a batch."""
        return self._run(&ROUTINES[K_KE], q, qd, None, None, out)

    def potential_energy(self, q, out=None):
        """Gravitational potential energy (zero at the base origin)."""
        return self._run(&ROUTINES[K_PE], q, None, None, None, out)

    def fk(self, q, out=None):
        """Tool pose: 4x4 homogeneous transform from the base (world) frame."""
        return self._run(&ROUTINES[K_POSE], q, None, None, None, out)

    def jacobian(self, q, out=None):
        """Geometric tool Jacobian (6, n): linear velocity of the tool origin, then angular velocity."""
        return self._run(&ROUTINES[K_JAC], q, None, None, None, out)

    # -- simulation (robodyn.simulation documents the conventions) --------

    def control_law(self, str controller, kp=None, kd=None, tau_limit=None, str reference="hold", double t0=0.0,
                    double duration=0.0, a=None, b=None, omega=None, phase=None, bint friction_at_reference=False):
        """A compiled control law that uses this model (see ControlLaw)."""
        return ControlLaw(self, controller, kp, kd, tau_limit, reference, t0, duration, a, b, omega, phase,
                          friction_at_reference)

    def step(self, q, qd, tau, h=None, double dt=1e-3, int substeps=1, str integrator="rk4"):
        """Advance the state arrays q and qd in place by ``substeps`` steps of dt, torque and wrench held."""
        method = INTEGRATORS.get(integrator)
        if method is None:
            raise ValueError(f"unknown integrator {integrator!r}; expected one of {', '.join(INTEGRATORS)}")
        if not (dt > 0.0 and isfinite(dt)) or substeps < 1:
            raise ValueError("dt must be positive and finite and substeps at least 1")
        # Fast path as for the routines: exact, writable, finite ndarrays that do not overlap.
        cdef double* qp = <double*>_fast_vector(q, N)
        cdef double* qdp = <double*>_fast_vector(qd, N)
        cdef const double* taup = _fast_vector(tau, N)
        cdef const double* hp = NULL if h is None else _fast_vector(h, WRENCH)
        if (qp == NULL or qdp == NULL or taup == NULL or (h is not None and hp == NULL)
                or not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>q) or not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>qd)
                or _overlaps(qp, N, qdp, N)
                or not isfinite(_sum(qp, N) + _sum(qdp, N) + _sum(taup, N) + _sum(self._p, NP)
                                + (0.0 if hp == NULL else _sum(hp, WRENCH)))):
            qp = _data(_checked(q, "q", -1, N, True))
            qdp = _data(_checked(qd, "qd", -1, N, True))
            _check_finite(qp, N, "q")
            _check_finite(qdp, N, "qd")
            taup = _data(_checked(tau, "tau", -1, N, False))
            hp = NULL if h is None else _data(_checked(h, "h", -1, WRENCH, False))
            if _overlaps(qp, N, qdp, N):
                raise ValueError("q and qd must not share memory")
            _check_finite(self._p, NP, "params")
        cdef int status = rd_step(&self._model, method, dt, substeps, qp, qdp, taup, hp,
                                  <double*>cnp.PyArray_DATA(self._step_work), NULL)
        if status != RD_OK:
            _raise_status(status, "step")

    def simulate(self, law, q, qd, qdd, tau, q_ref, qd_ref, qdd_ref, compute_time, double period,
                 str integrator="rk4", int substeps=1, disturbance=None, wrench=None, bint measure_time=True):
        """Closed-loop simulation over len(q) - 1 control periods, in C without the GIL.

        ``law``: a ControlLaw capsule (``ControlLaw.capsule()``, from any module of a robot with
        the same n). q and qd: (ticks + 1, n) arrays whose first row is the initial state; the
        other outputs are arrays of the same shape or None (compute_time: (ticks + 1,)).
        Returns -1, or the tick at which the simulation stopped (then raises).
        """
        if integrator not in INTEGRATORS:
            raise ValueError(f"unknown integrator {integrator!r}; expected one of {', '.join(INTEGRATORS)}")
        if not PyCapsule_IsValid(law, _LAW_CAPSULE):
            raise TypeError("law: expected ControlLaw.capsule() from a robot module built by this version of "
                            "robodyn (rebuild the controller's model)")
        cdef rd_law* c_law = <rd_law*>PyCapsule_GetPointer(law, _LAW_CAPSULE)
        if c_law.controller.model.n != N:
            raise ValueError(f"law: its model has {c_law.controller.model.n} joints, this robot {N}")
        if not (period > 0.0 and isfinite(period)) or substeps < 1:
            raise ValueError("period must be positive and finite and substeps at least 1")
        if not cnp.PyArray_Check(q) or cnp.PyArray_NDIM(<cnp.ndarray>q) != 2:
            raise ValueError("q: expected an array of shape (ticks + 1, n)")
        cdef Py_ssize_t rows = cnp.PyArray_DIM(<cnp.ndarray>q, 0)
        if rows < 1:
            raise ValueError("q: needs at least one row (the initial state)")
        arrays = [_checked(q, "q", rows, N, True), _checked(qd, "qd", rows, N, True)]
        _check_finite(_data(arrays[0]), N, "q[0]")
        _check_finite(_data(arrays[1]), N, "qd[0]")
        for name, value in (("qdd", qdd), ("tau", tau), ("q_ref", q_ref), ("qd_ref", qd_ref), ("qdd_ref", qdd_ref)):
            arrays.append(None if value is None else _checked(value, name, rows, N, True))
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
        disturbance_array = _rows_or_constant(disturbance, "disturbance", rows, N, &config.disturbance_stride)
        wrench_array = _rows_or_constant(wrench, "wrench", rows, WRENCH, &config.wrench_stride)
        config.disturbance = _data(disturbance_array)
        config.wrench = _data(wrench_array)
        config.measure_time = measure_time and times is not None
        _check_finite(self._p, NP, "params")
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
        cdef cnp.ndarray work = np.zeros(rd_workspace_size(N), dtype=np.float64)
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
        if status != RD_OK:
            _raise_status(status, f"simulation stopped at tick {failed} (t = {failed * period:.6g} s)")
        return -1


# ---------------------------------------------------------------------------
# Simulation and control (static C in robodyn_sim.c). These are the compiled
# back end of robodyn.control and robodyn.simulation, which document the
# laws, gains and conventions; the entry points here check every array they
# are given (shape, dtype, layout, finiteness) so a mistake raises, never crashes.

cdef extern from "robodyn_sim_abi.h":
    const char* RD_SIM_ABI  # hash of robodyn_sim.h, written by the build

# A law crosses modules (a controller's model may be another robot module), so its capsule
# name carries the struct layout's hash: modules built from another robodyn_sim.h refuse it.
_LAW_CAPSULE_NAME = b"robodyn.rd_law:" + <bytes>RD_SIM_ABI
cdef const char* _LAW_CAPSULE = _LAW_CAPSULE_NAME

cdef long SIMULATION_CHUNK = 4096  # ticks between checks for Ctrl-C: ~2 ms (rr) to ~20 ms (6-joint arm)
INTEGRATORS = {"euler": RD_EULER, "semi-implicit-euler": RD_SEMI_IMPLICIT_EULER, "rk4": RD_RK4}
CONTROLLERS = {"none": RD_CTRL_NONE, "pd": RD_CTRL_PD, "pd-gravity": RD_CTRL_PD_GRAVITY,
               "computed-torque": RD_CTRL_COMPUTED_TORQUE, "slotine-li": RD_CTRL_SLOTINE_LI}
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


@cython.final
cdef class ControlLaw:
    """A built-in control law bound to its model and reference, evaluated in C.

    Holds its own workspace: one object must not be called from two threads at once.
    """

    cdef rd_law _law
    cdef Dynamics _model
    cdef tuple _arrays     # keeps gains and reference arrays alive
    cdef cnp.ndarray _work
    cdef cnp.ndarray _ref_q, _ref_qd, _ref_qdd

    def __cinit__(self, Dynamics model not None, str controller, kp, kd, tau_limit, str reference, double t0,
                  double duration, a, b, omega, phase, bint friction_at_reference=False):
        if controller not in CONTROLLERS:
            raise ValueError(f"unknown controller {controller!r}; expected one of {', '.join(CONTROLLERS)}")
        if reference not in REFERENCES:
            raise ValueError(f"unknown reference {reference!r}; expected one of {', '.join(REFERENCES)}")
        self._model = model
        self._law.controller.kind = CONTROLLERS[controller]
        self._law.controller.model = &model._model
        arrays = []
        for name, value in (("kp", kp), ("kd", kd), ("tau_limit", tau_limit), ("a", a), ("b", b),
                            ("omega", omega), ("phase", phase)):
            arrays.append(None if value is None else _checked(value, name, -1, N, False))
        self._arrays = tuple(arrays)
        for name, array in zip(("kp", "kd", "tau_limit"), arrays[:3]):
            if array is not None and np.any(array < 0.0):
                raise ValueError(f"{name}: must be non-negative")
        if self._law.controller.kind != RD_CTRL_NONE and (arrays[0] is None or arrays[1] is None):
            raise ValueError(f"controller {controller!r} needs both gain vectors")
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
        self._work = np.zeros(rd_workspace_size(N), dtype=np.float64)
        self._ref_q = np.zeros(N)
        self._ref_qd = np.zeros(N)
        self._ref_qdd = np.zeros(N)

    def capsule(self):
        """The C law (rd_law*) for a robot module's simulate(); the capsule keeps this law alive."""
        capsule = PyCapsule_New(&self._law, _LAW_CAPSULE, <PyCapsule_Destructor>_release_law)
        Py_INCREF(self)
        PyCapsule_SetContext(capsule, <void*>self)
        return capsule

    def reference(self, double t):
        """(q_r, qd_r, qdd_r) at time t, as new arrays."""
        q = np.empty(N)
        qd = np.empty(N)
        qdd = np.empty(N)
        rd_reference_eval(&self._law.reference, N, t, _data(q), _data(qd), _data(qdd))
        return q, qd, qdd

    def __call__(self, double t, q, qd, out=None):
        """Joint torque for the state (q, qd) at time t."""
        cdef const double* qp = _fast_vector(q, N)
        cdef const double* qdp = _fast_vector(qd, N)
        cdef double* tp
        cdef cnp.ndarray result
        if qp == NULL or qdp == NULL or not isfinite(_sum(qp, N) + _sum(qdp, N)):
            q = _checked(_as_array(q, "q"), "q", -1, N, False)
            qd = _checked(_as_array(qd, "qd"), "qd", -1, N, False)
            qp = _data(q)
            qdp = _data(qd)
        cdef cnp.npy_intp dims[1]
        if out is None:
            dims[0] = N
            result = _empty(1, dims)
        else:
            result = _checked(out, "out", -1, N, True)
            if _overlaps(_data(result), N, qp, N) or _overlaps(_data(result), N, qdp, N):
                raise ValueError("out: must not share memory with q or qd")
        tp = <double*>cnp.PyArray_DATA(result)
        cdef double* work = <double*>cnp.PyArray_DATA(self._work)
        cdef double* rq = <double*>cnp.PyArray_DATA(self._ref_q)
        cdef double* rqd = <double*>cnp.PyArray_DATA(self._ref_qd)
        cdef double* rqdd = <double*>cnp.PyArray_DATA(self._ref_qdd)
        rd_reference_eval(&self._law.reference, N, t, rq, rqd, rqdd)
        cdef int status = rd_control(&self._law.controller, qp, qdp, rq, rqd, rqdd, tp, work)
        if status != RD_OK:
            _raise_status(status, "controller")
        return result


cdef inline void _fill_model(rd_model* m, double* p) noexcept:
    m.n = N
    m.n_params = NP
    m.p = p
    m.mass_matrix = api.mass_matrix
    m.coriolis_matrix = api.coriolis_matrix
    m.gravity = api.gravity
    m.friction = api.friction
    m.inverse_dynamics = api.inverse_dynamics
    m.forward_dynamics = api.forward_dynamics


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

