"""Array arguments of the Python-level helpers (integrate, difference, tree velocities, ...), checked as the compiled
routines check theirs: real numbers only, no masked values."""

from __future__ import annotations

import numpy as np


def float_array(value, name: str, ndmin: int = 0) -> np.ndarray:
    """``value`` as a new float64 array. TypeError for complex values (their imaginary part would be dropped) and
    for what is not numbers; ValueError for a masked array with masked entries (the mask would be ignored)."""
    if isinstance(value, np.ma.MaskedArray) and np.ma.is_masked(value):
        raise ValueError(f"{name}: has masked entries (pass the values to use, e.g. numpy.ma.filled)")
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
