"""Candidates the ladder has ruled out for good: the screen stops them whatever a planner proposes.

A computed rung that failed on a candidate, in the survey or in a run, for a reason of the calculation (not a timeout
or a lost worker), makes the screen skip it (``nodes.screen``); a table rung's empty cell does not
(``Rung.is_computed``). The plan node leaves such candidates out of what the planners may propose: otherwise a
planner that ranks them first proposes them again every round, the screen skips them again, and the campaign stalls
with its lab budget unspent.
"""

from __future__ import annotations

from orchestrator.loop.context import CampaignContext

__all__ = ["failed_for_good"]


def failed_for_good(ctx: CampaignContext) -> set[str]:
    """Candidates the screen stops whatever the planner does: a computed rung failed on them in its survey, or in a
    run for a reason of the calculation. Only where the screen reads the ladder (``uses_ladder``)."""
    if not ctx.uses_ladder:
        return set()
    return ctx.view.survey_failures() | ctx.view.rungs.failed_for_good
