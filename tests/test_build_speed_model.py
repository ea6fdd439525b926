"""The build's shortcuts give what the slower code they replaced gave:

* the transforms and products spelled out on lists (``recursive._dot``, ``_rows_times``, ``_product``,
  ``_motion_to_child``, ``rnea_derivatives._motion_rows``) build the very expressions SymPy's matrix products
  build (same terms, same order: the generated C is byte for byte the same);
* the self-check's shared printer (``numeric.NumPyPrograms``: each definition printed once, for every function
  that reads it) evaluates as separate functions do, whichever argument an input comes in;
* ``program.needed_definitions`` (its free-symbol cache is keyed by values, not names) is right for two programs
  whose intermediates have the same names and different values;
* ``regressor._precise_combinations``: a dependent column whose support misses a coefficient below the numerical
  fit's noise is solved again on every independent column and gets it; one whose support fits keeps its exact
  coefficients;
* ``regressor._matrix_function`` (K as floats, its zeros skipped) gives K's entries.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import sympy as sp

from codegen.model import program
from codegen.model.numeric import NumPyPrograms, numpy_function
from codegen.model.recursive import _dot, _motion_to_child, _product, _rows_times, force_cross, motion_cross
from codegen.model.regressor import _matrix_function, _precise_combinations
from codegen.model.rnea_derivatives import _motion_rows

A = sp.symbols("a0:6", real=True)
B = sp.symbols("b0:6", real=True)


def _same(x: sp.MatrixBase, y) -> bool:
    """Entry by entry the same expression tree (``srepr``: argument order included)."""
    return [sp.srepr(e) for e in sp.Matrix(x)] == [sp.srepr(e) for e in sp.Matrix(y)]


def _mixed_vector(rng, symbols) -> sp.Matrix:
    """Symbols, zeros, integers, rationals and floats, as a model's vectors have them."""
    choices = [lambda s: s, lambda s: sp.Integer(0), lambda s: sp.Integer(2) * s, lambda s: sp.Rational(3, 7),
               lambda s: sp.Float(0.0825) * s, lambda s: s + sp.Float(-1.5)]
    return sp.Matrix([choices[int(rng.integers(len(choices)))](s) for s in symbols])


def test_list_products_build_the_expressions_of_the_matrix_products():
    rng = np.random.default_rng(3)
    for _ in range(20):
        a, b = _mixed_vector(rng, A), _mixed_vector(rng, B)
        M = motion_cross(a)
        assert _same(M * b, _rows_times(M.tolist(), b))
        assert _same(force_cross(a) * b, _rows_times(force_cross(a).tolist(), b))
        assert _same(M * b, _rows_times(_motion_rows(a), b))
        rows = _motion_rows(a)
        assert _same(force_cross(a) * b, _rows_times([[-rows[c][r] for c in range(6)] for r in range(6)], b))
        block = sp.Matrix(6, 10, lambda i, j: b[(i + j) % 6] * (j + 1) if (i * j) % 3 else 0)
        assert _same(force_cross(a) * block, _product(force_cross(a), block))
        assert _dot(list(a), list(b)) == (a.T * b)[0, 0]
        R, p = sp.Matrix(3, 3, list(b[:3]) + list(a[:3]) + [0, 1, b[5]]), a[3:, 0]
        w, v = b[:3, 0], b[3:, 0]
        expected = sp.Matrix([*(R.T * w), *(R.T * (v - p.cross(w)))])
        assert _same(expected, _motion_to_child(R, p, b))


def test_shared_printer_evaluates_as_separate_functions():
    q, qd, p = sp.symbols("q0:3", real=True), sp.symbols("qd0:3", real=True), sp.symbols("m0:2", real=True)
    w = sp.symbols("w0:4", real=True)
    definitions = [(w[0], sp.sin(q[0]) * p[0]), (w[1], w[0] * qd[1] + q[2] ** 2), (w[2], w[1] / (2 + q[1] ** 2)),
                   (w[3], w[2] - sp.Rational(1, 3) * p[1])]
    outputs = [[w[3], w[1] + qd[0], sp.Integer(0)], [w[2] * w[0], sp.Float(0.125), q[1]]]
    rng = np.random.default_rng(1)
    values = {"q": rng.normal(size=(3, 5)), "qd": rng.normal(size=(3, 5))}
    params = np.array([1.5, -0.25])
    shared = NumPyPrograms()
    layouts = [(q, qd), (qd, q)]  # an input in either argument: the names do not depend on the position
    for entries in outputs:
        prelude = program.needed_definitions(definitions, entries)
        for layout in layouts:
            arguments = [list(s) for s in layout] + [list(p)]
            inputs = [values["q" if s is q else "qd"] for s in layout]
            alone = numpy_function(arguments, prelude, entries)(*inputs, params)
            together = shared.function(arguments, prelude, entries)(*inputs, params)
            for x, y in zip(alone, together):
                assert np.array_equal(np.broadcast_to(x, (5,)), np.broadcast_to(y, (5,)))
    assert len(shared._lines) == len(definitions)  # each definition printed once


def test_needed_definitions_of_programs_with_the_same_names():
    x, y = sp.symbols("x y", real=True)
    first, second = program.Program(), program.Program()
    a = first.let(sp.sin(x) * y)
    first.let(a * x + 1)
    out_first = first.let(a ** 2 + y)
    b = second.let(sp.cos(y) + x)
    c = second.let(b * y - x)
    out_second = second.let(c + b * x)
    assert out_first.name == out_second.name  # w2 in both, reading w0 in one and w0, w1 in the other
    for _ in range(2):  # again, from the cache
        assert program.needed_definitions(first.definitions, [out_first]) == [first.definitions[0],
                                                                              first.definitions[2]]
        assert program.needed_definitions(second.definitions, [out_second]) == list(second.definitions)


def _fake_description(n: int):
    return SimpleNamespace(n=n, floating_base=None, parameters=())


def test_precise_combinations_recover_a_coefficient_below_the_fit_noise():
    """Columns c0 ... c3 of a fake regressor (functions of the states), c4 = 2 c0 + 3/8 c1 and c5 = c0 + 1e-12 c2:
    the support of c5 given without c2 (as a float fit that zeroes coefficients under 1e-9 gives it) does not fit,
    and the solution on every column has the 1e-12."""
    n = 2

    def evaluate(q, qd, qdd, params):
        base = [np.sin(q[:, 0]) * qd[:, 1], np.cos(q[:, 1]) * qdd[:, 0] + qd[:, 0], q[:, 0] * qd[:, 0] ** 2,
                np.sin(q[:, 1] + q[:, 0]) * qdd[:, 1]]
        columns = base + [2 * base[0] + 0.375 * base[1], base[0] + 1e-12 * base[2]]
        row = np.stack(columns, axis=1)
        return np.stack([row, row * np.cos(q[:, :1])], axis=1)  # two joints' rows

    evaluate.columns = 6
    independent, dependent = [0, 1, 2, 3], [4, 5]
    beta_numeric = np.array([[2.0, 1.0], [0.375, 0.0], [0.0, 0.0], [0.0, 0.0]])
    beta = _precise_combinations(evaluate, _fake_description(n), independent, dependent, beta_numeric,
                                 np.random.default_rng(0))
    assert beta[0] == [sp.Integer(2), sp.Rational(3, 8), 0, 0]
    assert beta[1][0] == 1 and beta[1][1] == 0 and beta[1][3] == 0
    assert abs(float(beta[1][2]) - 1e-12) < 1e-18


def test_matrix_function_fills_numbers_and_evaluates_expressions():
    g = sp.Symbol("g", real=True)
    K = sp.ImmutableMatrix([[1, 0, sp.Rational(1, 4)], [0, 2 * g, sp.Float(0.5)]])
    description = SimpleNamespace(parameters=(SimpleNamespace(symbol=g),))
    value = _matrix_function(description, K)(np.array([3.0]))
    assert np.array_equal(value, np.array([[1.0, 0.0, 0.25], [0.0, 6.0, 0.5]]))


def test_base_parameters_run_on_one_blas_thread(monkeypatch):
    """K must not depend on the machine's cores: a multithreaded BLAS sums in a thread-dependent order (TIAGo's
    K differed in 1,307 entries between one and two OpenBLAS threads). Every BLAS library loaded, SciPy's
    included, runs one thread while the base parameters are computed, and the setting is restored after."""
    from threadpoolctl import threadpool_info

    from codegen.model import regressor

    seen = []
    monkeypatch.setattr(regressor, "_base_parameters",
                        lambda *args: seen.append([lib["num_threads"] for lib in threadpool_info()
                                                   if lib["user_api"] == "blas"]))
    before = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
    regressor.base_parameters(None, None, None, None, None, None)
    assert seen and seen[0] and all(n == 1 for n in seen[0])
    assert [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"] == before
