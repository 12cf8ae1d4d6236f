"""The loop's read model: ``CampaignView``, a set of typed folds over the ledger refreshed once per step.

``campaign_view`` (the view and its refresh), ``lab_jobs`` (jobs, results, failures), ``failures`` (what was decided
about them), ``rungs`` (the ladder's results and surveys), ``proposals``, ``fits``, ``calls`` (recorded chat-model
calls) and ``upcast`` (old event shapes, read in one place).
"""

from orchestrator.loop.view.campaign_view import CampaignView, LadderView
from orchestrator.loop.view.lab_jobs import JobRecord, LabHistory

__all__ = ["CampaignView", "JobRecord", "LabHistory", "LadderView"]
