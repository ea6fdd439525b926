/*
 * robodyn_method.h: the type of the routine methods of robodyn.Robot.
 *
 * robodyn.Robot gets one method per entry of the routine table (robodyn/routines.py),
 * installed on the class when the runtime is imported. A Python function would add a
 * frame to every call (hundreds of instructions, several times a small robot's whole
 * routine), so each method is an object of this C type instead: a method descriptor
 * (Py_TPFLAGS_METHOD_DESCRIPTOR, so `robot.M(q)` binds no method object) called
 * through vectorcall. It parses the positional and keyword arguments by the names of
 * its table entry, then hands them to the runtime's dispatcher (set once by
 * robodyn._native) with the routine's index. help(), inspect.signature and IDEs see
 * the name, documentation and signature that the runtime stores in its __dict__.
 *
 * Included (once) into the Cython module robodyn._native.
 */
#ifndef ROBODYN_METHOD_H
#define ROBODYN_METHOD_H

#include <Python.h>
#include <stddef.h>

#define RD_METHOD_MAX_ARGS 8

/* args[k]: the k-th parameter after self (NULL when not given); returns a new reference or NULL. */
typedef PyObject *(*rd_dispatch_fn)(PyObject *self, int index, PyObject **args);

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    int index;              /* position in the routine table */
    int n_args;             /* parameters after self */
    int n_required;         /* the first n_required are required */
    PyObject *names;        /* tuple of str, n_args names */
    PyObject *dict;         /* __name__, __qualname__, __doc__, __signature__, ... */
    PyTypeObject *owner;    /* self must be an instance of this type */
    rd_dispatch_fn dispatch;
} rd_method_object;

static PyObject *rd_method_name(rd_method_object *m)
{
    PyObject *name = m->dict ? PyDict_GetItemString(m->dict, "__name__") : NULL;
    return name ? name : m->names;
}

static PyObject *rd_method_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    rd_method_object *m = (rd_method_object *)callable;
    const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    const int n_args = m->n_args;
    PyObject *slots[RD_METHOD_MAX_ARGS];
    if (nargs < 1 || !PyObject_TypeCheck(args[0], m->owner)) {
        PyErr_Format(PyExc_TypeError, "%S() must be called on a %s", rd_method_name(m), m->owner->tp_name);
        return NULL;
    }
    const Py_ssize_t given = nargs - 1;
    if (given > n_args) {
        PyErr_Format(PyExc_TypeError, "%S() takes at most %d positional arguments (%zd given)",
                     rd_method_name(m), n_args, given);
        return NULL;
    }
    /* Spelled out: as loops, the compiler calls memcpy and memset, several times the work. */
    int i;
    for (i = (int)given; i < RD_METHOD_MAX_ARGS; ++i)
        slots[i] = NULL;
    switch (given) {
    case 8: slots[7] = args[8]; /* fall through */
    case 7: slots[6] = args[7]; /* fall through */
    case 6: slots[5] = args[6]; /* fall through */
    case 5: slots[4] = args[5]; /* fall through */
    case 4: slots[3] = args[4]; /* fall through */
    case 3: slots[2] = args[3]; /* fall through */
    case 2: slots[1] = args[2]; /* fall through */
    case 1: slots[0] = args[1]; /* fall through */
    default: break;
    }
    if (kwnames != NULL) {
        const Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
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
                PyErr_Format(PyExc_TypeError, "%S() got an unexpected keyword argument '%S'", rd_method_name(m), key);
                return NULL;
            }
            if (slots[found] != NULL) {
                PyErr_Format(PyExc_TypeError, "%S() got multiple values for argument '%S'", rd_method_name(m),
                             key);
                return NULL;
            }
            slots[found] = args[nargs + k];
        }
    }
    for (i = (int)given; i < m->n_required; ++i) {
        if (slots[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "%S() missing required argument '%S' (pos %d)", rd_method_name(m),
                         PyTuple_GET_ITEM(m->names, i), i + 1);
            return NULL;
        }
    }
    return m->dispatch(args[0], m->index, slots);
}

static PyObject *rd_method_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    if (obj == NULL || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, obj);
}

static void rd_method_dealloc(rd_method_object *m)
{
    Py_XDECREF(m->names);
    Py_XDECREF(m->dict);
    Py_XDECREF((PyObject *)m->owner);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static PyObject *rd_method_repr(rd_method_object *m)
{
    PyObject *qualname = m->dict ? PyDict_GetItemString(m->dict, "__qualname__") : NULL;
    return PyUnicode_FromFormat("<robodyn routine %S>", qualname ? qualname : rd_method_name(m));
}

static PyTypeObject rd_method_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "robodyn._native.routine_method",
    .tp_basicsize = sizeof(rd_method_object),
    .tp_dealloc = (destructor)rd_method_dealloc,
    .tp_vectorcall_offset = offsetof(rd_method_object, vectorcall),
    .tp_repr = (reprfunc)rd_method_repr,
    .tp_call = PyVectorcall_Call,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_METHOD_DESCRIPTOR | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A compiled routine of robodyn.Robot (see robodyn.routines).",
    .tp_descr_get = rd_method_get,
    .tp_dictoffset = offsetof(rd_method_object, dict),
};

static int rd_method_ready(void)
{
    return PyType_Ready(&rd_method_type);
}

/* A new method object; names: tuple of n_args str (interned here). */
static PyObject *rd_method_new(int index, PyObject *names, int n_required, PyTypeObject *owner,
                               rd_dispatch_fn dispatch)
{
    Py_ssize_t n_args = PyTuple_Size(names);
    if (n_args < 0)
        return NULL;
    if (n_args > RD_METHOD_MAX_ARGS || n_required < 0 || n_required > n_args) {
        PyErr_SetString(PyExc_ValueError, "routine method: too many arguments or bad required count");
        return NULL;
    }
    PyObject *interned = PyTuple_New(n_args);
    if (interned == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n_args; ++i) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        if (!PyUnicode_CheckExact(name)) {
            Py_DECREF(interned);
            PyErr_SetString(PyExc_TypeError, "routine method: argument names must be str");
            return NULL;
        }
        Py_INCREF(name);
        PyUnicode_InternInPlace(&name);
        PyTuple_SET_ITEM(interned, i, name);
    }
    rd_method_object *m = PyObject_New(rd_method_object, &rd_method_type);
    if (m == NULL) {
        Py_DECREF(interned);
        return NULL;
    }
    m->vectorcall = rd_method_vectorcall;
    m->index = index;
    m->n_args = (int)n_args;
    m->n_required = n_required;
    m->names = interned;
    m->dict = PyDict_New();
    Py_INCREF((PyObject *)owner);
    m->owner = owner;
    m->dispatch = dispatch;
    if (m->dict == NULL) {
        Py_DECREF((PyObject *)m);
        return NULL;
    }
    return (PyObject *)m;
}

#endif
