"""Shared test helpers: ledger events of a minimal campaign, and several processes appending to one at once."""

from __future__ import annotations

import multiprocessing

from orchestrator.ledger import Ledger, verify
from vocabulary.events import CampaignStarted, Dispatched, Observed

__all__ = ["dispatched", "observed", "started", "write_concurrently"]


def started(name: str = "demo") -> CampaignStarted:
    return CampaignStarted(name=name, seed=0, spec={"objective": {"direction": "maximize"}})


def dispatched(i: int, cid: str = "c") -> Dispatched:
    return Dispatched(iteration=i, job_key=f"{cid}/{i}", candidate_id=str(i), arm="bo", driver="d", sim_time_s=float(i))


def observed(i: int, cid: str = "c") -> Observed:
    return Observed(iteration=i, job_key=f"{cid}/{i}", candidate_id=str(i), arm="bo", value=float(i), status="ok",
                    sim_time_s=i + 1.0, provenance="lab", driver="d", observe_iteration=i)


def _writer(db: str, worker: int, n: int) -> None:
    ledger = Ledger.open(db)
    try:
        for i in range(n):
            job = worker * 1000 + i
            ledger.append_many("c", [(dispatched(job), f"d{job}"), (observed(job), f"o{job}")], actor=f"w{worker}")
    finally:
        ledger.close()


def write_concurrently(db: str, n_workers: int, n_each: int) -> None:
    """``n_workers`` processes each append ``n_each`` (dispatch, result) pairs to campaign ``c`` of ``db`` at once;
    then the seqs must be gap-free, every result counted by the projections, and ``verify`` must agree."""
    ledger = Ledger.open(db)
    ledger.append("c", started(), key="start")
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(db, w, n_each)) for w in range(n_workers)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
        assert w.exitcode == 0
    try:
        events = ledger.events("c")
        assert [e.seq for e in events] == list(range(1, 2 + 2 * n_workers * n_each))
        assert ledger.campaign("c").n_lab == n_workers * n_each  # a read-modify-write lost nothing
        assert {e.actor for e in events} == {"orchestrator"} | {f"w{w}" for w in range(n_workers)}
        assert verify(ledger, "c").is_identical
    finally:
        ledger.close()


def finished_campaign(root, campaign_id: str, *, lab_budget: int = 6):
    """A small finished Buchwald–Hartwig campaign (bo) in ``root/source.db`` and its export ``root/campaign.jsonl``:
    (ledger path, export path, number of events)."""
    from orchestrator.ledger.jsonl import export_jsonl
    from orchestrator.loop.campaign import Campaign
    from orchestrator.spec import load_spec
    from tests.conftest import BUCHWALD_SPEC

    spec = load_spec(BUCHWALD_SPEC).with_overrides(lab_budget=lab_budget, planner="bo")
    with Campaign.start(spec, db=root / "source.db", campaign_id=campaign_id) as campaign:
        campaign.run()
        n_events = export_jsonl(campaign.ledger, campaign_id, root / "campaign.jsonl")
    return root / "source.db", root / "campaign.jsonl", n_events
