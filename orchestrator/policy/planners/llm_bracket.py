"""The bracket of the llm arm: the same slots, shortlist and anchors, with the model's choice replaced by a coin
(``llm-random``, the floor) or by the lab's truth (``llm-oracle``, the ceiling, bench only).

Everything but the choice is the llm arm's own graph (``llm_graph.ProposeRun``): bo's anchors, the model's share of
the slots from its lab track record (``model_share``), the shortlist and its trimming, the repair and fallback
paths. Where the model would be called, a ``Chooser`` picks among exactly the rows the model would be shown. So the
model's contribution on a metric ``m`` (lab experiments to a top-1 % candidate, lower is better) is

    contribution = (m(llm-random) - m(llm)) / (m(llm-random) - m(llm-oracle))

0 for a model no better than a coin, 1 for one that always picks the shortlist row the lab will rate best
(``orchestrator.bench.bracket.contribution``). The oracle reads the simulated lab's ground truth, so it exists
only in ``closedloop bench`` (``orchestrator.bench.bracket`` registers it there); ``closedloop run --planner
llm-oracle`` is refused.

Example:
    >>> RandomChoiceLLMPlanner().name, OracleChoiceLLMPlanner().name
    ('llm-random', 'llm-oracle')
"""

from __future__ import annotations

import numpy as np

from orchestrator.policy.planners.base import PlannerTraits, PlanningContext
from orchestrator.policy.planners.llm import LLMPlanner
from orchestrator.seeding import derive_rng
from vocabulary.domain import SetupError, objective_utility

__all__ = ["OracleChoiceLLMPlanner", "RandomChoiceLLMPlanner", "oracle_utilities"]

_BRACKET_TRAITS = PlannerTraits(uses_surrogate=True, uses_ladder=True, reads_provenance=True, records_llm_calls=False)
"""The llm arm's traits less the model-call record: a bracket arm calls no model."""


class RandomChoiceLLMPlanner(LLMPlanner):
    """``llm-random``: the llm arm with a seeded uniform choice among the shown rows wherever the model would choose.

    The floor of the bracket: what the llm arm's slots and shortlist give a planner that knows nothing.
    """

    name = "llm-random"
    traits = _BRACKET_TRAITS
    chooser_note = "llm-random: a seeded uniform choice among the shortlist rows the model would be shown"

    def check_ready(self) -> None:
        """No model is loaded: nothing to check."""

    def chooser(self, context: PlanningContext):
        def choose(run, labels: list[str], need: int) -> list[str]:
            rng = derive_rng(context.seed, context.iteration, "plan", "llm-random-choice", len(labels))
            return [labels[int(k)] for k in rng.choice(len(labels), size=min(need, len(labels)), replace=False)]

        return choose


class OracleChoiceLLMPlanner(LLMPlanner):
    """``llm-oracle``: the llm arm choosing, among the shown rows, those with the best true lab value (ties: shown
    order). The ceiling of the bracket; it reads the simulated lab's ground truth, so only the bench runs it.

    With several objectives it ranks by the first objective's truth.
    """

    name = "llm-oracle"
    traits = _BRACKET_TRAITS
    chooser_note = "llm-oracle: the shortlist row with the best true lab value (a benchmark's ceiling, not a planner)"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._truth: dict[int, float] = {}

    def check_ready(self) -> None:
        """No model is loaded: nothing to check."""

    def chooser(self, context: PlanningContext):
        def choose(run, labels: list[str], need: int) -> list[str]:
            rows = [run.tools.labels[label] for label in labels]
            utility = oracle_utilities(context, rows, self._truth)
            order = sorted(range(len(labels)), key=lambda k: -utility[k])  # stable: ties keep the shown order
            return [labels[k] for k in order[:need]]

        return choose


def oracle_utilities(context: PlanningContext, rows: list[int], memo: dict[int, float]) -> np.ndarray:
    """The true lab utility (higher is better) of pool ``rows``, read from the simulated lab's ground-truth column
    (``lab.oracle_column``); a row without a value is worst (-inf). ``memo`` keeps answers per row.

    Raises:
        SetupError: the campaign's lab is not the simulated one reading a pool column, so there is no truth to read.
    """
    spec = context.spec
    column = spec.lab.oracle_column or spec.objective.column
    if spec.lab.driver != "simlab" or column is None or column not in context.pool.columns:
        raise SetupError(f"llm-oracle reads the simulated lab's ground truth from a pool column; this campaign's lab "
                         f"is {spec.lab.driver!r} without one. Run the bracket with closedloop bench on a pool")
    truth = context.pool.columns[column]
    objective = spec.objective
    for row in rows:
        if row not in memo:
            value = float(truth[row])
            memo[row] = objective_utility(objective.direction, value, objective.target) if np.isfinite(value) else -np.inf
    return np.asarray([memo[r] for r in rows], dtype=float)
