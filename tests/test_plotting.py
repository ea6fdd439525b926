"""robodyn.plotting: figures are written whole or not at all, and matplotlib stays optional."""

from __future__ import annotations

import re
import struct
import subprocess
import sys

import matplotlib  # noqa: F401  (the test extra installs it: missing, these tests must fail, not skip)
import pytest
from conftest import ROOT

import robodyn
from robodyn.plotting import plot_comparison, plot_trajectory

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def rr(load):
    return load("rr")


@pytest.fixture
def tracked(rr):
    reference = robodyn.Quintic([0.0, 0.0], [0.5, -0.5], duration=0.4)
    return robodyn.simulate(rr, robodyn.ComputedTorque(rr, reference), duration=0.5)


def _assert_png(path, min_width: int, min_height: int) -> None:
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk comes first
    assert width >= min_width and height >= min_height
    assert len(data) > 10_000  # axes, lines and labels, not an empty canvas


def test_plot_trajectory_writes_a_png(tracked, tmp_path):
    path = plot_trajectory(tracked, tmp_path / "new" / "dir" / "run.png", title="rr, computed torque")
    assert path == tmp_path / "new" / "dir" / "run.png"
    _assert_png(path, 500, 1000)  # five stacked panels: q, qd, qdd, tau, tracking error
    assert [p.name for p in path.parent.iterdir()] == ["run.png"]  # no temporary file left


def test_plot_comparison_overlays_runs(rr, tracked, tmp_path):
    free = robodyn.simulate(rr, None, duration=0.5)
    path = plot_comparison({"computed torque": tracked, "free": free}, tmp_path / "qdd.png", quantity="qdd")
    _assert_png(path, 500, 300)
    with pytest.raises(ValueError, match="tracking_error was not recorded for: free"):
        plot_comparison({"computed torque": tracked, "free": free}, tmp_path / "e.png", quantity="tracking_error")
    with pytest.raises(ValueError, match="quantity"):
        plot_comparison({"free": free}, tmp_path / "x.png", quantity="energy")
    assert [p.name for p in tmp_path.iterdir()] == ["qdd.png"]


def test_failed_save_leaves_nothing(tracked, tmp_path):
    with pytest.raises(ValueError, match="not supported"):
        plot_trajectory(tracked, tmp_path / "run.unknown-format")
    assert list(tmp_path.iterdir()) == []


def test_missing_matplotlib_is_a_clear_import_error(tracked, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an uninstalled package looks like
    with pytest.raises(ImportError, match=r"matplotlib.*robodyn\[plot\]"):
        plot_trajectory(tracked, tmp_path / "out" / "run.png")
    assert list(tmp_path.iterdir()) == []


def test_free_motion_example(load, cache_dir, tmp_path):
    load("rr")  # build into the session cache, which the script then reuses
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "free_motion_rr.py"), "--out", str(tmp_path),
                             "--cache-dir", str(cache_dir)], check=False, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "D = 80" in result.stdout and "relative mismatch" in result.stdout
    # The printed numbers are physics checks, not only text: RK4 and RK45 agree, the frictionless run
    # conserves energy, and the energy lost equals the friction work (D = 30 and 80; RK45 samples at
    # 100 Hz, so its trapezoid rule is 100x coarser).
    number = r"([0-9.]+e[-+][0-9]+)"
    agreement = [float(x) for x in re.findall(r"max \|q_RK45 - q_RK4\| = " + number, result.stdout)]
    drift = dict(re.findall(r"(RK45|RK4): relative energy drift " + number, result.stdout))
    mismatch = re.findall(r"(RK45|RK4): energy lost vs friction work, relative mismatch " + number, result.stdout)
    assert len(agreement) == 3 and max(agreement) < 1e-6, result.stdout
    assert float(drift["RK4"]) < 1e-9 and float(drift["RK45"]) < 1e-6, result.stdout
    assert len(mismatch) == 4, result.stdout
    assert all(float(value) < (1e-6 if name == "RK4" else 1e-4) for name, value in mismatch), result.stdout
    expected = {f"trajectory_D{d}.png" for d in (0, 30, 80)} | {f"compare_{q}.png" for q in ("q", "qd", "qdd")}
    assert {p.name for p in tmp_path.iterdir()} == expected
    for name in expected:
        assert (tmp_path / name).read_bytes().startswith(PNG_SIGNATURE)
