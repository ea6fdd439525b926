"""Identification end to end (issue 11, point 6): simulated measurements of a robot whose parameters differ
from its description → identify → an identified description → its compiled model.

The truth is the notes' RR arm with a heavier second link and friction (m2 = 60 kg, D = 30 N m s/rad,
Fc = 8 N m) where the description says 50 kg and no friction. Oracles: the truth's base parameters (not what robodyn
estimates), the truth's own held-out prediction error (the floor), and the rebuilt module's parameters.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import robodyn
import robodyn.identification
from robodyn.identification import (FourierTrajectory, identify, read_measurements, simulate_measurements,
                                    standard_parameters, write_identified, write_measurements)
from robodyn.identification.data import process
from robodyn.identification.identify import _split

ROOT = Path(__file__).resolve().parent.parent
RR = ROOT / "tests" / "data" / "rr_friction.yaml"  # robots/rr.yaml with a Coulomb parameter Fc
TRUTH = {"m2": 60.0, "D": 30.0, "Fc": 8.0}


def _trajectory(joint_names) -> FourierTrajectory:
    """Five harmonics of 0.1 Hz per joint over four periods, seeded coefficients (a fixed design: the
    optimiser has its own tests; this one only has to excite every base parameter, friction in both
    directions). identify holds out the last quarter: one whole period, three to estimate from. Whole
    periods matter: the processing's small systematic errors (filter ends, the sgn(q̇) switches) cancel
    over a period of a periodic excitation, not over a part of one (measured: 15 s of a 10 s period bias
    Fv1 by 2 %, 30 s by 0.1 %)."""
    rng = np.random.default_rng(3)
    return FourierTrajectory(frequency=0.1, a=rng.normal(0.0, 0.4, (2, 5)), b=rng.normal(0.0, 0.4, (2, 5)),
                             offsets=np.zeros(2), joint_names=tuple(joint_names), duration=40.0)


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    robot = robodyn.load(RR, cache_dir=tmp_path_factory.getbasetemp() / "cache", verbose=False)
    truth = robot.copy()
    for name, value in TRUTH.items():
        truth.params[name] = value
    trajectory = _trajectory(robot.joint_names)
    t, q, qd, qdd = trajectory.sample(1000.0)
    measured = simulate_measurements(truth, t, q, qd, qdd, encoder_noise=2e-5, torque_noise=0.5, seed=1)
    return robot, truth, measured


def _holdout_rms(robot, measured, theta) -> float:
    """RMS torque error of base parameters ``theta`` on the held-out quarter, processed as identify does."""
    _, validation = _split(measured, 0.25)
    check = process(validation, robot, decimate=10)
    return float(np.sqrt(np.mean((check.y - check.W @ theta) ** 2)))


def test_identified_base_parameters_match_the_truth_not_the_description(setting):
    robot, truth, measured = setting
    result = identify(robot, measured, decimate=10)
    true_base, described = truth.base_parameters(), robot.base_parameters()
    names = robot.base_parameter_names
    assert np.max(np.abs(true_base - described)) > 5  # the description is wrong: there is something to find
    # A parameter whose true value is 0 (MY1: the centre of mass on the link axis) is judged against the
    # largest true parameter of its unit (the first moments MX1R, MX2R).
    unit = ["M" if name[:2] in ("MX", "MY", "MZ") else "F" if name[0] == "F" else "I" for name in names]
    for i, name in enumerate(names):
        error = abs(result.estimated[i] - true_base[i])
        largest = max(abs(true_base[j]) for j in range(len(names)) if unit[j] == unit[i])
        if name.startswith(("Fv", "Fs")):
            assert error <= 0.02 * abs(true_base[i]), (name, result.estimated[i], true_base[i])
        else:
            assert error <= 0.005 * max(abs(true_base[i]), 0.1 * largest), (name, result.estimated[i], true_base[i])
    # Held out: the identified model predicts as well as the truth does on the same processed data.
    identified, floor = _holdout_rms(robot, measured, result.estimated), _holdout_rms(robot, measured, true_base)
    assert identified <= 1.1 * floor, (identified, floor)
    assert _holdout_rms(robot, measured, described) > 10 * floor
    text = result.report()
    assert "ZZ1R" in text and "held-out" in text


def test_known_zeros_give_the_notes_four_inertial_combinations(setting):
    robot, truth, measured = setting
    assert set(robot.known_zero_base_parameters) == {"MY1", "MY2"}
    result = identify(robot, measured, known_zeros=True, decimate=10)
    estimated = [robot.base_parameter_names[i] for i in result.identified]
    assert estimated == ["ZZ1R", "MX1R", "ZZ2R", "MX2R", "Fv1", "Fv2", "Fs1", "Fs2"]
    zero = [i for i, name in enumerate(robot.base_parameter_names) if name in robot.known_zero_base_parameters]
    assert np.all(result.estimated[zero] == 0.0)


def test_consistent_estimate_keeps_known_zeros_at_zero(tmp_path):
    """method="consistent" with known_zeros on robots/rr.yaml, whose description has no Coulomb friction (Fs1 and
    Fs2 known zeros): they stay at zero. Their columns used to be blanked, which left them to a 1e-6 regularisation
    while Fs >= 0 let them drift: Coulomb friction of 13 N m came out, and was written into the model."""
    pytest.importorskip("cvxpy")
    robot = robodyn.load(ROOT / "robots" / "rr.yaml", cache_dir=tmp_path / "cache", verbose=False)
    truth = robot.copy()
    truth.params["m2"], truth.params["D"] = 60.0, 30.0
    t, q, qd, qdd = _trajectory(robot.joint_names).sample(1000.0)
    measured = simulate_measurements(truth, t, q, qd, qdd, encoder_noise=2e-5, torque_noise=0.5, seed=1)
    assert {"Fs1", "Fs2"} <= set(robot.known_zero_base_parameters)
    plain = identify(robot, measured, known_zeros=True, decimate=10)
    result = identify(robot, measured, method="consistent", known_zeros=True, decimate=10)
    zero = [i for i, name in enumerate(robot.base_parameter_names) if name in robot.known_zero_base_parameters]
    scale = np.abs(result.estimated).max()
    assert np.all(np.abs(result.estimated[zero]) <= 1e-7 * scale), result.estimated[zero]
    # The truth is physical, so the consistent estimate is the weighted least squares one (within its spread).
    std = np.zeros(len(robot.base_parameter_names))
    std[list(plain.identified)] = plain.estimate.std
    assert np.all(np.abs(result.estimated - plain.estimated) <= 3 * std + 1e-9 * scale), (result.estimated, std)
    assert np.all(result.holdout_rms["identified"] <= 1.05 * plain.holdout_rms["identified"])


def test_standard_parameters_reproduce_base_parameters_exactly(setting):
    robot, truth, _ = setting
    target = truth.base_parameters()
    pi = standard_parameters(robot, target)
    np.testing.assert_allclose(robot.base_parameter_matrix() @ pi, target, rtol=0, atol=1e-12 * np.abs(target).max())
    # Only the leads move: the grouped parameters (here the masses) keep the description's values.
    changed = np.flatnonzero(np.abs(pi - robot.dynamic_parameters()) > 1e-12)
    assert set(changed) <= set(robot.base_parameter_columns)


def test_write_back_builds_a_model_with_the_identified_parameters(setting, tmp_path):
    robot, truth, measured = setting
    result = identify(robot, measured, known_zeros=True, decimate=10)
    out = tmp_path / "rr.identified.yaml"
    adjustments = write_identified(robot, result, RR, out, data_name="simulated")
    assert adjustments == []
    text = out.read_text()
    assert text.startswith("# rr: identified by robodyn") and "D:" not in text  # D no longer used: dropped
    rebuilt = robodyn.load(out, cache_dir=tmp_path / "cache", verbose=False)
    assert rebuilt.selfcheck["passed"]
    np.testing.assert_allclose(rebuilt.base_parameters(), result.estimated, rtol=1e-9,
                               atol=1e-9 * np.abs(result.estimated).max())
    # The rebuilt model's own inverse dynamics predicts the held-out torques as the estimate does.
    _, validation = _split(measured, 0.25)
    check = process(validation, robot, decimate=10)
    rng = np.random.default_rng(0)
    q, qd, qdd = rng.normal(size=(3, 20, 2))
    np.testing.assert_allclose(rebuilt.inverse_dynamics(q, qd, qdd),
                               robot.base_regressor(q, qd, qdd) @ result.estimated, rtol=1e-9, atol=1e-9)
    assert np.sqrt(np.mean((check.y - check.W @ rebuilt.base_parameters()) ** 2)) <= 1.1 * _holdout_rms(
        robot, measured, truth.base_parameters())


def test_negative_friction_is_reported_not_written(setting, tmp_path):
    robot, _, measured = setting
    result = identify(robot, measured, decimate=10)
    forced = result.standard.copy()
    fs = robot.dynamic_parameter_names.index("Fs2")
    forced[fs] = -0.5
    from dataclasses import replace

    adjustments = write_identified(robot, replace(result, standard=forced), RR, tmp_path / "x.yaml")
    assert any("Coulomb friction of elbow" in line for line in adjustments)
    assert "coulomb: -" not in (tmp_path / "x.yaml").read_text()


def test_identify_refuses_bad_arguments(setting):
    robot, _, measured = setting
    with pytest.raises(ValueError, match="method"):
        identify(robot, measured, method="magic")
    with pytest.raises(ValueError, match="holdout"):
        identify(robot, measured, holdout=1.5)
    with pytest.raises(ValueError, match="YAML"):
        write_identified(robot, identify(robot, measured, decimate=10), ROOT / "tests" / "urdf" / "rr.urdf", "x.yaml")


@pytest.mark.slow
def test_command_line_measure_then_identify(setting, tmp_path):
    robot, truth, measured = setting
    trajectory = tmp_path / "trajectory.json"
    _trajectory(robot.joint_names).save(trajectory)
    env_cache = ["--cache-dir", str(tmp_path / "cache")]
    data = tmp_path / "data.csv"
    run = subprocess.run([sys.executable, "-m", "robodyn", "measure", str(RR), str(trajectory), "--set", "m2=60",
                          "--set", "D=30", "--set", "Fc=8", "--out", str(data), "--quiet", *env_cache],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert read_measurements(data, robot.joint_names).t.shape == (40000,)
    out = tmp_path / "rr.identified.yaml"
    run = subprocess.run([sys.executable, "-m", "robodyn", "identify", str(RR), str(data), "--out", str(out),
                          "--known-zeros", *env_cache], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ZZ1R" in run.stdout and "reproduce the estimate" in run.stdout and out.exists()
    bad = subprocess.run([sys.executable, "-m", "robodyn", "identify", str(RR), str(data), "--out", str(out),
                          "--holdout", "2"], capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2 and "--holdout" in bad.stderr
    missing = subprocess.run([sys.executable, "-m", "robodyn", "identify", str(RR), str(tmp_path / "none.csv"),
                              "--out", str(out), *env_cache], capture_output=True, text=True, cwd=tmp_path)
    assert missing.returncode == 1 and "none.csv" in missing.stderr and "Traceback" not in missing.stderr


def test_measurements_file_round_trip_feeds_identify(setting, tmp_path):
    robot, truth, measured = setting
    path = write_measurements(tmp_path / "m.npz", measured)
    again = read_measurements(path, robot.joint_names)
    a = identify(robot, measured, decimate=10)
    b = identify(robot, again, decimate=10)
    np.testing.assert_array_equal(a.estimated, b.estimated)


def test_monte_carlo_runs_on_local_processes_like_in_this_one(setting):
    """Point 8: Monte-Carlo runs go through an executor; seeds per run, so the worker does not matter.
    The spread of the estimates matches the estimator's own standard deviations."""
    from robodyn.parallel import executor

    robot, _, measured = setting
    options = {"runs": 4, "encoder_noise": 2e-5, "torque_noise": 0.5, "seed": 7, "decimate": 10}
    serial = robodyn.identification.monte_carlo(robot, measured, **options)
    with executor(workers=2) as pool:
        parallel = robodyn.identification.monte_carlo(robot, measured, executor=pool, **options)
    np.testing.assert_allclose(parallel, serial, rtol=1e-12, atol=1e-12)
    assert serial.shape == (4, len(robot.base_parameter_names))
    assert np.all(np.std(serial, axis=0) > 0)


def test_known_zeros_excitation_reproduces_the_notes_condition_numbers(setting):
    """The notes' RR model (centres of mass on the link axes, no Coulomb friction): a single sine per
    joint gives cond about 250 (the notes: about 280), an optimised trajectory at most 30."""
    from robodyn.identification import design_excitation, regressor_condition, single_sine
    from robodyn.identification.excitation import WithoutKnownZeros

    rr = robodyn.load(ROOT / "robots" / "rr.yaml", verbose=False)
    sine = single_sine(rr.joint_names, 20.0)
    assert 200 < regressor_condition(WithoutKnownZeros(rr), sine) < 320
    _, report = design_excitation(rr, duration=20, harmonics=5, starts=2, known_zeros=True)
    assert report.feasible and report.cond <= 30


def test_torque_offsets_are_found_and_leave_the_parameters_unbiased(setting):
    """A constant bias on each torque sensor: with offset columns it is found, and the parameters are
    those found without the bias."""
    from dataclasses import replace

    robot, truth, measured = setting
    bias = np.array([3.0, -2.0])
    biased = replace(measured, tau=measured.tau + bias)
    clean = identify(robot, measured, decimate=10)
    fitted = identify(robot, biased, decimate=10, offset=True)
    np.testing.assert_allclose(fitted.offsets, bias, atol=0.1)
    scale = np.abs(truth.base_parameters()).max()
    assert np.max(np.abs(fitted.estimated - clean.estimated)) < 1e-3 * scale
    assert "torque offsets" in fitted.report()


def test_write_back_of_an_unphysical_estimate_is_made_physical_or_refused(tmp_path):
    """Noise can leave a link's lead parameters (XX2R = XX2 - YY2 + ...) unphysical once the grouped ones
    keep their values. The file written must load: the closest physical parameters (cvxpy), reported."""
    pytest.importorskip("cvxpy")
    from dataclasses import replace

    rrr = robodyn.load(ROOT / "robots" / "rrr.yaml", cache_dir=tmp_path / "cache", verbose=False)
    rng = np.random.default_rng(0)
    q, qd, qdd = rng.uniform(-2, 2, (3, 400, 3))
    tau = rrr.inverse_dynamics(q, qd, qdd)
    t = np.arange(400) * 1e-3
    from robodyn.identification import Measurements

    result = identify(rrr, Measurements(t, q, tau, rrr.joint_names), holdout=0, raw=True)
    names = rrr.base_parameter_names
    wrong = result.estimated.copy()
    wrong[names.index("XX2R")] -= 1.0  # a tensor no body has, once YY2 keeps its value
    forced = replace(result, estimated=wrong, standard=standard_parameters(rrr, wrong))
    adjustments = write_identified(rrr, forced, ROOT / "robots" / "rrr.yaml", tmp_path / "x.yaml")
    assert any("closest physical parameters" in line for line in adjustments)
    rebuilt = robodyn.load(tmp_path / "x.yaml", cache_dir=tmp_path / "cache", verbose=False)
    assert rebuilt.selfcheck["passed"]


def test_commands_refuse_to_overwrite_their_inputs_and_damaged_trajectories(tmp_path):
    from robodyn.__main__ import main

    copy = tmp_path / "rr.yaml"
    copy.write_text(RR.read_text())
    data = tmp_path / "data.csv"
    data.write_text("t,q_shoulder,q_elbow,tau_shoulder,tau_elbow\n")
    with pytest.raises(SystemExit) as exit_:
        main(["identify", str(copy), str(data), "--out", str(copy)])
    assert exit_.value.code == 2 and copy.read_text() == RR.read_text()
    with pytest.raises(SystemExit) as exit_:
        main(["identify", str(ROOT / "tests" / "urdf" / "rr.urdf"), str(data), "--out", str(tmp_path / "x.yaml")])
    assert exit_.value.code == 2
    damaged = tmp_path / "t.npz"
    damaged.write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(ValueError, match="t.npz"):
        FourierTrajectory.load(damaged)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(ValueError, match="deep.json"):
        FourierTrajectory.load(deep)
    with pytest.raises(ValueError, match="not a regular file"):
        FourierTrajectory.load(tmp_path)


def test_a_missing_optional_extra_is_an_environment_error(setting, tmp_path, monkeypatch, capsys):
    """--estimator consistent without cvxpy: status 4 (environment) with the extra to install."""
    from robodyn.__main__ import main

    robot, _, measured = setting
    data = write_measurements(tmp_path / "d.npz", measured)
    monkeypatch.setitem(sys.modules, "cvxpy", None)  # import cvxpy now raises ImportError
    status = main(["identify", str(RR), str(data), "--estimator", "consistent", "--out", str(tmp_path / "x.yaml"),
                   "--quiet", "--cache-dir", str(tmp_path / "cache")])
    assert status == 4 and 'robodyn[identify]' in capsys.readouterr().err
    assert not (tmp_path / "x.yaml").exists()
