"""Fitting the GP surrogate's hyperparameters: the exact negative log marginal likelihood in closed form (plus
BoTorch's default priors for a MAP fit), Adam or L-BFGS on pyro's unconstrained parameters, seeded and retried with
growing jitter, with the callers' global random generators handed back untouched.

torch and pyro come in as arguments (``gp_kernels.require_torch_pyro``), so importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
import math
import random
from typing import TYPE_CHECKING, Any

import numpy as np

from orchestrator.policy.planners.gp_kernels import SCALED_KERNELS, make_kernel
from vocabulary.domain import SetupError

if TYPE_CHECKING:
    import torch

__all__ = ["JITTERS", "NOISE_FLOOR", "optimise", "stable_jitter"]

NOISE_FLOOR = 1e-6  # in standardised y units; keeps K + noise·I well conditioned when y is nearly noiseless
JITTERS = (1e-6, 1e-5, 1e-4, 1e-3)
_LEARNING_RATE = 0.05


def stable_jitter(kernel, X_t: torch.Tensor, noise: float) -> float:
    """Smallest jitter in ``JITTERS`` for which K + (noise + jitter)·I has a Cholesky factor."""
    import torch

    with torch.no_grad():
        K = kernel(X_t).contiguous()
        for jitter in JITTERS:
            attempt = K.clone()
            attempt.view(-1)[:: X_t.size(0) + 1] += jitter + noise
            _, info = torch.linalg.cholesky_ex(attempt)
            if int(info) == 0:
                return jitter
    raise SetupError(
        f"the GP covariance is singular even with jitter {JITTERS[-1]:g}; check for NaN-like or huge features"
    )


@contextlib.contextmanager
def _restoring_global_rngs(torch):
    """pyro.set_rng_seed reseeds Python's, NumPy's and torch's global generators; hand the callers theirs back."""
    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])


def _seed_cpu_generators(torch, seed: int) -> None:
    """``pyro.set_rng_seed`` for the CPU only: torch.manual_seed also seeds every lazily loaded accelerator backend,
    which costs about 0.7 ms a call here (two a fit)."""
    torch.default_generator.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)


def optimise(torch, pyro, gp, X: np.ndarray, y_std: np.ndarray, init: dict[str, Any], *, seed: int, n_steps: int,
              optimizer: str = "adam", priors: bool = False):
    """Maximise the marginal likelihood from ``init``; return the fitted floats, or None on numerical failure."""
    with _restoring_global_rngs(torch):
        return _optimise_seeded(torch, pyro, gp, X, y_std, init, seed=seed, n_steps=n_steps, optimizer=optimizer,
                                priors=priors)


class RawParameters:
    """The fit's parameters: pyro's unconstrained tensors (the ones the optimiser moves), each turned into its
    constrained value by the transform pyro applies, once per use, so that the loss and its gradient are bitwise
    those of the pyro model while skipping pyro's per-access parameter machinery (about half of a fit's time)."""

    def __init__(self, model):
        from torch.distributions import transform_to

        self._raw = {}
        for module, name, key in ((model, "noise", "noise"), (model.kernel, "variance", "variance"),
                                  (model.kernel, "lengthscale", "lengthscale")):
            if name in getattr(module, "_pyro_params", {}):
                constraint, _ = module._pyro_params[name]
                self._raw[key] = (module._parameters[f"{name}_unconstrained"], transform_to(constraint))

    def __contains__(self, key: str) -> bool:
        return key in self._raw

    def value(self, key: str):
        raw, transform = self._raw[key]
        return transform(raw)

    def raw(self, key: str):
        """The unconstrained tensor the optimiser moves."""
        return self._raw[key][0]


def _negative_log_marginal_likelihood(torch, model, params: RawParameters, X_t, y_t, jitter: float,
                                      priors: bool = False):
    """-log N(y | 0, K + (noise + jitter)·I) of pyro's ``GPRegression`` in closed form (it has no priors or latents).

    With ``priors``, minus the log densities of the hyperparameter priors (up to constants) are added: the loss is
    then the negative log posterior, whose minimum is the MAP estimate.
    """
    n = X_t.size(0)
    hyper = {"lengthscale": params.value("lengthscale")} if "lengthscale" in params else {}
    K = model.kernel.covariance(X_t, None, variance=params.value("variance"), **hyper)
    K = K + (params.value("noise") + jitter) * torch.eye(n, dtype=X_t.dtype)
    L = torch.linalg.cholesky(K)
    alpha = torch.cholesky_solve(y_t[:, None], L)
    loss = 0.5 * (y_t[:, None] * alpha).sum() + torch.log(torch.diagonal(L)).sum() + 0.5 * n * math.log(2 * math.pi)
    if priors:
        loss = loss + _negative_log_prior(torch, params, getattr(model.kernel, "n_scaled", X_t.size(1)))
    return loss


def _log_normal_nll(torch, value, loc: float, scale: float):
    log_value = torch.log(value)
    return (log_value + 0.5 * ((log_value - loc) / scale) ** 2).sum()


def _negative_log_prior(torch, params: RawParameters, n_features: int):
    """Hvarfner et al. (2024)'s priors, as BoTorch's defaults: LogNormal(√2 + ½ log d, √3) on each lengthscale,
    LogNormal(-4, 1) on the noise; and LogNormal(0, 1) on the kernel variance (standardised y has variance 1)."""
    loss = (_log_normal_nll(torch, params.value("noise"), -4.0, 1.0)
            + _log_normal_nll(torch, params.value("variance"), 0.0, 1.0))
    if "lengthscale" in params:
        loss = loss + _log_normal_nll(torch, params.value("lengthscale"), math.sqrt(2) + 0.5 * math.log(n_features),
                                      math.sqrt(3))
    return loss


def _train_lbfgs(torch, model, X_t, y_t, jitter: float, n_steps: int, priors: bool = False) -> list[float]:
    """torch's L-BFGS (strong Wolfe) on pyro's unconstrained parameters, the loss and gradient in closed form
    (``gp_gradients``), which is several times cheaper than autograd on a fit's few points."""
    from orchestrator.policy.planners.gp_gradients import (
        GPLossInputs,
        loss_and_gradient,
    )

    params = RawParameters(model)
    raw_noise, raw_variance = params.raw("noise"), params.raw("variance")
    raw_lengthscale = params.raw("lengthscale") if "lengthscale" in params else None
    with torch.no_grad():
        if hasattr(model.kernel, "split"):  # Tanimoto × Matérn: the bits' similarity is fixed, the numbers scale
            similarity, X_scaled = model.kernel.similarity(X_t), model.kernel.split(X_t)[1]
        elif raw_lengthscale is None:
            similarity, X_scaled = model.kernel.covariance(X_t, None, variance=1.0), X_t
        else:
            similarity, X_scaled = None, X_t
    inputs = GPLossInputs(X=X_scaled.numpy(), y=y_t.numpy(), jitter=jitter, noise_floor=NOISE_FLOOR, priors=priors,
                          similarity=None if similarity is None else similarity.numpy(),
                          shape=getattr(model.kernel, "shape", "matern52"))
    optimizer = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=n_steps, line_search_fn="strong_wolfe",
                                  tolerance_grad=1e-6, tolerance_change=1e-9)
    losses: list[float] = []

    def closure():
        try:
            loss, g_noise, g_variance, g_lengthscale = loss_and_gradient(
                inputs, raw_noise.detach().item(), raw_variance.detach().item(),
                None if raw_lengthscale is None else raw_lengthscale.detach().numpy())
        except OverflowError:
            # a line-search trial step beyond exp's range (a raw parameter above ~709): an infinite loss, which the
            # strong-Wolfe search rejects and backs off from; not a loss of the fit, so not recorded in ``losses``
            loss, g_noise, g_variance = math.inf, math.inf, math.inf
            g_lengthscale = None if raw_lengthscale is None else np.full(tuple(raw_lengthscale.shape), math.inf)
            raw_noise.grad = torch.tensor(g_noise, dtype=torch.float64)
            raw_variance.grad = torch.tensor(g_variance, dtype=torch.float64)
            if raw_lengthscale is not None:
                raw_lengthscale.grad = torch.as_tensor(g_lengthscale, dtype=torch.float64)
            return torch.tensor(loss, dtype=torch.float64)
        raw_noise.grad = torch.tensor(g_noise, dtype=torch.float64)
        raw_variance.grad = torch.tensor(g_variance, dtype=torch.float64)
        if raw_lengthscale is not None:
            raw_lengthscale.grad = torch.as_tensor(g_lengthscale, dtype=torch.float64).reshape(raw_lengthscale.shape)
        losses.append(loss)
        return torch.tensor(loss, dtype=torch.float64)

    optimizer.step(closure)
    return losses


def _train_adam(torch, model, X_t, y_t, jitter: float, n_steps: int, priors: bool = False) -> list[float]:
    """The steps of ``pyro.contrib.gp.util.train`` on the same loss, without pyro's trace machinery (~15× faster)."""
    params = RawParameters(model)
    adam = torch.optim.Adam(model.parameters(), lr=_LEARNING_RATE)
    losses = []
    for _ in range(n_steps):
        adam.zero_grad()
        loss = _negative_log_marginal_likelihood(torch, model, params, X_t, y_t, jitter, priors)
        loss.backward()
        adam.step()
        losses.append(float(loss.detach()))
    return losses


def _optimise_seeded(torch, pyro, gp, X, y_std, init, *, seed: int, n_steps: int, optimizer: str = "adam",
                     priors: bool = False):
    from torch.distributions import constraints

    for jitter in JITTERS:
        _seed_cpu_generators(torch, seed)
        pyro.clear_param_store()
        X_t = torch.as_tensor(X, dtype=torch.float64)
        y_t = torch.as_tensor(y_std, dtype=torch.float64)
        kernel = make_kernel(init["kernel"], X.shape[1], init["variance"], init.get("lengthscale"),
                             init.get("continuous"))
        model = gp.models.GPRegression(X_t, y_t, kernel, jitter=jitter)
        model.noise = gp.parameterized.PyroParam(
            torch.tensor(init["noise"], dtype=torch.float64), constraints.greater_than(NOISE_FLOOR)
        )
        try:
            if optimizer == "lbfgs":
                losses = _train_lbfgs(torch, model, X_t, y_t, jitter, n_steps, priors)
            else:
                losses = _train_adam(torch, model, X_t, y_t, jitter, n_steps, priors)
        except (RuntimeError, ValueError):  # torch's LinAlgError is a RuntimeError, NumPy's a ValueError
            continue
        if not all(math.isfinite(loss) for loss in losses):
            continue
        with torch.no_grad():
            fitted = {"variance": float(kernel.variance), "noise": float(model.noise)}
            if init["kernel"] in SCALED_KERNELS:
                lengthscale = kernel.lengthscale
                fitted["lengthscale"] = float(lengthscale) if lengthscale.dim() == 0 else lengthscale.tolist()
        if all(math.isfinite(value) and value > 0 for value in np.ravel(list(_flat(fitted)))):
            return fitted
    return None


def _flat(values: dict[str, Any]):
    for value in values.values():
        yield from (value if isinstance(value, list) else [value])
