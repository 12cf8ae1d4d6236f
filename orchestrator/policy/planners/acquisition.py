"""Expected improvement in log space and pending-aware batch selection over a finite pool.

Everything maximises: callers that minimise negate y first. ``log_expected_improvement`` follows the LogEI
formulation of Ament et al. (2023, "Unexpected improvements to expected improvement", as in BoTorch), which stays
finite and monotone far into the tail where plain EI underflows to zero. ``select_batch`` builds a batch with the
Kriging believer (Ginsbourger et al., 2010): each pick, and each pending experiment, is believed to come back at the
posterior mean, which shrinks the uncertainty around it without refitting.

Example:
    >>> import numpy as np
    >>> from orchestrator.policy.planners.surrogate import GPSurrogate
    >>> X = np.array([[0.0], [0.4], [1.0]])
    >>> y = np.array([0.0, 1.0, 0.2])
    >>> surrogate = GPSurrogate.fit(X, y, n_steps=30)
    >>> pool = np.linspace(0.0, 1.0, 21)[:, None]
    >>> indices, values = select_batch(surrogate, X, y, pool, q=3)
    >>> len(set(indices)), all(np.isfinite(values))
    (3, True)
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from orchestrator.policy.planners.surrogate import GPSurrogate
from vocabulary.domain import SetupError

__all__ = ["log_expected_improvement", "log_window_improvement", "select_batch"]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
_LOG_SQRT_PI_DIV_2 = 0.5 * math.log(math.pi / 2)
_INV_SQRT_EPS = 1 / math.sqrt(np.finfo(float).eps)
_MIN_VARIANCE = 1e-12  # standardised units, as BoTorch clamps posterior variance before EI
_MIN_WINDOW = 0.01  # target windows: the smallest incumbent distance, in sds of y
_MAX_WINDOW = 1e3  # and the window without any incumbent


def _log1mexp(w: np.ndarray) -> np.ndarray:
    """log(1 - exp(w)) for w < 0, accurate on both sides of -log 2 (Mächler, 2012)."""
    with np.errstate(divide="ignore"):
        return np.where(w > -math.log(2), np.log(-np.expm1(np.minimum(w, -1e-300))), np.log1p(-np.exp(w)))


def _log_h(z: np.ndarray) -> np.ndarray:
    """log(phi(z) + z * Phi(z)), the log of EI for a standard normal, stable for all finite z."""
    z = np.asarray(z, dtype=float)
    # z > -1: h = Phi(z) * (z + phi(z)/Phi(z)), and z + phi/Phi (the inverse Mills ratio plus z) is positive.
    z_upper = np.maximum(z, -1.0)
    log_phi_upper = -0.5 * z_upper**2 - _LOG_SQRT_2PI
    log_cdf = special.log_ndtr(z_upper)
    upper = log_cdf + np.log(z_upper + np.exp(log_phi_upper - log_cdf))
    # z <= -1: h = phi(z) * (1 - |z| Phi(z) / phi(z)), with |z| Phi / phi = |z| erfcx(-z/√2) √(π/2) < 1.
    z_lower = np.minimum(z, -1.0)
    log_phi = -0.5 * z_lower**2 - _LOG_SQRT_2PI
    z_mid = np.maximum(z_lower, -_INV_SQRT_EPS)
    w = np.log(special.erfcx(-z_mid / math.sqrt(2)) * np.abs(z_mid)) + _LOG_SQRT_PI_DIV_2
    # Beyond -1/sqrt(eps), 1 - |z| Phi / phi rounds to zero; its asymptote is 1 / z^2.
    lower = log_phi + np.where(z_lower > -_INV_SQRT_EPS, _log1mexp(w), -2 * np.log(np.abs(z_lower)))
    return np.where(z > -1.0, upper, lower)


def log_expected_improvement(mean: np.ndarray, sd: np.ndarray, best: float) -> np.ndarray:
    """log E[max(f - best, 0)] for f ~ Normal(mean, sd²), elementwise, for maximisation.

    Stays finite where EI itself underflows (z = (mean - best) / sd far below zero) and is monotone in the mean.
    Where ``sd`` is zero the exact limit log(max(mean - best, 0)) is returned, which is -inf without improvement.

    Args:
        mean: posterior means, any shape, in y units.
        sd: posterior standard deviations, same shape, non-negative.
        best: incumbent value to improve on, in y units.

    Example:
        >>> import numpy as np
        >>> values = log_expected_improvement(np.array([0.0, -50.0]), np.array([1.0, 1.0]), best=0.0)
        >>> bool(np.isclose(np.exp(values[0]), 1 / np.sqrt(2 * np.pi))), bool(np.isfinite(values[1]))
        (True, True)
    """
    mean = np.asarray(mean, dtype=float)
    sd = np.asarray(sd, dtype=float)
    if np.any(sd < 0) or not np.all(np.isfinite(sd)) or not np.all(np.isfinite(mean)):
        raise SetupError("log_expected_improvement needs finite means and non-negative finite sds")
    is_certain = sd <= 0
    safe_sd = np.where(is_certain, 1.0, sd)
    values = _log_h((mean - best) / safe_sd) + np.log(safe_sd)
    if np.any(is_certain):
        with np.errstate(divide="ignore"):
            values = np.where(is_certain, np.log(np.maximum(mean - best, 0.0)), values)
    return values


def _normal_mass(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Phi(hi) - Phi(lo) for lo <= hi, from the tail that keeps its digits."""
    return np.where(lo > 0, special.ndtr(-lo) - special.ndtr(-hi), special.ndtr(hi) - special.ndtr(lo))


def log_window_improvement(mean: np.ndarray, sd: np.ndarray, target: float, best_distance: float) -> np.ndarray:
    """log E[max(d - |f - target|, 0)] for f ~ Normal(mean, sd²), with d = ``best_distance``, elementwise.

    The expected improvement of the target utility ``-|f - target|`` over an incumbent at distance d, when the model
    is of the value f itself (so it knows on which side of the target a candidate lies). In closed form, with
    z(x) = (x - mean) / sd, a = target - d and b = target + d:
    ``sd · [φ(z_a) − φ(z_t) − z_a (Φ(z_t) − Φ(z_a)) + z_b (Φ(z_b) − Φ(z_t)) − φ(z_t) + φ(z_b)]``. Far from the window,
    where that difference of probabilities loses its digits, its asymptote (Mills' ratio) is used. Where ``sd`` is zero the exact limit log(max(d − |mean − target|, 0)) is returned.

    Args:
        mean, sd: the predictive of the value, same shape, value units.
        target: the centre of the window.
        best_distance: the incumbent's |value − target| (> 0; floor it before calling, as ``select_batch`` does).

    Example:
        >>> import numpy as np
        >>> values = log_window_improvement(np.array([1.4, 1.6, 9.0]), np.array([0.1, 0.1, 0.1]), 1.4, 0.2)
        >>> bool(values[0] > values[1] > values[2]), bool(np.all(np.isfinite(values)))
        (True, True)
    """
    mean = np.asarray(mean, dtype=float)
    sd = np.asarray(sd, dtype=float)
    if np.any(sd < 0) or not np.all(np.isfinite(sd)) or not np.all(np.isfinite(mean)):
        raise SetupError("log_window_improvement needs finite means and non-negative finite sds")
    if not best_distance > 0:
        raise SetupError(f"{best_distance=} must be positive; floor the incumbent's distance to the target")
    is_certain = sd <= 0
    safe_sd = np.where(is_certain, 1.0, sd)
    z_a, z_t, z_b = ((x - mean) / safe_sd for x in (target - best_distance, target, target + best_distance))
    pdf = [np.exp(-0.5 * z * z - _LOG_SQRT_2PI) for z in (z_a, z_t, z_b)]
    below = pdf[0] - pdf[1] - z_a * _normal_mass(z_a, z_t)
    above = z_b * _normal_mass(z_t, z_b) - pdf[1] + pdf[2]
    standardised = np.maximum(below + above, 0.0)
    # Far outside the window (edge at z > 0 sds), the density across it is φ(z)·exp(-z·s), and the tent integrates
    # to φ(z) (1 - exp(-z w))² / z², w = d / sd: the asymptote, used where the closed form has lost its digits.
    z_edge = np.maximum(z_a, -z_b)
    is_far = (z_edge > 1.0) & ~(standardised > 1e-9 * (1.0 + np.abs(z_t) + (z_b - z_t)))
    z_far = np.where(is_far, z_edge, 2.0)
    with np.errstate(divide="ignore"):
        asymptote = (-0.5 * z_far**2 - _LOG_SQRT_2PI + 2 * np.log(-np.expm1(-z_far * (z_b - z_t))) - 2 * np.log(z_far))
        values = np.where(is_far, asymptote, np.log(np.where(is_far, 1.0, standardised))) + np.log(safe_sd)
        if np.any(is_certain):
            values = np.where(is_certain, np.log(np.maximum(best_distance - np.abs(mean - target), 0.0)), values)
    return values


def select_batch(
    surrogate: GPSurrogate,
    X_train: np.ndarray,
    y_train: np.ndarray,
    X_pool: np.ndarray,
    q: int,
    *,
    pending: np.ndarray | None = None,
    offset_pool: np.ndarray | None = None,
    offset_pending: np.ndarray | None = None,
    incumbent: float | None = None,
    target: float | None = None,
    log_weight: np.ndarray | None = None,
) -> tuple[list[int], list[float]]:
    """Pick q distinct pool rows by log-EI with the Kriging believer, aware of pending experiments.

    The posterior is ``surrogate``'s hyperparameters conditioned on (X_train, y_train); the surrogate is not
    refitted. Pending rows (dispatched, not yet observed) are believed to return their posterior mean before the
    first pick, and so is every pick before the next one. The incumbent ``best`` is max(y_train), raised by any
    believed value above it, so the batch does not crowd around one promising point.

    Args:
        surrogate: fitted surrogate whose hyperparameters are reused.
        X_train: observed features, shape (n_train, n_features).
        y_train: observed values to maximise, shape (n_train,).
        X_pool: candidate features, shape (n_pool, n_features); rows already pending should be left out.
        q: batch size, at most n_pool.
        pending: features of dispatched but unobserved experiments, shape (n_pending, n_features).
        offset_pool: a prior mean added to the surrogate's mean over the pool, shape (n_pool,), y units. With it the
            surrogate models residuals (``y_train`` = observed − prior) and EI is taken on prior + residual.
        offset_pending: the same prior at the pending rows, shape (n_pending,); needed with both pending and offset.
        incumbent: the value to improve on; default max(y_train) (pass max(observed) when y_train are residuals).
        target: for a target objective modelled by its value: y_train (plus the offset) are values, the utility is
            ``-|value - target|``, ``incumbent`` is the best utility (default from y_train), and the acquisition is
            ``log_window_improvement``. Each believed pick at distance d from the target tightens the window to d.
        log_weight: a log probability per pool row, shape (n_pool,), added to every pick's score (log EI + log p:
            ``feasibility.outcome_log_weight``, P(constraints met) times P(success)); None adds nothing.

    Returns:
        Pool indices in pick order and their log-EI values (y units, plus ``log_weight``) at pick time.

    Raises:
        SetupError: for q out of range or mismatched shapes.

    Example:
        >>> import numpy as np
        >>> from orchestrator.policy.planners.surrogate import GPSurrogate
        >>> X, y = np.array([[0.0], [1.0]]), np.array([0.0, 1.0])
        >>> surrogate = GPSurrogate.fit(X, y, n_steps=20)
        >>> pool = np.array([[0.5], [1.2], [3.0]])
        >>> select_batch(surrogate, X, y, pool, q=2)[0]
        [1, 2]
    """
    X_pool = np.asarray(X_pool, dtype=float)
    if X_pool.ndim != 2 or X_pool.shape[1] != surrogate.n_features:
        raise SetupError(
            f"X_pool has shape {X_pool.shape}; expected (n_pool, {surrogate.n_features}) like the training features"
        )
    if not 1 <= q <= len(X_pool):
        raise SetupError(f"{q=} must be between 1 and the pool size {len(X_pool)}; shrink the batch or grow the pool")
    y_train = np.asarray(y_train, dtype=float)
    offset = np.zeros(len(X_pool)) if offset_pool is None else np.asarray(offset_pool, dtype=float)
    if offset.shape != (len(X_pool),):
        raise SetupError(f"offset_pool has shape {offset.shape}; expected ({len(X_pool)},), one prior mean per pool row")
    weight = np.zeros(len(X_pool)) if log_weight is None else np.asarray(log_weight, dtype=float)
    if weight.shape != (len(X_pool),):
        raise SetupError(f"log_weight has shape {weight.shape}; expected ({len(X_pool)},), one per pool row")
    posterior = _posterior_on(surrogate, X_train, y_train)
    # "best" is on the utility scale: y itself, or -|y - target| for a target modelled by its value.
    utility = (lambda v: v) if target is None else (lambda v: -np.abs(np.asarray(v, dtype=float) - target))
    if incumbent is not None:
        best = float(incumbent)
    else:
        best = float(np.max(utility(y_train))) if y_train.size else -math.inf
    if pending is not None and len(pending):
        pending = np.asarray(pending, dtype=float)
        if offset_pool is not None and offset_pending is None:
            raise SetupError("pending experiments with a prior mean need offset_pending, the prior at the pending rows")
        pending_offset = 0.0 if offset_pending is None else np.asarray(offset_pending, dtype=float)
        best = max(best, float(np.max(utility(posterior.predict(pending)[0] + pending_offset))))
        posterior = posterior.fantasize(pending)

    pool = posterior.pool_posterior(X_pool)
    y_sd = posterior.hyperparameters["y_sd"]
    is_picked = np.zeros(len(X_pool), dtype=bool)
    indices: list[int] = []
    values: list[float] = []
    for _ in range(q):
        # Work in standardised units, where the variance floor means the same thing for every objective.
        sd_std = np.sqrt(np.maximum((pool.sd / y_sd) ** 2, _MIN_VARIANCE))
        if target is None:
            scores = log_expected_improvement((pool.mean + offset) / y_sd, sd_std, best / y_sd) + math.log(y_sd)
        else:
            # An incumbent on the target leaves nothing to improve: keep a window of 1 % of y's spread.
            distance = max(-best, _MIN_WINDOW * y_sd) if math.isfinite(best) else _MAX_WINDOW * y_sd
            scores = log_window_improvement((pool.mean + offset) / y_sd, sd_std, target / y_sd, distance / y_sd)
            scores = scores + math.log(y_sd)
        if log_weight is not None:
            scores = scores + weight
        scores[is_picked] = -np.inf
        index = int(np.argmax(scores))  # ties and an all -inf pool resolve to the lowest index
        indices.append(index)
        values.append(float(scores[index]))
        is_picked[index] = True
        best = max(best, float(utility(pool.mean[index] + offset[index])))
        if len(indices) < q:
            pool.add_fantasy(index)
    return indices, values


def _posterior_on(surrogate: GPSurrogate, X_train: np.ndarray, y_train: np.ndarray) -> GPSurrogate:
    """The surrogate itself when it already holds (X_train, y_train), otherwise a rebuild with its hyperparameters."""
    X_train = np.asarray(X_train, dtype=float)
    if np.array_equal(X_train, surrogate.X_train) and np.array_equal(y_train, surrogate.y_train):
        return surrogate
    return GPSurrogate.from_hyperparameters(X_train, y_train, surrogate.hyperparameters)
