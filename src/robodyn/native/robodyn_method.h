/*
 * robodyn_method.h: the routine methods of robodyn.Robot.
 *
 * robodyn.Robot gets one method per entry of the routine table (robodyn/routines.py),
 * installed on the class when the runtime is imported. A Python function would add a
 * frame to every call (hundreds of instructions, several times a small robot's whole
 * routine), so each method is a real method descriptor, as a compiled class's methods
 * are (PyDescr_NewMethod, METH_FASTCALL | METH_KEYWORDS): CPython's fast paths for
 * built-in methods apply to `robot.M(q)` and to a bound `f = robot.M`, and help(),
 * inspect.signature and IDEs see a name, a docstring and a text signature. A
 * PyMethodDef function has no context argument, so each table index has its own
 * trampoline (RD_METHOD_SLOTS of them) that parses the arguments by the names of its
 * table entry, then hands them to the runtime's dispatcher with the routine's index.
 *
 * Included (once) into the Cython module robodyn._native.
 */
#ifndef ROBODYN_METHOD_H
#define ROBODYN_METHOD_H

#include <Python.h>

#include "robodyn_call.h"

#define RD_METHOD_MAX_ARGS 8
#define RD_METHOD_SLOTS 64

/* The runtime's handler of a call the fast path did not finish (fast_status: RD_FAST_FAILED or
   RD_FAST_DECLINED, see robodyn_call.h). args[k]: the k-th parameter after self (None when not
   given); returns a new reference or NULL. */
typedef PyObject *(*rd_dispatch_fn)(PyObject *self, int index, PyObject **args, int fast_status);

typedef struct {
    int n_args;             /* parameters after self */
    int n_required;         /* the first n_required are required */
    PyObject *names;        /* tuple of n_args interned str */
    PyObject *name;         /* the method's name (str) */
    /* The layout of the last call with keywords that parsed: a call site's keyword names are one constant tuple,
       so two comparisons find the layout again and the names are not looked up per call. */
    PyObject *kw_names;     /* its keyword names (a new reference; NULL: none yet) */
    Py_ssize_t kw_nargs;    /* its positional count */
    int kw_in_place;        /* every parameter given, the keywords naming the last ones in order: read in place */
    signed char kw_target[RD_METHOD_MAX_ARGS]; /* else keyword k names parameter kw_target[k] */
} rd_method_info;

static rd_method_info rd_methods[RD_METHOD_SLOTS];
static PyMethodDef rd_method_defs[RD_METHOD_SLOTS];
/* The general path (robodyn/_native.pyx): conversions, batches, errors. */
static rd_dispatch_fn rd_method_dispatch;
/* Where a RobotCore keeps its rd_core, measured on a live object by robodyn._native. */
static Py_ssize_t rd_core_offset = -1;

/* slots[0:nargs] = args, None after (the fast path then tests one value, not two). Spelled out: as a loop, the
   compiler calls memcpy, several times the work. */
static RD_ALWAYS_INLINE void rd_fill_positional(PyObject **slots, PyObject *const *args, Py_ssize_t nargs)
{
    for (int i = 0; i < RD_METHOD_MAX_ARGS; ++i)
        slots[i] = Py_None;
    switch (nargs) {
    case 8: slots[7] = args[7]; /* fall through */
    case 7: slots[6] = args[6]; /* fall through */
    case 6: slots[5] = args[5]; /* fall through */
    case 5: slots[4] = args[4]; /* fall through */
    case 4: slots[3] = args[3]; /* fall through */
    case 3: slots[2] = args[2]; /* fall through */
    case 2: slots[1] = args[1]; /* fall through */
    case 1: slots[0] = args[0]; /* fall through */
    default: break;
    }
}

/* The TypeError of a call with more positional arguments than the method has parameters. */
static PyObject *rd_too_many(const rd_method_info *m, Py_ssize_t nargs)
{
    PyErr_Format(PyExc_TypeError, "%S() takes at most %d positional arguments (%zd given)", m->name, m->n_args, nargs);
    return NULL;
}

static PyObject *rd_method_call(int index, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    rd_method_info *m = &rd_methods[index];
    const int n_args = m->n_args;
    PyObject *slots[RD_METHOD_MAX_ARGS];
    PyObject **values = slots; /* the parameters in order, None where not given */
    int i;
    if (kwnames == NULL) { /* by position only */
        if (nargs == n_args) { /* all given (out too): read in place, not copied */
            values = (PyObject **)args;
            goto parsed;
        }
        if (nargs > n_args) {
            return rd_too_many(m, nargs);
        }
        if (nargs < m->n_required) {
            PyErr_Format(PyExc_TypeError, "%S() missing required argument '%S' (pos %d)", m->name,
                         PyTuple_GET_ITEM(m->names, nargs), (int)nargs + 1);
            return NULL;
        }
        rd_fill_positional(slots, args, nargs);
        goto parsed;
    }
    /* This call site's layout, kept from its last call: */
    const int known = kwnames == m->kw_names && nargs == m->kw_nargs;
    if (known && m->kw_in_place) { /* `robot.M(q, out=o)`: the values already lie in parameter order */
        values = (PyObject **)args;
        goto parsed;
    }
    if (nargs > n_args) {
        return rd_too_many(m, nargs);
    }
    rd_fill_positional(slots, args, nargs);
    if (known) { /* `robot.inverse_dynamics(q, qd, qdd, out=o)`: h, between, stays None */
        const Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t k = 0; k < nkw; ++k)
            slots[m->kw_target[k]] = args[nargs + k];
    } else {
        unsigned given = nargs >= 32 ? ~0u : (1u << nargs) - 1u; /* bit j: parameter j has a value */
        const Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
        signed char target[RD_METHOD_MAX_ARGS]; /* the layout to keep: keyword k names parameter target[k] */
        for (Py_ssize_t k = 0; k < nkw; ++k) {
            PyObject *key = PyTuple_GET_ITEM(kwnames, k);
            int found = -1;
            /* Keyword names in calls are interned, as are ours: identity decides almost always. */
            for (int j = n_args - 1; j >= 0; --j) {
                if (PyTuple_GET_ITEM(m->names, j) == key) {
                    found = j;
                    break;
                }
            }
            for (int j = 0; found < 0 && j < n_args; ++j) {
                int equal = PyUnicode_Compare(PyTuple_GET_ITEM(m->names, j), key);
                if (equal == -1 && PyErr_Occurred())
                    return NULL;
                if (equal == 0)
                    found = j;
            }
            if (found < 0) {
                PyErr_Format(PyExc_TypeError, "%S() got an unexpected keyword argument '%S'", m->name, key);
                return NULL;
            }
            if ((given >> found) & 1u) {
                PyErr_Format(PyExc_TypeError, "%S() got multiple values for argument '%S'", m->name, key);
                return NULL;
            }
            given |= 1u << found;
            slots[found] = args[nargs + k];
            target[k] = (signed char)found; /* k < n_args: no parameter is named twice */
        }
        for (i = (int)nargs; i < m->n_required; ++i) {
            if (!((given >> i) & 1u)) {
                PyErr_Format(PyExc_TypeError, "%S() missing required argument '%S' (pos %d)", m->name,
                             PyTuple_GET_ITEM(m->names, i), i + 1);
                return NULL;
            }
        }
#if !defined(Py_GIL_DISABLED) /* the layout is written (and so read) under the GIL only */
        int in_place = nargs + nkw == n_args;
        for (Py_ssize_t k = 0; k < nkw; ++k) {
            m->kw_target[k] = target[k];
            in_place &= target[k] == nargs + k;
        }
        m->kw_in_place = in_place;
        m->kw_nargs = nargs;
        Py_INCREF(kwnames);
        Py_XSETREF(m->kw_names, kwnames);
#endif
    }
parsed:
    /* The fast path straight from here (self is a RobotCore: the method descriptor checked it). */
    /* rd_core_offset is known: rd_method_new makes no method before it is. */
    const rd_core *core = (const rd_core *)((const char *)self + rd_core_offset);
    int status = RD_FAST_DECLINED;
    if (index < core->n_slots && core->slots[index] != NULL) {
        PyObject *result = NULL;
        int release = core->release[index];
        status = rd_fast_call(core->slots[index], core->optional[index], values, core->p, release,
                              core->spare + (Py_ssize_t)index * RD_SPARES, &result);
        if (status == RD_FAST_DONE)
            return result;
    }
    return rd_method_dispatch(self, index, values, status); /* failed, declined or unavailable: it says why */
}

#define RD_TRAMPOLINE(i)                                                                                   \
    static PyObject *rd_method_##i(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) \
    {                                                                                                       \
        return rd_method_call(i, self, args, nargs, kwnames);                                             \
    }
#define RD_TRAMPOLINE_REF(i) (PyCFunction)(void (*)(void))rd_method_##i

RD_TRAMPOLINE(0)
RD_TRAMPOLINE(1)
RD_TRAMPOLINE(2)
RD_TRAMPOLINE(3)
RD_TRAMPOLINE(4)
RD_TRAMPOLINE(5)
RD_TRAMPOLINE(6)
RD_TRAMPOLINE(7)
RD_TRAMPOLINE(8)
RD_TRAMPOLINE(9)
RD_TRAMPOLINE(10)
RD_TRAMPOLINE(11)
RD_TRAMPOLINE(12)
RD_TRAMPOLINE(13)
RD_TRAMPOLINE(14)
RD_TRAMPOLINE(15)
RD_TRAMPOLINE(16)
RD_TRAMPOLINE(17)
RD_TRAMPOLINE(18)
RD_TRAMPOLINE(19)
RD_TRAMPOLINE(20)
RD_TRAMPOLINE(21)
RD_TRAMPOLINE(22)
RD_TRAMPOLINE(23)
RD_TRAMPOLINE(24)
RD_TRAMPOLINE(25)
RD_TRAMPOLINE(26)
RD_TRAMPOLINE(27)
RD_TRAMPOLINE(28)
RD_TRAMPOLINE(29)
RD_TRAMPOLINE(30)
RD_TRAMPOLINE(31)
RD_TRAMPOLINE(32)
RD_TRAMPOLINE(33)
RD_TRAMPOLINE(34)
RD_TRAMPOLINE(35)
RD_TRAMPOLINE(36)
RD_TRAMPOLINE(37)
RD_TRAMPOLINE(38)
RD_TRAMPOLINE(39)
RD_TRAMPOLINE(40)
RD_TRAMPOLINE(41)
RD_TRAMPOLINE(42)
RD_TRAMPOLINE(43)
RD_TRAMPOLINE(44)
RD_TRAMPOLINE(45)
RD_TRAMPOLINE(46)
RD_TRAMPOLINE(47)
RD_TRAMPOLINE(48)
RD_TRAMPOLINE(49)
RD_TRAMPOLINE(50)
RD_TRAMPOLINE(51)
RD_TRAMPOLINE(52)
RD_TRAMPOLINE(53)
RD_TRAMPOLINE(54)
RD_TRAMPOLINE(55)
RD_TRAMPOLINE(56)
RD_TRAMPOLINE(57)
RD_TRAMPOLINE(58)
RD_TRAMPOLINE(59)
RD_TRAMPOLINE(60)
RD_TRAMPOLINE(61)
RD_TRAMPOLINE(62)
RD_TRAMPOLINE(63)

static PyCFunction const rd_trampolines[RD_METHOD_SLOTS] = {
    RD_TRAMPOLINE_REF(0), RD_TRAMPOLINE_REF(1), RD_TRAMPOLINE_REF(2), RD_TRAMPOLINE_REF(3), RD_TRAMPOLINE_REF(4), RD_TRAMPOLINE_REF(5), RD_TRAMPOLINE_REF(6), RD_TRAMPOLINE_REF(7),
    RD_TRAMPOLINE_REF(8), RD_TRAMPOLINE_REF(9), RD_TRAMPOLINE_REF(10), RD_TRAMPOLINE_REF(11), RD_TRAMPOLINE_REF(12), RD_TRAMPOLINE_REF(13), RD_TRAMPOLINE_REF(14), RD_TRAMPOLINE_REF(15),
    RD_TRAMPOLINE_REF(16), RD_TRAMPOLINE_REF(17), RD_TRAMPOLINE_REF(18), RD_TRAMPOLINE_REF(19), RD_TRAMPOLINE_REF(20), RD_TRAMPOLINE_REF(21), RD_TRAMPOLINE_REF(22), RD_TRAMPOLINE_REF(23),
    RD_TRAMPOLINE_REF(24), RD_TRAMPOLINE_REF(25), RD_TRAMPOLINE_REF(26), RD_TRAMPOLINE_REF(27), RD_TRAMPOLINE_REF(28), RD_TRAMPOLINE_REF(29), RD_TRAMPOLINE_REF(30), RD_TRAMPOLINE_REF(31),
    RD_TRAMPOLINE_REF(32), RD_TRAMPOLINE_REF(33), RD_TRAMPOLINE_REF(34), RD_TRAMPOLINE_REF(35), RD_TRAMPOLINE_REF(36), RD_TRAMPOLINE_REF(37), RD_TRAMPOLINE_REF(38), RD_TRAMPOLINE_REF(39),
    RD_TRAMPOLINE_REF(40), RD_TRAMPOLINE_REF(41), RD_TRAMPOLINE_REF(42), RD_TRAMPOLINE_REF(43), RD_TRAMPOLINE_REF(44), RD_TRAMPOLINE_REF(45), RD_TRAMPOLINE_REF(46), RD_TRAMPOLINE_REF(47),
    RD_TRAMPOLINE_REF(48), RD_TRAMPOLINE_REF(49), RD_TRAMPOLINE_REF(50), RD_TRAMPOLINE_REF(51), RD_TRAMPOLINE_REF(52), RD_TRAMPOLINE_REF(53), RD_TRAMPOLINE_REF(54), RD_TRAMPOLINE_REF(55),
    RD_TRAMPOLINE_REF(56), RD_TRAMPOLINE_REF(57), RD_TRAMPOLINE_REF(58), RD_TRAMPOLINE_REF(59), RD_TRAMPOLINE_REF(60), RD_TRAMPOLINE_REF(61), RD_TRAMPOLINE_REF(62), RD_TRAMPOLINE_REF(63)
};

/* A method descriptor of `owner` for table entry `index`: `name` and `doc` (which starts with the
   text signature, "name($self, q, /, out=None)\n--\n\n") must stay alive as long as the method;
   `names`: tuple of the parameter names after self (interned here). */
static PyObject *rd_method_new(int index, const char *name, const char *doc, PyObject *names, int n_required,
                               PyTypeObject *owner, rd_dispatch_fn dispatch)
{
    Py_ssize_t n_args = PyTuple_Size(names);
    if (n_args < 0)
        return NULL;
    if (index < 0 || index >= RD_METHOD_SLOTS) {
        PyErr_Format(PyExc_ValueError, "routine table: at most %d routines", RD_METHOD_SLOTS);
        return NULL;
    }
    if (rd_core_offset <= 0) {
        PyErr_SetString(PyExc_RuntimeError, "routine method: the runtime has not located RobotCore's rd_core yet");
        return NULL;
    }
    if (n_args > RD_METHOD_MAX_ARGS || n_required < 0 || n_required > n_args) {
        PyErr_SetString(PyExc_ValueError, "routine method: too many arguments or bad required count");
        return NULL;
    }
    PyObject *interned = PyTuple_New(n_args);
    PyObject *method_name = PyUnicode_FromString(name);
    if (interned == NULL || method_name == NULL) {
        Py_XDECREF(interned);
        Py_XDECREF(method_name);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n_args; ++i) {
        PyObject *item = PyTuple_GET_ITEM(names, i);
        if (!PyUnicode_CheckExact(item)) {
            Py_DECREF(interned);
            Py_DECREF(method_name);
            PyErr_SetString(PyExc_TypeError, "routine method: argument names must be str");
            return NULL;
        }
        Py_INCREF(item);
        PyUnicode_InternInPlace(&item);
        PyTuple_SET_ITEM(interned, i, item);
    }
    rd_method_info *info = &rd_methods[index];
    Py_XSETREF(info->names, interned);
    Py_XSETREF(info->name, method_name);
    Py_CLEAR(info->kw_names); /* a layout of the former method at this index */
    info->n_args = (int)n_args;
    info->n_required = n_required;
    rd_method_dispatch = dispatch;
    PyMethodDef *def = &rd_method_defs[index];
    def->ml_name = name;
    def->ml_meth = rd_trampolines[index];
    def->ml_flags = METH_FASTCALL | METH_KEYWORDS;
    def->ml_doc = doc;
    return PyDescr_NewMethod(owner, def);
}

#endif
