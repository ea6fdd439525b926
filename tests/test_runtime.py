"""The runtime API: argument validation, out= buffers, parameters, GIL modes, threads."""

from __future__ import annotations

import sys
import threading
import warnings

import numpy as np
import pytest

import robodyn


@pytest.fixture
def rr(load):
    return load("rr")


def _state():
    return np.array([0.3, -0.5]), np.array([1.0, 2.0]), np.array([0.1, -0.2])


def _rr_closed_form(p, q, qd):
    """The notes' planar 2R arm written out in NumPy (independent of codegen): M, C, g, friction,
    kinetic and potential energy, tool pose and Jacobian. p: parameter values by name."""
    m1, m2, a1, a2, ac1, ac2, I1, I2, g0, D = (p[k] for k in ("m1", "m2", "a1", "a2", "ac1", "ac2", "I1", "I2",
                                                                "g0", "D"))
    c1, s1, c2, s2 = np.cos(q[0]), np.sin(q[0]), np.cos(q[1]), np.sin(q[1])
    c12, s12 = np.cos(q[0] + q[1]), np.sin(q[0] + q[1])
    M = np.array([[m1 * ac1**2 + m2 * (a1**2 + ac2**2 + 2 * a1 * ac2 * c2) + I1 + I2, m2 * (ac2**2 + a1 * ac2 * c2) + I2],
                  [m2 * (ac2**2 + a1 * ac2 * c2) + I2, m2 * ac2**2 + I2]])
    h = -m2 * a1 * ac2 * s2
    C = np.array([[h * qd[1], h * (qd[0] + qd[1])], [-h * qd[0], 0.0]])
    g = np.array([(m1 * ac1 + m2 * a1) * g0 * c1 + m2 * g0 * ac2 * c12, m2 * g0 * ac2 * c12])
    pose = np.array([[c12, -s12, 0, a1 * c1 + a2 * c12], [s12, c12, 0, a1 * s1 + a2 * s12], [0, 0, 1, 0], [0, 0, 0, 1]])
    jacobian = np.array([[-a1 * s1 - a2 * s12, -a2 * s12], [a1 * c1 + a2 * c12, a2 * c12], [0, 0], [0, 0], [0, 0],
                         [1, 1]])
    potential = g0 * (m1 * ac1 * s1 + m2 * (a1 * s1 + ac2 * s12))  # gravity along -y, zero at the base's height
    return {"M": M, "C": C, "g": g, "friction": D * qd, "kinetic_energy": 0.5 * qd @ M @ qd,
            "potential_energy": potential, "fk": pose, "jacobian": jacobian}


def test_every_routine_matches_the_closed_form(rr):
    """Each routine of the 2R arm, at states and parameters away from the defaults, against the NumPy
    closed form: the call path (argument order, output layout, parameters) of every routine."""
    rng = np.random.default_rng(7)
    for _ in range(10):
        values = {name: rng.uniform(0.5, 3.0) for name in rr.params}
        rr.params.update(values)
        q, qd, qdd, tau = rng.uniform(-3, 3, (4, 2))
        h = rng.normal(0, 5, 6)
        ref = _rr_closed_form(values, q, qd)
        for method in ("M", "g", "fk", "jacobian"):
            np.testing.assert_allclose(getattr(rr, method)(q), ref[method], rtol=1e-12, atol=1e-12, err_msg=method)
        np.testing.assert_allclose(rr.C(q, qd), ref["C"], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(rr.friction(qd), ref["friction"], rtol=1e-12, atol=1e-12)
        assert rr.kinetic_energy(q, qd) == pytest.approx(ref["kinetic_energy"], rel=1e-12)
        assert rr.potential_energy(q) == pytest.approx(ref["potential_energy"], rel=1e-12, abs=1e-12)
        bias = ref["C"] @ qd + ref["g"] + ref["friction"]
        np.testing.assert_allclose(rr.nonlinear_effects(q, qd), bias, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(rr.inverse_dynamics(q, qd, qdd, h), ref["M"] @ qdd + bias - ref["jacobian"].T @ h,
                                   rtol=1e-11, atol=1e-11)
        np.testing.assert_allclose(rr.forward_dynamics(q, qd, tau, h),
                                   np.linalg.solve(ref["M"], tau + ref["jacobian"].T @ h - bias), rtol=1e-11, atol=1e-11)


def test_readme_example(rr):
    q, qd, qdd = _state()
    assert rr.n == 2 and rr.joint_names == ("shoulder", "elbow")
    ref = _rr_closed_form(rr.params, q, qd)
    np.testing.assert_allclose(rr.M(q), ref["M"], rtol=1e-13)
    np.testing.assert_allclose(rr.C(q, qd), ref["C"], rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(rr.g(q), ref["g"], rtol=1e-13)
    tau = rr.inverse_dynamics(q, qd, qdd)
    np.testing.assert_allclose(tau, ref["M"] @ qdd + ref["C"] @ qd + ref["g"], rtol=1e-13)
    np.testing.assert_allclose(rr.forward_dynamics(q, qd, tau), qdd, rtol=1e-12, atol=1e-12)
    before = rr.M(q)
    rr.params["m2"] = 80.0
    np.testing.assert_allclose(rr.M(q), _rr_closed_form(rr.params, q, qd)["M"], rtol=1e-13)  # takes effect at once
    rr.params.reset()
    np.testing.assert_array_equal(rr.M(q), before)
    assert "rr" in repr(rr)


@pytest.mark.parametrize("bad, error", [
    (np.array([1, 2]), TypeError),                       # integer dtype
    (np.array([1.0, 2.0], dtype=np.float32), TypeError),  # wrong float dtype
    (np.array([1.0, 2.0, 3.0]), ValueError),              # wrong length
    (np.zeros((2, 2, 2)), ValueError),                    # wrong rank
    (np.array([np.nan, 0.0]), ValueError),
    (np.array([0.0, np.inf]), ValueError),
    (np.arange(4.0)[::2], ValueError),                    # not contiguous
    (np.array([1.0, 2.0]).astype(">f8"), ValueError),     # byte-swapped
    ("q", TypeError),
    (None, TypeError),
    (3.0, TypeError),
    ([1.0, "x"], TypeError),
])
def test_bad_inputs_raise(rr, bad, error):
    q, qd, qdd = _state()
    with pytest.raises(error):
        rr.M(bad)
    with pytest.raises(error):
        rr.inverse_dynamics(q, bad, qdd)
    with pytest.raises(error):
        rr.forward_dynamics(q, qd, bad)


def test_lists_are_accepted(rr):
    q, qd, qdd = _state()
    np.testing.assert_array_equal(rr.inverse_dynamics(list(q), tuple(qd), list(qdd)), rr.inverse_dynamics(q, qd, qdd))


def test_wrench_shape_checked(rr):
    q, qd, qdd = _state()
    with pytest.raises(ValueError):
        rr.inverse_dynamics(q, qd, qdd, np.zeros(5))
    with pytest.raises(ValueError):
        rr.inverse_dynamics(q, qd, qdd, np.array([0, 0, np.nan, 0, 0, 0.0]))


def test_out_buffers(rr):
    q, qd, qdd = _state()
    out = np.empty(2)
    result = rr.inverse_dynamics(q, qd, qdd, out=out)
    assert result is out
    np.testing.assert_array_equal(out, rr.inverse_dynamics(q, qd, qdd))
    M = np.empty((2, 2))
    assert rr.M(q, out=M) is M
    with pytest.raises(ValueError):
        rr.M(q, out=np.empty(4))                 # wrong shape
    with pytest.raises(ValueError):
        rr.M(q, out=np.empty((2, 2), order="F")[:, :1])
    with pytest.raises(TypeError):
        rr.g(q, out=np.empty(2, dtype=np.float32))
    with pytest.raises(TypeError):
        rr.g(q, out=[0.0, 0.0])
    read_only = np.empty(2)
    read_only.flags.writeable = False
    with pytest.raises(ValueError):
        rr.g(q, out=read_only)
    with pytest.raises(ValueError):               # aliasing an input
        rr.forward_dynamics(q, qd, qdd, out=qd)
    energy = np.empty(1)
    assert rr.kinetic_energy(q, qd, out=energy) is energy
    assert energy[0] == pytest.approx(0.5 * qd @ rr.M(q) @ qd, rel=1e-14)



def test_keyword_arguments_in_every_arrangement(load):
    """The methods take their parameters by position, by keyword, or both (robodyn_method.h reads trailing keywords
    in parameter order in place, and sorts any other arrangement into slots, keeping each call site's layout): every
    arrangement gives the same
    result, and the ones Python would refuse are refused with Python's messages."""
    robot = load("puma560")
    n = robot.n
    rng = np.random.default_rng(11)
    q, qd, qdd, h = rng.uniform(-1.0, 1.0, n), rng.uniform(-1.0, 1.0, n), rng.uniform(-1.0, 1.0, n), rng.uniform(
        -1.0, 1.0, 6)
    expected = robot.inverse_dynamics(q, qd, qdd, h)
    without_h = robot.inverse_dynamics(q, qd, qdd)
    assert np.abs(without_h - expected).max() > 1e-3  # h matters, so a slot read wrongly shows
    out_name = "".join(["o", "ut"])  # a keyword that is equal to, but not the same object as, the interned name
    arrangements = [
        ((q, qd, qdd, h), {"out": None}),
        ((q, qd, qdd), {"h": h, "out": None}),
        ((q, qd, qdd), {"out": None, "h": h}),  # keywords out of parameter order
        ((), {"q": q, "qd": qd, "qdd": qdd, "h": h, "out": None}),
        ((), {"out": None, "h": h, "qdd": qdd, "qd": qd, "q": q}),
        ((q, qd, qdd, h), {out_name: None}),
    ]
    for args, kwargs in arrangements:
        out = np.empty(n)
        kwargs = {key: (out if value is None else value) for key, value in kwargs.items()}
        assert robot.inverse_dynamics(*args, **kwargs) is out, kwargs.keys()
        np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-13)
    for _ in range(2):  # literal call sites (one constant names tuple each), each twice: in-order ones are remembered
        for _ in range(2):
            out = np.empty(n)
            assert robot.inverse_dynamics(q, qd, qdd, h=h, out=out) is out
            np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-13)
        for _ in range(2):
            out = np.full(n, 0.5)
            assert robot.inverse_dynamics(q, qd, qdd, out=out, h=h) is out
            np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-13)
        for _ in range(2):
            out = np.empty(n)
            assert robot.inverse_dynamics(q, qd, qdd=qdd, h=h, out=out) is out
            np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-13)
        # One names tuple, ('out',), at two call sites with different positional counts, the second leaving h out
        # (a layout with a gap): each site's layout is its own, whichever ran last.
        for _ in range(2):
            out = np.empty(n)
            assert robot.inverse_dynamics(q, qd, qdd, h, out=out) is out
            np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-13)
            out = np.full(n, 0.5)
            assert robot.inverse_dynamics(q, qd, qdd, out=out) is out
            np.testing.assert_allclose(out, without_h, rtol=1e-13, atol=1e-13)
            out = np.empty(n)
            assert robot.inverse_dynamics(q, qd, qdd=qdd, out=out) is out
            np.testing.assert_allclose(out, without_h, rtol=1e-13, atol=1e-13)
    out = np.empty((n, n))
    assert robot.M(q, out=out) is out and robot.M(q=q, out=out) is out and robot.M(out=out, q=q) is out
    np.testing.assert_allclose(out, robot.M(q), rtol=0, atol=0)
    with pytest.raises(TypeError, match="multiple values for argument 'q'"):
        robot.M(q, q=q)
    with pytest.raises(TypeError, match="multiple values for argument 'out'"):
        robot.M(q, out, out=out)
    with pytest.raises(TypeError, match="unexpected keyword argument 'outt'"):
        robot.M(q, outt=out)
    with pytest.raises(TypeError, match="missing required argument 'qd'"):
        robot.inverse_dynamics(q, qdd=qdd, out=np.empty(n))

def test_calls_read_in_place_with_inputs_left_out_and_fall_back_with_every_parameter(load):
    """Calls that leave optional inputs out (h of the inverse dynamics), by position or with keywords naming the
    following parameters in order, are read where the interpreter put them (robodyn_method.h: n_given inputs, then
    out). The same calls with a list among the inputs take the general path, which must get every parameter in its
    place (h None, out the given array): a value read from the wrong place shows in the torques."""
    robot = load("puma560")
    n = robot.n
    rng = np.random.default_rng(5)
    q, qd, qdd = (rng.uniform(-1.0, 1.0, n) for _ in range(3))
    h = rng.uniform(-1.0, 1.0, 6)
    expected, with_h = robot.inverse_dynamics(q, qd, qdd), robot.inverse_dynamics(q, qd, qdd, h)
    assert np.abs(expected - with_h).max() > 1e-3
    for as_given in (lambda x: x, list):  # arrays: the fast path; a list: the general path
        q_in = as_given(q)
        for _ in range(2):  # each call site twice: the second reads the layout the first kept
            np.testing.assert_allclose(robot.inverse_dynamics(q_in, qd, qdd), expected, rtol=1e-13, atol=1e-13)
            np.testing.assert_allclose(robot.inverse_dynamics(q_in, qd, qdd=qdd), expected, rtol=1e-13, atol=1e-13)
            np.testing.assert_allclose(robot.inverse_dynamics(q=q_in, qd=qd, qdd=qdd), expected, rtol=1e-13,
                                       atol=1e-13)
            out = np.full(n, 0.5)
            assert robot.inverse_dynamics(q_in, qd, qdd, out=out) is out
            np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-13)
            out = np.full(n, 0.5)
            assert robot.inverse_dynamics(q_in, qd, qdd=qdd, out=out) is out
            np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-13)
            out = np.full(n, 0.5)
            assert robot.inverse_dynamics(q_in, qd, qdd, h=h, out=out) is out
            np.testing.assert_allclose(out, with_h, rtol=1e-13, atol=1e-13)
            np.testing.assert_allclose(robot.g(q=q_in), robot.g(q), rtol=0, atol=0)
        with pytest.raises(TypeError, match="missing required argument 'qdd'"):
            robot.inverse_dynamics(q_in, qd, out=np.empty(n))


def test_routine_methods_on_the_class(rr):
    """What the class holds (robodyn_method.h's rd_routine_slot) behaves as the method descriptor it stands for:
    called with a robot first it is the method; with anything else, or nothing, it refuses as the descriptor does;
    attribute access gives the descriptor and bound methods; it cannot be instantiated or subclassed."""
    q = np.array([0.3, -0.5])
    raw = vars(robodyn.Robot)["g"]
    np.testing.assert_array_equal(raw(rr, q), rr.g(q))
    out = np.empty(2)
    assert raw(rr, q, out=out) is out
    with pytest.raises(TypeError, match="descriptor 'g'.*'int'"):
        raw(5, q)
    with pytest.raises(TypeError, match=r"Robot.g\(\) needs an argument"):
        raw()
    assert type(robodyn.Robot.g).__name__ == "method_descriptor"
    assert robodyn.Robot.g.__get__(rr) == rr.g and rr.g.__self__ is rr
    assert type(rr.g).__name__ == "builtin_function_or_method"
    np.testing.assert_array_equal(rr.g(q), robodyn.Robot.g(rr, q))
    with pytest.raises(TypeError):
        type(raw)()
    with pytest.raises(TypeError):
        type(raw)("subclass", (raw,), {})
    with pytest.raises(TypeError):
        class Subclass(raw):  # noqa: F841 (the class statement is what must fail)
            pass


def test_an_empty_keyword_names_tuple_is_a_call_by_position(rr):
    """The vectorcall protocol lets a caller pass an empty tuple of keyword names instead of none (C extensions,
    Cython): such a call is a call by position, every time (a remembered layout once read `out` as an input)."""
    import ctypes

    vectorcall = getattr(ctypes.pythonapi, "PyObject_Vectorcall", None)
    if vectorcall is None:  # CPython 3.10 defines it inline only
        pytest.skip("this CPython exports no PyObject_Vectorcall")
    vectorcall.restype = ctypes.py_object
    vectorcall.argtypes = [ctypes.py_object, ctypes.c_void_p, ctypes.c_size_t, ctypes.py_object]

    def call(function, *args):
        array = (ctypes.py_object * len(args))(*args)
        return vectorcall(function, ctypes.cast(array, ctypes.c_void_p), len(args), ())

    q = np.array([0.3, -0.5])
    for function in (rr.g, vars(robodyn.Robot)["g"]):
        first = (rr,) if function is vars(robodyn.Robot)["g"] else ()
        for _ in range(3):
            out = np.zeros(2)
            assert call(function, *first, q, out) is out
            np.testing.assert_array_equal(out, rr.g(q))
            with pytest.raises(TypeError, match="out"):
                call(function, *first, q, "not an array")


def test_methods_installed_on_a_second_class_leave_the_first_ones_working(rr):
    """robodyn.Robot holds each index's type object (robodyn_method.h); installing the table on another class
    gives that class plain method descriptors, and Robot's methods keep working for Robot's instances."""
    from robodyn import routines
    from robodyn.robot import install

    class Other(robodyn.Robot):
        pass

    q = np.array([0.3, -0.5])
    expected = rr.g(q)
    install(Other, routines.TABLE)
    assert vars(Other)["g"] is not vars(robodyn.Robot)["g"]
    np.testing.assert_array_equal(rr.g(q), expected)
    np.testing.assert_array_equal(robodyn.Robot.g(rr, q), expected)
    other = Other.from_extension(rr.extension)
    np.testing.assert_array_equal(other.g(q), expected)
    out = np.empty(2)
    assert other.g(q, out=out) is out
    with pytest.raises(TypeError, match="doesn't apply"):
        Other.g(rr, q)


@pytest.mark.skipif(sys.version_info[:2] not in ((3, 11), (3, 12)), reason="the specialised opcodes of CPython 3.11/3.12")
def test_calls_with_keywords_take_the_interpreters_fast_path(rr):
    """CPython 3.11 and 3.12 specialise `robot.g(q, out=o)` as a call of a built-in class (robodyn_method.h), where a
    method descriptor called with keywords stays on the generic path (about 120 instructions more a call)."""
    import dis

    q, o = np.zeros(2), np.empty(2)

    def calls(robot):
        robot.inverse_dynamics(q, q, q, out=o)
        robot.inverse_dynamics(q, q, q, None, o)
        robot.M(q)

    for _ in range(64):  # past the adaptive counters' warm-up
        calls(rr)
    specialised = "PRECALL_BUILTIN_CLASS" if sys.version_info[:2] == (3, 11) else "CALL_BUILTIN_CLASS"
    names = [i.opname for i in dis.get_instructions(calls, adaptive=True)]
    assert names.count(specialised) == 3, names


@pytest.mark.parametrize("name", ["rr", "puma560"])  # 2 joints: the scalar finiteness sum; 6: the paired one
def test_out_overlapping_an_input_is_refused_however_the_arrays_are_made(load, name):
    """The fast path's overlap test takes two routes (robodyn_call.h): arrays that all own their data are compared
    as objects, anything else by address range. Both must refuse exactly the overlapping cases, and every
    refused call must leave the general path's error (ValueError), not a wrong result."""
    robot = load(name)
    n = robot.n
    rng = np.random.default_rng(7)
    q, qd, qdd = (rng.uniform(-1.0, 1.0, n) for _ in range(3))
    expected = robot.inverse_dynamics(q, qd, qdd)
    buffer = np.zeros(4 * n)
    cases = {  # name: (q, qd, qdd, out, overlapping)
        "owning, distinct": (q, qd, qdd, np.empty(n), False),
        "out is an input": (q, qd, qdd.copy(), None, True),
        "views, adjacent": (buffer[:n], qd, qdd, buffer[n:2 * n], False),
        "views, one value shared": (buffer[:n], qd, qdd, buffer[n - 1:2 * n - 1], True),
        "views, out before the input": (q, buffer[n:2 * n], qdd, buffer[1:n + 1], True),
        "owning out, an input its view": (None, qd, qdd, np.empty(n), True),
    }
    for label, (a, b, c, out, overlapping) in cases.items():
        if label == "out is an input":
            out = c
        if a is None:
            a = out[:]
        buffer[:] = 0.0
        a[:], b[:], c[:] = q, qd, qdd  # the values the expected torques were computed from
        if overlapping:
            with pytest.raises(ValueError, match="overlap|share|alias"):
                robot.inverse_dynamics(a, b, c, None, out)
        else:
            assert robot.inverse_dynamics(a, b, c, None, out) is out, label
            np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-13, err_msg=label)
    # The wrench h not given (NULL in the kernel) overlaps nothing.
    out = np.empty(n)
    assert robot.inverse_dynamics(q, qd, qdd, out=out) is out


@pytest.mark.parametrize("name", ["rr", "puma560"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_value_anywhere_is_refused(load, name, bad):
    """Every value of every argument goes through the finiteness check (the paired sum reads 4 to 8 values as two
    overlapping windows of four: each position must be covered)."""
    robot = load(name)
    n = robot.n
    for argument in range(3):
        for position in range(n):
            values = [np.full(n, 0.25) for _ in range(3)]
            values[argument][position] = bad
            with pytest.raises(ValueError, match="finite|NaN|nan|inf"):
                robot.inverse_dynamics(*values, None, np.empty(n))


def test_a_float64_dtype_other_than_numpys_own_is_accepted(rr):
    """The fast path compares an array's dtype with NumPy's float64 descriptor first (robodyn_call.h,
    rd_array_data); a native float64 dtype that is another object (here one with metadata) must still be
    accepted, as input and as out, with the same results (by the fast path or the general one)."""
    q, qd, qdd = _state()
    other = np.dtype(np.float64, metadata={"unit": "rad"})
    assert other is not np.dtype(np.float64)
    expected = rr.inverse_dynamics(q, qd, qdd).copy()
    np.testing.assert_array_equal(rr.inverse_dynamics(q.astype(other), qd.astype(other), qdd.astype(other)), expected)
    out = np.zeros(2, dtype=other)
    assert rr.inverse_dynamics(q, qd, qdd, None, out) is out
    np.testing.assert_array_equal(out, expected)


def test_allocating_calls_reuse_only_results_nobody_references(rr):
    """An allocating call may return an array of an earlier call (robodyn_call.h, rd_spare_take) only when nothing
    else can see it: not while a variable, a view, a weak reference or a buffer export holds it, and not once its
    flags, shape or dtype were changed. Whatever it returns holds this call's values."""
    import gc
    import weakref

    # Unlike rr, a copy holds no results of earlier tests kept for reuse: which array a call reuses depends on them.
    rr = rr.copy()
    q, qd, qdd = _state()
    expected = rr.M(q).copy()
    first = rr.M(q)
    first_id = id(first)
    second = rr.M(q + 1.0)
    assert second is not first and np.array_equal(first, expected)  # held: never written again
    del first
    gc.collect()
    third = rr.M(q)
    assert id(third) == first_id  # freed by the caller: reused (the point of it)
    np.testing.assert_array_equal(third, expected)

    def fresh_after(hold):
        """Whether a call made while ``hold(result)`` keeps something on an earlier result returns another array."""
        result = rr.M(q + 2.0)
        address = result.__array_interface__["data"][0]
        keeper = hold(result)
        del result
        others = [rr.M(q + 3.0) for _ in range(3)]  # each held: the spares are tried, then new arrays made
        fresh = all(o.__array_interface__["data"][0] != address for o in others)
        del keeper
        return fresh

    assert fresh_after(lambda a: a[0])                # a view references its base
    assert fresh_after(memoryview)                    # a buffer export references its exporter
    assert fresh_after(weakref.ref)                   # a weak reference would see it change
    assert fresh_after(lambda a: a)                   # held outright

    def changed(change):
        result = rr.M(q)
        change(result)
        identity = id(result)
        del result
        return id(rr.M(q)) != identity

    def read_only(a):
        a.flags.writeable = False

    def reshaped(a):  # in place, as users may still do it (NumPy 2.5 deprecates setting .shape)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            a.shape = (4,)

    assert changed(read_only) and changed(reshaped)
    out = rr.M(q)
    assert out.flags.writeable and out.shape == (2, 2) and out.dtype == np.float64

    # Several outputs: the tuple is reused only with every array in it free.
    derivatives = rr.inverse_dynamics_derivatives(q, qd, qdd)
    reference = [d.copy() for d in derivatives]
    kept = derivatives[0]
    del derivatives
    again = rr.inverse_dynamics_derivatives(q, qd, qdd)
    assert again[0] is not kept
    assert all(np.array_equal(d, r) for d, r in zip(again, reference))  # (a loop variable would hold an array)
    identity = id(again)
    del again, kept
    reused = rr.inverse_dynamics_derivatives(q, qd, qdd)
    assert id(reused) == identity
    assert all(np.array_equal(d, r) for d, r in zip(reused, reference))


def test_reused_results_are_not_shared_between_threads(rr):
    """With the GIL released around the kernel, a thread must not claim an array another one is writing: each
    thread's results match its own inputs."""
    rr.release_gil = True
    try:
        rng = np.random.default_rng(3)
        states = rng.uniform(-2, 2, (4, 200, 3, 2))
        expected = [[rr.inverse_dynamics(*s).copy() for s in states[i]] for i in range(4)]
        failures = []

        def work(i):
            try:
                for _ in range(20):
                    for s, e in zip(states[i], expected[i]):
                        if not np.array_equal(rr.inverse_dynamics(*s), e):
                            failures.append(i)
            except Exception as exc:  # noqa: BLE001 - a thread's exception would otherwise only be printed
                failures.append(repr(exc))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
    finally:
        rr.release_gil = "auto"

def test_batches(rr):
    rng = np.random.default_rng(0)
    Q, QD = rng.normal(size=(5, 2)), rng.normal(size=(5, 2))
    out = np.empty((5, 2, 2))
    assert rr.M(Q, out=out) is out
    # Every row of a batch is that state's value (not only the right shape): checked against the
    # closed form, so a wrong row stride in any output layout ((n, n), (n,), (), (4, 4), (6, n)) fails.
    rr.params["D"] = 3.0  # friction on, so its batch is not all zeros
    reference = [_rr_closed_form(rr.params, q, qd) for q, qd in zip(Q, QD)]
    batched = {"M": out, "C": rr.C(Q, QD), "g": rr.g(Q), "friction": rr.friction(QD),
               "kinetic_energy": rr.kinetic_energy(Q, QD), "potential_energy": rr.potential_energy(Q),
               "fk": rr.fk(Q), "jacobian": rr.jacobian(Q)}
    for name, values in batched.items():
        expected = np.array([ref[name] for ref in reference])
        assert values.shape == expected.shape, name
        np.testing.assert_allclose(values, expected, rtol=1e-12, atol=1e-12, err_msg=name)
    assert rr.jacobian(Q).shape == (5, 6, 2)
    jacobian_out = np.empty((5, 6, 2))
    assert rr.jacobian(Q, out=jacobian_out) is jacobian_out
    np.testing.assert_array_equal(jacobian_out, batched["jacobian"])
    with pytest.raises(ValueError):
        rr.C(Q, QD[:4])                          # batch sizes differ
    with pytest.raises(ValueError):
        rr.C(Q, QD[0])                           # batch mixed with a single state
    with pytest.raises(ValueError):
        rr.M(Q, out=np.empty((4, 2, 2)))


def test_parameters_mapping(rr):
    assert list(rr.params) == ["m1", "m2", "a1", "a2", "ac1", "ac2", "I1", "I2", "g0", "D"]
    assert rr.params["m1"] == 50.0
    with pytest.raises(KeyError, match="unknown parameter"):
        rr.params["m3"] = 1.0
    with pytest.raises(ValueError):
        rr.params["m1"] = float("nan")
    with pytest.raises(TypeError):
        rr.params["m1"] = "heavy"
    with pytest.raises(TypeError):
        del rr.params["m1"]
    q = np.array([0.3, 0.2])
    rr.params["g0"] = 2 * 9.81
    np.testing.assert_allclose(rr.g(q), _rr_closed_form(rr.params, q, np.zeros(2))["g"], rtol=1e-13)
    rr.params["g0"] = 0.0
    np.testing.assert_array_equal(rr.g(q), [0.0, 0.0])


def test_singular_mass_matrix_is_an_exception(rr):
    q, qd, qdd = _state()
    rr.params.update(m1=0.0, m2=0.0, I1=0.0, I2=0.0)
    with pytest.raises(ValueError, match="positive definite"):
        rr.forward_dynamics(q, qd, qdd)


def test_copies_have_independent_parameters(rr):
    other = rr.copy()
    other.params["m2"] = 1.0
    assert rr.params["m2"] == 50.0
    q, qd, _ = _state()
    np.testing.assert_allclose(other.M(q), _rr_closed_form(other.params, q, qd)["M"], rtol=1e-13)
    np.testing.assert_allclose(rr.M(q), _rr_closed_form(rr.params, q, qd)["M"], rtol=1e-13)
    assert not np.allclose(other.M(q), rr.M(q))


@pytest.mark.parametrize("mode", [True, False, "auto"])
def test_gil_modes_give_identical_results(rr, mode):
    q, qd, qdd = _state()
    reference = rr.inverse_dynamics(q, qd, qdd)
    rr.release_gil = mode
    try:
        assert rr.release_gil == mode
        np.testing.assert_array_equal(rr.inverse_dynamics(q, qd, qdd), reference)
    finally:
        rr.release_gil = "auto"
    with pytest.raises(ValueError):
        rr.release_gil = "sometimes"


def test_threads_share_a_robot(rr):
    rng = np.random.default_rng(1)
    Q = rng.normal(size=(2000, 2))
    expected = rr.M(Q)
    results = [None] * 4

    def work(i):
        results[i] = rr.M(Q)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for result in results:
        np.testing.assert_array_equal(result, expected)


def test_metadata_and_selfcheck(rr):
    assert rr.metadata["robot"] == "rr"
    assert rr.metadata["generator_version"]
    assert len(rr.metadata["source_sha256"]) == 64
    assert rr.selfcheck["passed"] is True
    assert {c["name"] for c in rr.selfcheck["checks"]} >= {"skew", "inverse_forward", "compiled_vs_symbolic_mass_matrix"}


def test_load_reports_bad_description(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\njoints: []\n")
    with pytest.raises(robodyn_error()):
        robodyn.load(bad, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def robodyn_error():
    from codegen import DescriptionError

    return DescriptionError
