"""How expressions are spelled in C: a strict C99 printer.

Symbols are printed through an explicit table (``q1`` -> ``q[0]``, parameter
``m2`` -> ``p[1]``); a symbol missing from the table is a bug and raises, so
user-chosen names can never reach the C source. Small integer powers become
products, ``sign`` becomes a branch-free comparison, sin and cos become the
inlined ``rd_sin`` and ``rd_cos`` (``TRIG_FUNCTIONS``), and every constant is a
double literal with 17 significant digits.
"""

from __future__ import annotations

import re
from typing import Mapping

import sympy as sp
from sympy.printing.c import C99CodePrinter


class UnprintableError(ValueError):
    pass


class FastArithmetic:
    """``_print`` written out for the nodes a model is made of (sums, products, integer powers, symbols, numbers):
    SymPy's generic printing of a product asks for precedences, signs and coefficients through its assumption
    system, which made printing most of a humanoid's emission and self-check. Other nodes go to the printer this
    is mixed into. Terms and factors keep their stored order (as ``order="none"``).

    The subclass spells symbols (``_print_Symbol``), numbers and ``_power(base_text, base, exponent)``."""

    def _print(self, expr, **settings):
        handler = _FAST_HANDLERS.get(type(expr))
        if handler is None:
            handler = _fast_handler(type(expr))
        return handler(self, expr) if handler else super()._print(expr, **settings)

    def _fast_add(self, expr) -> str:
        parts = []
        for term in expr.args:
            text = self._print(term)
            if not parts:
                parts.append(text)
            elif text[0] == "-":  # a term is never a sum, so its leading minus negates all of it
                parts.append(" - " + text[1:])
            else:
                parts.append(" + " + text)
        return "".join(parts)

    def _fast_mul(self, expr) -> str:
        args = expr.args
        sign, factors = "", []
        if args[0].is_Number:
            coefficient, args = args[0], args[1:]
            if _is_negative(coefficient):
                sign, coefficient = "-", -coefficient
            if coefficient != 1:
                factors.append(self._print(coefficient))
        divisors = []
        for factor in args:
            if factor.is_Pow and factor.exp.is_Integer and factor.exp.p < 0:
                divisors.append(self._factor(sp.Pow(factor.base, -factor.exp)))
            else:
                factors.append(self._factor(factor))
        text = "*".join(factors) or self._one
        if divisors:
            text += "/" + (divisors[0] if len(divisors) == 1 else "(" + "*".join(divisors) + ")")
        return sign + text

    def _factor(self, factor) -> str:
        """A factor of a product: a sum is parenthesised, powers parenthesise themselves."""
        text = self._print(factor)
        return f"({text})" if factor.is_Add else text

    def _fast_pow(self, expr) -> str:
        base = expr.base
        text = self._print(base)
        if not (base.is_Symbol or base.is_Function):
            text = f"({text})"
        return self._power(text, base, expr.exp)


def _is_negative(number) -> bool:
    """Whether a SymPy number is negative, read from its value: SymPy's ``is_negative`` goes through the
    assumption system for every new number (under cProfile, 0.4 s of a Panda's 0.9 s of printing)."""
    if number.is_Rational:
        return number.p < 0
    if number.is_Float:
        return number._mpf_[0] == 1  # mpmath's (sign, mantissa, exponent, bits); zero and NaN have sign 0
    return bool(number.is_negative)


def _fast_handler(cls):
    """The fast printing method for a node type, or None (then SymPy's); found once per type."""
    for base, handler in ((sp.Add, FastArithmetic._fast_add), (sp.Mul, FastArithmetic._fast_mul),
                          (sp.Pow, FastArithmetic._fast_pow)):
        if issubclass(cls, base):
            _FAST_HANDLERS[cls] = handler
            return handler
    _FAST_HANDLERS[cls] = None
    return None


_FAST_HANDLERS: dict = {}


class TrigTable:
    """The angles of one routine whose sin and cos are computed together at its start (``rd_sincos_block``):
    those that read only the routine's inputs and parameters. The printer asks for a slot as it meets sin(a) or
    cos(a) and prints ``trig_sin[k]`` or ``trig_cos[k]``; once the routine is printed, ``declarations`` computes
    them. Other angles (one that reads an intermediate value) stay inline ``rd_sin``/``rd_cos`` calls."""

    #: The block is padded to a multiple of four angles: one AVX2 vector (two SSE2 ones) per four.
    LANES = 4

    def __init__(self, available: set):
        self._available = frozenset(available)
        self.angles: list[sp.Expr] = []
        self._slots: dict[sp.Expr, int] = {}

    def slot(self, angle: sp.Expr) -> int | None:
        k = self._slots.get(angle)
        if k is None and angle.free_symbols <= self._available:
            k = self._slots[angle] = len(self.angles)
            self.angles.append(angle)
        return k

    def declarations(self, printer: "RobotCPrinter", indent: str = "    ") -> tuple[list[str], dict[int, int] | None]:
        """The block's array and two pointer declarations (no statements: a split kernel's parts each repeat the
        ones they read), and how to renumber the printed slots (``trig_sin[k]`` -> ``trig_sin[renumber[k]]``), or
        None to keep them.

        When the angles are four or more consecutive entries of one input, x[a] to x[a + count - 1] (a serial
        arm's joint angles), the block reads them in place (``rd_sincos_range``, slot k for x[a + k]); otherwise
        they are gathered into an array padded to a multiple of four (``rd_sincos_block``). Gathering stores the
        angles one by one and then loads them four at a time, a load the processor cannot take from the pending
        stores: the Panda's g kernel took 58 ns a call gathered, 49 ns in place (C 195 -> 186 ns; back-to-back
        calls, as in a batch)."""
        if not self.angles:
            return [], None
        printed = [printer.expression(angle) for angle in self.angles]
        entries = [_INPUT_ENTRY.fullmatch(text) for text in printed]
        if len(printed) >= self.LANES and all(entries) and len({m.group(1) for m in entries}) == 1:
            indices = [int(m.group(2)) for m in entries]
            first, count = min(indices), len(indices)
            if sorted(indices) == list(range(first, first + count)):
                source = entries[0].group(1) + (f" + {first}" if first else "")
                return ([f"{indent}double trig_values[{2 * count}];",
                         f"{indent}const double *restrict trig_sin = rd_sincos_range(trig_values, {source}, {count});",
                         f"{indent}const double *restrict trig_cos = trig_sin + {count};"],
                        {slot: index - first for slot, index in enumerate(indices)})
        width = -(-len(self.angles) // self.LANES) * self.LANES
        angles = printed + ["0.0"] * (width - len(self.angles))
        # The sines and cosines go to an uninitialised array: rd_sincos_block writes all of it, and zeroing it
        # first (a compound literal `(double[16]){0.0}`) compiled to `rep stos`, whose start-up took about 25 ns a
        # call, a tenth of the Panda's C (215 -> 194 ns a kernel call, 19 instructions fewer).
        return ([f"{indent}double trig_values[{2 * width}];",
                 f"{indent}const double *restrict trig_sin = rd_sincos_block(trig_values, "
                 f"(const double[{width}]){{{', '.join(angles)}}}, {width});",
                 f"{indent}const double *restrict trig_cos = trig_sin + {width};"], None)


#: An input's entry as printed, e.g. ``q[3]``: (name, index).
_INPUT_ENTRY = re.compile(r"([A-Za-z_]\w*)\[(\d+)\]")


class RobotCPrinter(FastArithmetic, C99CodePrinter):
    _one = "1.0"

    def __init__(self, names: Mapping[sp.Symbol, str], trig: TrigTable | None = None):
        # order="none": print terms in their canonical argument order; sorting them for
        # display dominates printing time and adds nothing to C.
        super().__init__({"strict": True, "math_macros": {}, "order": "none"})
        self._names = dict(names)
        self._trig = trig

    def expression(self, expr) -> str:
        """C text of one expression (``doprint`` without its statement machinery, ~5x faster)."""
        return self._print(expr)

    def _print_Symbol(self, expr):
        try:
            return self._names[expr]
        except KeyError:
            raise UnprintableError(f"no C name for symbol {expr!r}") from None

    def _print_Float(self, expr):
        value = float(expr)
        text = repr(value)
        if "e" not in text and "." not in text and "inf" not in text and "nan" not in text:
            text += ".0"
        return text

    def _print_Integer(self, expr):
        return f"{int(expr)}.0"

    def _print_Rational(self, expr):
        return f"({int(expr.p)}.0/{int(expr.q)}.0)"

    def _print_sign(self, expr):
        arg = self._print(expr.args[0])
        return f"(double)(({arg} > 0.0) - ({arg} < 0.0))"

    def _power(self, factor: str, base, exponent) -> str:
        """base**exponent, ``factor`` being the base's text, parenthesised unless a symbol or a call."""
        if exponent.is_Integer and 1 <= abs(int(exponent)) <= 4:
            product = "*".join([factor] * abs(int(exponent)))
            if exponent < 0:
                return f"1.0/({product})"
            # Parenthesised: a power may stand wherever a product would need parentheses, as the divisor
            # of a/b**2 ("a/b*b" would be (a/b)*b).
            return product if exponent == 1 else f"({product})"
        if exponent == sp.Rational(1, 2):
            return f"sqrt({self._print(base)})"
        if exponent == sp.Rational(-1, 2):
            return f"1.0/sqrt({self._print(base)})"
        return f"pow({self._print(base)}, {self._print(exponent)})"

    def _print_sin(self, expr):
        k = None if self._trig is None else self._trig.slot(expr.args[0])
        return f"rd_sin({self._print(expr.args[0])})" if k is None else f"trig_sin[{k}]"

    def _print_cos(self, expr):
        k = None if self._trig is None else self._trig.slot(expr.args[0])
        return f"rd_cos({self._print(expr.args[0])})" if k is None else f"trig_cos[{k}]"

    def _print_NumberSymbol(self, expr):
        return self._print_Float(sp.Float(expr.evalf(20)))

    _print_Pi = _print_NumberSymbol
    _print_Exp1 = _print_NumberSymbol


_OPERATION = re.compile(r"[-+*/]|\b(?:rd_sin|rd_cos|sin|cos|tan|sqrt|pow|fabs)\(")

#: ``rd_sin`` and ``rd_cos``, the printer's sin and cos, written into every source that calls them (the
#: generated C stays self-contained). Measured on Solo12's inverse dynamics: libm's sincos was 1,590 of the
#: kernel's 6,470 instructions (12 calls). Error against a 120-bit reference: at most 1 ulp for |x| <= 7,
#: 2 ulps up to 1e5 (tests/test_printer.py).
TRIG_FUNCTIONS = """\
#include <stdint.h>
#include <string.h>
/* sin and cos of joint angles, inlined where libm's sincos is a call of ~130 instructions: x = n pi/2 + r
 * by Cody-Waite reduction (pi/2 in three parts; the first two products are exact for |n| < 2^20), then
 * fdlibm's minimax polynomials on |r| <= pi/4 (error below one ulp). Beyond |x| = 1e5, and for inf and
 * NaN, libm. The two share their reduction and polynomials, so a compiler computes them once per angle.
 * The coefficients are those of FreeBSD msun's k_sin.c and k_cos.c (Sun Microsystems, freely redistributable). */
static inline double rd_trig_reduce(double x, int *quadrant)
{
    const double shift = 6755399441055744.0; /* 1.5 * 2^52: adding it rounds to an integer */
    const double n = (x * 0.63661977236758134308 + shift) - shift;
    *quadrant = (int)n & 3;
    return ((x - n * 1.57079632673412561417e+00) - n * 6.07710050630396597660e-11)
           - n * 2.02226624879595063154e-21;
}
static inline double rd_sin_poly(double r)
{
    const double z = r * r, w = z * z;
    const double tail = 8.33333333332248946124e-03 + z * (-1.98412698298579493134e-04 + z * 2.75573137070700676789e-06)
                        + z * w * (-2.50507602534068634195e-08 + z * 1.58969099521155010221e-10);
    return r + z * r * (-1.66666666666666324348e-01 + z * tail);
}
static inline double rd_cos_poly(double r)
{
    const double z = r * r, w = z * z;
    const double tail = z * (4.16666666666666019037e-02 + z * (-1.38888888888741095749e-03 + z * 2.48015872894767294178e-05))
                        + w * w * (-2.75573143513906633035e-07 + z * (2.08757232129817482790e-09 + z * -1.13596475577881948265e-11));
    const double half = 0.5 * z, one_minus_half = 1.0 - half;
    return one_minus_half + (((1.0 - one_minus_half) - half) + z * tail);
}
static inline double rd_trig(double x, int quarter_turns) /* sin(x + quarter_turns pi/2), |x| < 1e5 */
{
    int quadrant;
    const double r = rd_trig_reduce(x, &quadrant);
    const double s = rd_sin_poly(r), c = rd_cos_poly(r);
    quadrant += quarter_turns;
    const double value = (quadrant & 1) ? c : s;
    return (quadrant & 2) ? -value : value;
}
static inline double rd_sin(double x) { return fabs(x) < 1.0e5 ? rd_trig(x, 0) : sin(x); }
static inline double rd_cos(double x) { return fabs(x) < 1.0e5 ? rd_trig(x, 1) : cos(x); }
/* sin and cos of x into out[k] and out[stride + k]: the reduction and polynomials above, written branch-free (the
 * quadrant's swap and signs as bit operations) so that the loops below vectorise, four angles per AVX2
 * instruction. Returns 1.0 when |x| >= 1e5 (or x is inf or NaN): then the caller redoes x with libm. */
#if defined(__GNUC__)
#define RD_TRIG_INLINE inline __attribute__((always_inline)) /* into each AVX2 clone, to be vectorised there */
#else
#define RD_TRIG_INLINE inline
#endif
static RD_TRIG_INLINE double rd_sincos_lane(double *restrict out, double x, int k, int stride)
{
    const double shift = 6755399441055744.0; /* 1.5 * 2^52: adding it rounds to an integer */
    const double t = x * 0.63661977236758134308 + shift;
    const double n = t - shift;
    const double r = ((x - n * 1.57079632673412561417e+00) - n * 6.07710050630396597660e-11)
                     - n * 2.02226624879595063154e-21;
    const double s = rd_sin_poly(r), c = rd_cos_poly(r);
    uint64_t quadrant, s_bits, c_bits;
    memcpy(&quadrant, &t, sizeof quadrant); /* n's low bits: the quadrant */
    memcpy(&s_bits, &s, sizeof s_bits);
    memcpy(&c_bits, &c, sizeof c_bits);
    const uint64_t swap = (uint64_t)0 - (quadrant & 1);
    const uint64_t sin_bits = ((c_bits & swap) | (s_bits & ~swap)) ^ ((quadrant & 2) << 62);
    const uint64_t cos_bits = ((s_bits & swap) | (c_bits & ~swap)) ^ (((quadrant + 1) & 2) << 62);
    memcpy(&out[k], &sin_bits, sizeof sin_bits);
    memcpy(&out[stride + k], &cos_bits, sizeof cos_bits);
    return fabs(x) < 1.0e5 ? 0.0 : 1.0;
}
static inline void rd_sincos_far(double *restrict out, const double *restrict x, int count, int stride)
{
    for (int k = 0; k < count; ++k)
        if (!(fabs(x[k]) < 1.0e5)) {
            out[k] = sin(x[k]);
            out[stride + k] = cos(x[k]);
        }
}
/* sin and cos of `width` gathered angles (width a multiple of 4): out[k] = sin(x[k]), out[width + k] = cos(x[k]).
 * The Panda's g took 662 instructions with a call of rd_sin and rd_cos per angle, 451 with this. */
static RD_TRIG_INLINE const double *rd_sincos_block(double *restrict out, const double *restrict x, int width)
{
    double far = 0.0;
    for (int k = 0; k < width; ++k)
        far += rd_sincos_lane(out, x[k], k, width);
    if (far != 0.0)
        rd_sincos_far(out, x, width, width);
    return out;
}
/* The same for `count` >= 4 angles read in place, x[0] to x[count - 1]: windows of four, the last one moved back to
 * end at count (its overlap with the one before is computed twice, to the same values). */
static RD_TRIG_INLINE const double *rd_sincos_range(double *restrict out, const double *restrict x, int count)
{
    double far = 0.0;
    for (int base = 0;; base += 4) {
        if (base > count - 4)
            base = count - 4;
        for (int j = 0; j < 4; ++j) /* not k < base + 4: under Python's -fwrapv that bound may wrap, no vectors */
            far += rd_sincos_lane(out, x[base + j], base + j, count);
        if (base == count - 4)
            break;
    }
    if (far != 0.0)
        rd_sincos_far(out, x, count, count);
    return out;
}
"""


def count_operations(c_text: str) -> int:
    """Arithmetic operators and math-library calls in a C expression (unary minus included)."""
    return len(_OPERATION.findall(c_text))


def fold_constants(expr: sp.Expr) -> sp.Expr:
    """Evaluate symbol-free function calls such as cos(157/100) once, at generation time."""
    replacements = {}
    for atom in expr.atoms(sp.Function, sp.Pow, sp.NumberSymbol):
        if not atom.free_symbols and not atom.is_Rational:
            replacements[atom] = sp.Float(sp.N(atom, 30), 30)
    return expr.xreplace(replacements) if replacements else expr
