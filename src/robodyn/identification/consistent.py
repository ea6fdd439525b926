"""A physically consistent estimate of the dynamic parameters (cvxpy with the Clarabel solver).

Least squares on the base parameters can return values no rigid body has (a negative mass, an
inertia violating the triangle inequality, negative friction), most often for poorly excited
parameters. Here the unknowns are the full dynamic parameters π (p), the data enter through the
base regressor and the base-parameter matrix K (W_b K π ≈ y), and each body is constrained to be
physical by its 4×4 pseudo-inertia (Wensing, Kim, Slotine, "Linear matrix inequalities for
physically consistent inertial parameter identification", IEEE RA-L 2017):

    J = [[Σ, h], [hᵀ, m]] ⪰ ε 1,   Σ = ½ tr(I) 1₃ − I,

I the inertia tensor about the link-frame origin (XX..ZZ), h = (MX, MY, MZ), m = M. J ⪰ 0 holds
exactly when a non-negative mass distribution has these moments (J = ∫ [r; 1][r; 1]ᵀ dm): it
implies m ≥ 0, the COM inside, and the triangle inequalities of the rotational inertia.
Rotor inertias and viscous and Coulomb friction are constrained ≥ 0.

The least-squares term is reduced by a QR factorisation first (||W x − y||² = ||R x − Qᵀ y||² +
const), so the conic problem has b rows, not one per sample, and minimised as a norm (a second-order
cone), which has the same minimiser. The parameters W does not see are left to the solver unless a
``prior`` with ``regularization`` > 0 picks the physical set closest to it: the penalty is a norm
too, so a small one does not pull the base parameters off the data's optimum when the data allow it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ConsistentEstimate", "consistent_estimate", "pseudo_inertia"]

_INSTALL = 'the physically consistent estimate needs cvxpy and clarabel: pip install "robodyn[identify]"'


@dataclass(frozen=True)
class ConsistentEstimate:
    """The full parameters π (p), the base parameters K π (b), the solver's status and objective, and
    the smallest eigenvalue of each link's pseudo-inertia (label → value)."""

    parameters: np.ndarray
    base_parameters: np.ndarray
    names: tuple | None
    status: str
    objective: float
    residual_rms: float
    min_eigenvalues: dict


def pseudo_inertia(link_parameters) -> np.ndarray:
    """The 4×4 pseudo-inertia of one link from its ten parameters (XX XY XZ YY YZ ZZ MX MY MZ M)."""
    xx, xy, xz, yy, yz, zz, mx, my, mz, m = np.asarray(link_parameters, dtype=np.float64)
    inertia = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    J = np.empty((4, 4))
    J[:3, :3] = 0.5 * np.trace(inertia) * np.eye(3) - inertia
    J[:3, 3] = J[3, :3] = (mx, my, mz)
    J[3, 3] = m
    return J


def _pseudo_inertia_map() -> np.ndarray:
    """A (16, 10) constant matrix A with vec(J) = A @ link_parameters (row-major vec), for cvxpy."""
    A = np.zeros((16, 10))
    for k in range(10):
        unit = np.zeros(10)
        unit[k] = 1.0
        A[:, k] = pseudo_inertia(unit).reshape(16)
    return A


def consistent_estimate(W, y, robot, *, prior=None, regularization: float = 0.0, epsilon: float = 0.0,
                        K=None, layout=None, names=None, link_offsets=None, known_zero=(),
                        verbose: bool = False) -> ConsistentEstimate:
    """Minimise ||W K π − y|| (+ regularization · ||π − prior||, both relative) subject to physical consistency.

    ``W`` (rows, b) base regressor, ``y`` (rows,) torques. ``robot`` supplies ``base_parameter_matrix()``
    (K, b × p), ``dynamic_parameter_layout`` and ``dynamic_parameter_names``; ``K``, ``layout``,
    ``names`` override them (robot may then be None). ``epsilon`` ≥ 0: J ⪰ ε 1 (strict positivity
    margin, kg m²). ``prior`` defaults to ``robot.dynamic_parameters()`` when regularizing.
    ``link_offsets``: per link label, ten parameters in that link's group that belong to other
    bodies (the rotors it carries: ``identify.rotor_lumps``); the link itself, π_link − offset, is
    what must be physical. ``known_zero``: indices of base parameters (rows of K) known to be zero,
    constrained to it (their columns of W then play no part).
    Raises ImportError (with the install hint) without cvxpy/clarabel, RuntimeError when the
    solver does not reach an optimal solution.
    """
    try:
        import clarabel  # noqa: F401  (the solver cvxpy calls)
        import cvxpy as cp
    except ImportError as error:
        raise ImportError(f"{_INSTALL} ({error})") from None
    from scipy.linalg import qr

    K = np.asarray(robot.base_parameter_matrix() if K is None else K, dtype=np.float64)
    layout = tuple(robot.dynamic_parameter_layout if layout is None else layout)
    if names is None and robot is not None:
        names = getattr(robot, "dynamic_parameter_names", None)
    W = np.asarray(W, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if K.ndim != 2 or W.ndim != 2 or W.shape[1] != K.shape[0]:
        raise ValueError(f"W {W.shape} and K {K.shape} do not fit: W has one column per base parameter (K's rows)")
    if y.shape != (W.shape[0],):
        raise ValueError(f"y: expected shape ({W.shape[0]},), got {y.shape}")
    if not (np.all(np.isfinite(W)) and np.all(np.isfinite(y)) and np.all(np.isfinite(K))):
        raise ValueError("W, y and K must be finite")
    p = K.shape[1]
    if not (isinstance(regularization, (int, float, np.floating)) and regularization >= 0.0):
        raise ValueError(f"regularization: expected a non-negative number, got {regularization!r}")
    if not (isinstance(epsilon, (int, float, np.floating)) and epsilon >= 0.0):
        raise ValueError(f"epsilon: expected a non-negative number, got {epsilon!r}")
    covered = np.zeros(p, dtype=int)
    for entry in layout:
        kind, label, start, stop = entry
        if kind not in ("link", "rotor", "viscous", "coulomb", "offset") or not 0 <= start < stop <= p:
            raise ValueError(f"layout entry {entry!r} is not (kind, label, start, stop) within {p} parameters")
        if kind == "link" and stop - start != 10:
            raise ValueError(f"layout entry {entry!r}: a link has 10 parameters")
        covered[start:stop] += 1
    if np.any(covered > 1):
        raise ValueError(f"layout: parameter(s) {np.flatnonzero(covered > 1).tolist()} belong to two entries")

    Q, R = qr(W, mode="economic")
    target = Q.T @ y
    scale = max(float(np.linalg.norm(target)), 1e-300)
    pi = cp.Variable(p)
    # Norms, not squares: the solver's ~1e-9 relative accuracy on the objective is then ~1e-9 on the
    # residual itself (a squared objective would leave ~1e-4 in the parameters).
    objective = cp.norm((R @ K) @ pi - target, 2) / scale
    if regularization > 0.0:
        prior = np.asarray(robot.dynamic_parameters() if prior is None else prior, dtype=np.float64)
        if prior.shape != (p,):
            raise ValueError(f"prior: expected shape ({p},), got {prior.shape}")
        objective = objective + regularization * cp.norm(pi - prior, 2) / max(float(np.linalg.norm(prior)), 1.0)
    A = _pseudo_inertia_map()
    constraints = []
    links = []
    for kind, label, start, stop in layout:
        if kind == "link":
            J = cp.Variable((4, 4), PSD=True)
            offset = np.zeros(10) if not link_offsets or label not in link_offsets else np.asarray(
                link_offsets[label], dtype=np.float64)
            constraints.append(cp.vec(J, order="C") == A @ (pi[start:stop] - offset))
            if epsilon > 0.0:
                constraints.append(J - epsilon * np.eye(4) >> 0)
            links.append((label, start, stop))
        elif kind in ("rotor", "viscous", "coulomb"):
            constraints.append(pi[start:stop] >= 0.0)
    known_zero = sorted({int(i) for i in known_zero})
    if known_zero:
        if known_zero[0] < 0 or known_zero[-1] >= K.shape[0]:
            raise ValueError(f"known_zero: base parameter indices within 0..{K.shape[0] - 1}, got {known_zero}")
        constraints.append(K[known_zero] @ pi == 0.0)
    problem = cp.Problem(cp.Minimize(objective), constraints)
    try:
        problem.solve(solver=cp.CLARABEL, verbose=verbose)
    except cp.error.SolverError as error:
        raise RuntimeError(f"Clarabel failed on the consistent estimate: {error}") from None
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or pi.value is None:
        raise RuntimeError(f"Clarabel did not find a consistent estimate: status {problem.status}")
    parameters = np.asarray(pi.value, dtype=np.float64)
    base = K @ parameters
    residual = W @ base - y
    eigenvalues = {label: float(np.linalg.eigvalsh(pseudo_inertia(
        parameters[start:stop] - (np.asarray(link_offsets[label]) if link_offsets and label in link_offsets else 0.0)))[0])
        for label, start, stop in links}
    return ConsistentEstimate(parameters, base, None if names is None else tuple(names), str(problem.status),
                              float(problem.value), float(np.sqrt(np.mean(residual**2))), eigenvalues)
