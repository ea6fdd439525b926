"""python -m robodyn simulate --controller lqr (issue 13): the underactuated examples stabilised from the command
line, with their figures, and one clear error for each wrong use."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from robodyn.__main__ import _number

ROOT = Path(__file__).resolve().parent.parent


def _simulate(cache_dir, *arguments) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "robodyn", "simulate", *map(str, arguments), "--cache-dir",
                           str(cache_dir)], capture_output=True, text=True, cwd=ROOT, timeout=300)


@pytest.mark.parametrize("name, equilibrium, start", [("cartpole", "0,pi", "0.2,0.9pi"),
                                                      ("acrobot", "pi,0", "1.02pi,-0.1")])
def test_lqr_from_the_command_line_stabilises_the_upright_equilibrium(cache_dir, tmp_path, name, equilibrium, start):
    summary_path, plot_path = tmp_path / "run.json", tmp_path / "run.png"
    result = _simulate(cache_dir, f"robots/{name}.yaml", "--controller", "lqr", "--equilibrium", equilibrium,
                       "--q0", start, "--duration", "10", "--json", summary_path, "--plot", plot_path)
    assert result.returncode == 0, result.stderr
    summary = json.loads(summary_path.read_text())
    assert summary["controller"] == "lqr" and len(summary["gains"]["K"]) == 1  # one motor
    assert summary["gains"]["equilibrium"] == pytest.approx([_number(v) for v in equilibrium.split(",")])
    assert summary["tracking_error_final"] < 1e-2  # near rest at the equilibrium (the hold reference) by the end
    assert plot_path.stat().st_size > 10_000


def test_an_underactuated_robot_runs_free_by_default_and_says_how_to_stabilise_it(cache_dir):
    result = _simulate(cache_dir, "robots/acrobot.yaml", "--duration", "0.1")
    assert result.returncode == 0, result.stderr
    assert "underactuated" in result.stderr and "--controller lqr --equilibrium" in result.stderr


@pytest.mark.parametrize("arguments, message", [
    (["--controller", "lqr"], "needs --equilibrium"),
    (["--controller", "pd", "--equilibrium", "0,pi"], "--equilibrium is for --controller lqr"),
    (["--equilibrium", "0.5,0"], "not an equilibrium"),
    (["--equilibrium", "pi"], "expected 2 values"),
    (["--equilibrium", "0,__import__('os')"], "expected comma-separated numbers"),
])
def test_wrong_lqr_arguments_are_one_clear_error(cache_dir, arguments, message):
    result = _simulate(cache_dir, "robots/acrobot.yaml", *arguments, "--duration", "0.1")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert message in result.stderr, result.stderr


def test_multiples_of_pi():
    assert _number("pi") == math.pi and _number("-pi/2") == -math.pi / 2 and _number("2pi") == 2 * math.pi
    assert _number("0.5*pi") == 0.5 * math.pi and _number("1.5") == 1.5 and _number("-.5pi") == -0.5 * math.pi
    for text in ("pi*pi", "e", "1/0", "pi/0x1"):
        with pytest.raises(ValueError):
            _number(text)
