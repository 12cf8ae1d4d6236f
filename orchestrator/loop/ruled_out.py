"""Candidates the ladder has ruled out for good: the screen stops them whatever a planner proposes.

A computed rung that failed on a candidate, in the survey or in a run, for a reason of the calculation (not a timeout
or a lost worker), makes the screen skip it (``nodes.screen``); a table rung's empty cell does not (``Rung.is_computed``). The plan node leaves
such candidates out of what the planners may propose: otherwise a planner that ranks them first proposes them again
every round, the screen skips them again, and the campaign stalls with its lab budget unspent.
"""

from __future__ import annotations

import numpy as np

from orchestrator.loop.context import CampaignContext
from orchestrator.loop.ladder_view import ladder_view, uses_ladder
from vocabulary.events import Screened, Simulated, batch_records

__all__ = ["failed_for_good"]


def failed_for_good(ctx: CampaignContext) -> set[str]:
    """Candidates the screen stops whatever the planner does: a computed rung failed on them in its survey, or in a
    run for a reason of the calculation (not a timeout or a lost worker, which a retry may cure). Planning
    them again would spend a lab slot on a proposal the screen skips; a campaign of such picks stalls. Only where the
    screen reads the ladder (``uses_ladder``); folded incrementally from the ledger."""
    from simulators.executor_batch import is_transient_failure
    from vocabulary.domain import Observation

    if not uses_ladder(ctx):
        return set()
    view, cached = ladder_view(ctx), ctx.resources.get("survey_failures")
    if cached is not None and cached[0] == (len(ctx.pool), id(view)):
        surveyed = cached[1]
    else:
        computed = {r.name for r in ctx.rungs if r.is_computed}
        missing = [np.flatnonzero(~np.isfinite(v)) for name, v in (view.values.items() if view is not None else ())
                   if name in computed]
        surveyed = {ctx.pool.ids[row] for row in np.unique(np.concatenate(missing)).tolist()} if missing else set()
        ctx.resources["survey_failures"] = ((len(ctx.pool), id(view)), surveyed)
    seen, failed = ctx.resources.get("rung_failures") or (0, set())
    head = ctx.ledger.head_seq(ctx.campaign_id)
    if head > seen:
        computed = {r.name for r in ctx.rungs if r.is_computed}
        for event in ctx.ledger.events(ctx.campaign_id, types=[Screened.type, Simulated.type], after_seq=seen):
            for kind, record in batch_records(event.type, event.payload):
                run = record.get("observation") if kind == Simulated.type and record["rung"] in computed else None
                if run and run.get("status") == "failed" and run.get("parameters", {}).get("read_from") != "survey" \
                        and not is_transient_failure(Observation.model_construct(**run)):
                    failed.add(record["candidate_id"])
        ctx.resources["rung_failures"] = (head, failed)
    return surveyed | failed
