"""Adaptive Slotine-Li control (robodyn.AdaptiveSlotineLi) on the notes' RR arm.

The plant is robots/rr.yaml with a heavier second link (m2 = 75 kg instead of 50): its base
parameters differ from the model's by 24-41 %, and the controller starts from the model's. On a
persistently exciting reference (three sines per joint, pairwise frequency ratios far from small
rationals, so nothing repeats within a run) the oracles are:

* the tracking error converges (late ≪ early, below a stated bound) and stays large without
  adaptation (Γ = 0, the negative control);
* θ̂ converges to the plant's base parameters (inertial ones to < 1 %; those the description
  fixes at zero, MY and the friction, in absolute terms: the zero-order hold's bias lands there);
* V = ½ sᵀ M s + ½ θ̃ᵀ Γ⁻¹ θ̃ does not increase beyond the discretisation, and its decrease is the
  dissipation ∫ sᵀ K_D s (V̇ = −sᵀ K_D s in continuous time);
* the bias is the discretisation's: it halves with the control period;
* with Γ = 0 and the model's parameters the law is the built-in SlotineLi, step for step.

Measured (500 Hz, 20 s, τₐ = 1 s, mean of θ̂ over the last 5 s): max |q̃| 3.3e-2 rad in the first
5 s, 1.5e-3 in the last 5 (6e-2 without adaptation); inertial base parameters within 0.3 %; MY1,
MY2 within 0.6 kg m; Fv within 6 N m s/rad and Fs within 2 N m (half of all that at 1 kHz).
"""

from __future__ import annotations

import numpy as np
import pytest

import robodyn
from robodyn import AdaptiveSlotineLi, Harness, SimulatedPlant, Sine, SlotineLi, simulate
from robodyn.identification import FourierTrajectory
from robodyn.references import Reference

AMPLITUDES = np.array([[0.6, 0.3, 0.2], [0.5, 0.35, 0.25]])  # rad, per joint and sine
FREQUENCIES = np.array([[0.21, 0.53, 1.07], [0.31, 0.67, 1.39]])  # Hz
LAMBDA = 10.0  # 1/s
OMEGA = 20.0  # rad/s: K_D = OMEGA M̂ii at the start, as SlotineLi's default K
TIME_CONSTANT = 1.0  # s, adaptation (suggest_gamma)
INERTIAL = ("ZZ1R", "MX1R", "ZZ2R", "MX2R")  # the base parameters m2 changes (well excited)
RATE, DURATION, LATE = 500.0, 20.0, 5.0  # Hz, s, s: the last LATE seconds are "late"


class SumOfSines(Reference):
    """q_i(t) = Σ_j A_ij sin(2π f_ij t): each joint a sum of sines."""

    kind = "sum-of-sines"

    def __init__(self, amplitudes, frequencies):
        self.amplitudes = np.asarray(amplitudes, dtype=np.float64)
        self.omega = 2.0 * np.pi * np.asarray(frequencies, dtype=np.float64)

    @property
    def n(self) -> int:
        return self.amplitudes.shape[0]

    def _evaluate(self, t):
        angle = t[:, :, None] * self.omega  # (N, n, sines)
        sin, cos = np.sin(angle), np.cos(angle)
        a, w = self.amplitudes, self.omega
        return (a * sin).sum(-1), (a * w * cos).sum(-1), -(a * w**2 * sin).sum(-1)


REFERENCE = SumOfSines(AMPLITUDES, FREQUENCIES)


def _setup(load):
    model = load("rr")
    plant = model.copy()
    plant.params["m2"] = 75.0
    q0, qd0, _ = REFERENCE.evaluate(0.0)
    kd = OMEGA * np.diag(model.M(q0))
    return model, plant, q0, qd0, kd


def _run(load, *, gamma="suggested", rate=RATE, duration=DURATION, update="euler"):
    model, plant, q0, qd0, kd = _setup(load)
    if isinstance(gamma, str):
        gamma = AdaptiveSlotineLi.suggest_gamma(model, REFERENCE, kd, TIME_CONSTANT)
    controller = AdaptiveSlotineLi(model, REFERENCE, Lambda=LAMBDA, Kd=kd, Gamma=gamma, update=update)
    run = simulate(plant, controller, duration=duration, rate=rate, q0=q0, qd0=qd0)
    return model, plant, controller, run


def _windows(run, controller):
    """(max |q̃| over the first LATE s, over the last LATE s, mean θ̂ over the last LATE s)."""
    error = np.max(np.abs(run.tracking_error), axis=1)
    early, late = run.t < LATE, run.t > run.t[-1] - LATE
    return error[early].max(), error[late].max(), controller.estimates[late].mean(axis=0)


@pytest.fixture(scope="module")
def adaptive_run(load):
    return _run(load)


def test_the_plant_differs_from_the_model(load):
    model, plant, *_ = _setup(load)
    names = model.base_parameter_names
    true, initial = plant.base_parameters(), model.base_parameters()
    changed = {name for name, a, b in zip(names, true, initial) if abs(a - b) > 0.2 * abs(a)}
    assert changed == set(INERTIAL)
    assert all(true[names.index(name)] == 0.0 for name in ("MY1", "MY2", "Fv1", "Fv2", "Fs1", "Fs2"))


@pytest.mark.parametrize("update", ["euler", "trapezoid"])
def test_tracking_error_and_estimate_converge(update, load, adaptive_run):
    model, plant, controller, run = adaptive_run if update == "euler" else _run(load, update=update)
    assert controller.estimates.shape == (len(run.t), len(model.base_parameter_names))
    assert np.array_equal(controller.times, run.t)
    assert np.array_equal(controller.estimates[0], model.base_parameters())
    early, late, estimate = _windows(run, controller)
    assert early > 0.02 and late < 3e-3 and late < early / 10, (early, late)
    names, true = controller.base_parameter_names, plant.base_parameters()
    for name in INERTIAL:
        i = names.index(name)
        assert abs(estimate[i] - true[i]) < 0.01 * abs(true[i]), (name, estimate[i], true[i])
    absolute = {"MY1": 1.5, "MY2": 1.5, "Fv1": 10.0, "Fv2": 3.0, "Fs1": 5.0, "Fs2": 3.0}  # true values 0
    for name, bound in absolute.items():
        assert abs(estimate[names.index(name)]) < bound, (name, estimate[names.index(name)])


def test_without_adaptation_the_wrong_model_keeps_a_larger_error(load, adaptive_run):
    *_, controller, run = adaptive_run
    _, late_adaptive, _ = _windows(run, controller)
    _, _, fixed, run_fixed = _run(load, gamma=0.0)
    early, late, estimate = _windows(run_fixed, fixed)
    assert np.array_equal(estimate, fixed.theta0)  # Γ = 0: θ̂ never moves
    assert late > 0.03 and late > 0.5 * early and late > 20 * late_adaptive, (early, late, late_adaptive)


def test_lyapunov_function_decreases_by_the_dissipation(adaptive_run):
    _, plant, controller, run = adaptive_run
    V = controller.lyapunov(run, plant.base_parameters())
    q_d, qd_d, _ = REFERENCE.evaluate(run.t)
    s = run.qd - qd_d + LAMBDA * (run.q - q_d)
    power = np.einsum("ki,i,ki->k", s, controller.Kd, s)
    dissipated = np.concatenate(([0.0], np.cumsum(0.5 * np.diff(run.t) * (power[1:] + power[:-1]))))
    assert np.max(np.diff(V)) < 1e-4 * V[0]  # measured 1.4e-5
    assert V[-1] < 2e-3 * V[0]
    assert np.max(np.abs(V - V[0] + dissipated)) < 0.02 * V[0]  # measured 0.9 %


def test_the_bias_is_the_discretisation_and_halves_with_the_period(load, adaptive_run):
    _, plant, controller, run = adaptive_run
    *_, fine, run_fine = _run(load, rate=2 * RATE)
    true = plant.base_parameters()
    _, late, estimate = _windows(run, controller)
    _, late_fine, estimate_fine = _windows(run_fine, fine)
    assert 0.3 < late_fine / late < 0.7, (late, late_fine)
    bias, bias_fine = np.linalg.norm(estimate - true), np.linalg.norm(estimate_fine - true)
    assert bias_fine < 0.7 * bias, (bias, bias_fine)


def test_gamma_zero_with_the_model_estimate_is_the_builtin_slotine_li(load):
    model, plant, _, _, kd = _setup(load)
    reference = Sine([0.1, -0.2], [0.6, 0.4], [0.3, 0.5])
    adaptive = AdaptiveSlotineLi(model, reference, Lambda=LAMBDA, Kd=kd, Gamma=0.0)
    builtin = SlotineLi(model, reference, lam=LAMBDA, k=kd)
    rng = np.random.default_rng(11)
    for k in range(20):
        q, qd = rng.uniform(-2, 2, 2), rng.uniform(-2, 2, 2)
        np.testing.assert_allclose(adaptive(0.01 * k, q, qd), builtin(0.01 * k, q, qd), rtol=1e-12, atol=1e-9)
    start = reference.evaluate(0.0)[0]
    ours = simulate(plant, AdaptiveSlotineLi(model, reference, Lambda=LAMBDA, Kd=kd, Gamma=0.0), duration=2.0,
                    rate=RATE, q0=start + 0.05)
    theirs = simulate(plant, builtin, duration=2.0, rate=RATE, q0=start + 0.05)  # the compiled C loop
    np.testing.assert_allclose(ours.q, theirs.q, rtol=0, atol=1e-10)
    np.testing.assert_allclose(ours.tau, theirs.tau, rtol=1e-9, atol=1e-7)


def test_update_rules_follow_their_formulas(load):
    model, *_, kd = _setup(load)
    b = len(model.base_parameter_names)
    rng = np.random.default_rng(3)
    root = rng.normal(size=(b, b))
    for gamma in (rng.uniform(0.1, 1.0, b), root @ root.T / b):
        matrix = np.diag(gamma) if gamma.ndim == 1 else gamma
        theta0 = model.base_parameters() * 1.3
        for update in ("euler", "trapezoid"):
            controller = AdaptiveSlotineLi(model, REFERENCE, Lambda=[8.0, 12.0], Kd=kd, Gamma=gamma, theta0=theta0,
                                           update=update)
            theta, previous = theta0.copy(), None
            for t in (0.0, 0.004, 0.01, 0.011):  # irregular steps: dt from the calls
                q, qd = rng.uniform(-1, 1, 2), rng.uniform(-1, 1, 2)
                q_d, qd_d, qdd_d = REFERENCE.evaluate(t)
                e, ed = q - q_d, qd - qd_d
                qdr, qddr = qd_d - [8.0, 12.0] * e, qdd_d - [8.0, 12.0] * ed
                s = qd - qdr
                Y = model.slotine_li_regressor(q, qd, qdr, qddr)
                if previous is not None:
                    dt, gradient = t - previous[0], previous[1]
                    theta = theta - dt * matrix @ (gradient if update == "euler" else 0.5 * (gradient + Y.T @ s))
                tau = controller(t, q, qd)
                np.testing.assert_allclose(controller.theta, theta, rtol=1e-12, atol=1e-12)
                np.testing.assert_allclose(tau, Y @ theta - kd * s, rtol=1e-12, atol=1e-9)
                # Y θ is the model's M q̈r + C q̇r + g + friction, with the model's own parameters
                previous = (t, Y.T @ s)
            np.testing.assert_allclose(controller.estimates[-1], theta, rtol=1e-12, atol=1e-12)


def test_harness_runs_reset_and_reference_blocks(load):
    model, plant, q0, qd0, kd = _setup(load)
    gamma = AdaptiveSlotineLi.suggest_gamma(model, REFERENCE, kd, TIME_CONSTANT, diagonal=True)
    controller = AdaptiveSlotineLi(model, REFERENCE, Lambda=LAMBDA, Kd=kd, Gamma=gamma, block=7)
    first = Harness(SimulatedPlant(plant, 1 / RATE, q0, qd0), controller, RATE).run(ticks=50)
    estimates = controller.estimates
    assert estimates.shape == (51, len(gamma)) and not np.array_equal(estimates[-1], estimates[0])
    # a new run starts again from theta0: the same run gives the same estimates
    second = Harness(SimulatedPlant(plant, 1 / RATE, q0, qd0), controller, RATE).run(ticks=50)
    np.testing.assert_array_equal(controller.estimates, estimates)
    np.testing.assert_array_equal(second.tau, first.tau)
    # blocks of the grid (7 ticks here) give what evaluating the reference at each call gives
    direct = AdaptiveSlotineLi(model, REFERENCE, Lambda=LAMBDA, Kd=kd, Gamma=gamma)
    direct._reference_at = lambda t, count: np.array(REFERENCE.evaluate(t))
    third = Harness(SimulatedPlant(plant, 1 / RATE, q0, qd0), direct, RATE).run(ticks=50)
    np.testing.assert_allclose(third.tau, first.tau, rtol=1e-13, atol=1e-10)
    # reset keeps what was learnt when asked to
    controller.reset(theta0=estimates[-1])
    controller(0.0, q0, qd0)
    np.testing.assert_array_equal(controller.estimates[0], estimates[-1])


def test_a_fourier_excitation_is_a_reference_too(load):
    model, plant, _, _, kd = _setup(load)
    trajectory = FourierTrajectory(frequency=0.25, a=[[0.5, 0.4, 0.3], [0.4, 0.5, 0.4]], b=np.zeros((2, 3)),
                                   offsets=[0.2, -0.3], joint_names=model.joint_names)
    gamma = AdaptiveSlotineLi.suggest_gamma(model, trajectory, kd, TIME_CONSTANT)
    q_start, qd_start, _ = trajectory.evaluate(0.0)
    late = []
    for g in (gamma, 0.0):
        controller = AdaptiveSlotineLi(model, trajectory, Lambda=LAMBDA, Kd=kd, Gamma=g)
        run = simulate(plant, controller, duration=12.0, rate=RATE, q0=q_start, qd0=qd_start)
        assert run.q_ref is None  # not a robodyn Reference: the trajectory does not record it
        error = np.max(np.abs(run.q - trajectory.evaluate(run.t)[0]), axis=1)
        late.append(error[run.t > 8.0].max())
    assert late[0] < 0.2 * late[1], late


def test_suggested_gamma_gives_every_excited_direction_the_time_constant(load):
    model, *_, kd = _setup(load)
    gamma = AdaptiveSlotineLi.suggest_gamma(model, REFERENCE, kd, 2.0, duration=20.0, samples=400)
    t = np.linspace(0.0, 20.0, 400, endpoint=False)
    q, qd, qdd = (np.ascontiguousarray(v) for v in REFERENCE.evaluate(t))
    Y = model.slotine_li_regressor(q, qd, qd, qdd)
    R = np.einsum("kia,i,kib->ab", Y, 1.0 / kd, Y) / len(t)
    np.testing.assert_allclose(gamma @ R, np.eye(len(gamma)) / 2.0, atol=1e-8)
    diagonal = AdaptiveSlotineLi.suggest_gamma(model, REFERENCE, kd, 2.0, diagonal=True, duration=20.0)
    np.testing.assert_allclose(diagonal * np.diag(R), 0.5, rtol=1e-12)


def test_arguments_are_checked(load):
    model, *_ = _setup(load)
    b = len(model.base_parameter_names)

    def make(**arguments):
        return AdaptiveSlotineLi(model, REFERENCE, **({"Lambda": 1.0, "Kd": 1.0, "Gamma": 1.0} | arguments))

    with pytest.raises(ValueError, match="Gamma"):
        make(Gamma=-1.0)
    with pytest.raises(ValueError, match="symmetric"):
        make(Gamma=np.triu(np.ones((b, b))))
    with pytest.raises(ValueError, match="semi-definite"):
        make(Gamma=-np.eye(b))
    with pytest.raises(ValueError, match="theta0"):
        make(theta0=np.zeros(b + 1))
    with pytest.raises(ValueError, match="update"):
        make(update="rk4")
    with pytest.raises(ValueError, match="Lambda"):
        make(Lambda=[1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="reference"):
        AdaptiveSlotineLi(model, lambda t: t, Lambda=1.0, Kd=1.0, Gamma=1.0)
    controller = make()
    with pytest.raises(ValueError, match="q"):
        controller(0.0, np.zeros(3), np.zeros(2))
    assert controller(0.0, [0.0, 0.0], [0.0, 0.0]).shape == (2,)  # lists are converted
    assert controller.base_parameter_names == model.base_parameter_names
    assert "AdaptiveSlotineLi" in robodyn.__all__
