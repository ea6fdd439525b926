/*
 * robodyn_method.h: the routine methods of robodyn.Robot.
 *
 * robodyn.Robot gets one method per entry of the routine table (robodyn/routines.py),
 * installed on the class when the runtime is imported. A Python function would add a
 * frame to every call (hundreds of instructions, several times a small robot's whole
 * routine), so each method is compiled: a method descriptor, as a compiled class's methods
 * are (PyDescr_NewMethod, METH_FASTCALL | METH_KEYWORDS), which help(), inspect.signature
 * and IDEs see with a name, a docstring and a text signature. What the class holds is a
 * small object in front of it (rd_routine_slot, below) that CPython 3.11 and 3.12 call on
 * their specialised fast path with keyword arguments too, where a method descriptor called
 * with `out=` takes the generic path. A PyMethodDef function has no context argument, so
 * each table index has its own trampoline (RD_ROUTINE_SLOTS of them) for the bound methods;
 * both entries parse the arguments by the names of their table entry, then run the fast
 * path (robodyn_call.h) or hand them to the runtime's dispatcher with the routine's index.
 *
 * Included (once) into the Cython module robodyn._native.
 */
#ifndef ROBODYN_METHOD_H
#define ROBODYN_METHOD_H

#include <Python.h>

#include "robodyn_call.h"

#define RD_METHOD_MAX_ARGS 8

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
    int kw_given;           /* read in place (see rd_method_parse_and_call): the inputs given, else -1 */
    int kw_out;             /* read in place: where out is among the values, -1 when not given */
    int kw_count;           /* its number of keywords */
    signed char kw_target[RD_METHOD_MAX_ARGS]; /* keyword k names parameter kw_target[k] */
} rd_method_info;

static rd_method_info rd_methods[RD_ROUTINE_SLOTS];
static PyMethodDef rd_method_defs[RD_ROUTINE_SLOTS];
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

static RD_ALWAYS_INLINE PyObject *rd_method_parse_and_call(int index, rd_method_info *m, PyObject *self,
                                                            PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    const int n_args = m->n_args; /* the inputs, then out */
    PyObject *slots[RD_METHOD_MAX_ARGS];
    /* What the fast path reads: the first n_given inputs at values, the inputs after them not given (None), out. */
    PyObject *const *values = args;
    int n_given;
    PyObject *out;
    int i;
    if (kwnames == NULL) { /* by position only: read in place */
    positional:
        if (nargs == n_args) { /* all given, out too */
            n_given = n_args - 1;
            out = args[n_given];
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
        n_given = (int)nargs;
        out = Py_None;
        goto parsed;
    }
    if (kwnames == m->kw_names && nargs == m->kw_nargs) { /* this call site's layout, kept from its last call */
        if (m->kw_given >= 0) { /* `robot.inverse_dynamics(q, qd, qdd, out=o)`: read in place, h not given */
            n_given = m->kw_given;
            out = m->kw_out >= 0 ? args[m->kw_out] : Py_None;
            goto parsed;
        }
        rd_fill_positional(slots, args, nargs);
        for (int k = 0; k < m->kw_count; ++k)
            slots[m->kw_target[k]] = args[nargs + k];
        goto parsed_slots;
    }
    if (PyTuple_GET_SIZE(kwnames) == 0) /* an empty tuple (the vectorcall protocol allows it): no keywords */
        goto positional;
    if (nargs > n_args) {
        return rd_too_many(m, nargs);
    }
    rd_fill_positional(slots, args, nargs);
    {
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
        /* In place when the keywords name the inputs after the positional ones, in order, then maybe out: the
           values then lie as the fast path reads them (inputs, out) with only inputs left out after them. */
        const int names_out = nkw > 0 && target[nkw - 1] == n_args - 1;
        const int n_inputs_named = (int)nkw - names_out;
        int in_place = 1;
        for (int k = 0; k < n_inputs_named; ++k)
            in_place &= target[k] == nargs + k;
        for (Py_ssize_t k = 0; k < nkw; ++k)
            m->kw_target[k] = target[k];
        m->kw_given = in_place ? (int)nargs + n_inputs_named : -1;
        m->kw_out = in_place && names_out ? (int)nargs + n_inputs_named : -1;
        m->kw_count = (int)nkw;
        m->kw_nargs = nargs;
        Py_INCREF(kwnames);
        Py_XSETREF(m->kw_names, kwnames);
#endif
    }
parsed_slots:
    values = slots;
    n_given = n_args - 1;
    out = slots[n_given];
parsed:
    /* The fast path straight from here (self is a RobotCore: rd_routine_vectorcall or the method descriptor checked
       it). rd_core_offset is known: rd_method_new makes no method before it is. */
    {
        rd_core *core = (rd_core *)((char *)self + rd_core_offset);
        rd_core_slot *slot = &core->slots[index];
        int status = RD_FAST_DECLINED;
        if (slot->routine != NULL) {
            PyObject *result = NULL;
            status = rd_fast_call(slot->routine, slot->optional, values, n_given, out, core->p, slot->release,
                                  slot->spare, &result);
            if (status == RD_FAST_DONE)
                return result;
        }
        if (values != slots) { /* the general path takes every parameter in order, None where not given */
            rd_fill_positional(slots, values, n_given);
            slots[n_args - 1] = out;
        }
        return rd_method_dispatch(self, index, slots, status); /* failed, declined or unavailable: it says why */
    }
}

/* The bound methods' entry (robodyn_method.h's trampolines): one out-of-line copy. */
static PyObject *rd_method_call(int index, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    return rd_method_parse_and_call(index, &rd_methods[index], self, args, nargs, kwnames);
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

static PyCFunction const rd_trampolines[RD_ROUTINE_SLOTS] = {
    RD_TRAMPOLINE_REF(0), RD_TRAMPOLINE_REF(1), RD_TRAMPOLINE_REF(2), RD_TRAMPOLINE_REF(3), RD_TRAMPOLINE_REF(4), RD_TRAMPOLINE_REF(5), RD_TRAMPOLINE_REF(6), RD_TRAMPOLINE_REF(7),
    RD_TRAMPOLINE_REF(8), RD_TRAMPOLINE_REF(9), RD_TRAMPOLINE_REF(10), RD_TRAMPOLINE_REF(11), RD_TRAMPOLINE_REF(12), RD_TRAMPOLINE_REF(13), RD_TRAMPOLINE_REF(14), RD_TRAMPOLINE_REF(15),
    RD_TRAMPOLINE_REF(16), RD_TRAMPOLINE_REF(17), RD_TRAMPOLINE_REF(18), RD_TRAMPOLINE_REF(19), RD_TRAMPOLINE_REF(20), RD_TRAMPOLINE_REF(21), RD_TRAMPOLINE_REF(22), RD_TRAMPOLINE_REF(23),
    RD_TRAMPOLINE_REF(24), RD_TRAMPOLINE_REF(25), RD_TRAMPOLINE_REF(26), RD_TRAMPOLINE_REF(27), RD_TRAMPOLINE_REF(28), RD_TRAMPOLINE_REF(29), RD_TRAMPOLINE_REF(30), RD_TRAMPOLINE_REF(31),
    RD_TRAMPOLINE_REF(32), RD_TRAMPOLINE_REF(33), RD_TRAMPOLINE_REF(34), RD_TRAMPOLINE_REF(35), RD_TRAMPOLINE_REF(36), RD_TRAMPOLINE_REF(37), RD_TRAMPOLINE_REF(38), RD_TRAMPOLINE_REF(39),
    RD_TRAMPOLINE_REF(40), RD_TRAMPOLINE_REF(41), RD_TRAMPOLINE_REF(42), RD_TRAMPOLINE_REF(43), RD_TRAMPOLINE_REF(44), RD_TRAMPOLINE_REF(45), RD_TRAMPOLINE_REF(46), RD_TRAMPOLINE_REF(47),
    RD_TRAMPOLINE_REF(48), RD_TRAMPOLINE_REF(49), RD_TRAMPOLINE_REF(50), RD_TRAMPOLINE_REF(51), RD_TRAMPOLINE_REF(52), RD_TRAMPOLINE_REF(53), RD_TRAMPOLINE_REF(54), RD_TRAMPOLINE_REF(55),
    RD_TRAMPOLINE_REF(56), RD_TRAMPOLINE_REF(57), RD_TRAMPOLINE_REF(58), RD_TRAMPOLINE_REF(59), RD_TRAMPOLINE_REF(60), RD_TRAMPOLINE_REF(61), RD_TRAMPOLINE_REF(62), RD_TRAMPOLINE_REF(63)
};

/* The objects installed on the class: one static type per table index, whose metatype is a method descriptor.
   CPython 3.11 and 3.12 specialise a call with keywords (`robot.inverse_dynamics(q, qd, qdd, out=o)`) for a
   built-in function or a built-in class, never for a method descriptor (specialize.c: SPEC_FAIL_CALL_KWNAMES):
   such a call took the generic path (the Panda's inverse dynamics: 355 instructions in the interpreter; 235 now).
   A type object with a vectorcall entry is a built-in class to the specialiser, with or without keywords
   (PRECALL_BUILTIN_CLASS, CALL_BUILTIN_CLASS); and since its metatype is flagged Py_TPFLAGS_METHOD_DESCRIPTOR,
   `robot.name(...)` loads it unbound, as it does a method, and calls it with the robot first. Attribute access
   (`robot.name`, `Robot.name`) goes through the metatype's __get__, which hands on to the method descriptor: the
   bound method and the descriptor users see, with name, signature and docstring, are those of rd_method_new. */
typedef struct {
    PyTypeObject type;       /* first: a pointer to the type is one to its slot */
    int index;               /* the routine table index */
    rd_method_info *info;    /* &rd_methods[index] */
    PyTypeObject *owner;     /* the class the method was made for (borrowed: the class holds this type); another
                                class given the same index gets the plain descriptor (rd_method_new) */
    PyObject *descriptor;    /* the method descriptor (rd_method_new) */
    char name[64];           /* the type's name (tp_name must stay put) */
} rd_routine_slot;

static PyTypeObject rd_routine_meta;
static rd_routine_slot rd_routine_slots[RD_ROUTINE_SLOTS];

static PyObject *rd_routine_get(PyObject *self, PyObject *obj, PyObject *type)
{
    PyObject *descriptor = ((rd_routine_slot *)self)->descriptor;
    return Py_TYPE(descriptor)->tp_descr_get(descriptor, obj, type);
}

static PyObject *rd_routine_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    const rd_routine_slot *slot = (const rd_routine_slot *)callable;
    const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 1 || (Py_TYPE(args[0]) != slot->owner && !PyObject_TypeCheck(args[0], slot->owner))) {
        /* called without a robot, or with something else first: the method descriptor says so */
        return PyObject_Vectorcall(slot->descriptor, args, nargsf, kwnames);
    }
    return rd_method_parse_and_call(slot->index, slot->info, args[0], args + 1, nargs - 1, kwnames);
}

static PyTypeObject rd_routine_meta = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "robodyn._native.routine_method",
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_METHOD_DESCRIPTOR | Py_TPFLAGS_DISALLOW_INSTANTIATION
                | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A routine method of robodyn.Robot (see its descriptor: Robot.<name>).",
    .tp_descr_get = rd_routine_get,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(PyTypeObject, tp_vectorcall),
};

/* The routine method of `owner` for table entry `index`: this index's type (rd_routine_slot), to install on the
   class, with its method descriptor. `name` and `doc` (which starts with the text signature,
   "name($self, q, /, out=None)\n--\n\n") must stay alive as long as the method; `names`: tuple of the parameter names
   after self (interned here). */
static PyObject *rd_method_new(int index, const char *name, const char *doc, PyObject *names, int n_required,
                               PyTypeObject *owner, rd_dispatch_fn dispatch)
{
    Py_ssize_t n_args = PyTuple_Size(names);
    if (n_args < 0)
        return NULL;
    if (index < 0 || index >= RD_ROUTINE_SLOTS) {
        PyErr_Format(PyExc_ValueError, "routine table: at most %d routines", RD_ROUTINE_SLOTS);
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
    PyObject *descriptor = PyDescr_NewMethod(owner, def);
    if (descriptor == NULL)
        return NULL;

    /* The object to install: this index's type (see rd_routine_slot), made ready once. */
    if (rd_routine_meta.tp_base == NULL) {
        rd_routine_meta.tp_base = &PyType_Type;
        if (PyType_Ready(&rd_routine_meta) < 0) {
            rd_routine_meta.tp_base = NULL;
            Py_DECREF(descriptor);
            return NULL;
        }
    }
    rd_routine_slot *slot = &rd_routine_slots[index];
    if (slot->descriptor != NULL && slot->owner != owner)
        return descriptor; /* another class has this index's type (robodyn.Robot): this one gets the descriptor */
    PyTypeObject *type = &slot->type;
    Py_XSETREF(slot->descriptor, descriptor);
    slot->owner = owner;
    slot->index = index;
    slot->info = info;
    PyOS_snprintf(slot->name, sizeof slot->name, "robodyn.%s", name);
    type->tp_doc = doc; /* "name($self, ...)\n--\n\n...": __doc__ and __text_signature__, as the descriptor's */
    if (!(type->tp_flags & Py_TPFLAGS_READY)) {
        Py_SET_TYPE(type, &rd_routine_meta);
        Py_SET_REFCNT(type, 1); /* a static type: never freed */
        type->tp_name = slot->name;
        type->tp_basicsize = sizeof(PyObject);
        type->tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION;
        type->tp_vectorcall = rd_routine_vectorcall;
        if (PyType_Ready(type) < 0)
            return NULL;
    } else { /* made again (another table at this index): the doc PyType_Ready stored is the former method's */
        PyObject *text = PyObject_GetAttrString(descriptor, "__doc__");
        int failed = text == NULL || PyDict_SetItemString(type->tp_dict, "__doc__", text) < 0;
        Py_XDECREF(text);
        PyType_Modified(type);
        if (failed)
            return NULL;
    }
    Py_INCREF(type);
    return (PyObject *)type;
}

#endif
