"""The strict C99 printer: what it writes must mean, under C's precedence, the expression it was given."""

from __future__ import annotations

import itertools

import pytest
import sympy as sp

from codegen.emit.printer import RobotCPrinter, UnprintableError

X, Y, Z = sp.symbols("x y z", real=True)
VALUES = {X: 1.3, Y: -0.7, Z: 2.1}


def _c_value(text: str) -> float:
    """Evaluate printed C with Python (same precedence and left-to-right grouping for + - * /)."""
    return eval(text, {"sqrt": lambda v: v ** 0.5, "pow": pow}, {str(s): v for s, v in VALUES.items()})


def _expressions():
    atoms = [X, Y, X + Y, X * Z, 2 * X]
    for base, exponent in itertools.product(atoms, (-4, -3, -2, -1, 2, 3, 4)):
        for other in (Z, 3 * Z, Z + 1):
            yield other * base**exponent
            yield other / base**exponent
            yield -other * base**exponent / (Z * Z)


@pytest.mark.parametrize("expr", list(_expressions()), ids=str)
def test_products_and_quotients_of_powers_keep_their_meaning(expr):
    printer = RobotCPrinter({X: "x", Y: "y", Z: "z"})
    text = printer.expression(expr)
    assert _c_value(text) == pytest.approx(float(expr.xreplace(VALUES)), rel=1e-12), text


def test_a_squared_divisor_is_parenthesised():
    """x/y**2 once printed as x/y*y, that is (x/y)*y in C."""
    assert RobotCPrinter({X: "x", Y: "y"}).expression(X / Y**2) == "x/(y*y)"


def test_a_symbol_without_a_c_name_is_refused():
    with pytest.raises(UnprintableError):
        RobotCPrinter({X: "x"}).expression(X + Y)


def _compiled_trig(tmp_path, flags: tuple[str, ...], mode: str):
    """The printer's rd_sin and rd_cos (``mode`` "single"), rd_sincos_block on blocks of eight angles ("block") or
    rd_sincos_range on runs of seven read in place (two overlapping windows of four: "range"), compiled alone (the
    compiler Python builds extensions with), as numpy functions over arrays."""
    import ctypes
    import shlex
    import subprocess
    import sysconfig

    import numpy as np

    from codegen.emit.printer import TRIG_FUNCTIONS

    source = tmp_path / "trig.c"
    group = {"single": 1, "block": 8, "range": 7}[mode]
    call = "rd_sincos_block(out, x + i, 8)" if mode == "block" else "rd_sincos_range(out, x + i, 7)"
    loop = (f"{{ double out[16]; for (long i = 0; i < n; i += {group}) {{ {call};\n"
            f"  for (int k = 0; k < {group}; k++) {{ s[i + k] = out[k]; c[i + k] = out[{group} + k]; }} }} }}\n"
            if mode != "single" else
            "{ for (long i = 0; i < n; i++) { s[i] = rd_sin(x[i]); c[i] = rd_cos(x[i]); } }\n")
    source.write_text("#include <math.h>\n" + TRIG_FUNCTIONS + "void both(const double *x, double *s, double *c, long n)\n"
                      + loop)
    library = tmp_path / f"trig{len(flags)}{mode}.so"
    compiler = shlex.split(sysconfig.get_config_var("CC") or "cc")
    result = subprocess.run([*compiler, "-O2", "-fno-math-errno", "-fPIC", "-shared", *flags, str(source), "-o",
                             str(library), "-lm"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    both = ctypes.CDLL(str(library)).both
    pointer = ctypes.POINTER(ctypes.c_double)

    def evaluate(x):
        size = len(x)
        x = np.concatenate([np.asarray(x, dtype=float), np.zeros(-size % group)])  # whole blocks
        s, c = np.empty_like(x), np.empty_like(x)
        both(x.ctypes.data_as(pointer), s.ctypes.data_as(pointer), c.ctypes.data_as(pointer), ctypes.c_long(x.size))
        return s[:size], c[:size]
    return evaluate


@pytest.mark.parametrize("mode", ["single", "block", "range"],
                         ids=["rd_sin-rd_cos", "rd_sincos_block", "rd_sincos_range"])
@pytest.mark.parametrize("flags", [(), ("-march=x86-64-v3",)], ids=["baseline", "x86-64-v3"])
def test_inline_sin_cos_within_two_ulps_of_a_120_bit_reference(tmp_path, flags, mode):
    import platform

    import mpmath
    import numpy as np

    if flags and platform.machine() != "x86_64":
        pytest.skip("x86-64-v3 is an x86-64 target")
    evaluate = _compiled_trig(tmp_path, flags, mode)
    rng = np.random.default_rng(3)
    small = np.concatenate([rng.uniform(-7, 7, 4000), np.arange(-40, 41) * np.pi / 4, [0.0, -0.0, 1e-300, 5e-324,
                                                                                       1e-8, np.pi / 4]])
    large = np.concatenate([rng.uniform(-1e5, 1e5, 1500), [99999.99, -99999.99, 1e5, -1e5, 3.0e8, -1e300]])
    with mpmath.workprec(120):
        for x, limit in ((small, 1), (large, 2)):
            s, c = evaluate(x)
            for values, function in ((s, mpmath.sin), (c, mpmath.cos)):
                reference = np.array([float(function(mpmath.mpf(float(v)))) for v in x])
                ulps = np.abs(values - reference) / np.spacing(np.abs(reference))
                assert ulps.max() <= limit, x[np.argmax(ulps)]
    s, c = evaluate(np.array([0.0, -0.0]))
    assert list(s) == [0.0, 0.0] and list(c) == [1.0, 1.0]  # the sign of sin(-0) is not kept
    s, c = evaluate(np.array([np.inf, -np.inf, np.nan]))
    assert np.isnan(s).all() and np.isnan(c).all()
    # A far or non-finite angle is redone by libm without disturbing its neighbours in the block.
    mixed = np.array([0.5, 3.0e8, -1.25, np.nan, 2.0, -1e300, 0.75, 1e5])
    s, c = evaluate(mixed)
    with mpmath.workprec(120):
        for values, function in ((s, mpmath.sin), (c, mpmath.cos)):
            finite = np.isfinite(mixed)
            reference = np.array([float(function(mpmath.mpf(float(v)))) for v in mixed[finite]])
            assert (np.abs(values[finite] - reference) <= 2 * np.spacing(np.abs(reference))).all()
            assert np.isnan(values[~finite]).all()


def _random_expression(rng, depth: int) -> sp.Expr:
    """Sums, products, integer powers, quotients, signs, rationals, floats, sin and cos, nested."""
    if depth == 0:
        return [X, Y, Z, sp.Rational(int(rng.integers(-9, 10)), int(rng.integers(1, 8))),
                sp.Float(float(rng.normal())), sp.Integer(int(rng.integers(-3, 4)))][int(rng.integers(6))]
    kind = int(rng.integers(6))
    a, b = _random_expression(rng, depth - 1), _random_expression(rng, depth - 1)
    if kind == 0:
        return a + b - _random_expression(rng, depth - 1)
    if kind == 1:
        return -a * b * _random_expression(rng, depth - 1)
    if kind == 2:
        return a * (X + Y + Z) ** int(rng.choice([-3, -2, -1, 2, 3, 4]))
    if kind == 3:
        return a / (b * b + 1)
    if kind == 4:
        return sp.sin(a) * sp.cos(b) - a
    return sp.Rational(-3, 7) * a + sp.Float(-0.25) * b


def test_the_fast_printing_of_sums_and_products_means_the_expression():
    """The printers' own printing of sums, products and powers (FastArithmetic, not SymPy's) against SymPy's
    evaluation of the expression, in C (evaluated as Python: same precedence and grouping) and in NumPy."""
    import math

    import numpy as np

    from codegen.model.numeric import numpy_function

    rng = np.random.default_rng(7)
    c_printer = RobotCPrinter({X: "x", Y: "y", Z: "z"})
    expressions = [_random_expression(rng, 3) for _ in range(300)]
    evaluate = numpy_function([[X, Y, Z]], [], expressions)(np.array([VALUES[X], VALUES[Y], VALUES[Z]]))
    namespace = {"sqrt": math.sqrt, "pow": pow, "rd_sin": math.sin, "rd_cos": math.cos}
    for expr, numpy_value in zip(expressions, evaluate):
        expected = float(expr.xreplace(VALUES))
        c_value = eval(c_printer.expression(expr), namespace, {str(s): v for s, v in VALUES.items()})
        assert c_value == pytest.approx(expected, rel=1e-12, abs=1e-12), (expr, c_printer.expression(expr))
        assert float(numpy_value) == pytest.approx(expected, rel=1e-12, abs=1e-12), expr
