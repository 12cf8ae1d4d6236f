"""learn: re-assess each proxy rung against the lab, update the surrogate, and record both.

For a target objective the GP is fitted on the lab values, otherwise on the utilities
(``planners.campaign_surrogate_state``). When the main arm plans with the ladder and a proxy rung was surveyed, the
GP models the residual from the rung's calibrated prediction (``planners.ladder_prior``), recorded in its state.
Hyperparameters are refitted when the lab data has grown since the last fit by a batch, by a quarter, and by at
least ``MIN_NEW_RESULTS`` results (``is_refit_due``); in between they are kept, and the planner conditions the GP on
all the data with them.

The plan node rebuilds the posterior from these recorded hyperparameters, so a resumed campaign plans exactly as
an uninterrupted one would.
"""

from __future__ import annotations

import logging

import numpy as np

from orchestrator.loop.beliefs import rung_calibrations
from orchestrator.loop.context import CampaignContext
from orchestrator.loop.state import CampaignState
from orchestrator.loop.summary import arm_comparison, comparison_ceiling
from orchestrator.policy.planners import campaign_kernel, campaign_surrogate_state
from orchestrator.seeding import derive_seed
from orchestrator.space.pool import describe
from vocabulary.events import (
    ArmsCompared,
    RungAssessment,
    RungsAssessed,
    SurrogateUpdated,
)

__all__ = ["MIN_NEW_RESULTS", "is_refit_due", "learn"]

MIN_NEW_RESULTS = 3
"""The fewest new lab results that make a hyperparameter refit due. A batch of one would otherwise refit after every
result until the quarter rule takes over (at 2, 3, 4, 5 results); three keeps a refit per iteration for batches of
three or more (the discovery benchmarks' five) and spaces a batch-one campaign's early refits (2, 5, 8, 11, 14, 18,
…), which the GP conditioned on every result with the kept hyperparameters covers in between."""

logger = logging.getLogger(__name__)


def is_refit_due(n_train: int, last_fit_n: int | None, batch_size: int) -> bool:
    """Whether the GP's hyperparameters are refitted at ``n_train`` lab results, the last fit having had
    ``last_fit_n`` (None: none yet): once the data has grown by a batch, by a quarter and by ``MIN_NEW_RESULTS``.

    Example:
        >>> [n for n in range(2, 13) if is_refit_due(n, 2, 1)]  # batch of one, last fit at 2 results
        [5, 6, 7, 8, 9, 10, 11, 12]
        >>> is_refit_due(10, 5, 5), is_refit_due(9, 5, 5)  # a batch of five still refits every batch
        (True, False)
    """
    if last_fit_n is None:
        return True
    return n_train >= max(last_fit_n + batch_size, last_fit_n + MIN_NEW_RESULTS, 1.25 * last_fit_n)


def learn(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    history = ctx.view.history()
    previous = ctx.view.fits.updates
    if previous and previous[-1]["n_train"] == len(history.results):
        return {}  # no new lab result since the last fit
    best = history.best
    hyperparameters: dict = {}
    model = "none"
    fitted = [p for p in previous if p["hyperparameters"] and "refit" in p["model"]]
    n_train = len(history.results)
    rows = np.asarray([ctx.pool.index[r[0]] for r in history.results], dtype=int)
    values = np.asarray([r[2] for r in history.results], dtype=float)
    prior, prior_train, features = _ladder_prior(ctx, rows, values) if n_train >= 2 else (None, None, None)
    is_due = is_refit_due(n_train, fitted[-1]["n_train"] if fitted else None, ctx.spec.planner.batch_size)
    if not is_due and _prior_kind(fitted[-1]["hyperparameters"].get("prior")) == _prior_kind(prior):
        # Hyperparameters move slowly: keep them (and the prior they were fitted with), and let the planner condition
        # the GP on all the data. A prior that changes kind (another rung, or calibrated at last) forces a refit.
        hyperparameters = fitted[-1]["hyperparameters"]
        model = fitted[-1]["model"].replace("refit", "kept")
    elif _fits_surrogate(ctx) and n_train >= 2:
        hyperparameters = campaign_surrogate_state(ctx.spec, (ctx.pool.features if features is None else features)[rows],
                                                   values, kernel=campaign_kernel(ctx.spec, ctx.pool), prior=prior,
                                                   feature_kinds=getattr(ctx.pool, "feature_kinds", None),
                                                   prior_train=prior_train,
                                                   seed=derive_seed(ctx.seed, iteration, "learn"))
        model = f"pyro-gp:{hyperparameters['kernel']}:refit"
    screening = ctx.spec.screening
    items = []
    calibrations = rung_calibrations(ctx)
    assessed = [RungAssessment(rung=rung, n_pairs=calibration.n_pairs, spearman=calibration.spearman,
                               intercept=calibration.intercept, slope=calibration.slope,
                               residual_sd=calibration.residual_sd,
                               is_informative=calibration.is_informative(
                                   min_pairs=screening.min_pairs, min_informativeness=screening.min_informativeness))
                for rung, calibration in calibrations.items()]
    _warn_backwards_rungs(ctx, calibrations)
    if assessed:  # one event for every rung (ledgers before it: a RungAssessed per rung)
        items.append((RungsAssessed(iteration=iteration, rungs=assessed), f"it{iteration}:rungs-assessed"))
    comparison = _arms_compared(ctx, iteration, history)
    if comparison is not None:
        items.append((comparison, f"it{iteration}:arms-compared"))
    items.append((SurrogateUpdated(iteration=iteration, model=model, n_train=len(history.results),
                                   hyperparameters=hyperparameters, incumbent=best[3] if best else None),
                  f"it{iteration}:surrogate"))
    ctx.ledger.append_many(ctx.campaign_id, items, actor="learner")
    if logger.isEnabledFor(logging.INFO):
        rungs = (f"; {sum(bool(a.is_informative) for a in assessed)} of {len(assessed)} rung(s) informative"
                 if assessed else "")
        logger.info("learn: iteration %d, surrogate %s on %d lab result(s); best so far %s%s", iteration, model, n_train,
                    "none" if best is None else f"{best[2]:.4g} {ctx.spec.objective.unit} ({describe(ctx.pool.get(best[0]))})",
                    rungs)
    return {}


_WARNED_BACKWARDS: set[tuple[str, str]] = set()


def _warn_backwards_rungs(ctx: CampaignContext, calibrations) -> None:
    """Say once per campaign and rung (per process) when the lab ranks a proxy rung in reverse: the campaign plans
    without it, and the user may have meant the opposite sense (a docking score for an activity)."""
    for rung, calibration in calibrations.items():
        key = (ctx.campaign_id, rung)
        if key in _WARNED_BACKWARDS or not calibration.runs_backwards():
            continue
        _WARNED_BACKWARDS.add(key)
        logger.warning("rung %r ranks the lab results backwards (Spearman %+.2f over %d pairs), so the campaign plans "
                       "without it. A proxy rung estimates the objective in its own sense (higher means higher); if "
                       "%r measures the opposite (a docking score for an activity), negate its column or property "
                       "and run again.", rung, calibration.spearman, calibration.n_pairs, rung)


def _prior_kind(prior: dict | None) -> tuple | None:
    """What a change of forces a refit: the prior's rung and whether it is calibrated (not its numbers)."""
    return None if not prior else (prior["rung"], prior["is_calibrated"])


def _fits_surrogate(ctx: CampaignContext) -> bool:
    """Whether an arm that gets lab slots plans with the campaign's GP (``uses_surrogate``): nothing is fitted for
    arms that do not (random, cheap-first, botorch), nor for a control whose share of the lab is 0."""
    planner_spec = ctx.spec.planner
    arms = [planner_spec.main]
    if planner_spec.control is not None and planner_spec.control_share > 0:
        arms.append(planner_spec.control)
    return any(ctx.traits[arm].uses_surrogate for arm in arms if arm in ctx.traits)


def _ladder_prior(ctx: CampaignContext, rows: np.ndarray, values: np.ndarray):
    """(prior, its mean at the training rows, the GP's inputs per pool row) when the main arm plans with the ladder
    and a rung was surveyed (``planners.ladder_prior``): a ``mean`` prior has no extra input (None), a ``feature``
    prior no mean (None); (None, None, None) without a prior."""
    from orchestrator.policy.planners.bo import surrogate_fits_values
    from orchestrator.policy.planners.ladder_prior import (
        choose_prior,
        prior_form,
        prior_rows,
        surrogate_features,
    )

    view = ctx.view.ladder
    if view is None or not ctx.traits[ctx.spec.planner.main].uses_ladder:
        return None, None, None
    kernel = campaign_kernel(ctx.spec, ctx.pool)
    prior = choose_prior(view.values, rows, values, ctx.spec, form=prior_form(kernel, ctx.pool.features))
    if prior is not None and prior.get("form") == "feature":
        return prior, None, surrogate_features(ctx.pool.features, prior, view.values)
    at_rows = prior_rows(prior, view.values, ctx.spec,
                         fitted_on="value" if surrogate_fits_values(ctx.spec) else "utility")
    return (None, None, None) if at_rows is None else (prior, at_rows[rows], None)


def _arms_compared(ctx: CampaignContext, iteration: int, history) -> ArmsCompared | None:
    """The main arm against the control on the lab results so far; None without a control arm or its results."""
    main, control = ctx.spec.planner.main, ctx.spec.planner.control
    arms = {r[1] for r in history.results}
    if control is None or not {main, control} <= arms:
        return None
    # in dispatch order: within an iteration an arm's jobs go out in the screen's rank order
    rows = [(*r, iteration) for _, r, iteration in
            sorted(zip(history.dispatched_seqs, history.results, history.iterations, strict=True), key=lambda t: t[0])]
    comparison = arm_comparison(rows, main, control, seed=ctx.seed, ceiling=comparison_ceiling(ctx.spec.objective))
    return ArmsCompared(
        iteration=iteration, main=main, control=control,
        n_lab={arm: entry["n_lab"] for arm, entry in comparison["arms"].items()},
        best_utility=comparison["best_utility"],
        best_level=comparison["best_level"],
        experiments_to_best_level=comparison["experiments_to_best_level"],
        paired_experiments=comparison["paired_experiments"],
        pairings=comparison["pairings"],
        acceleration=comparison["acceleration"],
    )
