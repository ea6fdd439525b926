"""The self-check's closed-chain part: what certifies a compiled closed-chain module.

On the self-check's assembled samples (away from singularities), with the default parameters:

* the loops stay closed: the tree's loop equations h(qt) = 0 at the closed-form positions, H qt' = 0
  with the passive velocities Jp q', and H qt'' + H' qt' = 0 with qt'' = G q'' + G' q';
* J, Jp against central differences of the DGM and of the passive positions, J' (hence b = J' q')
  against central differences of J along q';
* the multiplier (KKT) model of the virtual tree, [M_x Hᵀ; H 0] [qt''; λ] = [S τ − bias_x; −H' qt'],
  gives the reduced forward dynamics' accelerations (an independent route: no G, no projection);
* along a free run of 0.2 s (RK4 at 1 kHz, from a sampled state at low speed): the loop residual, and
  the energy balance E(t) − E(0) = −∫ q'ᵀ friction dt;
* the nearest singularity over 2,000 configurations drawn within the joint limits: reported (the
  normalised measures are sines of the angles that vanish there), not judged.
"""

from __future__ import annotations

import numpy as np

from .selfcheck import DIFFERENCE_TOLERANCE, IDENTITY_TOLERANCE, Check, _joint_samples, _relative


def _central(function, q: np.ndarray, direction: np.ndarray, step: float) -> np.ndarray:
    return (function(q + step * direction) - function(q - step * direction)) / (2 * step)


def closed_chain_certificate(robot, routines, values: dict, seed: int = 0) -> list[Check]:
    model = routines.model
    chain = model.closed_chain
    q, qd, tau = values["q"], values["qd"], values["tau"]
    n = model.n
    checks = []
    qt = robot.tree_positions(q)
    qtd = robot.tree_velocities(q, qd)
    scale = max(1.0, float(np.max(np.abs(qt))))
    checks.append(Check("loop_residual", float(np.max(np.abs(robot.loop_residual(qt)))) / scale, IDENTITY_TOLERANCE))
    H = robot.loop_jacobian(qt)
    velocity = np.einsum("kij,kj->ki", H, qtd)
    checks.append(Check("loop_velocity", float(np.max(np.abs(velocity))) / max(
        float(np.max(np.abs(H))) * float(np.max(np.abs(qtd))), 1e-300), IDENTITY_TOLERANCE))
    qdd = values["qdd"]
    Jp, Jp_dot = robot.passive_jacobian(q), robot.passive_jacobian_derivative(q, qd)
    qtdd = np.empty_like(qt)
    qtdd[:, list(chain.actuated)] = qdd
    qtdd[:, list(chain.passive)] = np.einsum("kij,kj->ki", Jp, qdd) + np.einsum("kij,kj->ki", Jp_dot, qd)
    acceleration = np.einsum("kij,kj->ki", H, qtdd) + robot.loop_bias(qt, qtd)
    checks.append(Check("loop_acceleration", float(np.max(np.abs(acceleration))) / max(
        float(np.max(np.abs(np.einsum("kij,kj->ki", H, qtdd)))), 1e-300), IDENTITY_TOLERANCE))

    # First and second order against central differences of the closed-form geometry.
    worst = {"task_jacobian": 0.0, "passive_jacobian": 0.0, "task_jacobian_derivative": 0.0}
    for k in range(q.shape[0]):
        J, Jp_k = robot.task_jacobian(q[k]), Jp[k]
        fd_J = np.column_stack([_central(robot.dgm, q[k], e, 1e-6) for e in np.eye(n)])
        fd_Jp = np.column_stack([_central(robot.passive_positions, q[k], e, 1e-6) for e in np.eye(n)])
        fd_Jdot = _central(robot.task_jacobian, q[k], qd[k], 1e-6)
        worst["task_jacobian"] = max(worst["task_jacobian"], _relative(fd_J, J))
        worst["passive_jacobian"] = max(worst["passive_jacobian"], _relative(fd_Jp, Jp_k))
        worst["task_jacobian_derivative"] = max(worst["task_jacobian_derivative"],
                                                _relative(fd_Jdot, robot.task_jacobian_derivative(q[k], qd[k])))
    checks += [Check(f"{name}_vs_differences", error, DIFFERENCE_TOLERANCE) for name, error in worst.items()]

    # The multiplier model of the virtual tree against the reduced forward dynamics.
    torque = robot.inverse_dynamics(q, qd, qdd) + tau * 1e-3
    reduced = robot.forward_dynamics(q, qd, torque)
    M_tree, bias = robot.tree_M(qt), robot.tree_nonlinear_effects(qt, qtd)
    loop_bias = robot.loop_bias(qt, qtd)
    t, c = qt.shape[1], H.shape[1]
    worst_kkt = 0.0
    for k in range(q.shape[0]):
        kkt = np.zeros((t + c, t + c))
        kkt[:t, :t], kkt[:t, t:], kkt[t:, :t] = M_tree[k], H[k].T, H[k]
        rhs = np.zeros(t + c)
        rhs[list(chain.actuated)] = torque[k]
        rhs[:t] -= bias[k]
        rhs[t:] = -loop_bias[k]
        solution = np.linalg.solve(kkt, rhs)
        # LU of the KKT matrix loses about cond(KKT) ulps: judged relative to that.
        worst_kkt = max(worst_kkt, _relative(solution[list(chain.actuated)], reduced[k])
                        / max(1.0, 1e-4 * float(np.linalg.cond(kkt))))
    checks.append(Check("multiplier_model_forward_dynamics", worst_kkt, IDENTITY_TOLERANCE))

    coulomb = any(joint.coulomb != 0 for joint in chain.tree.description.joints)
    checks += _free_run(robot, q[0], 0.1 * qd[0], coulomb)
    checks.append(_nearest_singularity(robot, model.description, seed))
    return checks


#: RK4 at fixed steps integrates Coulomb friction's jumps (at velocity reversals) to first order only.
COULOMB_BALANCE_TOLERANCE = 1e-4


def _free_run(robot, q0: np.ndarray, qd0: np.ndarray, coulomb: bool = False) -> list[Check]:
    """Loop residual and energy balance along 0.2 s of free motion (RK4, 1 kHz)."""
    from robodyn.simulation import simulate

    run = simulate(robot, None, duration=0.2, rate=1000.0, q0=q0, qd0=qd0, singularity_margin=0.0)
    qt = robot.tree_positions(run.q)
    residual = float(np.max(np.abs(robot.loop_residual(qt)))) / max(1.0, float(np.max(np.abs(qt))))
    energy = robot.total_energy(run.q, run.qd)
    # Friction forces: the bias minus C q̇ + g (passive joints' friction is in the bias only).
    forces = robot.nonlinear_effects(run.q, run.qd) - np.einsum("kij,kj->ki", robot.C(run.q, run.qd), run.qd) \
        - robot.g(run.q)
    power = np.einsum("ki,ki->k", run.qd, forces)
    dissipated = np.concatenate(([0.0], np.cumsum(0.5 * (power[1:] + power[:-1]) * np.diff(run.t))))
    balance = energy - energy[0] + dissipated
    scale = max(float(np.max(np.abs(energy))), float(np.max(robot.kinetic_energy(run.q, run.qd))), 1e-300)
    return [Check("loop_residual_along_run", residual, IDENTITY_TOLERANCE),
            Check("energy_balance_along_run", float(np.max(np.abs(balance))) / scale,
                  COULOMB_BALANCE_TOLERANCE if coulomb else DIFFERENCE_TOLERANCE)]


def _nearest_singularity(robot, description, seed: int, count: int = 2000) -> Check:
    rng = np.random.default_rng(seed + 1)
    q = _joint_samples(description, count, rng)
    x = robot.dgm_modes(q)[:, 0 if robot.assembly_mode == 1 else 1, :]
    assembled = np.all(np.isfinite(x), axis=1)
    if not np.any(assembled):
        return Check("nearest_singularity", 0.0, 0.0, note=f"none of {count} configurations within the joint limits "
                     "assembles")
    measures = np.abs(robot.singularity_measures(q[assembled]))
    return Check("nearest_singularity", 0.0, 0.0, note=(
        f"{int(assembled.sum())} of {count} configurations within the joint limits assemble; the smallest "
        f"normalised |det A| (type 2) among them is {measures[:, 2].min():.3g}, |det B| (type 1) "
        f"{measures[:, 3].min():.3g}"))


def constrained_certificate(robot, routines, seed: int = 0) -> list[Check]:
    """A closed chain without a closed form: its multiplier model where the loops close (found by Newton from
    random guesses within the joint limits): the KKT system solvable, the loop equations' velocity level,
    and a 0.2 s free run (RK4 with projection, 1 kHz) keeping the loops closed and, without friction, its
    energy."""
    from robodyn.closed_chain import ConstrainedDynamics

    model = ConstrainedDynamics(robot)
    description = routines.model.description
    rng = np.random.default_rng(seed)
    qt = None
    for q in _joint_samples(description, 64, rng):
        try:
            qt = model.assemble(q[model.actuated], q[model.passive])
            break
        except ValueError:
            continue
    if qt is None:
        return [Check("assembles_within_the_limits", np.inf, 0.0)]
    qtd = np.zeros_like(qt)
    qtd[model.actuated] = rng.uniform(-0.5, 0.5, len(model.actuated))
    qtd[model.passive] = model.passive_velocities(qt, qtd[model.actuated])
    checks = [Check("loop_velocity", float(np.max(np.abs(robot.loop_jacobian(qt) @ qtd))) / max(
        float(np.max(np.abs(qtd))), 1e-300), IDENTITY_TOLERANCE)]
    try:
        model.forward_dynamics(qt, qtd, np.zeros(len(model.actuated)))
        solvable = 0.0
    except (ValueError, np.linalg.LinAlgError):
        solvable = np.inf
    checks.append(Check("multiplier_model_solvable", solvable, 0.0))
    if not np.isfinite(solvable):
        return checks
    energy0 = model.energy(qt, qtd)
    q, v, residual, drift = qt, qtd, 0.0, 0.0
    for _ in range(200):
        q, v = model.step(q, v, np.zeros(len(model.actuated)), 1e-3)
        residual = max(residual, float(np.max(np.abs(robot.loop_residual(q)))))
        drift = max(drift, abs(model.energy(q, v) - energy0))
    checks.append(Check("loop_residual_along_run", residual / max(1.0, float(np.max(np.abs(q)))), IDENTITY_TOLERANCE))
    joints = routines.model.closed_chain.tree.description.joints
    frictionless = all(joint.viscous == 0 and joint.coulomb == 0 for joint in joints)
    if frictionless:
        scale = max(abs(energy0), 0.5 * float(v @ robot.tree_M(q) @ v), 1e-300)
        checks.append(Check("energy_along_run", drift / scale, DIFFERENCE_TOLERANCE))
    return checks
