"""The Bayesian-optimisation arm: a pyro-ppl GP with pending-aware batch log-EI (Kriging believer).

With a ``prior_mean`` (for example a cheap rung calibrated against the lab), the GP models the lab utility's residual
from that prior, and expected improvement is taken on prior + residual: the multi-fidelity mean-function form of
co-kriging (Kennedy & O'Hagan, 2000) with the calibration playing the role of the scale factor.

For a target objective the utility ``-|value - target|`` folds the two sides of the target together and puts a kink
at the optimum. Given the lab values (``PlanningContext.values``), the surrogate models the value instead (the prior,
if any, is then a prior value) and the planner ranks by ``log_window_improvement``, the expected improvement of the
folded utility under the value's predictive. A surrogate state records what it was fitted on (``fitted_on``), and
every reader conditions it on the same numbers (``surrogate_targets``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal, Protocol

import numpy as np

from orchestrator.policy.planners.base import PlannerTraits, PlanningContext
from orchestrator.policy.planners.kernel_choice import (
    FittedOn,
    choose_kernel,
    continuous_columns,
    fit_surrogate_state,
)
from orchestrator.policy.planners.random_arm import RandomPlanner
from vocabulary.domain import Proposal

__all__ = ["BOPlanner", "LabUtilityModel", "PriorMean", "campaign_surrogate_state", "campaign_utility_model",
           "campaign_kernel", "choose_kernel", "cold_start_count", "continuous_columns", "fit_surrogate_state", "folded_utility_moments", "has_fitted_surrogate",
           "rung_share", "rung_slots", "state_features", "state_prior", "surrogate_fits_values", "surrogate_targets"]


class PriorMean(Protocol):
    """A prior belief about every pool row's lab utility (or value), from what is known before the lab answers."""

    def __call__(self, context: PlanningContext) -> np.ndarray | None:
        """Prior utility per pool row, shape (n_pool,), in utility units; None when there is no prior (yet).

        When the planner models values (a target objective, ``BOPlanner.models_values``): the prior value, in the
        objective's unit.
        """
        ...


def campaign_kernel(spec, pool) -> str:
    """The kernel a campaign's surrogate uses on ``pool`` (``choose_kernel`` on the pool's features): the learn node,
    an import's warm start and the bench's report all ask here. ``evidence`` stays ``evidence``: the kernel is then
    chosen at each refit (``campaign_surrogate_state``), and a ladder prior enters as the GP's mean, not as a feature
    (``ladder_prior.prior_form``), so that every candidate is scored on the same targets."""
    return choose_kernel(spec.campaign.kind, spec.planner.kernel, getattr(pool, "features", None),
                         getattr(pool, "feature_kinds", None))


def surrogate_fits_values(spec) -> bool:
    """Whether a campaign's surrogate is fitted on lab values rather than utilities: for a target objective."""
    return spec.objective.direction == "target"


def campaign_surrogate_state(spec, X: np.ndarray, values: np.ndarray, *, seed: int, kernel: str | None = None,
                             prior: dict[str, Any] | None = None, prior_train: np.ndarray | None = None,
                             feature_kinds=None) -> dict[str, Any]:
    """The campaign's surrogate on lab results (``values`` in the objective's unit): fitted on the values for a
    target objective, on the utilities otherwise (``surrogate_fits_values``).

    With a ladder ``prior`` (``ladder_prior.choose_prior``) and its value at the training rows (``prior_train``, in
    the unit fitted on), the GP is fitted on the residuals and the prior is recorded in the state. ``kernel``: the
    campaign's (``campaign_kernel``, judged on the whole pool); None judges ``X`` alone. ``feature_kinds``: the
    pool's (``Pool.feature_kinds``), which say the columns of a ``tanimoto_matern52`` kernel's Matérn factor.
    ``evidence``: the candidate kernel with the best leave-one-out predictive density on these targets
    (``kernel_evidence.fit_by_evidence``), recorded in the state's ``kernel_evidence``.
    """
    kernel = kernel or choose_kernel(spec.campaign.kind, spec.planner.kernel, X, feature_kinds)
    continuous = continuous_columns(feature_kinds, X.shape[1]) if kernel == "tanimoto_matern52" else None
    values = np.asarray(values, dtype=float)
    fits_values = surrogate_fits_values(spec)
    y = values if fits_values else np.asarray([spec.objective.utility(v) for v in values], dtype=float)
    if prior is not None and prior_train is not None:
        y = y - np.asarray(prior_train, dtype=float)
    fitted_on: FittedOn = "value" if fits_values else "utility"
    if kernel == "evidence":
        from orchestrator.policy.planners.kernel_evidence import fit_by_evidence

        state = fit_by_evidence(X, y, kind=spec.campaign.kind, feature_kinds=feature_kinds, seed=seed,
                                fitted_on=fitted_on)
    else:
        state = fit_surrogate_state(X, y, kernel=kernel, seed=seed, fitted_on=fitted_on, continuous=continuous)
    return {**state, "prior": prior} if prior is not None else state


def state_prior(context: PlanningContext) -> np.ndarray | None:
    """The ladder prior recorded in ``context.surrogate_state``, per pool row in the unit the state was fitted on;
    None when the state has none (or the context has no surveyed rungs to evaluate it on)."""
    state = context.surrogate_state
    if not state or not state.get("prior"):
        return None
    from orchestrator.policy.planners.ladder_prior import prior_rows

    ladder = getattr(context, "ladder", None)
    return prior_rows(state["prior"], ladder.values if ladder is not None else None, context.spec,
                      fitted_on=state.get("fitted_on", "utility"))


def _target_of_values(state: dict | None, values: np.ndarray | None, objective) -> float | None:
    """The objective's target when a surrogate with ``state`` is conditioned on lab values, else None.

    Values when they are known, the objective is a target and the state was fitted on values (a state without
    ``fitted_on`` predates value models and was fitted on utilities; no state yet means the next fit is on values).
    """
    fitted_on = (state or {}).get("fitted_on", "utility" if state else "value")
    if values is not None and objective.direction == "target" and fitted_on == "value":
        return float(objective.target)
    return None


def surrogate_targets(context: PlanningContext) -> tuple[np.ndarray, float | None]:
    """The lab numbers to condition ``context.surrogate_state`` on, and the target when they are values."""
    target = _target_of_values(context.surrogate_state, context.values, context.spec.objective)
    return np.asarray(context.utilities if target is None else context.values, dtype=float), target


def folded_utility_moments(mean: np.ndarray, sd: np.ndarray, target: float) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sd of the utility ``-|v - target|`` for v ~ Normal(mean, sd²), elementwise (the folded normal).

    Example:
        >>> m, s = folded_utility_moments(np.array([3.0, 0.0]), np.array([0.0, 1.0]), 0.0)
        >>> np.round(m, 4).tolist(), np.round(s, 4).tolist()
        ([-3.0, -0.7979], [0.0, 0.6028])
    """
    from scipy.special import ndtr

    shift = np.asarray(mean, dtype=float) - target
    sd = np.asarray(sd, dtype=float)
    z = shift / np.where(sd > 0, sd, 1.0)
    abs_mean = np.where(sd > 0, sd * np.sqrt(2 / np.pi) * np.exp(-0.5 * z * z) + shift * (1 - 2 * ndtr(-z)),
                        np.abs(shift))
    return -abs_mean, np.sqrt(np.maximum(shift**2 + sd**2 - abs_mean**2, 0.0))


class LabUtilityModel:
    """The campaign's GP rebuilt from a recorded state, predicting lab utilities whatever it was fitted on.

    A state fitted on a target objective's values predicts values; their utility ``-|v - target|`` is given by its
    folded-normal mean and sd (``folded_utility_moments``).

    Args:
        state: recorded hyperparameters (``SurrogateUpdated.hyperparameters``).
        X_train: features of the lab results, one row each.
        utilities, values: the lab results as utilities and in the objective's unit (values may be None).
        objective: the campaign's ``Objective``.
    """

    def __init__(self, state: dict[str, Any], X_train: np.ndarray, utilities: np.ndarray,
                 values: np.ndarray | None, objective, *, prior_train: np.ndarray | None = None):
        from orchestrator.policy.planners.surrogate import GPSurrogate

        self.target = _target_of_values(state, values, objective)
        y = np.asarray(utilities if self.target is None else values, dtype=float)
        if prior_train is not None:
            y = y - np.asarray(prior_train, dtype=float)
        self.surrogate = GPSurrogate.from_hyperparameters(X_train, y, state)

    def _mean_sd(self, X: np.ndarray, prior: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        mean, sd = self.surrogate.predict(X)
        return (mean if prior is None else mean + np.asarray(prior, dtype=float)), sd

    def predict(self, X: np.ndarray, prior: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and sd of the lab utility at the rows of ``X`` (``prior``: the ladder prior there, when
        the model was built with ``prior_train``)."""
        mean, sd = self._mean_sd(X, prior)
        return (mean, sd) if self.target is None else folded_utility_moments(mean, sd, self.target)

    pool_features: np.ndarray | None = None
    pool_prior: np.ndarray | None = None

    def predict_rows(self, rows) -> tuple[np.ndarray, np.ndarray]:
        """``predict`` at pool rows (a model from ``campaign_utility_model``), prior included."""
        rows = np.asarray(rows, dtype=int)
        return self.predict(self.pool_features[rows], None if self.pool_prior is None else self.pool_prior[rows])

    def log_improvement_rows(self, rows, best_utility: float) -> np.ndarray:
        """``log_improvement`` at pool rows (a model from ``campaign_utility_model``), prior included."""
        rows = np.asarray(rows, dtype=int)
        return self.log_improvement(self.pool_features[rows], best_utility,
                                    None if self.pool_prior is None else self.pool_prior[rows])

    def log_improvement(self, X: np.ndarray, best_utility: float, prior: np.ndarray | None = None) -> np.ndarray:
        """log expected improvement of the lab utility over ``best_utility`` at the rows of ``X`` (utility units):
        log-EI on a utility model, ``log_window_improvement`` on a value model (the window floored as in
        ``select_batch``)."""
        from orchestrator.policy.planners.acquisition import (
            log_expected_improvement,
            log_window_improvement,
        )

        mean, sd = self._mean_sd(X, prior)
        if self.target is None:
            return log_expected_improvement(mean, sd, best_utility)
        floor = 0.01 * float(self.surrogate.hyperparameters["y_sd"])
        return log_window_improvement(mean, sd, self.target, max(-best_utility, floor))


def state_features(context: PlanningContext):
    """The GP's inputs per pool row for ``context.surrogate_state``: the pool's features, plus its ladder prior's
    rung when the prior is a feature (``ladder_prior.surrogate_features``)."""
    state = context.surrogate_state
    if not state or not state.get("prior"):
        return context.pool.features
    from orchestrator.policy.planners.ladder_prior import surrogate_features

    ladder = getattr(context, "ladder", None)
    return surrogate_features(context.pool.features, state["prior"], ladder.values if ladder is not None else None)


def campaign_utility_model(context: PlanningContext) -> LabUtilityModel:
    """The campaign's GP on ``context`` with its ladder prior, if its state records one: what the planners, the
    screen and the llm arm's tools all read. ``predict_rows`` and ``log_improvement_rows`` take pool rows."""
    prior = state_prior(context)
    observed = np.asarray(context.observed, dtype=int)
    features = state_features(context)
    model = LabUtilityModel(context.surrogate_state, features[observed], context.utilities,
                            context.values, context.spec.objective,
                            prior_train=None if prior is None else prior[observed])
    model.pool_features, model.pool_prior = features, prior
    return model


class BOPlanner:
    """Proposes the batch that maximises log expected improvement, treating pending jobs as fantasies.

    Until the surrogate has been fitted (``n_initial`` lab results), it proposes an initial design: random, or led by
    the dearest (highest-fidelity) surveyed rung (``cold_start_count``).

    With a target objective and the lab values in the context (``PlanningContext.values``), it models the values
    (``models_values``) and ranks by the expected improvement of the folded utility.

    Args:
        prior_mean: optional prior utility (or value, when the planner models values) per pool row; the surrogate
            state must then be fitted on ``training_targets(context)`` (the residuals), not on the raw lab numbers.
    """

    name = "bo"
    incumbent: Literal["observed", "posterior"] = "posterior"
    """What log-EI improves on; "posterior" measured fewer lab experiments on the noisier pools (DECISIONS.md)."""

    def __init__(self, prior_mean: PriorMean | None = None, *, uses_ladder: bool = True):
        self.prior_mean = prior_mean
        self.traits = PlannerTraits(uses_surrogate=True, uses_ladder=uses_ladder)
        """The campaign's GP is fitted for it; ``uses_ladder``: it plans with the surveyed rungs (cold start by the
        dearest rung, calibrated rung as prior mean), and the ``bo-sf`` arm is the same planner without them."""

    def prior(self, context: PlanningContext) -> np.ndarray | None:
        """Prior mean per pool row in the surrogate's unit: the given ``prior_mean``, else the ladder prior recorded
        in the surrogate state (``planners.ladder_prior``), else None."""
        if self.prior_mean is not None:
            return self.prior_mean(context)
        return state_prior(context)

    def models_values(self, context: PlanningContext) -> bool:
        """Whether the surrogate models the lab value (a target objective, values known) or the utility."""
        return surrogate_targets(context)[1] is not None

    def training_targets(self, context: PlanningContext) -> np.ndarray:
        """What the surrogate is fitted on: lab utilities (or values), minus the prior mean when there is one."""
        prior = self.prior(context)
        y = surrogate_targets(context)[0]
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

    def _cold_start_utility(self, context: PlanningContext) -> np.ndarray | None:
        """Utility per pool row that steers the initial design: the given prior, else the dearest (highest-fidelity)
        surveyed rung read as it stands (before any lab result it cannot be calibrated), else None (a random design)."""
        if self.prior_mean is not None:
            prior = self.prior_mean(context)
            return None if prior is None else self._prior_utility(context, prior)
        ladder = getattr(context, "ladder", None)
        if not self.traits.uses_ladder or ladder is None or ladder.dearest is None:
            return None
        from orchestrator.policy.planners.ladder_prior import prior_rows

        uncalibrated = {"rung": ladder.dearest, "intercept": 0.0, "slope": 1.0, "fill": float("nan")}
        utility = prior_rows(uncalibrated, ladder.values, context.spec, fitted_on="utility")
        return np.where(np.isfinite(utility), utility, -np.inf)  # a failed rung: measured last

    def _initial_design(self, context: PlanningContext, n: int) -> list[Proposal]:
        """Random, or with a prior: the best by the prior (``cold_start_share``), then random picks."""
        prior_utility = self._cold_start_utility(context)
        by_prior, rest = np.zeros(0, dtype=int), context
        if prior_utility is not None:
            available = np.asarray(context.available, dtype=int)
            from orchestrator.spec_model_prior import is_guess

            n_prior = cold_start_count(context.spec.objective.direction, n,
                                       guess=self.prior_mean is None and is_guess(context.spec, context.ladder.dearest))
            ranked = available[np.isfinite(prior_utility[available])]  # a failed or empty rung ranks nothing
            by_prior = rung_ranking(context, ranked, prior_utility)[:n_prior]
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
        from orchestrator.policy.planners.outcome_models import (
            scalar_tradeoff_state,
            tradeoff_method,
        )

        if tradeoff_method(context.spec) == "pareto":  # several objectives on a front: log EHVI (planners.pareto)
            from orchestrator.policy.planners.pareto import ParetoPlanner

            return ParetoPlanner(cold_start=self).propose(context, n)
        if not has_fitted_surrogate(context):
            return self._initial_design(context, n)
        scalar_state = scalar_tradeoff_state(context)  # a desirability or weighted sum: the GP on that scalar
        if scalar_state is not None:
            context = dataclasses.replace(context, surrogate_state=scalar_state)

        from orchestrator.policy.planners.acquisition import select_batch
        from orchestrator.policy.planners.surrogate import GPSurrogate

        X = state_features(context)
        prior = self.prior(context)
        X_train, y_train = X[context.observed], self.training_targets(context)
        surrogate = GPSurrogate.from_hyperparameters(X_train, y_train, context.surrogate_state)
        pending = X[context.pending] if len(context.pending) else None
        offsets = {} if prior is None else {"offset_pool": prior[context.available],
                                            "offset_pending": prior[context.pending] if len(context.pending) else None}
        is_value = self.models_values(context)
        target = float(context.spec.objective.target) if is_value else None
        best = self._incumbent(context, surrogate, X_train, prior, target)
        rung_order = self._rung_order(context)
        n_rung = 0 if rung_order is None else min(rung_slots(
            n, len(context.observed) + len(context.pending),
            share=rung_share(context.surrogate_state["prior"].get("evidence"))),
            int(np.isfinite(rung_order[1][context.available]).sum()))  # only what the rung ranks; the rest: the model
        n_model = n - n_rung
        if n_model == 0:
            chosen, log_ei = np.zeros(0, dtype=int), []
        elif isinstance(X, np.ndarray):
            from orchestrator.policy.planners.feasibility import (
                outcome_log_weight,
                with_imputed_failures,
            )

            log_weight = outcome_log_weight(context, context.available)  # constraints, learned failures: log p added
            X_fit, y_fit = with_imputed_failures(context, X, X_train, y_train, target)
            picks, log_ei = select_batch(surrogate, X_fit, y_fit, X[context.available], n_model, pending=pending,
                                         incumbent=best, target=target, log_weight=log_weight, **offsets)
            chosen = context.available[np.asarray(picks, dtype=int)]
        else:  # a streamed pool: features gathered chunk by chunk, the same batch (acquisition_stream)
            from orchestrator.policy.planners.acquisition_stream import (
                select_batch_streamed,
            )

            chosen, log_ei = select_batch_streamed(
                surrogate, X_train, y_train, X, context.available, n_model, pending=pending, prior=prior,
                prior_pending=offsets.get("offset_pending"), incumbent=best, target=target)
        mean, sd = surrogate.predict(X[chosen]) if len(chosen) else (np.zeros(0), np.zeros(0))
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
                    # a value's sd is the utility's where the utility is the value or its negative (not a target's)
                    expected_sd=float(sigma) if is_value or _utility_to_value(context, 1.0) is not None else None,
                    acquisition=float(acq),
                )
            )
        if scalar_state is not None and len(chosen):  # the scalar is no objective's value: say each one's instead
            from orchestrator.policy.planners.pareto import describe_expected

            proposals = [p.model_copy(update=update) for p, update in
                         zip(proposals, describe_expected(context, chosen), strict=True)]
        if n_rung:
            proposals = _interleave(proposals, self._rung_proposals(context, rung_order, chosen, n_rung))
        return proposals

    def _rung_order(self, context: PlanningContext) -> tuple[str, np.ndarray] | None:
        """(rung, utility per pool row read as it stands) of the rung the surrogate's prior rests on, while the lab
        has not ruled it out, to maximise or minimise; None for a target window (the raw order near a target depends
        on the calibration) and without a ladder prior (``bo-sf``, a given ``prior_mean``, every rung ruled out)."""
        state = context.surrogate_state or {}
        ladder = getattr(context, "ladder", None)
        if (not self.traits.uses_ladder or self.prior_mean is not None or not state.get("prior") or ladder is None
                or state["prior"]["rung"] not in (ladder.values or {})
                or context.spec.objective.direction not in ("maximize", "minimize")):
            return None
        from orchestrator.policy.planners.ladder_prior import prior_rows

        rung = state["prior"]["rung"]
        as_is = {"rung": rung, "intercept": 0.0, "slope": 1.0, "fill": float("nan")}
        utility = prior_rows(as_is, ladder.values, context.spec, fitted_on="utility")
        return rung, np.where(np.isfinite(utility), utility, -np.inf)

    def _rung_proposals(self, context: PlanningContext, rung_order: tuple[str, np.ndarray], taken: np.ndarray,
                        n: int) -> list[Proposal]:
        """The ``n`` untested candidates the rung ranks best, read as it stands, skipping the model's picks and the
        candidates it has no value for."""
        rung, utility = rung_order
        available = np.asarray(context.available, dtype=int)
        free = available[~np.isin(available, np.asarray(taken, dtype=int)) & np.isfinite(utility[available])]
        order = rung_ranking(context, free, utility)[:n]
        return [Proposal(candidate=context.pool.candidates[int(i)], arm="bo",
                         hypothesis=f"{rung}, read as it stands, ranks it {k + 1} of {len(free)} untested",
                         rationale="the rung's own order, uncalibrated: the batch's share that hedges the calibrated "
                                   "model (rung_slots)",
                         acquisition=float(utility[int(i)]) if np.isfinite(utility[int(i)]) else None)
                for k, i in enumerate(order)]


#: The largest share of a batch that follows the prior's rung as it stands: before the lab's answers nothing favours
#: the calibrated model or the rung's own order, so each gets half.
RUNG_SHARE = 0.5


def rung_share(evidence: float | None) -> float:
    """The share of a batch that follows the prior's rung as it stands: ``RUNG_SHARE`` while the pairs leave the rung
    at least as likely informative as not (``evidence``, ``escalation.probability_informative``, ≥ ½; ½ before any
    pair), none once they make it more likely noise. A state without ``evidence`` (a ledger from before it was
    recorded) gets ``RUNG_SHARE``.

    Not matched to the probability: the rung is surveyed over the pool, so every lab result, whichever source picked
    it, is one more pair for judging it. A slot given to the rung buys no evidence about the rung, so there is nothing
    to explore, and each slot goes to the better bet: the portfolio while the rung is as likely to say something as
    not, the model alone once it probably says nothing.

    Example:
        >>> rung_share(None), rung_share(0.5), rung_share(0.97), rung_share(0.3)
        (0.5, 0.5, 0.5, 0.0)
    """
    if evidence is None:
        return RUNG_SHARE
    return RUNG_SHARE if float(evidence) >= 0.5 else 0.0


def rung_slots(n: int, started: int = 0, *, share: float = RUNG_SHARE) -> int:
    """How many of a batch of ``n`` follow the prior's rung read as it stands once the surrogate is fitted:
    ``⌊share · n⌋``, so the model keeps the first pick of every batch. A one-slot plan (an asynchronous campaign)
    goes to the rung when ``⌊share · (started + 1)⌋`` steps past ``⌊share · started⌋`` (every other time at ½),
    ``started`` counting lab experiments observed or pending.

    A portfolio of two sources of picks, the calibrated model and the rung's own order: whichever of the two is
    right, the campaign finds what it would have found within about 1/share times the lab experiments, so a good
    rung is never worth much less than measuring in its order (``cheap-first``). The share is ``rung_share``: ½
    while the pairs leave the rung at least as likely informative as not (the prior's ``evidence``), none once they
    make it more likely noise (a pure-noise rung: after its first batch, P ≈ 0.3) or the lab rules it out (no prior).
    Only to maximise or minimise, where every increasing calibration ranks as the raw rung does (the
    ``cold_start_count`` argument); near a target the raw order is wrong by the rung's offset (orchestrator/DECISIONS.md).

    Example:
        >>> rung_slots(5), rung_slots(4), rung_slots(1, started=6), rung_slots(1, started=7)
        (2, 2, 0, 1)
        >>> rung_slots(5, share=0.3), rung_slots(5, share=0.15), [rung_slots(1, k, share=0.25) for k in range(4)]
        (1, 0, [0, 0, 0, 1])
    """
    share = min(max(float(share), 0.0), 1.0)
    if n > 1:
        return int(math.floor(share * n + 1e-9))
    return int(math.floor(share * (started + 1) + 1e-9) - math.floor(share * started + 1e-9))


def _interleave(first: list, second: list) -> list:
    """first[0], second[0], first[1], second[1], ... then the rest of the longer list."""
    merged = []
    for k in range(max(len(first), len(second))):
        merged += first[k:k + 1] + second[k:k + 1]
    return merged


def has_fitted_surrogate(context: PlanningContext) -> bool:
    """Whether bo plans by its GP: the surrogate has been fitted on at least ``min(n_initial, 2)`` lab results.
    Until then it proposes its initial design (the cold start)."""
    return context.surrogate_state is not None and len(context.observed) >= min(context.spec.planner.n_initial, 2)


def rung_ranking(context: PlanningContext, rows: np.ndarray, utility: np.ndarray) -> np.ndarray:
    """``rows`` best first by ``utility`` (a rung read as it stands); candidates the rung values equally come in a
    seeded random order (per campaign seed), not the pool's. A rung that cannot tell candidates apart says nothing
    about their order, and the pool's order is whatever the file had (sorted by a parameter, grouped by source):
    a rung of one value for all would otherwise send the file's first rows, the same on every seed.

    Example:
        >>> from types import SimpleNamespace
        >>> context = SimpleNamespace(seed=0)
        >>> rung_ranking(context, np.arange(4), np.array([1.0, 3.0, 2.0, 0.5])).tolist()
        [1, 2, 0, 3]
        >>> sorted(rung_ranking(context, np.arange(4), np.zeros(4)).tolist())
        [0, 1, 2, 3]
    """
    from orchestrator.seeding import derive_rng

    rows = np.asarray(rows, dtype=int)
    tiebreak = derive_rng(context.seed, "plan", "rung-ties").random(int(rows.max()) + 1 if rows.size else 0)
    return rows[np.lexsort((tiebreak[rows], -utility[rows]))]


def cold_start_count(direction: str, n: int, *, guess: bool = False) -> int:
    """How many of a first batch of ``n`` follow an uncalibrated rung's ranking; the rest are drawn at random.

    To maximise or minimise, every increasing calibration ranks the pool as the raw rung does, so the rung's order is
    the best guess before any lab result, whatever its calibration turns out to be: all ``n``. For a target, the
    order depends on the calibration (an offset moves which candidates sit near the target), so half (rounded up)
    follow the raw rung and half are spread at random for the calibration to be fitted on. For a rung that is a
    ``guess`` (a chat model's prior, ``spec_model_prior.GUESS_SIMULATORS``) half too, whatever the direction: a
    guess that knows nothing still ranks by what the text says, so its top is one corner of the space, not a random
    draw, and a first batch all there teaches the surrogate little and the rung's evidence less (pairs all at its
    top); the random half is the portfolio's hedge (``rung_slots``).

    Example:
        >>> cold_start_count("maximize", 5), cold_start_count("target", 5), cold_start_count("maximize", 5, guess=True)
        (5, 3, 3)
    """
    return n if direction in ("maximize", "minimize") and not guess else (n + 1) // 2


def _utility_to_value(context: PlanningContext, utility: float) -> float | None:
    direction = context.spec.objective.direction
    if direction == "maximize":
        return utility
    if direction == "minimize":
        return -utility
    return None  # a target utility does not say on which side of the target the value lies
