"""examples/lqr_panda.py --quick: the Panda's LQR and its sampled region of attraction, end to end.

The script builds the Panda (example-robot-data, fingers locked) into the session's cache, estimates the region
of attraction and simulates the nonlinear closed loop from samples inside it, which must all converge, and over a
slice of the joint space; it writes the figure. About 5 s after the Panda's build (10-20 s).
"""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata

import pytest
from conftest import ROOT

SCRIPT = ROOT / "examples" / "lqr_panda.py"


def _require_example_robot_data() -> None:
    try:
        metadata.distribution("example-robot-data")
    except metadata.PackageNotFoundError:
        pytest.skip("example-robot-data is not installed (pip install example-robot-data)")


def test_lqr_panda_quick(tmp_path, cache_dir):
    _require_example_robot_data()
    out = tmp_path / "figures"
    result = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(out), "--cache-dir", str(cache_dir)],
                            check=False, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    text = result.stdout

    rho = float(re.search(r"region of attraction \{V < rho\}: rho = (\S+) ", text).group(1))
    assert rho > 0.0
    converged, total = map(int, re.search(r"inside \{V < rho\}: (\d+)/(\d+) converged", text).groups())
    assert total == 40 and converged == total, text
    shells = re.findall(r"shell \S+ rho < V < \S+ rho: (\d+)/(\d+) converged", text)
    assert len(shells) == 2 and all(int(total) == 20 for _, total in shells), text
    slice_line = re.search(r"slice of joints 2 and 4 \(12 x 12 starts.*?(\d+) inside the estimate, (\w+) of which "
                           r"converge", text)
    assert slice_line is not None and slice_line.group(2) == "all", text

    figure = out / "panda_lqr_roa.png"
    data = figure.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
    assert [path.name for path in out.iterdir()] == ["panda_lqr_roa.png"]  # no temporary file left behind
