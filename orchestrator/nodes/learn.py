"""learn: re-assess each proxy rung against the lab, update the surrogate, and record both.

For a target objective the GP is fitted on the lab values, otherwise on the utilities
(``planners.campaign_surrogate_state``). Hyperparameters are refitted when the lab data has grown by a batch or by a quarter since the last fit; in
between they are kept, and the planner conditions the GP on all the data with them.

The plan node rebuilds the posterior from these recorded hyperparameters, so a resumed campaign plans exactly as
an uninterrupted one would.
"""

from __future__ import annotations

import numpy as np

from ..context import CampaignContext
from ..beliefs import rung_calibrations
from ..events import ArmsCompared, RungAssessed, SurrogateUpdated
from ..history import lab_history
from ..planners import campaign_surrogate_state
from ..seeding import derive_seed
from ..summary import arm_comparison
from ..state import CampaignState

__all__ = ["learn"]


def learn(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    history = lab_history(ctx)
    previous = ctx.ledger.events(ctx.campaign_id, types=[SurrogateUpdated.type])
    if previous and previous[-1].payload["n_train"] == len(history.results):
        return {}  # no new lab result since the last fit
    best = history.best
    hyperparameters: dict = {}
    model = "none"
    fitted = [e.payload for e in previous if e.payload["hyperparameters"] and "refit" in e.payload["model"]]
    n_train = len(history.results)
    if fitted and n_train < max(fitted[-1]["n_train"] + ctx.spec.planner.batch_size, 1.25 * fitted[-1]["n_train"]):
        # Hyperparameters move slowly: keep them, and let the planner condition the GP on all the data.
        hyperparameters = fitted[-1]["hyperparameters"]
        model = fitted[-1]["model"].replace("refit", "kept")
    elif {"bo", "llm"} & set(ctx.arms) and n_train >= 2:
        X = ctx.pool.features[[ctx.pool.index[r[0]] for r in history.results]]
        values = np.asarray([r[2] for r in history.results], dtype=float)
        hyperparameters = campaign_surrogate_state(ctx.spec, X, values, seed=derive_seed(ctx.seed, iteration, "learn"))
        model = f"pyro-gp:{hyperparameters['kernel']}:refit"
    screening = ctx.spec.screening
    items = []
    for rung, calibration in rung_calibrations(ctx).items():
        informative = calibration.is_informative(min_pairs=screening.min_pairs,
                                                 min_informativeness=screening.min_informativeness)
        items.append((RungAssessed(iteration=iteration, rung=rung, n_pairs=calibration.n_pairs,
                                   spearman=calibration.spearman, intercept=calibration.intercept,
                                   slope=calibration.slope, residual_sd=calibration.residual_sd,
                                   is_informative=informative), f"it{iteration}:rung-assessed:{rung}"))
    comparison = _arms_compared(ctx, iteration, history)
    if comparison is not None:
        items.append((comparison, f"it{iteration}:arms-compared"))
    ctx.ledger.append_many(ctx.campaign_id, items, actor="learner")
    ctx.ledger.append(
        ctx.campaign_id,
        SurrogateUpdated(iteration=iteration, model=model, n_train=len(history.results), hyperparameters=hyperparameters,
                         incumbent=best[3] if best else None),
        key=f"it{iteration}:surrogate",
        actor="learner",
    )
    return {}


def _arms_compared(ctx: CampaignContext, iteration: int, history) -> ArmsCompared | None:
    """The main arm against the control on the lab results so far; None without a control arm or its results."""
    main, control = ctx.spec.planner.main, ctx.spec.planner.control
    arms = {r[1] for r in history.results}
    if control is None or not {main, control} <= arms:
        return None
    comparison = arm_comparison([(r[0], r[1], r[2], r[3]) for r in history.results], main, control)
    return ArmsCompared(
        iteration=iteration, main=main, control=control,
        n_lab={arm: entry["n_lab"] for arm, entry in comparison["arms"].items()},
        best_utility=comparison["best_utility"],
        main_experiments_to_control_best=comparison["main_experiments_to_control_best"],
        control_experiments_to_its_best=comparison["control_experiments_to_its_best"],
        acceleration=comparison["acceleration"],
    )
