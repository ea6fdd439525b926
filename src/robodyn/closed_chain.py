"""The multiplier model of a closed chain: its virtual tree plus the loop equations, solved numerically.

Every closed-chain module compiles the virtual tree's dynamics (``tree_M``, ``tree_nonlinear_effects``,
in the tree coordinates qt: every joint, actuated and passive) and its loop equations h(qt) = 0
(``loop_residual``, the Jacobian H = ∂h/∂qt as ``loop_jacobian``, Ḣ q̇t as ``loop_bias``). From them:

    [M   Hᵀ] [q̈t]   [S τ − bias          ]
    [H   0 ] [−λ ] = [−Ḣ q̇t − 2α H q̇t − β² h]

with S placing the actuated torques in the tree, λ the cut joints' constraint forces and α, β
Baumgarte gains that pull drift back to the constraint; after each integration step the state is
projected back on h = 0 and H q̇t = 0 (minimum-norm corrections). A mechanism whose geometry has a
closed form gets a compiled reduced model in its actuated coordinates as well, and this model is its
independent cross-check; one without a closed form is simulated with this model (``simulate`` uses it).

Positions of the passive joints for given actuated ones come from Newton's method on h, from a guess
(``assemble``): along a path, pass the previous solution as the guess to stay on one branch
(continuation).
"""

from __future__ import annotations

import numpy as np

__all__ = ["DEFAULT_BAUMGARTE", "ConstrainedDynamics"]

#: (α, β) = (ζ ω, ω) with ω = 10 rad/s, ζ = 1 (critical damping): h'' + 2α h' + β² h = 0 pulls drift back
#: over about 0.1 s without stiffening the ODE at 1 kHz.
DEFAULT_BAUMGARTE = (10.0, 10.0)
#: Passive positions tried, in turn, when ``assemble`` is given no guess.
DEFAULT_GUESSES = (0.3, -0.3, 1.2, -1.2, 2.2, -2.2)


class ConstrainedDynamics:
    """The KKT (multiplier) model of a closed-chain ``robot`` in its tree coordinates."""

    def __init__(self, robot, baumgarte: tuple[float, float] = DEFAULT_BAUMGARTE):
        if not getattr(robot, "is_closed_chain", False):
            raise TypeError(f"robot {robot.name!r} is not a closed chain")
        alpha, beta = (float(v) for v in baumgarte)
        if not (np.isfinite(alpha) and np.isfinite(beta) and alpha >= 0 and beta >= 0):
            raise ValueError(f"baumgarte: expected two finite, non-negative gains, got {baumgarte!r}")
        info = robot.metadata["closed_chain"]
        self.robot = robot
        self.alpha, self.beta = alpha, beta
        self.actuated = np.array(info["actuated"], dtype=int)
        self.passive = np.array(info["passive"], dtype=int)
        self.t = len(info["tree_joint_names"])
        self.k = int(info["constraints"])
        self.joint_names = tuple(info["tree_joint_names"])

    # -- geometry ---------------------------------------------------------------------------------

    def assemble(self, qa, guess=None, tolerance: float = 1e-13, iterations: int = 50) -> np.ndarray:
        """The tree positions with actuated positions ``qa`` that close the loops, by Newton's method (damped:
        Levenberg-Marquardt, SciPy) on the passive positions from ``guess`` (tree positions, or passive
        positions only; default: a few spread starts). ValueError when it does not converge (the mechanism cannot be
        assembled near the guess)."""
        qa = np.asarray(qa, dtype=float)
        if guess is None:  # zeros can be a stationary point of the residual (links folded): spread the starts
            for start in DEFAULT_GUESSES:
                try:
                    return self.assemble(qa, np.full(len(self.passive), start), tolerance, iterations)
                except ValueError:
                    continue
            raise ValueError(f"the loops do not close at actuated positions {qa.tolist()} from any default guess: "
                             "the mechanism cannot be assembled there, or give a guess")
        qt = np.zeros(self.t)
        if guess is not None:
            guess = np.asarray(guess, dtype=float)
            if guess.shape == (self.t,):
                qt[:] = guess
            elif guess.shape == (len(self.passive),):
                qt[self.passive] = guess
            else:
                raise ValueError(f"guess: expected {self.t} tree or {len(self.passive)} passive positions, "
                                 f"got shape {guess.shape}")
        qt[self.actuated] = qa
        from scipy.optimize import root

        def residual(passive):
            qt[self.passive] = passive
            return self.robot.loop_residual(qt), self.robot.loop_jacobian(qt)[:, self.passive]

        # Levenberg-Marquardt: Newton's steps near the solution, damped far from it.
        result = root(residual, qt[self.passive].copy(), jac=True, method="lm",
                      options={"xtol": 1e-15, "ftol": 1e-15, "maxiter": 100 * iterations})
        qt[self.passive] = result.x
        h = self.robot.loop_residual(qt)
        if np.max(np.abs(h)) <= tolerance * max(1.0, float(np.max(np.abs(qt)))):
            return qt
        raise ValueError(f"the loops do not close near the guess at actuated positions {qa.tolist()} "
                         f"(residual {float(np.max(np.abs(h))):.3g}): the mechanism cannot be assembled there, or "
                         "only far from the guess")

    def follow(self, qa_path, guess=None) -> np.ndarray:
        """Tree positions along a path of actuated positions (rows), each solved from the previous one
        (continuation: the branch of the first solution is kept)."""
        rows = []
        for qa in np.asarray(qa_path, dtype=float):
            guess = self.assemble(qa, guess)
            rows.append(guess)
        return np.array(rows)

    def passive_velocities(self, qt, qad) -> np.ndarray:
        """Passive velocities that keep the loops closed: −A⁻¹ B q̇a (A, B: the passive and actuated columns
        of H)."""
        H = self.robot.loop_jacobian(np.asarray(qt, dtype=float))
        return np.linalg.solve(H[:, self.passive], -H[:, self.actuated] @ np.asarray(qad, dtype=float))

    def singularity_measure(self, qt) -> float:
        """Smallest over largest singular value of A = ∂h/∂q_passive: zero on a type-2 singularity."""
        s = np.linalg.svd(self.robot.loop_jacobian(np.asarray(qt, dtype=float))[:, self.passive], compute_uv=False)
        return float(s[-1] / s[0]) if s[0] > 0 else 0.0

    # -- dynamics -----------------------------------------------------------------------------------

    def forward_dynamics(self, qt, qtd, tau) -> tuple[np.ndarray, np.ndarray]:
        """(q̈t, λ) under actuated torques ``tau`` (one per actuated joint) or tree torques (one per joint)."""
        from scipy.linalg import solve

        qt, qtd = np.asarray(qt, dtype=float), np.asarray(qtd, dtype=float)
        tau = np.asarray(tau, dtype=float)
        effort = np.zeros(self.t)
        if tau.shape == (len(self.actuated),):
            effort[self.actuated] = tau
        elif tau.shape == (self.t,):
            effort[:] = tau
        else:
            raise ValueError(f"tau: expected {len(self.actuated)} actuated or {self.t} tree torques, got {tau.shape}")
        robot, t = self.robot, self.t
        H = robot.loop_jacobian(qt)
        kkt = np.zeros((t + self.k, t + self.k))
        kkt[:t, :t] = robot.tree_M(qt)
        kkt[:t, t:] = H.T
        kkt[t:, :t] = H
        rhs = np.empty(t + self.k)
        rhs[:t] = effort - robot.tree_nonlinear_effects(qt, qtd)
        rhs[t:] = -robot.loop_bias(qt, qtd) - 2 * self.alpha * (H @ qtd) - self.beta**2 * robot.loop_residual(qt)
        solution = solve(kkt, rhs, assume_a="sym", check_finite=True)
        return solution[:t], -solution[t:]

    def project(self, qt, qtd, tolerance: float = 1e-14, iterations: int = 20) -> tuple[np.ndarray, np.ndarray]:
        """The nearest state on the constraint: positions by Gauss-Newton on h (minimum-norm steps), then
        velocities with H q̇t = 0 (minimum-norm correction)."""
        qt, qtd = np.array(qt, dtype=float), np.array(qtd, dtype=float)
        for _ in range(iterations):
            h = self.robot.loop_residual(qt)
            if np.max(np.abs(h)) <= tolerance * max(1.0, float(np.max(np.abs(qt)))):
                break
            step, *_ = np.linalg.lstsq(self.robot.loop_jacobian(qt), -h, rcond=None)
            qt += step
        H = self.robot.loop_jacobian(qt)
        correction, *_ = np.linalg.lstsq(H, H @ qtd, rcond=None)
        return qt, qtd - correction

    def step(self, qt, qtd, tau, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """One RK4 step of the multiplier model under constant ``tau``, projected back on the constraint."""
        def f(q, v):
            return v, self.forward_dynamics(q, v, tau)[0]

        qt, qtd = np.asarray(qt, dtype=float), np.asarray(qtd, dtype=float)
        k1q, k1v = f(qt, qtd)
        k2q, k2v = f(qt + 0.5 * dt * k1q, qtd + 0.5 * dt * k1v)
        k3q, k3v = f(qt + 0.5 * dt * k2q, qtd + 0.5 * dt * k2v)
        k4q, k4v = f(qt + dt * k3q, qtd + dt * k3v)
        q_next = qt + dt / 6 * (k1q + 2 * k2q + 2 * k3q + k4q)
        v_next = qtd + dt / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
        return self.project(q_next, v_next)

    def energy(self, qt, qtd) -> float:
        """Kinetic plus potential energy of the tree (the mechanism's, on the constraint)."""
        qtd = np.asarray(qtd, dtype=float)
        kinetic = 0.5 * qtd @ self.robot.tree_M(np.asarray(qt, dtype=float)) @ qtd
        return float(kinetic + self.robot.tree_potential_energy(np.asarray(qt, dtype=float)))
