"""Large kernels are compiled as a sequence of parts (codegen/emit/sources.py, ``_split``): the values one part
computes and a later one reads pass through a stack array. Here the part size is made tiny so that a small
robot's kernels split into many parts, and the split build is compared with a whole one: same numbers for every
routine, its self-check passed (each routine against its symbolic value), and a guard in the first part still
fails the call (a floating base's non-unit quaternion)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import random_floating_configuration

import robodyn
from codegen.emit import sources

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("spill", ["stack", "heap"])
def test_kernels_in_parts_compute_what_whole_kernels_do(tmp_path, monkeypatch, spill):
    path = ROOT / "robots" / "space_arm.yaml"
    # The whole build is the reference (its self-check off only so that its cache key differs).
    whole = robodyn.load(path, cache_dir=tmp_path / "whole", verbose=False, selfcheck=False)
    monkeypatch.setattr(sources, "_SPLIT_OPERATIONS", 80)
    monkeypatch.setattr(sources, "_PART_OPERATIONS", 40)
    if spill == "heap":  # the array of values crossing parts on the heap, as a very large kernel's
        monkeypatch.setattr(sources, "_STACK_SPILLED", 8)
    split = robodyn.load(path, cache_dir=tmp_path / "split", verbose=False)
    assert split.selfcheck["status"] == "passed"
    text = "\n".join(f.read_text() for f in (tmp_path / "split").glob("space_arm-*/*.c"))
    assert "_part5(" in text and "spill[" in text  # many parts, values crossing them
    assert ("malloc(" in text) == (spill == "heap")
    # The angles' sines and cosines are computed by one part and read by the others.
    assert ("rd_sincos_block(trig," in text or "rd_sincos_range(trig," in text) and "trig_sin = trig;" in text

    rng = np.random.default_rng(0)
    q = random_floating_configuration(whole, rng)
    v, a = rng.uniform(-2, 2, whole.nv), rng.uniform(-2, 2, whole.nv)
    calls = [("M", "mass_matrix", (q,)), ("C", "coriolis_matrix", (q, v)), ("g", "gravity", (q,)),
             ("inverse_dynamics", "inverse_dynamics", (q, v, a)), ("forward_dynamics", "forward_dynamics", (q, v, a)),
             ("regressor", "regressor", (q, v, a)), ("base_regressor", "base_regressor", (q, v, a)),
             ("centroidal_momentum_matrix", "centroidal_momentum_matrix", (q,))]
    for method, routine, arguments in calls:
        assert routine in whole.routine_names and routine in split.routine_names
        expected, got = getattr(whole, method)(*arguments), getattr(split, method)(*arguments)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-13 * max(1.0, np.abs(expected).max()),
                                   err_msg=method)

    bad = q.copy()
    bad[3:7] *= 1.1
    with pytest.raises(ValueError, match="unit norm"):
        split.inverse_dynamics(bad, v, a)


def test_parts_share_the_sines_and_cosines_read_in_place(tmp_path, monkeypatch):
    """A serial arm's angles are read in place (``rd_sincos_range``: q[0] to q[n-1], the slots renumbered to their
    place in q): split into parts, one part computes them and the others read that array, slot for slot. The
    Puma 560 (6 joints) split small against its whole build."""
    path = ROOT / "robots" / "puma560.yaml"
    whole = robodyn.load(path, cache_dir=tmp_path / "whole", verbose=False, selfcheck=False)
    monkeypatch.setattr(sources, "_SPLIT_OPERATIONS", 80)
    monkeypatch.setattr(sources, "_PART_OPERATIONS", 40)
    split = robodyn.load(path, cache_dir=tmp_path / "split", verbose=False)
    assert split.selfcheck["status"] == "passed"
    text = "\n".join(f.read_text() for f in (tmp_path / "split").glob("puma560-*/*.c"))
    assert "_part5(" in text and "rd_sincos_range(trig," in text and "trig_sin = trig;" in text
    rng = np.random.default_rng(1)
    for _ in range(5):
        q, v, a = rng.uniform(-3.0, 3.0, (3, whole.n))
        for method, arguments in [("M", (q,)), ("C", (q, v)), ("g", (q,)), ("inverse_dynamics", (q, v, a)),
                                  ("forward_dynamics", (q, v, a)), ("regressor", (q, v, a)),
                                  ("nonlinear_effects", (q, v))]:
            expected, got = getattr(whole, method)(*arguments), getattr(split, method)(*arguments)
            np.testing.assert_allclose(got, expected, rtol=0, atol=1e-13 * max(1.0, np.abs(expected).max()),
                                       err_msg=method)
