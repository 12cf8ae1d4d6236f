"""Candidates the ladder has ruled out for good: the screen stops them whatever a planner proposes.

A computed rung that failed on a candidate, in the survey or in a run, for a reason of the calculation (not a timeout
or a lost worker), makes the screen skip it (``nodes.screen``); a table rung's empty cell does not
(``Rung.is_computed``). The plan node leaves such candidates out of what the planners may propose: otherwise a
planner that ranks them first proposes them again every round, the screen skips them again, and the campaign stalls
with its lab budget unspent.

A candidate a person denied at the approval gate is not ruled out for good: it sits out the next
``DENIAL_HOLD_ITERATIONS`` iterations (``held_after_denial``), so the planners do not offer it straight back, and may
then be proposed again (the person may have denied it for the moment: a reagent out of stock, a busy instrument).
Denied again, it sits out again.
"""

from __future__ import annotations

from orchestrator.loop.context import CampaignContext

__all__ = ["DENIAL_HOLD_ITERATIONS", "failed_for_good", "held_after_denial"]

DENIAL_HOLD_ITERATIONS = 3
"""Iterations a candidate denied at approval is kept from the planners before it may be proposed again."""


def failed_for_good(ctx: CampaignContext) -> set[str]:
    """Candidates the screen stops whatever the planner does: a computed rung failed on them in its survey, or in a
    run for a reason of the calculation. Only where the screen reads the ladder (``uses_ladder``)."""
    if not ctx.uses_ladder:
        return set()
    return ctx.view.survey_failures() | ctx.view.rungs.failed_for_good


def held_after_denial(ctx: CampaignContext, iteration: int) -> set[str]:
    """Candidates denied at approval within the last ``DENIAL_HOLD_ITERATIONS`` iterations before ``iteration``:
    the plan node leaves them out; later they may be proposed again."""
    return {cid for cid, denied in ctx.view.proposals.denied_at.items() if iteration - denied <= DENIAL_HOLD_ITERATIONS}
