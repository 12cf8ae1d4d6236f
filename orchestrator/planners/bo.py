"""The Bayesian-optimisation arm: a pyro-ppl GP with pending-aware batch log-EI (Kriging believer).

With a ``prior_mean`` (for example a cheap rung calibrated against the lab), the GP models the lab utility's residual
from that prior, and expected improvement is taken on prior + residual: the multi-fidelity mean-function form of
co-kriging (Kennedy & O'Hagan, 2000) with the calibration playing the role of the scale factor.

For a target objective the utility ``-|value - target|`` folds the two sides of the target together. Given the lab
values (``observed_values``), the planner models the value instead (the prior, if any, is then a prior value) and
ranks by ``log_window_improvement``, the expected improvement of the folded utility under the value's predictive.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, Protocol

import numpy as np

from ..domain import Proposal
from .base import PlanningContext
from .random_arm import RandomPlanner

__all__ = ["BOPlanner", "PriorMean", "choose_kernel", "fit_surrogate_state"]


class PriorMean(Protocol):
    """A prior belief about every pool row's lab utility (or value), from what is known before the lab answers."""

    def __call__(self, context: PlanningContext) -> np.ndarray | None:
        """Prior utility per pool row, shape (n_pool,), in utility units; None when there is no prior (yet).

        With ``BOPlanner(observed_values=...)`` on a target objective: the prior value, in the objective's unit.
        """
        ...


class ObservedValues(Protocol):
    """The lab values (objective unit, not utilities) of ``context.observed``, in that order."""

    def __call__(self, context: PlanningContext) -> np.ndarray: ...


def choose_kernel(kind: str, requested: str) -> str:
    """``auto`` picks Tanimoto for molecular fingerprints and Matérn-5/2 otherwise."""
    if requested != "auto":
        return requested
    return "tanimoto" if kind == "molecule" else "matern52"


def fit_surrogate_state(X: np.ndarray, y: np.ndarray, *, kernel: str, seed: int) -> dict[str, Any]:
    """Fit the GP on lab data (features ``X``, utilities ``y``) and return its JSON-serialisable hyperparameters.

    The hyperparameters are the MAP under BoTorch's default priors (``GPSurrogate.fit(priors=True)``), found by
    L-BFGS; Matérn-5/2 gets one lengthscale per feature (ARD). Measured on the discovery benchmarks against the plain
    marginal-likelihood fit with one lengthscale (``orchestrator/DECISIONS.md``).
    """
    from .surrogate import GPSurrogate

    return GPSurrogate.fit(X, y, kernel=kernel, seed=seed, ard=kernel == "matern52", priors=True,
                           optimizer="lbfgs").hyperparameters


class BOPlanner:
    """Proposes the batch that maximises log expected improvement, treating pending jobs as fantasies.

    Until the surrogate has been fitted (``n_initial`` lab results), it proposes a random initial design.

    Args:
        prior_mean: optional prior utility per pool row; the surrogate state must then be fitted on
            ``training_targets(context)`` (the residuals), not on the raw utilities.
        observed_values: optional lab values of the observed rows; with a target objective the planner then models
            values rather than utilities (and ``prior_mean`` must give prior values). Fit the surrogate on
            ``training_targets(context)``.
    """

    name = "bo"
    incumbent: Literal["observed", "posterior"] = "posterior"
    """What log-EI improves on; "posterior" measured fewer lab experiments on the noisier pools (DECISIONS.md)."""

    def __init__(self, prior_mean: PriorMean | None = None, *, observed_values: ObservedValues | None = None):
        self.prior_mean = prior_mean
        self.observed_values = observed_values

    def models_values(self, context: PlanningContext) -> bool:
        """Whether the surrogate models the lab value (a target objective with the values given) or the utility."""
        return self.observed_values is not None and context.spec.objective.direction == "target"

    def training_targets(self, context: PlanningContext) -> np.ndarray:
        """What the surrogate is fitted on: lab utilities (or values), minus the prior mean when there is one."""
        prior = self.prior_mean(context) if self.prior_mean is not None else None
        if self.models_values(context):
            y = np.asarray(self.observed_values(context), dtype=float)
        else:
            y = np.asarray(context.utilities, dtype=float)
        return y if prior is None else y - prior[np.asarray(context.observed, dtype=int)]

    def _incumbent(self, context: PlanningContext, surrogate, X_train: np.ndarray, prior: np.ndarray | None,
                   target: float | None) -> float:
        """The utility to improve on: the best observed, or (``incumbent = "posterior"``) the best posterior mean
        at the tested candidates, which a lucky noisy measurement cannot inflate (the plug-in form of noisy EI)."""
        if self.incumbent == "observed":
            return float(np.max(context.utilities))
        mean = surrogate.predict(X_train)[0]
        if prior is not None:
            mean = mean + prior[np.asarray(context.observed, dtype=int)]
        return float(np.max(mean if target is None else -np.abs(mean - target)))

    def _prior_utility(self, context: PlanningContext, prior: np.ndarray) -> np.ndarray:
        if not self.models_values(context):
            return prior
        return -np.abs(prior - float(context.spec.objective.target))

    def _initial_design(self, context: PlanningContext, n: int) -> list[Proposal]:
        """Random, or with a prior: the best ceil(n/2) by the prior plus random picks (spread for calibrating it)."""
        prior = self.prior_mean(context) if self.prior_mean is not None else None
        by_prior, rest = np.zeros(0, dtype=int), context
        if prior is not None:
            available = np.asarray(context.available, dtype=int)
            prior_utility = self._prior_utility(context, prior)
            by_prior = available[np.argsort(-prior_utility[available], kind="stable")[: (n + 1) // 2]]
            rest = dataclasses.replace(context, available=available[~np.isin(available, by_prior)])
        picks = [context.pool.candidates[int(i)] for i in by_prior]
        proposals = [Proposal(candidate=c, arm="bo", hypothesis="initial design: best by the prior mean",
                              rationale="the ladder's ranking before any lab result") for c in picks]
        initial = RandomPlanner(label="bo-initial").propose(rest, n - len(proposals))
        return proposals + [p.model_copy(update={"arm": "bo", "hypothesis": "initial design (random) before the surrogate has data"})
                            for p in initial]

    def propose(self, context: PlanningContext, n: int) -> list[Proposal]:
        n = min(n, len(context.available))
        if n == 0:
            return []
        n_initial = context.spec.planner.n_initial
        if context.surrogate_state is None or len(context.observed) < min(n_initial, 2):
            return self._initial_design(context, n)

        from .acquisition import select_batch
        from .surrogate import GPSurrogate

        X = context.pool.features
        prior = self.prior_mean(context) if self.prior_mean is not None else None
        X_train, y_train = X[context.observed], self.training_targets(context)
        surrogate = GPSurrogate.from_hyperparameters(X_train, y_train, context.surrogate_state)
        pending = X[context.pending] if len(context.pending) else None
        offsets = {} if prior is None else {"offset_pool": prior[context.available],
                                            "offset_pending": prior[context.pending] if len(context.pending) else None}
        is_value = self.models_values(context)
        target = float(context.spec.objective.target) if is_value else None
        best = self._incumbent(context, surrogate, X_train, prior, target)
        picks, log_ei = select_batch(surrogate, X_train, y_train, X[context.available], n, pending=pending,
                                     incumbent=best, target=target, **offsets)
        chosen = context.available[np.asarray(picks, dtype=int)]
        mean, sd = surrogate.predict(X[chosen])
        if prior is not None:
            mean = mean + prior[chosen]
        proposals = []
        for index, acq, mu, sigma in zip(chosen, log_ei, mean, sd, strict=True):
            what = "value" if is_value else "utility"
            proposals.append(
                Proposal(
                    candidate=context.pool.candidates[int(index)],
                    arm="bo",
                    hypothesis=f"predicted {what} {mu:.3g} ± {sigma:.2g} against the incumbent utility {best:.3g}",
                    rationale="highest log expected improvement given the lab data and pending jobs",
                    expected=float(mu) if is_value else _utility_to_value(context, float(mu)),
                    acquisition=float(acq),
                )
            )
        return proposals


def _utility_to_value(context: PlanningContext, utility: float) -> float | None:
    direction = context.spec.objective.direction
    if direction == "maximize":
        return utility
    if direction == "minimize":
        return -utility
    return None  # a target utility does not say on which side of the target the value lies
