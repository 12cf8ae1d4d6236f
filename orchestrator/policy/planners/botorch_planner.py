"""The ``botorch`` arm, the yardstick: BoTorch's ``SingleTaskGP`` with ``qLogNoisyExpectedImprovement`` over the
untested pool, as a user who reaches for BoTorch would write it (``botorch_acquisition.propose_botorch``).

It models the utility for maximize/minimize objectives and, like the bo arm, the value itself for a target window,
maximising the expected improvement of −|value − target| (qLogNEI with that MC objective). It sees no rung and
fits its own model (the campaign's GP is not fitted for it). Its initial design is the bo arm's
(``RandomPlanner(label="bo-initial")``), so the GP arms start from the same experiments on the same seed.

Its inputs are the pool's own features (``Pool.features``: Morgan bits for SMILES columns, composition features for
formulas, scaled numbers, one-hot categories); ``botorch_onehot.BoTorchOneHotPlanner`` overrides ``features`` with
the one-hot encoding a user writes for a reaction grid, and is otherwise this arm.

With several objectives (``context.objective_values``) it is BoTorch's qLogNEHVI
(``botorch_acquisition.propose_botorch_hypervolume``: a ``ModelListGP`` of one ``SingleTaskGP`` per objective) on
the objectives in utility form (``vocabulary.pareto.utility_matrix``), with the spec's reference point
(``tradeoff.reference_point``; without one, BoTorch's ``infer_reference_point`` rule on the measured utilities, as
the tutorial does) and the jobs in the lab as ``X_pending``; same features, initial design and seed as above.
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
        if getattr(context, "objective_values", None) is not None:
            return self._propose_hypervolume(context, n)
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

    def _propose_hypervolume(self, context: PlanningContext, n: int) -> list[Proposal]:
        """Several objectives: BoTorch's qLogNEHVI over the untested pool (see the module docstring)."""
        from orchestrator.policy.planners.botorch_acquisition import (
            propose_botorch_hypervolume,
        )
        from vocabulary.pareto import (
            infer_reference_point,
            reference_in_utility,
            utility_matrix,
        )

        objectives = context.spec.objective_list
        Y = utility_matrix(objectives, np.asarray(context.objective_values, dtype=float))
        observed = np.asarray(context.observed, dtype=int)
        keep = np.isfinite(Y).all(axis=1)  # a result without every objective cannot train every model
        stated = context.spec.tradeoff.reference_point
        reference = (reference_in_utility(objectives, stated) if stated is not None
                     else infer_reference_point(Y[keep]))
        X, what_inputs = self.features(context.pool)
        available = np.asarray(context.available, dtype=int)
        pending = np.asarray(context.pending, dtype=int)
        rows = propose_botorch_hypervolume(X[observed[keep]], Y[keep], X[available], n, reference=reference,
                                           seed=derive_seed(context.seed, context.iteration, "botorch"),
                                           X_pending=X[pending] if len(pending) else None)
        names = ", ".join(o.property for o in objectives)
        return [Proposal(candidate=context.pool.candidates[int(available[r])], arm=self.name,
                         hypothesis=f"BoTorch qLogNEHVI pick {k + 1} of {n}",
                         rationale=f"ModelListGP (one SingleTaskGP per objective: {names}) + "
                                   "qLogNoisyExpectedHypervolumeImprovement, reference point "
                                   f"{[round(float(v), 6) for v in reference]} (utility form)"
                                   + (f"; inputs: {what_inputs}" if what_inputs else ""))
                for k, r in enumerate(rows)]
