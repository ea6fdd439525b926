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

cimport robot_api as api

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

    def __cinit__(self):
        defaults = [entry["default"] for entry in metadata["parameters"]]
        self._params = np.array(defaults if defaults else [0.0], dtype=np.float64)
        self._p = <double*>cnp.PyArray_DATA(self._params)
        self._gil_mode = 1

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
