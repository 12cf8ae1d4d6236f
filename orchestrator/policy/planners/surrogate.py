"""Gaussian-process surrogate for the ``bo`` planner arm, built on ``pyro.contrib.gp``.

The surrogate standardises y, fits the kernel variance, the lengthscale (``matern52`` and ``rbf``: one shared, or one per
feature with ``ard=True``) and the noise variance by maximising the exact marginal likelihood in float64 (Adam on
pyro's unconstrained parameters, the loss evaluated in closed form rather than through pyro's ELBO, which is the same
objective; L-BFGS on request, with the gradient in closed form too: ``gp_gradients``), or with ``priors=True`` the posterior under BoTorch's default priors (MAP), and keeps
those hyperparameters as plain floats. Every posterior, the fitted one included, is built from those floats by one code path, so
``GPSurrogate.from_hyperparameters`` reproduces a fitted surrogate's predictions bit for bit, and fantasies
(Kriging-believer batches, pending experiments) reuse the hyperparameters without refitting.

The kernels live in ``gp_kernels`` and the hyperparameter fit in ``gp_fitting``. torch and pyro are imported inside
the functions that need them, so importing this module stays cheap.

Example:
    >>> import numpy as np
    >>> X = np.linspace(0.0, 1.0, 8)[:, None]
    >>> surrogate = GPSurrogate.fit(X, np.sin(6 * X[:, 0]), n_steps=50)
    >>> mean, sd = surrogate.predict(np.array([[0.5], [3.0]]))
    >>> bool(abs(mean[0] - np.sin(3.0)) < 0.1), bool(sd[1] > sd[0])
    (True, True)
"""

from __future__ import annotations

import functools
import json
import math
import warnings
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from orchestrator.policy.planners.gp_fitting import optimise, stable_jitter
from orchestrator.policy.planners.gp_kernels import (
    DISTANCE_KERNELS,
    KERNEL_NAMES,
    SCALED_KERNELS,
    KernelName,
    freeze,
    make_kernel,
    require_torch_pyro,
)
from vocabulary.domain import SetupError

if TYPE_CHECKING:
    import torch

__all__ = ["GPSurrogate", "PoolPosterior"]

_SCHEMA_VERSION = 2  # 2: ``lengthscale`` may be a list (ARD); version 1 states (a scalar lengthscale) still load
_READABLE_SCHEMA_VERSIONS = (1, 2)
_DEFAULT_NOISE = 1e-2


# --------------------------------------------------------------------------------------------------- checks
@functools.lru_cache(maxsize=8)
def _rebuilt(X_bytes: bytes, X_shape: tuple[int, int], y_bytes: bytes, hyperparameters_json: str) -> GPSurrogate:
    """The posterior on (X, y) with these hyperparameters, shared by the rebuilds of one step (the plan, the screen
    and an environment's offer rebuild it from the same recorded state). A surrogate is never modified after it is
    built, so sharing it is safe; JSON keeps every float exactly."""
    X = np.frombuffer(X_bytes, dtype=float).reshape(X_shape).copy()  # writable, as torch.as_tensor wants
    y = np.frombuffer(y_bytes, dtype=float).copy()
    return GPSurrogate(X, y, json.loads(hyperparameters_json))


def _as_features(X: Any, what: str, n_features: int | None = None) -> np.ndarray:
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise SetupError(f"{what} has shape {X.shape}; pass a 2-D array of shape (n_points, n_features)")
    if n_features is not None and X.shape[1] != n_features:
        raise SetupError(f"{what} has {X.shape[1]} features but the surrogate was built on {n_features}")
    if not np.all(np.isfinite(X)):
        raise SetupError(f"{what} contains NaN or inf; drop or impute those rows before fitting")
    return X


def _as_targets(y: Any, n_points: int) -> np.ndarray:
    y = np.asarray(y, dtype=float)
    if y.shape != (n_points,):
        raise SetupError(f"y has shape {y.shape}; pass one finite value per row of X, shape ({n_points},)")
    if not np.all(np.isfinite(y)):
        raise SetupError("y contains NaN or inf; failed observations must be left out of the training data")
    return y


def _default_lengthscale(X: np.ndarray) -> float:
    """Median distance between distinct training rows, or the typical distance in the unit cube without any."""
    rows = np.unique(X, axis=0)
    if len(rows) >= 2:
        squared = (rows * rows).sum(1)
        distances = np.sqrt(np.clip(squared[:, None] + squared[None, :] - 2 * rows @ rows.T, 0.0, None))
        distances = distances[np.triu_indices(len(rows), k=1)]
        distances = distances[distances > 0]
        if distances.size:
            return float(np.median(distances))
    return max(math.sqrt(X.shape[1] / 6.0), 1e-3)


# --------------------------------------------------------------------------------------------------- surrogate
class GPSurrogate:
    """An exact GP posterior with fixed hyperparameters over standardised targets.

    Build one with :meth:`fit` (optimises hyperparameters) or :meth:`from_hyperparameters` (reuses them). Inputs
    are feature matrices of shape (n_points, n_features); ``matern52`` expects features on comparable scales
    (e.g. the unit cube), ``tanimoto`` expects non-negative features such as fingerprint bits.
    """

    def __init__(self, X: np.ndarray, y: np.ndarray, hyperparameters: dict[str, Any]):
        """Prefer :meth:`fit` or :meth:`from_hyperparameters`; this takes already validated inputs."""
        torch, _, gp = require_torch_pyro()
        self._X = X
        self._y = y
        self._hyperparameters = dict(hyperparameters)
        h = self._hyperparameters
        X_t = torch.as_tensor(X, dtype=torch.float64)
        y_t = (torch.as_tensor(y, dtype=torch.float64) - h["y_mean"]) / h["y_sd"]
        kernel = make_kernel(h["kernel"], X.shape[1], h["variance"], h.get("lengthscale"), h.get("continuous"))
        freeze(kernel, "variance", h["variance"])
        if h["kernel"] in SCALED_KERNELS:
            freeze(kernel, "lengthscale", h["lengthscale"])
        model = gp.models.GPRegression(X_t, y_t, kernel, noise=torch.tensor(h["noise"], dtype=torch.float64))
        freeze(model, "noise", h["noise"])
        model.jitter = stable_jitter(kernel, X_t, h["noise"])
        self._model = model

    # ----------------------------------------------------------------------------------------------- building
    @classmethod
    def fit(
        cls,
        X: np.ndarray,
        y: np.ndarray,
        *,
        kernel: KernelName = "matern52",
        seed: int = 0,
        n_steps: int = 200,
        optimizer: Literal["adam", "lbfgs"] = "adam",
        ard: bool = False,
        priors: bool = False,
        continuous: list[int] | None = None,
    ) -> GPSurrogate:
        """Fit hyperparameters by maximising the marginal likelihood and return the posterior.

        With one point, or a constant y, there is nothing to fit: the surrogate uses unit variance, a small noise
        and the median-distance lengthscale, and its ``hyperparameters["is_fitted"]`` is False.

        Args:
            X: training features, shape (n_points, n_features).
            y: training targets, shape (n_points,), any units.
            kernel: ``"matern52"``, ``"rbf"`` (squared exponential), ``"tanimoto"`` (non-negative features) or ``"tanimoto_matern52"`` (Tanimoto on
                the bit columns times Matérn-5/2 with one lengthscale per ``continuous`` column).
            seed: seeds torch and pyro (and clears pyro's param store) so that the fit is reproducible; the
                global random generators of Python, NumPy and torch are restored afterwards.
            n_steps: optimiser iterations on the negative log marginal likelihood (L-BFGS iterations, or Adam
                steps).
            optimizer: ``"adam"`` (default; learning rate 0.05) or ``"lbfgs"`` (strong-Wolfe line search; converges
                in tens of evaluations, and may find a sharper optimum than 200 Adam steps on tiny data sets).
            ard: ``matern52`` and ``rbf`` only: one lengthscale per feature (automatic relevance determination),
                each starting at the median distance between training rows.
            priors: maximise the marginal likelihood times the priors BoTorch uses by default (Hvarfner et al., 2024):
                LogNormal(√2 + ½ log d, √3) on each lengthscale, LogNormal(-4, 1) on the noise, and LogNormal(0, 1)
                on the kernel variance (standardised y). With many features and few points this keeps the ARD
                lengthscales from collapsing or running off to infinity.
            continuous: ``tanimoto_matern52`` only: the columns of the Matérn factor (numbers); the rest are bits.

        Raises:
            SetupError: for bad shapes, non-finite values, negative features with ``tanimoto``, or no torch/pyro.

        Example:
            >>> import numpy as np
            >>> X = np.array([[0.0], [0.5], [1.0]])
            >>> GPSurrogate.fit(X, np.array([0.0, 1.0, 0.0]), n_steps=20).hyperparameters["kernel"]
            'matern52'
        """
        torch, pyro, gp = require_torch_pyro()
        X = _as_features(X, "X")
        if X.shape[0] == 0:
            raise SetupError("the surrogate needs at least one observation; propose from another arm until then")
        y = _as_targets(y, X.shape[0])
        if kernel not in KERNEL_NAMES:
            raise SetupError(f"{kernel=} is not a known surrogate kernel; use one of {', '.join(KERNEL_NAMES)}")
        if optimizer not in ("lbfgs", "adam"):
            raise SetupError(f"{optimizer=} is not a known optimiser; use 'lbfgs' or 'adam'")
        continuous = _check_continuous(kernel, continuous, X.shape[1])
        _check_bits(kernel, X, continuous)

        y_mean = float(np.mean(y))
        y_sd = float(np.std(y))
        is_constant = not y_sd > 1e-12 * max(1.0, abs(y_mean))
        hyper: dict[str, Any] = {
            "type": "gp_surrogate",
            "schema_version": _SCHEMA_VERSION,
            "kernel": kernel,
            "variance": 1.0,
            "noise": _DEFAULT_NOISE,
            "y_mean": y_mean,
            "y_sd": 1.0 if is_constant else y_sd,
            "is_fitted": False,
        }
        if kernel in DISTANCE_KERNELS:
            hyper["lengthscale"] = _default_lengthscale(X)
            if ard:
                hyper["lengthscale"] = [hyper["lengthscale"]] * X.shape[1]
        elif kernel == "tanimoto_matern52":  # one lengthscale per number, always
            hyper["continuous"] = continuous
            hyper["lengthscale"] = [_default_lengthscale(X[:, continuous])] * len(continuous)
        if X.shape[0] >= 2 and not is_constant:
            fitted = optimise(torch, pyro, gp, X, (y - y_mean) / hyper["y_sd"], hyper, seed=seed, n_steps=n_steps,
                               optimizer=optimizer, priors=priors)
            if fitted is None:
                warnings.warn(
                    "GP hyperparameter optimisation failed numerically; using default hyperparameters "
                    "(hyperparameters['is_fitted'] is False)",
                    RuntimeWarning,
                    stacklevel=2,
                )
            else:
                hyper.update(fitted, is_fitted=True)
        return cls(X, y, hyper)

    @classmethod
    def from_hyperparameters(cls, X: np.ndarray, y: np.ndarray, hyperparameters: dict[str, Any]) -> GPSurrogate:
        """Rebuild the posterior on (X, y) with stored hyperparameters, without refitting.

        y is standardised with the stored ``y_mean`` and ``y_sd``, not recomputed, so that adding fantasy
        observations leaves the posterior mean where it was.

        Example:
            >>> import json
            >>> import numpy as np
            >>> X, y = np.array([[0.0], [1.0]]), np.array([1.0, 2.0])
            >>> fitted = GPSurrogate.fit(X, y, n_steps=10)
            >>> stored = json.loads(json.dumps(fitted.hyperparameters))
            >>> rebuilt = GPSurrogate.from_hyperparameters(X, y, stored)
            >>> bool(np.array_equal(rebuilt.predict(X)[0], fitted.predict(X)[0]))
            True
        """
        h = _check_hyperparameters(hyperparameters)
        X = _as_features(X, "X")
        if X.shape[0] == 0:
            raise SetupError("the surrogate needs at least one observation; propose from another arm until then")
        y = _as_targets(y, X.shape[0])
        continuous = _check_continuous(h["kernel"], h.get("continuous"), X.shape[1])
        _check_bits(h["kernel"], X, continuous)
        n_scaled = X.shape[1] if continuous is None else len(continuous)
        if isinstance(h.get("lengthscale"), list) and len(h["lengthscale"]) != n_scaled:
            raise SetupError(f"the hyperparameters have {len(h['lengthscale'])} lengthscales but X has {n_scaled} "
                             "features to scale; refit the surrogate on these features")
        if cls is not GPSurrogate:
            return cls(X, y, h)
        X, y = np.ascontiguousarray(X, dtype=float), np.ascontiguousarray(y, dtype=float)
        return _rebuilt(X.tobytes(), X.shape, y.tobytes(), json.dumps(h))

    def fantasize(self, X_new: np.ndarray) -> GPSurrogate:
        """Return the posterior after believing that y equals the posterior mean at the rows of ``X_new``.

        This is the Kriging believer: the hyperparameters stay, the mean is unchanged and the uncertainty near
        ``X_new`` shrinks. Used for pending experiments and for building a batch.

        Example:
            >>> import numpy as np
            >>> X = np.array([[0.0], [1.0]])
            >>> surrogate = GPSurrogate.fit(X, np.array([0.0, 1.0]), n_steps=10)
            >>> x = np.array([[3.0]])
            >>> bool(surrogate.fantasize(x).predict(x)[1][0] < surrogate.predict(x)[1][0])
            True
        """
        X_new = _as_features(X_new, "X_new", self.n_features)
        if len(X_new) == 0:
            return self
        mean, _ = self.predict(X_new)
        return GPSurrogate(np.vstack([self._X, X_new]), np.concatenate([self._y, mean]), self._hyperparameters)

    # ----------------------------------------------------------------------------------------------- queries
    @property
    def hyperparameters(self) -> dict[str, Any]:
        """JSON-serialisable hyperparameters: kernel name, variance, lengthscale (matern52), noise, y mean and sd.

        ``variance`` and ``noise`` are in standardised y units; ``lengthscale`` is in feature units, a float or (ARD)
        a list with one entry per feature.
        """
        return dict(self._hyperparameters)

    @property
    def n_features(self) -> int:
        """Number of input features."""
        return self._X.shape[1]

    @property
    def X_train(self) -> np.ndarray:
        """Training features the posterior conditions on, shape (n_points, n_features) (a copy)."""
        return self._X.copy()

    @property
    def y_train(self) -> np.ndarray:
        """Training targets the posterior conditions on, shape (n_points,) (a copy)."""
        return self._y.copy()

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation of the latent function at X, both shape (n,) in y units.

        Example:
            >>> import numpy as np
            >>> surrogate = GPSurrogate.fit(np.array([[0.0], [1.0]]), np.array([2.0, 4.0]), n_steps=10)
            >>> [a.shape for a in surrogate.predict(np.zeros((3, 1)))]
            [(3,), (3,)]
        """
        torch, _, _ = require_torch_pyro()
        X = _as_features(X, "X", self.n_features)
        with torch.no_grad():
            loc, var = self._model(torch.as_tensor(X, dtype=torch.float64), full_cov=False, noiseless=True)
        h = self._hyperparameters
        mean = loc.numpy() * h["y_sd"] + h["y_mean"]
        sd = np.sqrt(np.clip(var.numpy(), 0.0, None)) * h["y_sd"]
        return mean, sd

    def leave_one_out(self) -> tuple[np.ndarray, np.ndarray]:
        """Each training point's predictive mean and variance (noise included) given all the others, with these
        hyperparameters, in y units, both shape (n_points,): the closed form of Rasmussen & Williams (2006), eq.
        5.12, ``μ₋ᵢ = yᵢ − [K⁻¹y]ᵢ / [K⁻¹]ᵢᵢ`` and ``σ²₋ᵢ = 1 / [K⁻¹]ᵢᵢ``, from the one Cholesky factor of
        ``K = k(X, X) + (noise + jitter)·I`` (the same ``K`` every posterior here conditions on), so it equals n refits
        without point i to rounding.

        Example:
            >>> import numpy as np
            >>> X = np.linspace(0.0, 1.0, 6)[:, None]
            >>> mean, var = GPSurrogate.fit(X, np.sin(4 * X[:, 0]), n_steps=30).leave_one_out()
            >>> mean.shape, bool(np.all(var > 0))
            ((6,), True)
        """
        torch, _, _ = require_torch_pyro()
        with torch.no_grad():
            L = self._cholesky()
            K_inv = torch.cholesky_inverse(L)
            alpha = K_inv @ self._model.y
        diag = torch.diagonal(K_inv).numpy()
        h = self._hyperparameters
        y_std = self._model.y.numpy()
        mean = (y_std - alpha.numpy() / diag) * h["y_sd"] + h["y_mean"]
        return mean, h["y_sd"] ** 2 / diag

    def kernel_matrix(self, A: np.ndarray, B: np.ndarray | None = None) -> np.ndarray:
        """Prior covariance k(A, B) in standardised y units, shape (len(A), len(B)); B defaults to A.

        Multiply by ``hyperparameters["y_sd"] ** 2`` for y units. Divided by ``hyperparameters["variance"]``, it is
        a similarity in [0, 1], e.g. for finding the nearest tested neighbours of a candidate.

        Example:
            >>> import numpy as np
            >>> X = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
            >>> surrogate = GPSurrogate.fit(X, np.array([0.0, 1.0]), kernel="tanimoto", n_steps=10)
            >>> similarity = surrogate.kernel_matrix(X) / surrogate.hyperparameters["variance"]
            >>> np.round(similarity, 3).tolist()
            [[1.0, 0.333], [0.333, 1.0]]
        """
        torch, _, _ = require_torch_pyro()
        A_t = torch.as_tensor(_as_features(A, "A", self.n_features), dtype=torch.float64)
        B_t = None if B is None else torch.as_tensor(_as_features(B, "B", self.n_features), dtype=torch.float64)
        with torch.no_grad():
            return self._kernel(A_t, B_t).numpy().copy()

    def pool_posterior(self, X_pool: np.ndarray) -> PoolPosterior:
        """The posterior over a fixed candidate pool, ready to absorb Kriging-believer fantasies cheaply.

        Example:
            >>> import numpy as np
            >>> surrogate = GPSurrogate.fit(np.array([[0.0], [1.0]]), np.array([0.0, 1.0]), n_steps=10)
            >>> pool = surrogate.pool_posterior(np.array([[2.0], [2.1], [5.0]]))
            >>> before = pool.sd.copy()
            >>> pool.add_fantasy(0)
            >>> bool(pool.sd[1] < before[1]), bool(np.isclose(pool.sd[2], before[2], rtol=1e-3))
            (True, True)
        """
        return PoolPosterior(self, _as_features(X_pool, "X_pool", self.n_features))

    # ----------------------------------------------------------------------------------------------- internals
    def _kernel(self, A: torch.Tensor, B: torch.Tensor | None = None, *, diag: bool = False) -> torch.Tensor:
        return self._model.kernel(A, B, diag=diag)

    def _cholesky(self) -> torch.Tensor:
        import torch

        X_t = self._model.X
        K = self._kernel(X_t).contiguous()
        K.view(-1)[:: X_t.size(0) + 1] += self._model.jitter + self._model.noise
        return torch.linalg.cholesky(K)


def _check_hyperparameters(hyperparameters: dict[str, Any]) -> dict[str, Any]:
    h = dict(hyperparameters)
    if h.get("type") != "gp_surrogate":
        raise SetupError(f"hyperparameters have type {h.get('type')!r}; expected 'gp_surrogate' from GPSurrogate")
    if h.get("schema_version") not in _READABLE_SCHEMA_VERSIONS:
        raise SetupError(
            f"hyperparameters schema_version {h.get('schema_version')!r} is not one of {_READABLE_SCHEMA_VERSIONS}; "
            "refit the surrogate"
        )
    if h.get("kernel") not in KERNEL_NAMES:
        raise SetupError(f"hyperparameters kernel {h.get('kernel')!r} is not one of {', '.join(KERNEL_NAMES)}")
    names = ["variance", "noise", "y_mean", "y_sd"] + (["lengthscale"] if h["kernel"] in SCALED_KERNELS else [])
    for name in names:
        value = h.get(name)
        is_list = name == "lengthscale" and isinstance(value, list) and len(value) > 0
        for item in value if is_list else [value]:
            if isinstance(item, bool) or not isinstance(item, (int, float)) or not math.isfinite(item):
                raise SetupError(f"hyperparameter {name}={value!r} must be a finite number; refit the surrogate")
            if name != "y_mean" and item <= 0:
                raise SetupError(f"hyperparameter {name}={value!r} must be positive; refit the surrogate")
        h[name] = [float(v) for v in value] if is_list else float(value)
    return h


def _check_continuous(kernel: str, continuous, n_features: int) -> list[int] | None:
    """The Matérn factor's columns of a ``tanimoto_matern52`` kernel, checked; None for the other kernels."""
    if kernel != "tanimoto_matern52":
        return None
    columns = sorted({int(i) for i in (continuous or [])})
    if not columns or len(columns) >= n_features or columns[0] < 0 or columns[-1] >= n_features:
        raise SetupError(f"the tanimoto_matern52 kernel needs continuous columns among the {n_features} features, "
                         f"leaving at least one bit; got {continuous!r}")
    return columns


def _check_bits(kernel: str, X: np.ndarray, continuous: list[int] | None) -> None:
    """Tanimoto's columns must be non-negative (fingerprint bits)."""
    if kernel in DISTANCE_KERNELS:
        return
    bits = X if continuous is None else np.delete(X, continuous, axis=1)
    if np.any(bits < 0):
        raise SetupError(f"the {kernel} kernel needs non-negative features (fingerprints); use kernel='matern52'")


# --------------------------------------------------------------------------------------------------- pool
class PoolPosterior:
    """Posterior mean and sd over a candidate pool, updated in place by Kriging-believer fantasies.

    A fantasy at pool row j (y believed equal to the posterior mean there) leaves the mean unchanged and shrinks
    the variance by a rank-one term, ``var(x) -= cov(x, x_j)^2 / (var(x_j) + noise + jitter)``. That equals
    rebuilding the GP with the fantasy appended (``GPSurrogate.fantasize``), at O(n_pool) cost per fantasy
    instead of a full posterior per step. Attributes ``mean`` and ``sd`` have shape (n_pool,), in y units.
    """

    def __init__(self, surrogate: GPSurrogate, X_pool: np.ndarray):
        import torch

        self._surrogate = surrogate
        self._X_pool = torch.as_tensor(X_pool, dtype=torch.float64)
        model = surrogate._model
        self._y_sd = surrogate.hyperparameters["y_sd"]
        self._noise = float(model.noise) + float(model.jitter)
        h = surrogate.hyperparameters
        with torch.no_grad():
            L = surrogate._cholesky()
            # One triangular solve serves the mean, the variance and every later fantasy's cross-covariance.
            pack = torch.cat([model.y[:, None], surrogate._kernel(model.X, self._X_pool)], dim=1)
            solved = torch.linalg.solve_triangular(L, pack, upper=False)
            self._W = solved[:, 1:].numpy()
            prior_var = surrogate._kernel(self._X_pool, diag=True).numpy()
        self.mean = (self._W.T @ solved[:, 0].numpy()) * h["y_sd"] + h["y_mean"]
        self._var = np.clip(prior_var - (self._W * self._W).sum(0), 0.0, None)  # standardised units
        self._updates: list[np.ndarray] = []  # c_i = cov_{i-1}(pool, x_i) / sqrt(var_{i-1}(x_i) + noise)
        self.fantasies: list[int] = []

    @property
    def sd(self) -> np.ndarray:
        """Posterior sd of the latent function over the pool, in y units, shape (n_pool,)."""
        return np.sqrt(np.clip(self._var, 0.0, None)) * self._y_sd

    def shift(self, z: np.ndarray) -> np.ndarray:
        """How far the pool's mean moves when the fantasies' observations come back ``z`` standard deviations from
        their predictions (``z``: (n_fantasies, S) standard-normal draws, in fantasy order; each observation's
        innovation): (n_pool, S), y units. ``mean + shift`` with independent draws samples the pool's posterior
        mean jointly with the fantasies, which the believer (z = 0) holds fixed."""
        z = np.asarray(z, dtype=float)
        if z.ndim != 2 or len(z) != len(self._updates):
            raise SetupError(f"z has shape {z.shape}; expected ({len(self._updates)}, n_draws), a row per fantasy")
        if not self._updates:
            return np.zeros((len(self.mean), z.shape[1]))
        return (np.stack(self._updates, axis=1) @ z) * self._y_sd

    def add_fantasy(self, index: int) -> None:
        """Condition on a believed observation at pool row ``index``."""
        import torch

        with torch.no_grad():
            k_column = self._surrogate._kernel(self._X_pool, self._X_pool[index : index + 1])[:, 0].numpy()
        covariance = k_column - self._W.T @ self._W[:, index]
        for c in self._updates:
            covariance -= c * c[index]
        update = covariance / math.sqrt(max(self._var[index], 0.0) + self._noise)
        self._updates.append(update)
        self._var = self._var - update**2
        self.fantasies.append(int(index))
