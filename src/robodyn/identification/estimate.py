"""Least-squares estimates of the base parameters from a stacked system W θ = y.

* ``ordinary_least_squares(W, y)``: θ = argmin ||W θ − y||² by a QR factorisation of W
  (scipy.linalg), never the normal equations, whose condition number is cond(W)².
  Covariance σ² (WᵀW)⁻¹ = σ² R⁻¹R⁻ᵀ with σ² = ||y − W θ||² / (rows − b).
* ``weighted_least_squares(W, y, n_joints)``: Gautier's weighting. Each joint's noise variance is
  estimated from the OLS residuals of its rows, σ_j² = ||ρ_j||² / (rows_j − b rows_j / rows) (the b
  degrees of freedom the fit used, shared in proportion), and joint j's rows are divided by σ_j;
  then OLS on the weighted system. This matters when joints' torques differ in scale or noise
  (a wrist and a shoulder); with equal noise it gives the OLS estimate.

Both return an ``Estimate``: parameters, covariance, standard deviations, the relative standard
deviation %σ_i = 100 σ_θi / |θ_i| (Gautier's excitation figure: a parameter with a large %σ is
poorly excited or has little effect, and its value should not be trusted), per-joint residual RMS
and cond(W). Rows are sample-major (row k·n + j is joint j), as ``process`` stacks them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["POORLY_EXCITED", "Estimate", "ordinary_least_squares", "report", "weighted_least_squares"]

#: Default threshold of ``Estimate.poorly_excited``: relative standard deviation in percent.
POORLY_EXCITED = 10.0


@dataclass(frozen=True)
class Estimate:
    """A least-squares estimate θ of the base parameters with its statistics."""

    parameters: np.ndarray      # θ (b,)
    covariance: np.ndarray      # (b, b)
    residual_rms: np.ndarray    # per joint, in the units of y (unweighted residuals)
    sigma: np.ndarray           # per-joint noise standard deviation used (WLS) or the pooled one repeated (OLS)
    condition: float            # cond(W) (of the weighted W for WLS)
    names: tuple | None
    method: str                 # "ols" or "wls"
    rows: int

    @property
    def std(self) -> np.ndarray:
        """Standard deviation of each parameter."""
        return np.sqrt(np.clip(np.diag(self.covariance), 0.0, None))

    @property
    def relative_std(self) -> np.ndarray:
        """100 σ_θi / |θ_i| in percent (inf for a parameter estimated as exactly zero)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            value = 100.0 * self.std / np.abs(self.parameters)
        return np.where(self.std == 0.0, 0.0, value)

    def name(self, i: int) -> str:
        return self.names[i] if self.names is not None else f"theta[{i}]"

    def poorly_excited(self, threshold: float = POORLY_EXCITED) -> list[tuple[str, float]]:
        """(name, %σ) of every parameter whose relative standard deviation exceeds ``threshold`` percent,
        worst first."""
        if not (isinstance(threshold, (int, float, np.floating)) and threshold > 0.0):
            raise ValueError(f"threshold: expected a positive percentage, got {threshold!r}")
        relative = self.relative_std
        flagged = [i for i in np.argsort(-relative, kind="stable") if relative[i] > threshold]
        return [(self.name(i), float(relative[i])) for i in flagged]

    def report(self, threshold: float = POORLY_EXCITED) -> str:
        return report(self, threshold)


def _system(W, y, names):
    W = np.asarray(W, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if W.ndim != 2:
        raise ValueError(f"W: expected a 2-D matrix (rows, parameters), got shape {W.shape}")
    if y.shape != (W.shape[0],):
        raise ValueError(f"y: expected shape ({W.shape[0]},) to match W's rows, got {y.shape}")
    if W.shape[0] <= W.shape[1]:
        raise ValueError(f"W has {W.shape[0]} rows for {W.shape[1]} parameters: more rows than parameters are "
                         "needed to estimate them and their noise")
    for label, value in (("W", W), ("y", y)):
        if not np.all(np.isfinite(value)):
            raise ValueError(f"{label}: contains NaN or infinity")
    if names is not None:
        names = tuple(str(name) for name in names)
        if len(names) != W.shape[1]:
            raise ValueError(f"names: {len(names)} names for {W.shape[1]} parameters")
    return W, y, names


def _solve(W: np.ndarray, y: np.ndarray, names):
    """θ, R⁻¹ (so (WᵀW)⁻¹ = R⁻¹R⁻ᵀ), residual and cond(W) by QR; refuses a rank-deficient W, naming
    the dependent columns (found by a column-pivoted QR)."""
    from scipy.linalg import qr, solve_triangular, svdvals

    Q, R = qr(W, mode="economic")
    singular = svdvals(R)  # W = Q R with orthonormal Q: the same singular values, from a b × b matrix
    condition = float(singular[0] / singular[-1]) if singular[-1] > 0.0 else float("inf")
    rank = int(np.count_nonzero(singular > singular[0] * max(W.shape) * np.finfo(float).eps))
    if rank < W.shape[1]:
        pivot = qr(W, mode="r", pivoting=True)[1]
        dependent = [names[i] if names else f"theta[{i}]" for i in pivot[rank:]]
        raise ValueError(f"W has rank {rank} < {W.shape[1]} parameters (cond {condition:.3g}): not identifiable "
                         f"from these data: {', '.join(dependent)}; excite the robot more or use base parameters")
    R_inverse = solve_triangular(R, np.eye(R.shape[0]))
    theta = R_inverse @ (Q.T @ y)
    return theta, R_inverse, y - W @ theta, condition


def _joint_rows(rows: int, n_joints: int) -> np.ndarray:
    if isinstance(n_joints, bool) or not isinstance(n_joints, (int, np.integer)) or n_joints < 1:
        raise ValueError(f"n_joints: expected a positive integer, got {n_joints!r}")
    if rows % n_joints:
        raise ValueError(f"{rows} rows are not a whole number of samples of {n_joints} joints")
    return np.tile(np.arange(n_joints), rows // n_joints)


def _rms_per_joint(residual: np.ndarray, joint: np.ndarray, n_joints: int) -> np.ndarray:
    return np.sqrt(np.bincount(joint, weights=residual**2, minlength=n_joints) / np.bincount(joint, minlength=n_joints))


def ordinary_least_squares(W, y, *, names=None, n_joints: int = 1) -> Estimate:
    """OLS estimate of θ in W θ = y with covariance σ²(WᵀW)⁻¹ (pooled σ² from the residual).

    ``n_joints`` only splits the residual RMS per joint (rows sample-major); ``names`` label the parameters.
    """
    W, y, names = _system(W, y, names)
    joint = _joint_rows(W.shape[0], n_joints)
    theta, R_inverse, residual, condition = _solve(W, y, names)
    variance = float(residual @ residual) / (W.shape[0] - W.shape[1])
    covariance = variance * (R_inverse @ R_inverse.T)
    return Estimate(theta, covariance, _rms_per_joint(residual, joint, n_joints),
                    np.full(n_joints, np.sqrt(variance)), condition, names, "ols", W.shape[0])


def weighted_least_squares(W, y, n_joints: int, *, names=None) -> Estimate:
    """Gautier's weighted least squares: per-joint noise σ_j from the OLS residuals, rows weighted by 1/σ_j.

    Covariance (W̃ᵀW̃)⁻¹ σ̃², W̃ the weighted matrix and σ̃² its residual variance (≈ 1 when the per-joint
    noise model fits). A joint with zero residual (noiseless data) gets the smallest positive σ of the
    others (or 1 if all are zero), so exact data still give the exact θ.
    """
    W, y, names = _system(W, y, names)
    joint = _joint_rows(W.shape[0], n_joints)
    _, _, residual, _ = _solve(W, y, names)
    rows_per_joint = np.bincount(joint, minlength=n_joints).astype(np.float64)
    dof = rows_per_joint - W.shape[1] * rows_per_joint / W.shape[0]
    sigma = np.sqrt(np.bincount(joint, weights=residual**2, minlength=n_joints) / dof)
    positive = sigma[sigma > 0.0]
    floor = float(positive.min()) if positive.size else 1.0
    sigma = np.where(sigma > 0.0, sigma, floor)
    weight = 1.0 / sigma[joint]
    theta, R_inverse, weighted_residual, condition = _solve(W * weight[:, None], y * weight, names)
    variance = float(weighted_residual @ weighted_residual) / (W.shape[0] - W.shape[1])
    covariance = variance * (R_inverse @ R_inverse.T)
    residual = y - W @ theta
    return Estimate(theta, covariance, _rms_per_joint(residual, joint, n_joints), sigma, condition, names,
                    "wls", W.shape[0])


def report(estimate: Estimate, threshold: float = POORLY_EXCITED) -> str:
    """A plain-text table: each parameter with its value, standard deviation and %σ, the poorly excited
    ones marked, then the per-joint residual RMS and cond(W)."""
    lines = [f"{estimate.method.upper()} estimate from {estimate.rows} rows, cond(W) = {estimate.condition:.4g}",
             f"{'parameter':<14} {'value':>14} {'std':>12} {'%std':>9}"]
    relative = estimate.relative_std
    for i, (value, std) in enumerate(zip(estimate.parameters, estimate.std)):
        flag = "  poorly excited" if relative[i] > threshold else ""
        lines.append(f"{estimate.name(i):<14} {value:>14.6g} {std:>12.3g} {relative[i]:>8.3g}%{flag}")
    lines.append("residual RMS per joint: " + ", ".join(f"{value:.4g}" for value in estimate.residual_rms))
    if estimate.method == "wls":
        lines.append("noise std per joint (weights): " + ", ".join(f"{value:.4g}" for value in estimate.sigma))
    poor = estimate.poorly_excited(threshold)
    lines.append(f"poorly excited (%std > {threshold:g}): " + (", ".join(name for name, _ in poor) if poor else "none"))
    return "\n".join(lines)
