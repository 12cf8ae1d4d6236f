"""The ``botorch`` arm, the yardstick: BoTorch's ``SingleTaskGP`` with ``qLogNoisyExpectedImprovement`` over the
untested pool, as a user who reaches for BoTorch would write it (``botorch_acquisition.propose_botorch``).

It models the utility for maximize/minimize objectives and, like the bo arm, the value itself for a target window,
maximising the expected improvement of −|value − target| (qLogNEI with that MC objective). It sees no rung and
fits its own model (the campaign's GP is not fitted for it). Its initial design is the bo arm's
(``RandomPlanner(label="bo-initial")``), so the GP arms start from the same experiments on the same seed.

Its inputs are the pool's own features (``Pool.features``: Morgan bits for SMILES columns, composition features for
formulas, scaled numbers, one-hot categories); ``botorch_onehot.BoTorchOneHotPlanner`` overrides ``features`` with
the one-hot encoding a user writes for a reaction grid, and is otherwise this arm.
"""

from __future__ import annotations

import numpy as np

from orchestrator.policy.planners.base import PlannerTraits, PlanningContext
from orchestrator.policy.planners.random_arm import RandomPlanner
from orchestrator.seeding import derive_seed
from vocabulary.domain import Proposal

__all__ = ["BoTorchPlanner"]


class BoTorchPlanner:
    name = "botorch"
    traits = PlannerTraits()
    """Neither the campaign's GP nor the ladder: it fits its own model on the lab results alone."""

    def features(self, pool) -> tuple[np.ndarray, str | None]:
        """The GP's inputs, shape (n_candidates, n_features) in [0, 1], and what they are when not the pool's own."""
        return pool.features, None

    def propose(self, context: PlanningContext, n: int) -> list[Proposal]:
        from orchestrator.policy.planners.botorch_acquisition import propose_botorch

        n = min(n, len(context.available))
        if n == 0:
            return []
        if len(context.observed) < 2:
            initial = RandomPlanner(label="bo-initial").propose(context, n)
            return [p.model_copy(update={"arm": self.name}) for p in initial]
        objective = context.spec.objective
        is_window = objective.direction == "target" and context.values is not None
        y = np.asarray(context.values if is_window else context.utilities, dtype=float)
        X, what_inputs = self.features(context.pool)
        available = np.asarray(context.available, dtype=int)
        rows = propose_botorch(X[np.asarray(context.observed, dtype=int)], y, X[available], n,
                               # one seed for both BoTorch arms: where their inputs coincide, so do their picks
                               seed=derive_seed(context.seed, context.iteration, "botorch"),
                               target=float(objective.target) if is_window else None)
        what = "the window's improvement on the value" if is_window else "the utility"
        return [Proposal(candidate=context.pool.candidates[int(available[r])], arm=self.name,
                         hypothesis=f"BoTorch qLogNEI pick {k + 1} of {n}",
                         rationale=f"SingleTaskGP + qLogNoisyExpectedImprovement on {what}"
                                   + (f"; inputs: {what_inputs}" if what_inputs else ""))
                for k, r in enumerate(rows)]
