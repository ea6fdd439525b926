"""python -m robodyn excite (issue 11, point 3): arguments, exit statuses, the written file.

Most runs are in-process with the closed-form RR stand-in robot in place of the loaded one (fast,
and independent of the generated regressor); one runs the real command on robots/rr.yaml."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from test_ident_excitation import StandInRR

import robodyn.__main__ as cli
from robodyn.identification.excitation import CRITERIA, LIMIT_KINDS, FourierTrajectory

ROOT = Path(__file__).resolve().parent.parent
RR = str(ROOT / "robots" / "rr.yaml")
QUICK = ["--duration", "10", "--harmonics", "2", "--starts", "2", "--samples", "40", "--workers", "1"]


@pytest.fixture
def stand_in(monkeypatch):
    """The command with the stand-in robot instead of the loaded description."""
    monkeypatch.setattr(cli, "_load", lambda args: StandInRR())


def _exit_status(argv) -> int:
    try:
        return cli.main(argv)
    except SystemExit as exc:
        return exc.code


def test_help_shows_an_example_and_the_exit_statuses():
    result = subprocess.run([sys.executable, "-m", "robodyn", "excite", "--help"], capture_output=True, text=True,
                            cwd=ROOT, timeout=120)
    assert result.returncode == 0
    assert "python -m robodyn excite robots/rr.yaml --duration 20 --harmonics 5 --out trajectory.csv" in result.stdout
    for option in ("--out", "--cache-dir", "--quiet", "--debug", "--method", "--lock", "--scheduler", "--workers",
                   "--criterion", "--starts", "--seed"):
        assert option in result.stdout
    assert "exit status" in result.stdout and "\n  2    bad command line" in result.stdout
    assert cli.EXCITE_CRITERIA == CRITERIA and cli.EXCITE_LIMITS == LIMIT_KINDS  # spelled out in the CLI


@pytest.mark.parametrize("arguments, message", [
    (["--harmonics", "0"], "--harmonics"),
    (["--duration", "-3"], "--duration"),
    (["--duration", "nan"], "--duration"),
    (["--starts", "0"], "--starts"),
    (["--samples", "10"], "--samples"),
    (["--margin", "1"], "--margin"),
    (["--criterion", "e-optimal"], "--criterion"),
    (["--workers", "2", "--scheduler", "tcp://127.0.0.1:8786"], "exclude each other"),
    (["--workers", "0"], "--workers"),
    (["--limit", "speed=3"], "--limit"),
    (["--limit", "velocity=fast"], "--limit"),
    (["--limit", "velocity=nan"], "must be finite"),
    (["--limit", "acceleration=inf"], "must be finite"),
    (["--rate", "0"], "--rate"),
])
def test_bad_arguments_are_status_2_with_a_message(arguments, message, tmp_path, capsys, stand_in):
    assert _exit_status(["excite", RR, "--out", str(tmp_path / "t.csv"), *arguments]) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_out_is_required_and_must_name_a_known_file_type(tmp_path, capsys, stand_in):
    assert _exit_status(["excite", RR]) == 2
    assert "--out" in capsys.readouterr().err
    assert _exit_status(["excite", RR, "--out", str(tmp_path / "t.txt")]) == 2
    assert ".csv, .json or .npz" in capsys.readouterr().err


def test_a_limit_with_the_wrong_number_of_values_is_status_2(tmp_path, capsys, stand_in):
    assert _exit_status(["excite", RR, *QUICK, "--limit", "velocity=1,2,3", "--out", str(tmp_path / "t.csv")]) == 2
    assert "one number or 2" in capsys.readouterr().err


def test_design_writes_the_trajectory_and_reports_cond_and_margin(tmp_path, capsys, stand_in):
    out = tmp_path / "sub" / "trajectory.csv"
    assert _exit_status(["excite", RR, *QUICK, "--limit", "velocity=1.5", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "cond of the stacked base regressor:" in printed and "limits margin:" in printed
    trajectory = FourierTrajectory.load(out)
    assert trajectory.harmonics == 2 and trajectory.period == 10 and trajectory.joint_names == ("shoulder", "elbow")
    assert np.abs(trajectory.evaluate(np.linspace(0, 10, 5001))[1]).max() <= 1.5
    assert [p.name for p in out.parent.iterdir()] == ["trajectory.csv"]  # atomic: no temporary left
    assert len(out.read_text().splitlines()) == 4 + 1 + 1000  # comments, header, 10 s at 100 Hz


def test_quiet_prints_nothing_and_the_result_is_seeded(tmp_path, capsys, stand_in):
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for path in paths:
        assert _exit_status(["excite", RR, *QUICK, "--seed", "4", "--quiet", "--out", str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
    assert paths[0].read_text() == paths[1].read_text()


def test_no_design_within_the_limits_is_status_1_and_writes_nothing(tmp_path, capsys, stand_in):
    out = tmp_path / "t.npz"
    assert _exit_status(["excite", RR, *QUICK, "--limit", "effort=10", "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert "no design stayed within the limits" in captured.err and "peak torque" in captured.out
    assert not out.exists()


def test_an_unusable_output_is_status_1_before_the_work(tmp_path, capsys, stand_in):
    (tmp_path / "dir.csv").mkdir()
    assert _exit_status(["excite", RR, *QUICK, "--out", str(tmp_path / "dir.csv")]) == 1
    error = capsys.readouterr().err
    assert "--out" in error and "is a directory" in error


def test_starts_on_a_dask_cluster_given_by_its_address(tmp_path, capsys, stand_in):
    distributed = pytest.importorskip("distributed")
    serial, remote = tmp_path / "serial.json", tmp_path / "remote.json"
    assert _exit_status(["excite", RR, *QUICK, "--quiet", "--out", str(serial)]) == 0
    arguments = [a for a in QUICK if a not in ("--workers", "1")]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  worker_dashboard_address=None) as cluster:
        assert _exit_status(["excite", RR, *arguments, "--scheduler", cluster.scheduler_address,
                             "--out", str(remote)]) == 0
    assert "cond of the stacked base regressor" in capsys.readouterr().out
    # Seeds per start: the same design anywhere (to the last bits where BLAS is not limited to one
    # thread: threadpoolctl makes it bit for bit).
    import json

    a, b = json.loads(remote.read_text()), json.loads(serial.read_text())
    for key in ("a", "b", "offsets"):
        np.testing.assert_allclose(np.array(a[key]), np.array(b[key]), rtol=1e-9, atol=1e-12)


def test_an_unreachable_scheduler_is_status_1(tmp_path, capsys, stand_in, monkeypatch):
    pytest.importorskip("distributed")
    import robodyn.parallel

    real = robodyn.parallel.executor
    monkeypatch.setattr(robodyn.parallel, "executor", lambda scheduler, workers: real(scheduler, workers,
                                                                                       connect_timeout=1))
    assert _exit_status(["excite", RR, *QUICK[:-2], "--scheduler", "tcp://127.0.0.1:9",
                         "--out", str(tmp_path / "t.csv")]) == 1
    assert "cannot connect" in capsys.readouterr().err and not (tmp_path / "t.csv").exists()


def test_the_real_command_on_the_notes_arm(tmp_path, cache_dir, load):
    """rr through robodyn's generated regressor, two local workers, progress on stderr."""
    if not hasattr(load("rr"), "base_regressor"):
        pytest.skip("robodyn's regressor has not landed yet (issue 11, point 1)")
    out = tmp_path / "rr.csv"
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "robodyn", "excite", RR, "--duration", "20", "--harmonics", "5",
                             "--starts", "2", "--workers", "2", "--cache-dir", str(cache_dir), "--out", str(out)],
                            capture_output=True, text=True, cwd=ROOT, timeout=600)
    elapsed = time.perf_counter() - started
    assert result.returncode == 0, result.stderr
    cond = float(result.stdout.split("cond of the stacked base regressor:")[1].split()[0])
    assert cond <= 30
    # Progress appears once the optimisation has run a second; the whole command (imports and worker start-up
    # included) taking several seconds means it did. A faster run may rightly print nothing.
    if elapsed > 8.0:
        assert "[excite]" in result.stderr and "starts done" in result.stderr
    assert FourierTrajectory.load(out).harmonics == 5
