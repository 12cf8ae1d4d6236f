"""The closed-form loss and gradient the L-BFGS fit uses agree with autograd on the pyro model's own loss."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pyro")

from orchestrator.policy.planners import gp_fitting  # noqa: E402
from orchestrator.policy.planners.gp_gradients import GPLossInputs, loss_and_gradient  # noqa: E402
from orchestrator.policy.planners.gp_kernels import make_kernel, require_torch_pyro  # noqa: E402
from orchestrator.policy.planners.surrogate import GPSurrogate  # noqa: E402


def _pyro_model(kernel_name: str, X: np.ndarray, y: np.ndarray, lengthscale, jitter: float, continuous=None):
    from torch.distributions import constraints

    _, _, gp = require_torch_pyro()
    X_t, y_t = torch.as_tensor(X), torch.as_tensor(y)
    kernel = make_kernel(kernel_name, X.shape[1], 1.0, lengthscale, continuous)
    model = gp.models.GPRegression(X_t, y_t, kernel, jitter=jitter)
    model.noise = gp.parameterized.PyroParam(torch.tensor(1e-3, dtype=torch.float64),
                                             constraints.greater_than(gp_fitting.NOISE_FLOOR))
    return model, X_t, y_t


CASES = [("matern52", "ard"), ("matern52", "shared"), ("rbf", "ard"), ("rbf", "shared"), ("tanimoto", None),
         ("tanimoto_matern52", "ard")]
N_NUMBERS = 5  # tanimoto_matern52: the last columns are numbers, the rest bits


@pytest.mark.parametrize("priors", [False, True])
@pytest.mark.parametrize(("kernel_name", "lengthscales"), CASES)
def test_closed_form_loss_and_gradient_equal_autograd(kernel_name, lengthscales, priors):
    rng = np.random.default_rng(3)
    n, d = 9, 17
    X = (rng.random((n, d)) > 0.6).astype(float) if kernel_name not in ("matern52", "rbf") else rng.normal(size=(n, d))
    continuous = list(range(d - N_NUMBERS, d)) if kernel_name == "tanimoto_matern52" else None
    if continuous:
        X[:, continuous] = rng.random((n, N_NUMBERS))
    y = rng.normal(size=n)
    n_scaled = d if continuous is None else len(continuous)
    lengthscale = None if lengthscales is None else ([1.0] * n_scaled if lengthscales == "ard" else 1.0)
    jitter = 1e-6
    model, X_t, y_t = _pyro_model(kernel_name, X, y, lengthscale, jitter, continuous)
    params = gp_fitting.RawParameters(model)
    for _ in range(5):  # random points of the unconstrained space, away from the initial values
        with torch.no_grad():
            for key in ("noise", "variance", "lengthscale"):
                if key in params:
                    raw = params.raw(key)
                    raw.copy_(torch.as_tensor(rng.normal(-1.0 if key == "noise" else 0.3, 0.7, size=raw.shape)))
        for raw in model.parameters():
            raw.grad = None
        reference = gp_fitting._negative_log_marginal_likelihood(torch, model, params, X_t, y_t, jitter, priors)
        reference.backward()

        similarity, X_scaled = None, X
        if kernel_name == "tanimoto":
            with torch.no_grad():
                similarity = model.kernel.covariance(X_t, None, variance=1.0).numpy()
        elif kernel_name == "tanimoto_matern52":
            with torch.no_grad():
                similarity, X_scaled = model.kernel.similarity(X_t).numpy(), X[:, continuous]
        inputs = GPLossInputs(X=X_scaled, y=y, similarity=similarity, jitter=jitter, noise_floor=gp_fitting.NOISE_FLOOR,
                              priors=priors, shape="rbf" if kernel_name == "rbf" else "matern52")
        raw_lengthscale = params.raw("lengthscale").detach().numpy() if "lengthscale" in params else None
        loss, g_noise, g_variance, g_lengthscale = loss_and_gradient(
            inputs, params.raw("noise").item(), params.raw("variance").item(), raw_lengthscale)

        assert loss == pytest.approx(reference.detach().item(), rel=1e-10)
        assert g_noise == pytest.approx(params.raw("noise").grad.item(), rel=1e-8, abs=1e-10)
        assert g_variance == pytest.approx(params.raw("variance").grad.item(), rel=1e-8, abs=1e-10)
        if raw_lengthscale is not None:
            np.testing.assert_allclose(g_lengthscale, params.raw("lengthscale").grad.numpy(), rtol=1e-7, atol=1e-10)


def test_singular_covariance_raises_a_linalg_error_the_fit_retries_on():
    X = np.zeros((3, 2))
    inputs = GPLossInputs(X=X, y=np.array([0.0, 1.0, -1.0]), similarity=None, jitter=0.0, noise_floor=0.0,
                          priors=False)
    with pytest.raises(np.linalg.LinAlgError):
        loss_and_gradient(inputs, -np.inf, 0.0, np.zeros(2))


def test_lbfgs_fit_reaches_the_autograd_optimum():
    """The fit's L-BFGS minimum is a stationary point of the autograd loss (its gradient is ~0 there)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 6))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=12)
    fitted = GPSurrogate.fit(X, y, ard=True, priors=True, optimizer="lbfgs").hyperparameters
    y_std = (y - fitted["y_mean"]) / fitted["y_sd"]
    model, X_t, y_t = _refit_model(fitted, X, y_std)
    params = gp_fitting.RawParameters(model)
    loss = gp_fitting._negative_log_marginal_likelihood(torch, model, params, X_t, y_t, 1e-6, True)
    loss.backward()
    gradient = np.concatenate([p.grad.reshape(-1).numpy() for p in model.parameters()])
    assert np.max(np.abs(gradient)) < 1e-3


def _refit_model(fitted, X, y_std):
    """A pyro model whose raw parameters sit at the fitted hyperparameters."""
    from torch.distributions import constraints

    _, _, gp = require_torch_pyro()
    X_t, y_t = torch.as_tensor(X), torch.as_tensor(y_std)
    kernel = make_kernel("matern52", X.shape[1], fitted["variance"], fitted["lengthscale"])
    model = gp.models.GPRegression(X_t, y_t, kernel, jitter=1e-6)
    model.noise = gp.parameterized.PyroParam(torch.tensor(fitted["noise"], dtype=torch.float64),
                                             constraints.greater_than(gp_fitting.NOISE_FLOOR))
    return model, X_t, y_t


def test_a_trial_step_beyond_exps_range_is_rejected_and_the_fit_still_converges(monkeypatch):
    """A line-search trial step can put a raw variance above ~709, where math.exp overflows (it did on the band
    gap). The closure answers with an infinite loss, the strong-Wolfe search backs off, and the fit reaches the same
    optimum as without the failed trial."""
    from orchestrator.policy.planners import gp_gradients

    tiny = GPLossInputs(X=np.eye(2), y=np.ones(2), similarity=None, jitter=1e-6, noise_floor=1e-6, priors=True)
    with pytest.raises(OverflowError):
        loss_and_gradient(tiny, 0.0, 800.0, np.zeros(2))
    for raw_lengthscale in ([-800.0, 0.0], [0.0, 800.0]):  # exp underflows to 0 (X / 0) or overflows to inf
        with pytest.raises(OverflowError), np.errstate(all="raise"):  # and no NumPy warning on the way
            loss_and_gradient(tiny, 0.0, 0.0, np.asarray(raw_lengthscale))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 6))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=12)
    clean = GPSurrogate.fit(X, y, ard=True, priors=True, optimizer="lbfgs").hyperparameters
    real, calls = gp_gradients.loss_and_gradient, []

    def overflowing_once(inputs, raw_noise, raw_variance, raw_lengthscale):
        calls.append(raw_variance)
        if len(calls) == 2:  # the first trial step of the line search
            raise OverflowError("math range error")
        return real(inputs, raw_noise, raw_variance, raw_lengthscale)

    monkeypatch.setattr(gp_gradients, "loss_and_gradient", overflowing_once)
    with_overflow = GPSurrogate.fit(X, y, ard=True, priors=True, optimizer="lbfgs").hyperparameters
    assert len(calls) > 2 and with_overflow["is_fitted"]
    assert with_overflow["variance"] == pytest.approx(clean["variance"], rel=1e-3)
    assert with_overflow["noise"] == pytest.approx(clean["noise"], rel=1e-2, abs=1e-5)
