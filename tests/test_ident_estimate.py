"""Estimators (issue 11, point 5): OLS and WLS with their statistics, the physically consistent estimate.

Oracles: exact data recover the parameters to 1e-8; noise on τ only gives estimates unbiased within
3σ of σ²(WᵀW)⁻¹ over a seeded Monte-Carlo, whose spread matches that covariance; noisy encoders
with full processing give the inertial base parameters within 0.5 % and friction within 2 %; the
consistent estimate satisfies every link's pseudo-inertia inequality and friction ≥ 0.
"""
# ruff: noqa: F401, F811  (the shared session fixtures are imported and named by test parameters, as pytest requires)

from __future__ import annotations

import sys

import numpy as np
import pytest
from test_ident_data import (  # rr_ident, rr_run: the shared session fixtures
    INERTIAL,
    NOISE,
    StandInRR,
    fourier_reference,
    rr_ident,
    rr_run,
)

from robodyn.identification.data import add_noise, process, simulate_measurements
from robodyn.identification.estimate import (
    Estimate,
    ordinary_least_squares,
    report,
    weighted_least_squares,
)


def exact_system(stand_in, run, step=10):
    """W and τ from the noise-free simulated signals (exact derivatives), every ``step``-th sample."""
    truth = run.truth
    W = stand_in.base_regressor(truth.q[::step], truth.qd[::step], truth.qdd[::step]).reshape(-1, 10)
    return W, truth.tau[::step].reshape(-1)


def test_exact_data_recover_the_parameters_to_1e_8(rr_ident, rr_run):
    stand_in = StandInRR(rr_ident)
    theta = stand_in.base_parameters()
    W, y = exact_system(stand_in, rr_run, step=1)
    for estimate in (ordinary_least_squares(W, y, n_joints=2), weighted_least_squares(W, y, 2)):
        assert np.max(np.abs(estimate.parameters / theta - 1.0)) < 1e-8, estimate.method
        assert np.all(estimate.residual_rms < 1e-9)


def test_torque_noise_only_is_unbiased_within_3_sigma(rr_ident, rr_run):
    """Seeded Monte-Carlo (40 runs), noise on τ only: the mean is within 3 standard deviations of the mean
    (σ_θ/√runs from σ²(WᵀW)⁻¹) of the truth, and the runs' spread matches the predicted σ_θ."""
    stand_in = StandInRR(rr_ident)
    theta = stand_in.base_parameters()
    W, _ = exact_system(stand_in, rr_run)
    truth = rr_run.truth
    runs = 40
    estimates, predicted = [], []
    for seed in range(runs):
        m = add_noise(rr_run.t[::10], type(truth)(truth.q[::10], truth.qd[::10], truth.qdd[::10], truth.tau[::10]),
                      rr_run.joint_names, torque_noise=2.0, seed=seed)
        estimate = ordinary_least_squares(W, m.tau.reshape(-1), n_joints=2)
        estimates.append(estimate.parameters)
        predicted.append(estimate.std)
    estimates, predicted = np.array(estimates), np.mean(predicted, axis=0)
    assert np.all(np.abs(estimates.mean(axis=0) - theta) < 3.0 * predicted / np.sqrt(runs))
    assert np.all(np.abs(estimates.std(axis=0, ddof=1) / predicted - 1.0) < 0.35)
    assert np.all(np.abs(estimates - theta) < 5.0 * predicted)  # no run far out


def test_weighted_least_squares_estimates_per_joint_noise(rr_ident, rr_run):
    """Joint 1 ten times noisier than joint 2: WLS finds both noise levels, its covariance matches its
    Monte-Carlo spread, and it is more precise than OLS on the elbow's parameters."""
    stand_in = StandInRR(rr_ident)
    theta = stand_in.base_parameters()
    W, y = exact_system(stand_in, rr_run, step=20)
    rng = np.random.default_rng(0)
    sigma = np.array([5.0, 0.5])
    wls_runs, ols_runs = [], []
    for _ in range(30):
        noisy = y + (rng.standard_normal((y.size // 2, 2)) * sigma).reshape(-1)
        wls, ols = weighted_least_squares(W, noisy, 2), ordinary_least_squares(W, noisy, n_joints=2)
        wls_runs.append(wls.parameters)
        ols_runs.append(ols.parameters)
        # from OLS residuals: the noisy joint's misfit leaks into the quiet joint's residual (~10 % here)
        assert wls.sigma == pytest.approx(sigma, rel=0.2)
        assert ols.residual_rms == pytest.approx(sigma, rel=0.2)
    wls_runs, ols_runs = np.array(wls_runs), np.array(ols_runs)
    assert np.all(np.abs(wls_runs.std(axis=0, ddof=1) / wls.std - 1.0) < 0.45)
    assert np.all(np.abs(wls_runs.mean(axis=0) - theta) < 3.0 * wls.std / np.sqrt(30))
    shared = [1, 2, 3]  # ZZ2R, MX2R, MY2 act on both joints: the quiet joint's rows pin them down
    assert np.all(wls_runs.std(axis=0)[shared] < 0.7 * ols_runs.std(axis=0)[shared])
    assert np.all(wls_runs.std(axis=0) < 1.1 * ols_runs.std(axis=0))


def test_noisy_encoders_full_processing_within_issue_tolerances(rr_ident, rr_run):
    """Encoder noise (18 bits + 2e-5 rad) and 0.5 N m torque noise, processed: inertial base parameters
    within 0.5 %, friction within 2 % (measured: 0.07 % and 0.2 %), for OLS and WLS, decimated or not."""
    stand_in = StandInRR(rr_ident)
    theta = stand_in.base_parameters()
    noisy = add_noise(rr_run.t, rr_run.truth, rr_run.joint_names, seed=7, **NOISE)
    for decimate in (1, 10):
        p = process(noisy, stand_in, decimate=decimate)
        for estimate in (ordinary_least_squares(p.W, p.y, n_joints=2, names=p.parameter_names),
                         weighted_least_squares(p.W, p.y, 2, names=p.parameter_names)):
            error = np.abs(estimate.parameters / theta - 1.0)
            assert np.max(error[INERTIAL]) < 5e-3, (decimate, estimate.method, error)
            assert np.max(error[6:]) < 2e-2, (decimate, estimate.method, error)
            assert estimate.poorly_excited() == []


def test_relative_std_and_poorly_excited_report():
    rng = np.random.default_rng(3)
    W = rng.normal(size=(400, 3))
    W[:, 2] *= 1e-3  # a parameter the data barely see
    theta = np.array([2.0, -1.0, 0.5])
    y = W @ theta + 0.01 * rng.normal(size=400)
    estimate = ordinary_least_squares(W, y, names=["good", "fine", "weak"], n_joints=2)
    relative = estimate.relative_std
    assert relative[0] == pytest.approx(100 * estimate.std[0] / abs(estimate.parameters[0]))
    assert relative[2] > 10.0 > relative[0]
    assert [name for name, _ in estimate.poorly_excited()] == ["weak"]
    assert estimate.poorly_excited(threshold=1e-9)[0][0] == "weak"  # worst first
    text = report(estimate)
    assert "OLS estimate from 400 rows" in text and "weak" in text and "poorly excited" in text
    assert text.splitlines()[-1].endswith("weak")
    # σ²(WᵀW)⁻¹ from the normal equations, on this well-scaled small problem
    sigma2 = np.sum((y - W @ estimate.parameters) ** 2) / (400 - 3)
    assert np.allclose(estimate.covariance, sigma2 * np.linalg.inv(W.T @ W), rtol=1e-9)
    assert estimate.condition == pytest.approx(np.linalg.cond(W), rel=1e-10)


def test_estimator_input_errors():
    W = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(ValueError, match="rank 2 < 3 parameters.*'c'|rank 2 < 3 parameters.*c"):
        ordinary_least_squares(np.column_stack([W[:, :2], W[:, 0] + W[:, 1]]), np.zeros(20), names=["a", "b", "c"])
    with pytest.raises(ValueError, match=r"y: expected shape \(20,\)"):
        ordinary_least_squares(W, np.zeros(19))
    with pytest.raises(ValueError, match="3 rows for 3 parameters"):
        ordinary_least_squares(W[:3], np.zeros(3))
    with pytest.raises(ValueError, match="NaN"):
        ordinary_least_squares(W, np.full(20, np.nan))
    with pytest.raises(ValueError, match="not a whole number of samples of 3 joints"):
        weighted_least_squares(W, np.zeros(20), 3)
    with pytest.raises(ValueError, match="names: 2 names for 3 parameters"):
        ordinary_least_squares(W, np.zeros(20), names=["a", "b"])
    assert isinstance(ordinary_least_squares(W, W @ [1.0, 2.0, 3.0]), Estimate)


# -------------------------------------------------------------------------------- consistent estimate

def _eigenvalues(estimate, stand_in):
    from robodyn.identification.consistent import pseudo_inertia

    return [np.linalg.eigvalsh(pseudo_inertia(estimate.parameters[start:stop]))
            for kind, _, start, stop in stand_in.dynamic_parameter_layout if kind == "link"]


def test_consistent_estimate_reproduces_consistent_noiseless_data(rr_ident, rr_run):
    pytest.importorskip("cvxpy")
    from robodyn.identification.consistent import consistent_estimate, pseudo_inertia

    stand_in = StandInRR(rr_ident)
    theta = stand_in.base_parameters()
    pi = stand_in.dynamic_parameters()
    assert all(np.linalg.eigvalsh(pseudo_inertia(pi[k:k + 10]))[0] > 0 for k in (0, 10))  # the truth is physical
    W, y = exact_system(stand_in, rr_run, step=20)
    estimate = consistent_estimate(W, y, stand_in)
    assert estimate.status == "optimal"
    assert np.max(np.abs(estimate.base_parameters / theta - 1.0)) < 1e-6
    # PSD to the conic solver's precision, relative to each matrix's scale (the optimum of unphysical data is not unique)
    assert all(values[0] >= -1e-9 * values[-1] for values in _eigenvalues(estimate, stand_in))
    assert np.all(estimate.parameters[20:] >= -1e-9)
    near = consistent_estimate(W, y, stand_in, regularization=1e-3)  # prior = the description's values
    assert np.max(np.abs(near.base_parameters / theta - 1.0)) < 1e-6
    assert np.max(np.abs(near.parameters - pi)) < 1e-2 * np.max(np.abs(pi))


def test_consistent_estimate_enforces_the_inequalities_where_least_squares_does_not(rr_ident, rr_run):
    """Torques of an unphysical arm (negative Coulomb friction on the shoulder, a link whose mass
    distribution cannot exist): OLS reproduces the unphysical values, the consistent estimate stays
    physical (every pseudo-inertia eigenvalue >= 0 to the solver's tolerance, friction >= 0) at the cost of a residual."""
    pytest.importorskip("cvxpy")
    from robodyn.identification.consistent import consistent_estimate

    stand_in = StandInRR(rr_ident)
    W, _ = exact_system(stand_in, rr_run, step=20)
    pi = stand_in.dynamic_parameters()
    pi[21] = -3.0   # Fs1 < 0
    pi[9] = -5.0    # M1 < 0: no pseudo-inertia of link 1 can be positive semidefinite with it
    y = W @ (stand_in.base_parameter_matrix() @ pi)
    ols = ordinary_least_squares(W, y)
    assert ols.parameters[7] == pytest.approx(-3.0)
    estimate = consistent_estimate(W, y, stand_in)
    assert estimate.status == "optimal" and estimate.residual_rms > 1e-3
    # PSD to the conic solver's precision, relative to each matrix's scale (the optimum of unphysical data is not unique)
    # Here the optimum lies on the cone's boundary (eigenvalue 0), which the solver meets to its feasibility
    # tolerance (Clarabel's default 1e-8, on its scaled problem): -5.7e-9 of the largest was measured.
    eigenvalues = _eigenvalues(estimate, stand_in)
    assert all(values[0] >= -1e-7 * values[-1] for values in eigenvalues)
    assert min(estimate.min_eigenvalues.values()) >= -1e-7 * max(values[-1] for values in eigenvalues)
    assert np.all(estimate.parameters[20:] >= -1e-9)
    assert estimate.parameters[9] >= -1e-9


def test_consistent_estimate_without_cvxpy_says_what_to_install(monkeypatch):
    from robodyn.identification.consistent import consistent_estimate

    monkeypatch.setitem(sys.modules, "cvxpy", None)
    with pytest.raises(ImportError, match=r'pip install "robodyn\[identify\]"'):
        consistent_estimate(np.eye(3), np.zeros(3), None, K=np.eye(3), layout=())


# ------------------------------------------------------------------- the compiled regressor (real robots)

def _has_regressor() -> bool:
    import robodyn

    return hasattr(robodyn.Robot, "base_regressor")


needs_regressor = pytest.mark.skipif(not _has_regressor(), reason="the compiled regressor has not landed yet")


def _relative_or_absolute(estimate, theta, floor):
    """|θ̂/θ − 1| for the parameters that are not zero, |θ̂ − θ| / floor for those that are."""
    zero = np.abs(theta) < 1e-12 * np.max(np.abs(theta))
    return np.where(zero, np.abs(estimate - theta) / floor, np.abs(estimate / np.where(zero, 1.0, theta) - 1.0))


@needs_regressor
def test_rr_description_exact_then_noisy_identification(load):
    """robots/rr.yaml (viscous friction D = 30, no Coulomb) with its compiled base regressor: exact
    signals to 1e-8, then noisy encoders and torques through the full processing within 0.5 % / 2 %."""
    robot = load("rr")
    robot.params["D"] = 30.0
    theta = robot.base_parameters()
    run = simulate_measurements(robot, *fourier_reference(), seed=0)
    truth = run.truth
    W = robot.base_regressor(truth.q, truth.qd, truth.qdd).reshape(-1, theta.size)
    exact = ordinary_least_squares(W, truth.tau.reshape(-1), n_joints=robot.n).parameters
    assert np.max(_relative_or_absolute(exact, theta, 1.0)) < 1e-8
    noisy = add_noise(run.t, truth, run.joint_names, seed=3, **NOISE)
    p = process(noisy, robot)
    estimate = weighted_least_squares(p.W, p.y, robot.n, names=p.parameter_names)
    names = robot.base_parameter_names
    friction = np.array([name.startswith(("Fv", "Fs")) for name in names])
    error = _relative_or_absolute(estimate.parameters, theta, 0.1 * np.min(np.abs(theta[np.abs(theta) > 1e-9])))
    assert np.max(error[~friction]) < 5e-3, dict(zip(names, error))
    assert np.max(error[friction]) < 2e-2, dict(zip(names, error))


@needs_regressor
def test_rr_description_consistent_estimate(load):
    pytest.importorskip("cvxpy")
    from robodyn.identification.consistent import consistent_estimate

    robot = load("rr")
    robot.params["D"] = 30.0
    theta = robot.base_parameters()
    run = simulate_measurements(robot, *fourier_reference(duration=10.0, rate=200.0), seed=0, oversample=1)
    truth = run.truth
    W = robot.base_regressor(truth.q, truth.qd, truth.qdd).reshape(-1, theta.size)
    estimate = consistent_estimate(W, truth.tau.reshape(-1), robot)
    scale = np.max(np.abs(theta))
    assert np.max(np.abs(estimate.base_parameters - theta)) < 1e-6 * scale
    assert min(estimate.min_eigenvalues.values()) >= -1e-9
    for kind, _, start, stop in robot.dynamic_parameter_layout:
        if kind in ("rotor", "viscous", "coulomb"):
            assert np.all(estimate.parameters[start:stop] >= -1e-9)


@needs_regressor
@pytest.mark.slow
def test_puma560_exact_signals_recover_the_base_parameters(load):
    robot = load("puma560")
    theta = robot.base_parameters()
    t, q, qd, qdd = fourier_reference(duration=20.0, rate=500.0, n=robot.n, seed=5, amplitude=0.8)
    run = simulate_measurements(robot, t, q, qd, qdd, seed=0, oversample=2)
    truth = run.truth
    W = robot.base_regressor(truth.q, truth.qd, truth.qdd).reshape(-1, theta.size)
    estimate = ordinary_least_squares(W, truth.tau.reshape(-1), n_joints=robot.n)
    assert np.max(np.abs(estimate.parameters - theta)) < 1e-8 * np.max(np.abs(theta)), estimate.condition
