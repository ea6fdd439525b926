/*
 * robodyn_call.h: the hot path of every routine call, in C.
 *
 * rd_fast_call handles the common case of a control loop -- one state, exact float64
 * ndarrays of the right length, C-contiguous, aligned, native-endian, with finite
 * values, and `out` absent or exactly right (a tuple of arrays for several outputs) -- reading only
 * array headers: no Python
 * object is created unless the result must be allocated, and no exception is raised.
 * Anything else returns RD_FAST_DECLINED and the caller takes the general path
 * (robodyn/_native.pyx), which converts, loops over batches and raises precise errors.
 * The fast path accepts a subset of what the general path accepts and computes the
 * same result. Parameters are not checked here: the runtime stores only finite ones.
 *
 * Included into robodyn._native after numpy/arrayobject.h (it uses that module's
 * NumPy API table).
 */
#ifndef ROBODYN_CALL_H
#define ROBODYN_CALL_H

#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "robodyn_abi.h"

enum { RD_FAST_DONE = 1, RD_FAST_DECLINED = 0, RD_FAST_FAILED = -1 };

#if defined(__GNUC__)
#define RD_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define RD_ALWAYS_INLINE inline
#endif
/* Loops over a call's arguments, whose count is a constant in each rd_fast_call_sized copy: unrolled, the
   argument index is a constant too (the Panda's inverse dynamics: 17 instructions less a call). */
#if defined(__clang__)
#define RD_UNROLL _Pragma("unroll")
#elif defined(__GNUC__) && __GNUC__ >= 8
#define RD_UNROLL _Pragma("GCC unroll 8")
#else
#define RD_UNROLL
#endif

/* Routine-table entries a runtime handles (robodyn_method.h makes one method for each). */
#define RD_ROUTINE_SLOTS 64
/* Allocating calls keep this many results of each routine for reuse (see rd_spare_take). */
#define RD_SPARES 2

/* What a call needs from a robot for one routine-table entry. */
typedef struct {
    const rd_routine *routine;  /* NULL: not in this robot's module (or the robot is not bound) */
    PyObject *spare[RD_SPARES]; /* results kept for reuse (new references or NULL), see rd_spare_take */
    unsigned optional;          /* bit k set when argument k may be None */
    char heavy;                 /* worth releasing the GIL for, in "auto" mode */
    char release;               /* release the GIL around the kernel, under the current gil_mode */
} rd_core_slot;

/* What a call needs from a robot (a field of robodyn._native.RobotCore). The slots are part of the object, one per
   table index: a call finds its own at a constant offset, with no bound to check. */
typedef struct {
    rd_core_slot slots[RD_ROUTINE_SLOTS]; /* by routine-table index */
    int n_slots;                /* routine-table entries known when the robot was bound */
    double *p;                  /* the parameter vector (always finite) */
    int n_params;
    int gil_mode;               /* 0 never release the GIL, 1 auto, 2 always */
} rd_core;

#define RD_IN_FLAGS (NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED)
#define RD_OUT_FLAGS (NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_WRITEABLE)

/* Sum of x[0:n]. If every x[i] is finite the sum is finite, except for an overflow near 1e308; any NaN or
   infinity makes it NaN or infinite. So a finite sum proves all values finite, and a non-finite one sends the
   call to the general path, which checks the values one by one (and accepts an overflowing sum). 4 to 8 values,
   a robot arm's state, are two windows of four (a value counted twice is finite exactly when it is): no loop
   and no dispatch, 16 instructions a call for the Panda's 7 values, call included. Otherwise eight at a time,
   then the rest through a switch (21 for 7 values; 30 with the former loop of pairs). */
static inline double rd_sum(const double *x, Py_ssize_t n)
{
    if ((size_t)n - 4 <= 4) /* 4 to 8 values, a robot arm's state: two windows of four, overlapping below 8 */
        return ((x[0] + x[1]) + (x[2] + x[3])) + ((x[n - 4] + x[n - 3]) + (x[n - 2] + x[n - 1]));
    double a = 0.0, b = 0.0;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        a += x[i] + x[i + 2] + x[i + 4] + x[i + 6];
        b += x[i + 1] + x[i + 3] + x[i + 5] + x[i + 7];
    }
    switch (n - i) {
    case 7: b += x[i + 6]; /* fall through */
    case 6: a += x[i + 5]; /* fall through */
    case 5: b += x[i + 4]; /* fall through */
    case 4: a += x[i + 3]; /* fall through */
    case 3: b += x[i + 2]; /* fall through */
    case 2: a += x[i + 1]; /* fall through */
    case 1: b += x[i]; /* fall through */
    default: break;
    }
    return a + b;
}

/* The finiteness sum of a call's arguments of 4 to 8 values (a robot arm's state): rd_sum's two windows of four,
   added pair by pair into one accumulator for all the arguments (GCC and Clang vector extensions: on x86-64 two
   doubles per SSE2 instruction), whose two lanes are added once, at the end. */
#if defined(__GNUC__) || defined(__clang__)
#define RD_PAIRS 1
typedef double rd_pair __attribute__((vector_size(2 * sizeof(double))));
static RD_ALWAYS_INLINE rd_pair rd_load_pair(const double *x)
{
    rd_pair v;
    memcpy(&v, x, sizeof v); /* unaligned load */
    return v;
}
#endif

static inline int rd_overlaps(const double *a, Py_ssize_t na, const double *b, Py_ssize_t nb)
{
    return (uintptr_t)a < (uintptr_t)(b + nb) && (uintptr_t)b < (uintptr_t)(a + na);
}

/* rd_overlaps for an input a (NULL: an optional argument not given, which overlaps nothing) and an output b, in
   one comparison: they overlap when d = a + na - b lies in (0, na + nb), in bytes; as an unsigned number d - 1 is
   below na + nb - 1 exactly then, and for a NULL a (d far below zero) it is not. Needs na + nb > 0 (the fast
   path's one-state sizes are at least 1; rd_overlaps stays for the general path, whose batches may be empty). */
static inline int rd_input_overlaps(const double *a, Py_ssize_t na, const double *b, Py_ssize_t nb)
{
    const uintptr_t bytes_a = (uintptr_t)na * sizeof(double), bytes_b = (uintptr_t)nb * sizeof(double);
    return (uintptr_t)a + bytes_a - (uintptr_t)b - 1u < bytes_a + bytes_b - 1u;
}

/* NumPy's float64 dtype (borrowed; set by robodyn._native at import): the descriptor of almost every float64
   array, so comparing with it skips reading the type and byte order (3 instructions less per array). */
static PyObject *rd_float64_descr;

/* &PyArray_Type (set by robodyn._native at import): read through NumPy's API table it is one load more per array. */
static PyTypeObject *rd_ndarray_type;

/* Whether x is an exact float64 ndarray of `rank` (0 to 3) with these dims and flags. */
static RD_ALWAYS_INLINE int rd_array_fits(PyObject *x, int rank, const int *dims, int flags)
{
    if (Py_TYPE(x) != rd_ndarray_type)
        return 0;
    PyArrayObject *a = (PyArrayObject *)x;
    if (PyArray_NDIM(a) != rank || (PyArray_FLAGS(a) & flags) != flags)
        return 0;
    const npy_intp *shape = PyArray_DIMS(a);
    /* Not a loop: a constant rank (the inputs') folds; an output's, known only here, is tested in the order of how
       common it is (vectors, matrices, then the rest), not as a switch's chain of comparisons. */
    if (rank == 1) {
        if (shape[0] != dims[0])
            return 0;
    } else if (rank == 2) {
        if (shape[0] != dims[0] || shape[1] != dims[1])
            return 0;
    } else if (rank == 3) {
        if (shape[0] != dims[0] || shape[1] != dims[1] || shape[2] != dims[2])
            return 0;
    }
    const PyArray_Descr *descr = PyArray_DESCR(a);
    return (PyObject *)descr == rd_float64_descr || (descr->type_num == NPY_DOUBLE && PyArray_ISNBO(descr->byteorder));
}

/* The data of x if rd_array_fits, else NULL. */
static RD_ALWAYS_INLINE double *rd_array_data(PyObject *x, int rank, const int *dims, int flags)
{
    return rd_array_fits(x, rank, dims, flags) ? (double *)PyArray_DATA((PyArrayObject *)x) : NULL;
}

/* Allocating calls reuse a result of their own that nothing else references any more. A control loop that
   writes `tau = robot.inverse_dynamics(q, qd, qdd)` would otherwise allocate and free one array per call
   (NumPy's allocation and deallocation: about 700 instructions, more than a small robot's kernel). Each
   routine keeps its RD_SPARES latest results (two: with `x = f(...)` the previous result is still bound to x
   during the call); one whose only reference is ours -- no variable, container, view (a view references its
   base) or buffer export (a memoryview references its exporter) holds it, and no weak reference sees it -- is
   indistinguishable from a new array, and is written and returned instead of one. It is claimed (its reference
   count raised) before the kernel runs, so a thread running while the GIL is released cannot claim it too.
   Only a spare still of the routine's shape, dtype and flags qualifies: the user may have changed them.
   Several outputs: the tuple and each of its arrays must be ours alone. Not with free-threaded CPython, whose
   reference counts are not read this way. */

static RD_ALWAYS_INLINE int rd_spare_array_fits(PyObject *x, int rank, const int *dims)
{
    return Py_REFCNT(x) == 1 && ((PyArrayObject_fields *)x)->weakreflist == NULL
           && rd_array_fits(x, rank, dims, RD_OUT_FLAGS);
}

/* A spare result of r to write into (a new reference, its arrays' data in targets), or NULL. */
static RD_ALWAYS_INLINE PyObject *rd_spare_take(PyObject **spare, const rd_routine *r, const int n_outputs, double **targets)
{
#if defined(Py_GIL_DISABLED)
    (void)spare; (void)r; (void)n_outputs; (void)targets;
    return NULL;
#else
    if (spare == NULL)
        return NULL;
    for (int s = 0; s < RD_SPARES; ++s) {
        PyObject *x = spare[s];
        if (x == NULL)
            continue;
        if (n_outputs == 1) {
            if (!rd_spare_array_fits(x, r->out_rank[0], r->out_shape[0]))
                continue;
            targets[0] = (double *)PyArray_DATA((PyArrayObject *)x);
        } else {
            int fits = Py_REFCNT(x) == 1 && PyTuple_CheckExact(x) && PyTuple_GET_SIZE(x) == n_outputs;
            for (int j = 0; fits && j < n_outputs; ++j)
                fits = rd_spare_array_fits(PyTuple_GET_ITEM(x, j), r->out_rank[j], r->out_shape[j]);
            if (!fits)
                continue;
            for (int j = 0; j < n_outputs; ++j)
                targets[j] = (double *)PyArray_DATA((PyArrayObject *)PyTuple_GET_ITEM(x, j));
        }
        Py_INCREF(x);
        return x;
    }
    return NULL;
#endif
}

/* Keep a new result (borrowed: a reference is added) as the latest spare, dropping the oldest. */
static inline void rd_spare_keep(PyObject **spare, PyObject *result)
{
#if !defined(Py_GIL_DISABLED)
    if (spare == NULL)
        return;
    PyObject *oldest = spare[RD_SPARES - 1];
    for (int s = RD_SPARES - 1; s > 0; --s)
        spare[s] = spare[s - 1];
    Py_INCREF(result);
    spare[0] = result;
    Py_XDECREF(oldest); /* last: freeing it may run arbitrary code, with spare consistent */
#else
    (void)spare; (void)result;
#endif
}

/* args: the first n_given inputs (n_given <= r->n_inputs; the inputs after them are not given, so None: only optional
   ones may be missing), `out` (None when not given, never NULL). A call that leaves out optional inputs, as
   `robot.inverse_dynamics(q, qd, qdd, out=o)` leaves out h, is read where the interpreter put its arguments: no
   copy into a list of all the parameters. Results are allocated with rd_float64_descr.
   On RD_FAST_DONE *result is a new reference; on RD_FAST_FAILED the kernel returned nonzero
   (nothing allocated survives). `release`: run the kernel without the GIL. */

static RD_ALWAYS_INLINE int rd_fast_call_sized(const rd_routine *r, unsigned optional, PyObject *const *args,
                                               PyObject *out, const double *p, int release, PyObject **spare,
                                               PyObject **result, const int n_given, const int n_outputs)
{
    PyArray_Descr *float64 = (PyArray_Descr *)rd_float64_descr;
    const double *in[RD_MAX_INPUTS];
    double total = 0.0;
    int input_flags = ~0; /* the flags every given input has (NPY_ARRAY_OWNDATA: see the overlap test) */
#ifdef RD_PAIRS
    rd_pair pairs = {0.0, 0.0};
#endif
    RD_UNROLL
    for (int k = 0; k < n_given; ++k) {
        PyObject *x = args[k];
        if (!rd_array_fits(x, 1, &r->in_size[k], RD_IN_FLAGS)) { /* None is not an ndarray: tested second */
            if (x != Py_None || !((optional >> k) & 1u))
                return RD_FAST_DECLINED;
            in[k] = NULL;
            continue;
        }
        const Py_ssize_t size = r->in_size[k];
        const double *data = (const double *)PyArray_DATA((PyArrayObject *)x);
        in[k] = data;
        input_flags &= PyArray_FLAGS((PyArrayObject *)x);
#ifdef RD_PAIRS
        if ((size_t)size - 4 <= 4) {
            pairs += (rd_load_pair(data) + rd_load_pair(data + 2))
                     + (rd_load_pair(data + size - 4) + rd_load_pair(data + size - 2));
            continue;
        }
#endif
        total += rd_sum(data, size);
    }
#ifdef RD_PAIRS
    total += pairs[0] + pairs[1];
#endif
    if (!isfinite(total))
        return RD_FAST_DECLINED;
    /* Inputs not given: optional ones (routines.py puts them last; the methods' parser has seen every required one
       given). A constant count of stores, not a loop to r->n_inputs. */
    for (int k = n_given; k < RD_MAX_INPUTS; ++k)
        in[k] = NULL;

    /* Outputs: one array (or a float), or for several outputs a tuple of arrays (none a scalar). */
    const int given = out != Py_None;
    PyObject *made[RD_MAX_OUTPUTS] = {NULL};
    double *targets[RD_MAX_OUTPUTS];
    Py_ssize_t sizes[RD_MAX_OUTPUTS];
    double scalar = 0.0;
    if (n_outputs > 1 && given && (!PyTuple_CheckExact(out) || PyTuple_GET_SIZE(out) != n_outputs))
        return RD_FAST_DECLINED;
    PyObject *reused = given || r->out_rank[0] == 0 ? NULL : rd_spare_take(spare, r, n_outputs, targets);
    for (int j = 0; j < n_outputs && reused == NULL; ++j) {
        const int rank = r->out_rank[j];
        if (n_outputs > 1 && rank == 0)
            goto declined;
        if (given) {
            PyObject *item = n_outputs == 1 ? out : PyTuple_GET_ITEM(out, j);
            if (!rd_array_fits(item, rank, r->out_shape[j], RD_OUT_FLAGS))
                return RD_FAST_DECLINED;
            targets[j] = (double *)PyArray_DATA((PyArrayObject *)item);
            sizes[j] = (Py_ssize_t)r->out_shape[j][0] * r->out_shape[j][1] * r->out_shape[j][2]; /* for the overlaps */
            /* Arrays that own their data (NumPy allocated it) have buffers of their own: when `out` and every
               input do, they overlap only as one array. Otherwise (views among them) the address ranges are
               compared. The Panda's positional ID: 18 instructions less with arrays of their own, 8 more with
               views, than comparing ranges always. */
            if (PyArray_FLAGS((PyArrayObject *)item) & input_flags & NPY_ARRAY_OWNDATA) {
                RD_UNROLL
                for (int k = 0; k < n_given; ++k) /* (inputs not given overlap nothing) */
                    if (in[k] == targets[j])
                        return RD_FAST_DECLINED;
            } else {
                RD_UNROLL
                for (int k = 0; k < n_given; ++k)
                    if (rd_input_overlaps(in[k], r->in_size[k], targets[j], sizes[j]))
                        return RD_FAST_DECLINED;
            }
            for (int k = 0; k < j; ++k)
                if (rd_overlaps(targets[k], sizes[k], targets[j], sizes[j]))
                    return RD_FAST_DECLINED;
        } else if (rank == 0) {
            targets[j] = &scalar;
        } else {
            npy_intp dims[3] = {r->out_shape[j][0], r->out_shape[j][1], r->out_shape[j][2]};
            Py_INCREF(float64);
            made[j] = PyArray_NewFromDescr(&PyArray_Type, float64, rank, dims, NULL, NULL, 0, NULL);
            if (made[j] == NULL)
                goto declined; /* the general path reports the error */
            targets[j] = (double *)PyArray_DATA((PyArrayObject *)made[j]);
        }
    }
    int status;
    if (release) {
        Py_BEGIN_ALLOW_THREADS
        status = r->kernel(in, p, targets);
        Py_END_ALLOW_THREADS
    } else {
        status = r->kernel(in, p, targets);
    }
    if (status != 0) {
        Py_XDECREF(reused);
        for (int j = 0; j < n_outputs; ++j)
            Py_XDECREF(made[j]);
        return RD_FAST_FAILED;
    }
    if (given) {
        Py_INCREF(out);
        *result = out;
    } else if (reused != NULL) {
        *result = reused;
    } else if (n_outputs > 1) {
        PyObject *tuple = PyTuple_New(n_outputs);
        if (tuple == NULL)
            goto declined;
        for (int j = 0; j < n_outputs; ++j)
            PyTuple_SET_ITEM(tuple, j, made[j]); /* steals the reference */
        rd_spare_keep(spare, tuple);
        *result = tuple;
    } else if (made[0] != NULL) {
        rd_spare_keep(spare, made[0]);
        *result = made[0];
    } else {
        *result = PyFloat_FromDouble(scalar);
        if (*result == NULL)
            return RD_FAST_DECLINED;
    }
    return RD_FAST_DONE;

declined:
    for (int j = 0; j < n_outputs; ++j)
        Py_XDECREF(made[j]);
    return RD_FAST_DECLINED;
}

/* rd_fast_call_sized with the counts of the common signatures as constants, so that the compiler unrolls its
   loops over the arguments. Parameters are not checked: the runtime only stores finite ones
   (RobotCore._set_parameter). */
static RD_ALWAYS_INLINE int rd_fast_call(const rd_routine *r, unsigned optional, PyObject *const *args, int n_given,
                                         PyObject *out, const double *p, int release, PyObject **spare,
                                         PyObject **result)
{
    if (r->n_outputs == 1) {
        switch (n_given) {
        case 1: return rd_fast_call_sized(r, optional, args, out, p, release, spare, result, 1, 1);
        case 2: return rd_fast_call_sized(r, optional, args, out, p, release, spare, result, 2, 1);
        case 3: return rd_fast_call_sized(r, optional, args, out, p, release, spare, result, 3, 1);
        case 4: return rd_fast_call_sized(r, optional, args, out, p, release, spare, result, 4, 1);
        default: break;
        }
    }
    return rd_fast_call_sized(r, optional, args, out, p, release, spare, result, n_given, r->n_outputs);
}

/* Run the kernel on `count` rows (batched) or once; returns the first failing row, or -1. */
static Py_ssize_t rd_loop(const rd_routine *r, const double **in, double **out, const double *p, Py_ssize_t count,
                          int batched)
{
    Py_ssize_t in_step[RD_MAX_INPUTS], out_step[RD_MAX_OUTPUTS];
    const int n_inputs = r->n_inputs, n_outputs = r->n_outputs;
    for (int k = 0; k < n_inputs; ++k)
        in_step[k] = (batched && in[k] != NULL) ? r->in_size[k] : 0;
    for (int k = 0; k < n_outputs; ++k)
        out_step[k] = batched ? (Py_ssize_t)r->out_shape[k][0] * r->out_shape[k][1] * r->out_shape[k][2] : 0;
    for (Py_ssize_t i = 0; i < count; ++i) {
        if (r->kernel(in, p, out) != 0)
            return i;
        for (int k = 0; k < n_inputs; ++k)
            in[k] += in_step[k];
        for (int k = 0; k < n_outputs; ++k)
            out[k] += out_step[k];
    }
    return -1;
}


/* A batch's rows shared by several threads (robodyn._native's _run_parallel): each thread takes the next `chunk`
   rows until none are left. A thread slowed down -- a neighbour's load on a shared machine, a slower core, a late
   start -- then computes fewer rows instead of holding the others up, as fixed equal parts would. Rows are
   independent and each is computed by the same code, so the result is that of a serial loop, bit for bit. */
typedef struct {
    const rd_routine *r;
    const double *inputs[RD_MAX_INPUTS];  /* row 0 of each input (NULL: an optional argument not given) */
    double *outputs[RD_MAX_OUTPUTS];      /* row 0 of each output */
    const double *p;
    Py_ssize_t count;  /* rows */
    Py_ssize_t chunk;  /* rows taken at a time (at least 1) */
    Py_ssize_t next;   /* the first row not taken yet: read and advanced atomically */
    Py_ssize_t failed; /* the first failing row seen so far, count when none: lowered atomically */
} rd_shared_rows;

#if defined(__GNUC__) || defined(__clang__)
static inline Py_ssize_t rd_take(Py_ssize_t *counter, Py_ssize_t n)
{
    return __atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}
static inline Py_ssize_t rd_load(Py_ssize_t *x) { return __atomic_load_n(x, __ATOMIC_RELAXED); }
static inline void rd_store(Py_ssize_t *x, Py_ssize_t value) { __atomic_store_n(x, value, __ATOMIC_RELAXED); }
static inline void rd_lower(Py_ssize_t *x, Py_ssize_t value)
{
    Py_ssize_t seen = __atomic_load_n(x, __ATOMIC_RELAXED);
    while (value < seen && !__atomic_compare_exchange_n(x, &seen, value, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}
#elif defined(_MSC_VER) && defined(_WIN64)
#include <intrin.h>
static inline Py_ssize_t rd_take(Py_ssize_t *counter, Py_ssize_t n)
{
    return (Py_ssize_t)_InterlockedExchangeAdd64((volatile __int64 *)counter, (__int64)n);
}
static inline Py_ssize_t rd_load(Py_ssize_t *x) { return *(volatile Py_ssize_t *)x; }
static inline void rd_store(Py_ssize_t *x, Py_ssize_t value)
{
    _InterlockedExchange64((volatile __int64 *)x, (__int64)value);
}
static inline void rd_lower(Py_ssize_t *x, Py_ssize_t value)
{
    Py_ssize_t seen = rd_load(x);
    while (value < seen) {
        Py_ssize_t was = (Py_ssize_t)_InterlockedCompareExchange64((volatile __int64 *)x, (__int64)value,
                                                                  (__int64)seen);
        if (was == seen)
            break;
        seen = was;
    }
}
#elif defined(_MSC_VER) /* 32-bit Windows: Py_ssize_t is a 32-bit int, the size of MSVC's long */
#include <intrin.h>
static inline Py_ssize_t rd_take(Py_ssize_t *counter, Py_ssize_t n)
{
    return (Py_ssize_t)_InterlockedExchangeAdd((volatile long *)counter, (long)n);
}
static inline Py_ssize_t rd_load(Py_ssize_t *x) { return *(volatile Py_ssize_t *)x; }
static inline void rd_store(Py_ssize_t *x, Py_ssize_t value) { _InterlockedExchange((volatile long *)x, (long)value); }
static inline void rd_lower(Py_ssize_t *x, Py_ssize_t value)
{
    Py_ssize_t seen = rd_load(x);
    while (value < seen) {
        Py_ssize_t was = (Py_ssize_t)_InterlockedCompareExchange((volatile long *)x, (long)value, (long)seen);
        if (was == seen)
            break;
        seen = was;
    }
}
#else
#error "robodyn_call.h: no atomic operations known for this compiler"
#endif

/* No more chunks to take: the threads finish the ones they hold (an interrupted batch). */
static inline void rd_stop_shared(rd_shared_rows *s) { rd_store(&s->next, s->count); }

/* Compute rows of s until none are left (or only rows after a failure: a serial loop stops at the first failing
   row, and nothing after it is promised). Called by every thread of the batch, without the GIL. */
static void rd_run_shared(rd_shared_rows *s)
{
    const rd_routine *r = s->r;
    const double *in[RD_MAX_INPUTS];
    double *out[RD_MAX_OUTPUTS];
    for (;;) {
        const Py_ssize_t start = rd_take(&s->next, s->chunk);
        if (start >= s->count || start >= rd_load(&s->failed))
            return;
        const Py_ssize_t rows = s->count - start < s->chunk ? s->count - start : s->chunk;
        for (int k = 0; k < r->n_inputs; ++k)
            in[k] = s->inputs[k] == NULL ? NULL : s->inputs[k] + start * r->in_size[k];
        for (int k = 0; k < r->n_outputs; ++k)
            out[k] = s->outputs[k] + start * ((Py_ssize_t)r->out_shape[k][0] * r->out_shape[k][1] * r->out_shape[k][2]);
        const Py_ssize_t failed = rd_loop(r, in, out, s->p, rows, 1);
        if (failed >= 0)
            rd_lower(&s->failed, start + failed);
    }
}

#endif
