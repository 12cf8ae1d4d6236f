"""learn: refit the surrogate on every lab result so far and record its hyperparameters.

The plan node rebuilds the posterior from these recorded hyperparameters, so a resumed campaign plans exactly as
an uninterrupted one would.
"""

from __future__ import annotations

import numpy as np

from ..context import CampaignContext
from ..events import SurrogateUpdated
from ..history import lab_history
from ..planners import choose_kernel, fit_surrogate_state
from ..seeding import derive_seed
from ..state import CampaignState

__all__ = ["learn"]


def learn(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    history = lab_history(ctx)
    best = history.best
    hyperparameters: dict = {}
    model = "none"
    if ctx.spec.planner.main == "bo" and len(history.results) >= 2:
        X = ctx.pool.features[[ctx.pool.index[r[0]] for r in history.results]]
        y = np.asarray([r[3] for r in history.results], dtype=float)
        kernel = choose_kernel(ctx.spec.campaign.kind, ctx.spec.planner.kernel)
        hyperparameters = fit_surrogate_state(X, y, kernel=kernel, seed=derive_seed(ctx.seed, iteration, "learn"))
        model = f"pyro-gp:{kernel}"
    ctx.ledger.append(
        ctx.campaign_id,
        SurrogateUpdated(iteration=iteration, model=model, n_train=len(history.results), hyperparameters=hyperparameters,
                         incumbent=best[3] if best else None),
        key=f"it{iteration}:surrogate",
        actor="learner",
    )
    return {}
