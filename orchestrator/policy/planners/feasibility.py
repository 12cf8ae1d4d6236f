"""A failed run teaches: the probability that a candidate's run succeeds, and the acquisition weighed by it.

``success_probability`` is a label-regression GP classifier: the campaign's GP (``outcome_models.fit_outcome_gp``,
same features and kernel choice) fitted on +1 for every lab result and -1 for every learned failure, squashed by the
probit with the posterior's uncertainty, ``p = Phi(mu / sqrt(1 + sd²))`` (the probit likelihood's predictive for a
latent Normal(mu, sd²)). ``outcome_log_weight`` adds log p to log P(outcome constraints met), and
the bo arm adds that weight to every score of its Kriging-believer batch log-EI (``acquisition.select_batch``'s
``log_weight``: log EI + log p), so that a region that keeps failing stops being proposed. Nothing changes without learned
failures or constraints: both return None and the arm runs as before.

Example:
    >>> import numpy as np
    >>> from orchestrator.policy.planners.acquisition import select_batch
    >>> from orchestrator.policy.planners.surrogate import GPSurrogate
    >>> X = np.linspace(0, 0.5, 6)[:, None]
    >>> gp = GPSurrogate.fit(X, X[:, 0], n_steps=20)
    >>> pool = np.linspace(0.5, 1, 11)[:, None]
    >>> weight = np.where(pool[:, 0] > 0.6, -50.0, 0.0)  # above 0.6 all but certain to fail
    >>> picks, _ = select_batch(gp, X, X[:, 0], pool, 2, log_weight=weight)
    >>> pool[picks, 0].round(2).tolist()
    [0.6, 0.55]
"""

from __future__ import annotations

import numpy as np
from scipy import special

from orchestrator.policy.planners.base import PlanningContext
from orchestrator.policy.planners.outcome_models import (
    constraint_log_probability,
    fit_outcome_gp,
)

__all__ = ["LABEL_NOISE", "LABEL_SCALE", "MIN_SUCCESS_PROBABILITY", "learned_failures", "outcome_log_weight",
           "success_probability", "with_imputed_failures"]

MIN_SUCCESS_PROBABILITY = 1e-12
"""Floor on p before its log is taken: a candidate the classifier all but rules out still orders by its acquisition."""

LABEL_SCALE = 3.0
"""The labels' magnitude (+s succeeded, -s failed): with +-1, p = Phi(mu / sqrt(1 + sd²)) could never pass Phi(1) = 0.84
even at a failure's own row, too little to outweigh the larger expected improvement of an unexplored failing region;
at 3, a row with a failure, or between two, gets p of about 0.001 (DECISIONS.md)."""

LABEL_NOISE = 0.1
"""The label GP's noise variance, in latent units (labels at +-1): a success next to a failure is no contradiction."""

_MIN_VARIANCE = 1e-12  # standardised units, as acquisition.select_batch


def learned_failures(context: PlanningContext) -> np.ndarray:
    """Pool rows of the candidates whose failures the campaign learns from (``PlanningContext.failed``)."""
    return np.asarray(getattr(context, "failed", None) if getattr(context, "failed", None) is not None
                      else np.empty(0, dtype=int), dtype=int)


def success_probability(context: PlanningContext, rows: np.ndarray) -> np.ndarray | None:
    """P(a run at each pool row in ``rows`` succeeds), shape (len(rows),); None without learned failures.

    Without any success yet every label is -1 and the GP is flat: p is the same low value everywhere, which leaves
    the ranking to the acquisition.
    """
    failed = learned_failures(context)
    if len(failed) == 0:
        return None
    observed = np.asarray(context.observed, dtype=int)
    train = np.concatenate([observed, failed])
    labels = LABEL_SCALE * np.concatenate([np.ones(len(observed)), -np.ones(len(failed))])
    if len(train) < 2:  # one failure and nothing else: no fit, the failure's row alone is known
        return np.where(np.isin(np.asarray(rows, dtype=int), failed), special.ndtr(-1.0), special.ndtr(0.0))
    model = _label_model(context, train, labels)
    mean, sd = model.predict(np.asarray(context.pool.features[np.asarray(rows, dtype=int)], dtype=float))
    return special.ndtr(mean / np.sqrt(1.0 + sd**2))


def _label_model(context: PlanningContext, train: np.ndarray, labels: np.ndarray):
    """The campaign's GP conditioned on the labels: its kernel and lengthscales (the geometry the campaign's refit
    learned on the objective), a unit latent variance, ``LABEL_NOISE`` and a zero prior mean (p = 1/2 where nothing
    is known). A marginal-likelihood fit on a handful of labels picks lengthscales of a few hundredths, after which
    every untried row reverts to the prior (DECISIONS.md), so it is the fallback only: where the campaign's state
    has no geometry for the pool's features (none yet, or a ladder prior appended as a feature)."""
    from orchestrator.policy.planners.surrogate import GPSurrogate

    state = context.surrogate_state or {}
    X = np.asarray(context.pool.features[train], dtype=float)
    lengthscale = state.get("lengthscale")
    n_scaled = X.shape[1] if state.get("continuous") is None else len(state["continuous"])
    if not state or state.get("prior") or (isinstance(lengthscale, list) and len(lengthscale) != n_scaled):
        return fit_outcome_gp(context, train, labels, "success")
    borrowed = {key: state[key] for key in ("type", "schema_version", "kernel", "lengthscale", "continuous")
                if key in state}
    return GPSurrogate.from_hyperparameters(X, labels, {**borrowed, "variance": 1.0, "noise": LABEL_NOISE,
                                                        "y_mean": 0.0, "y_sd": LABEL_SCALE, "is_fitted": True})


def with_imputed_failures(context: PlanningContext, X, X_train: np.ndarray, y_train: np.ndarray,
                          target: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The training set with every learned failure added at the worst training target (penalised imputation,
    Forrester, Sóbester & Keane 2006): the lowest utility, or for a value model (``target``) the value farthest from
    the target. Without it the objective's GP never learns anything where runs fail, so its uncertainty there, and the
    expected improvement that follows from it, never shrinks, and p alone must outweigh it (DECISIONS.md).
    Unchanged without learned failures."""
    failed = learned_failures(context)
    y_train = np.asarray(y_train, dtype=float)
    if len(failed) == 0 or len(y_train) == 0:
        return X_train, y_train
    worst = y_train[np.argmax(np.abs(y_train - target))] if target is not None else np.min(y_train)
    X_failed = np.asarray(X[failed], dtype=float)
    return np.vstack([np.asarray(X_train, dtype=float), X_failed]), np.concatenate([y_train, np.full(len(failed), worst)])


def outcome_log_weight(context: PlanningContext, rows: np.ndarray) -> np.ndarray | None:
    """log P(constraints met) + log P(success) at pool ``rows``; None when the context has neither constraints nor
    learned failures (the acquisition is then unweighted)."""
    constraint = constraint_log_probability(context, rows)
    success = success_probability(context, rows)
    if constraint is None and success is None:
        return None
    weight = np.zeros(len(rows)) if constraint is None else constraint
    if success is not None:
        weight = weight + np.log(np.maximum(success, MIN_SUCCESS_PROBABILITY))
    return weight
