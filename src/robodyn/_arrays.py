"""Array arguments of the Python-level helpers (integrate, difference, tree velocities, ...), checked as the compiled
routines check theirs: real numbers only, no masked values."""

from __future__ import annotations

import numbers

import numpy as np


def refuse_masked(value, name: str) -> None:
    """ValueError for a masked array with masked entries: converting it would ignore the mask."""
    if isinstance(value, np.ma.MaskedArray) and np.ma.is_masked(value):
        raise ValueError(f"{name}: has masked entries (pass the values to use, e.g. numpy.ma.filled)")


def real_sequence(value, name: str) -> np.ndarray:
    """A list or tuple of real numbers (integers too) as a new float64 array, for the compiled routines' general
    path: strings, bools, complex numbers and other objects are refused, as arrays of those dtypes are (NumPy would
    parse '0.3', turn True into 1.0 and None into NaN). Converting may run the elements' ``__float__``."""
    try:
        array = np.array(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise TypeError(f"{name}: cannot convert to a float64 array ({exc})") from None
    kind = array.dtype.kind
    if kind == "O":  # numbers NumPy keeps as objects (int beyond 64 bits, Fraction, ...), or other things
        for item in array.flat:
            if isinstance(item, (bool, np.bool_)) or not isinstance(item, numbers.Real):
                raise TypeError(f"{name}: expected real numbers, got {type(item).__name__}")
    elif kind not in "iuf":
        what = {"b": "bool", "c": "complex numbers", "U": "strings", "S": "bytes"}.get(kind, f"dtype {array.dtype}")
        raise TypeError(f"{name}: expected real numbers, got {what}")
    try:
        return np.array(array, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise TypeError(f"{name}: cannot convert to a float64 array ({exc})") from None


def float_array(value, name: str, ndmin: int = 0) -> np.ndarray:
    """``value`` as a new float64 array. TypeError for complex values (their imaginary part would be dropped) and
    for what is not numbers; ValueError for a masked array with masked entries (the mask would be ignored)."""
    refuse_masked(value, name)
    try:
        if np.iscomplexobj(value):
            raise TypeError(f"{name}: expected real numbers, got complex values")
        return np.array(value, dtype=np.float64, ndmin=ndmin)
    except (TypeError, ValueError, OverflowError) as exc:
        if isinstance(exc, TypeError) and str(exc).startswith(name):
            raise
        raise TypeError(f"{name}: cannot convert to a float64 array ({exc})") from None


def finite_number(value, name: str) -> float:
    """A real, finite number (not a bool, not a string) as a float; ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not np.isfinite(value):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    return float(value)
