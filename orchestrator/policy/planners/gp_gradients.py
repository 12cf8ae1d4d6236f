"""The GP fit's loss and its gradient in closed form, in NumPy: the negative log marginal likelihood (plus BoTorch's
default priors) of the surrogate's kernels, differentiated by hand with respect to pyro's unconstrained parameters.

A fit is a few tens of L-BFGS evaluations on a handful of points, where autograd's per-operation overhead is most of
the cost (about 1 ms an evaluation with 107 ARD lengthscales, against about 0.1 ms here). The values agree with the
autograd loss to rounding; ``tests/orchestrator/policy/planners/test_gp_gradients.py`` checks both against each
other for every kernel, with and without priors.

Conventions (pyro's): ``noise = floor + exp(raw_noise)``, ``variance = exp(raw_variance)``,
``lengthscale = exp(raw_lengthscale)``; Matérn-5/2 ``k = variance · (1 + s + 5/3 r²) · exp(−s)`` with
``s = √5 · √(r² + 1e-12)`` and ``r²`` the squared distance over lengthscales (RBF: ``k = variance · exp(−r²/2)``);
Tanimoto ``k = variance · S``; their product ``k = S ⊙ Matérn`` (``X`` then holds the continuous columns only, and
``S`` is the bits' similarity).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg

__all__ = ["GPLossInputs", "loss_and_gradient"]

_SQRT5 = math.sqrt(5.0)
_EPS = 1e-12  # pyro's _torch_sqrt offset


@dataclass(frozen=True)
class GPLossInputs:
    """What the loss needs besides the parameters. ``X`` (n_points, n_features); ``y`` standardised, (n_points,);
    ``similarity`` the Tanimoto matrix (n_points, n_points), a factor of Matérn-5/2's when lengthscales are given, or
    None for Matérn-5/2 alone; ``jitter`` and ``noise_floor`` in standardised y² units."""

    X: np.ndarray
    y: np.ndarray
    similarity: np.ndarray | None
    jitter: float
    noise_floor: float
    priors: bool
    shape: str = "matern52"
    """The distance kernel with lengthscales: ``matern52`` or ``rbf`` (``k = variance · exp(−r²/2)``)."""

    @functools.cached_property
    def X_squared(self) -> np.ndarray:
        return self.X * self.X

    @property
    def n_features(self) -> int:
        return self.X.shape[1]


def _log_normal_nll(log_value: np.ndarray, loc: float, scale: float) -> tuple[float, np.ndarray]:
    """``log u + ½((log u − loc)/scale)²`` summed, and its derivative with respect to ``log u`` (elementwise)."""
    z = (log_value - loc) / scale
    return float(np.sum(log_value + 0.5 * z * z)), 1.0 + z / scale


def _matern52(r2: np.ndarray, variance: float) -> tuple[np.ndarray, np.ndarray]:
    """The Matérn-5/2 covariance and its derivative with respect to r² (elementwise)."""
    rho = np.sqrt(r2 + _EPS)
    s = _SQRT5 * rho
    decay = np.exp(-s)
    k = variance * (1.0 + s + (5.0 / 3.0) * r2) * decay
    ds_dr2 = _SQRT5 / (2.0 * rho)
    dk_dr2 = variance * decay * ((5.0 / 3.0) - (s + (5.0 / 3.0) * r2) * ds_dr2)
    return k, dk_dr2


def loss_and_gradient(inputs: GPLossInputs, raw_noise: float, raw_variance: float,
                      raw_lengthscale: np.ndarray | None) -> tuple[float, float, float, np.ndarray | None]:
    """The loss and its gradient with respect to (raw_noise, raw_variance, raw_lengthscale).

    ``raw_lengthscale`` is a 0-d or 1-d array for Matérn-5/2 (one shared lengthscale, or one per feature) and None
    for Tanimoto. Raises ``numpy.linalg.LinAlgError`` when the covariance has no Cholesky factor, and
    ``OverflowError`` when the raw noise or variance is beyond exp's range (a line-search trial step).
    """
    # a line-search trial step may overflow; the loss is then NaN, silently, as autograd's would be
    with np.errstate(over="ignore", invalid="ignore"):
        return _loss_and_gradient(inputs, raw_noise, raw_variance, raw_lengthscale)


def _loss_and_gradient(inputs: GPLossInputs, raw_noise: float, raw_variance: float,
                       raw_lengthscale: np.ndarray | None) -> tuple[float, float, float, np.ndarray | None]:
    X, y = inputs.X, inputs.y
    n = X.shape[0]
    exp_noise = math.exp(raw_noise)
    noise = inputs.noise_floor + exp_noise
    variance = math.exp(raw_variance)

    if raw_lengthscale is None:
        k = variance * inputs.similarity
        dk_dr2 = None
    else:
        with np.errstate(over="ignore", under="ignore"):
            lengthscale = np.exp(raw_lengthscale)
        if not np.all((lengthscale > 0) & np.isfinite(lengthscale)):
            # a line-search trial step beyond exp's range (a raw lengthscale below ~−745 or above ~709): the
            # caller's infinite loss, as for the noise and variance, not a failed fit
            raise OverflowError("lengthscale outside exp's range")
        A = X / lengthscale
        sq = np.sum(A * A, axis=1)
        r2 = np.clip(sq[:, None] - 2.0 * (A @ A.T) + sq[None, :], 0.0, None)
        if inputs.shape == "rbf":
            k = variance * np.exp(-0.5 * r2)
            dk_dr2 = -0.5 * k
        else:
            k, dk_dr2 = _matern52(r2, variance)
        if inputs.similarity is not None:  # Tanimoto × Matérn
            k, dk_dr2 = k * inputs.similarity, dk_dr2 * inputs.similarity

    K = k + (noise + inputs.jitter) * np.eye(n)
    L = np.linalg.cholesky(K)
    if not np.all(np.isfinite(L)):
        raise np.linalg.LinAlgError("the covariance has no finite Cholesky factor")
    K_inv = scipy.linalg.cho_solve((L, True), np.eye(n), check_finite=False)
    alpha = K_inv @ y
    loss = 0.5 * float(y @ alpha) + float(np.sum(np.log(np.diag(L)))) + 0.5 * n * math.log(2 * math.pi)

    # d loss / d K = ½ (K⁻¹ − α αᵀ)
    G = 0.5 * (K_inv - np.outer(alpha, alpha))
    g_noise = float(np.trace(G)) * exp_noise
    g_variance = float(np.sum(G * k))  # dk/d raw_variance = k
    g_lengthscale = None
    if raw_lengthscale is not None:
        W = G * dk_dr2
        if np.ndim(raw_lengthscale) == 0:
            g_lengthscale = np.asarray(-2.0 * np.sum(W * r2))  # r² ∝ ℓ⁻²
        else:
            # Σ_ij W_ij (x_id − x_jd)² = 2 (Σ_i x_id² Σ_j W_ij − x_dᵀ W x_d) for symmetric W; d r²/d raw ℓ_d = −2 (..)/ℓ_d²
            spread = 2.0 * (W.sum(axis=1) @ inputs.X_squared - np.sum((W @ X) * X, axis=0))
            g_lengthscale = -2.0 * spread / (lengthscale * lengthscale)

    if inputs.priors:
        log_noise = math.log(noise)
        value, slope = _log_normal_nll(np.asarray(log_noise), -4.0, 1.0)
        loss += value
        g_noise += float(slope) * exp_noise / noise
        value, slope = _log_normal_nll(np.asarray(raw_variance), 0.0, 1.0)
        loss += value
        g_variance += float(slope)
        if raw_lengthscale is not None:
            loc = math.sqrt(2) + 0.5 * math.log(inputs.n_features)
            value, slope = _log_normal_nll(np.asarray(raw_lengthscale, dtype=float), loc, math.sqrt(3))
            loss += value
            g_lengthscale = g_lengthscale + slope
    return loss, g_noise, g_variance, g_lengthscale
