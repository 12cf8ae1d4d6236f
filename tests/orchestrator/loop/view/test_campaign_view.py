"""The loop's read model: the nodes read the ledger only through ``CampaignView``, one read per step, and a view
refolded from the ledger's start sees what the running one saw."""

from __future__ import annotations

import functools

import pytest

from orchestrator.ledger import Ledger
from orchestrator.loop.campaign import Campaign
from orchestrator.loop.view import CampaignView
from tests.rewards.test_reward_ledger import quick_spec

READS = ("events", "read_events", "rows", "changed_rows", "last_event", "iteration_events", "count_events",
         "events_at", "observations", "lab_jobs", "candidate", "candidates", "dispatched_keys", "stored_rows", "scores")
"""The ledger's read methods (``head_seq``, one index lookup the view makes to see whether anything is new, aside)."""


def _counting(ledger: Ledger, counts: list[str]) -> None:
    for name in READS:
        method = getattr(ledger, name)

        @functools.wraps(method)
        def counted(*args, _method=method, _name=name, **kwargs):
            counts.append(_name)
            return _method(*args, **kwargs)

        setattr(ledger, name, counted)


@pytest.fixture(scope="module")
def counted_run(tmp_path_factory):
    spec = quick_spec(budget={"lab_experiments": 12})
    db = tmp_path_factory.mktemp("view") / "ledger.db"
    reads: list[str] = []
    per_step: list[tuple[str, int, list[str]]] = []
    with Campaign.start(spec, db=db, campaign_id="view") as campaign:
        _counting(campaign.ledger, reads)
        view = campaign.ctx.view

        def on_step(node: str, _update: dict) -> None:
            per_step.append((node, view.n_reads, list(reads)))
            reads.clear()

        campaign.run(on_step=on_step)
        yield spec, campaign, per_step


def test_the_nodes_read_the_ledger_once_per_step_through_the_view(counted_run):
    _, _, per_step = counted_run
    nodes = {node for node, _, _ in per_step}
    assert {"plan", "validate", "screen", "approve", "dispatch", "observe", "recover", "reward", "learn",
            "decide"} <= nodes, nodes
    n_reads_before = 0
    for step, (node, n_view_reads, reads) in enumerate(per_step):
        made_by_view = n_view_reads - n_reads_before
        n_reads_before = n_view_reads
        assert made_by_view <= 1, f"{node}: the view read the ledger {made_by_view} times in one step"
        if step == 0:  # the first step's reads also hold the run's start (where the ledger puts the graph)
            continue
        assert reads == ["events"] * made_by_view, f"{node} read the ledger past the view: {reads}"
    n_iterations = sum(node == "decide" for node, _, _ in per_step)
    assert n_iterations >= 3
    assert n_reads_before <= len(per_step), "one read per step at most"


def test_a_view_refolded_from_the_start_sees_what_the_running_one_saw(counted_run):
    spec, campaign, _ = counted_run
    live = campaign.ctx.view
    live.refresh()
    fresh = CampaignView(campaign.ledger, "view", spec, campaign.ctx.pool, campaign.ctx.rungs)
    fresh.refresh()
    assert fresh.cursor == live.cursor == campaign.ledger.head_seq("view")
    assert fresh.history() == live.history()
    assert fresh.history().n_dispatched == 12
    assert fresh.rungs.values == live.rungs.values and fresh.rungs.values["gaff"]
    assert fresh.rungs.cost_s_by_iteration == live.rungs.cost_s_by_iteration
    assert fresh.fits.updates == live.fits.updates and fresh.fits.latest_state == live.fits.latest_state
    assert fresh.proposals.first_arm == live.proposals.first_arm
    assert fresh.lab.n_observed == live.lab.n_observed == campaign.ledger.count_events("view", "Observed")
    assert fresh.pending_retries() == live.pending_retries() == []


def test_the_views_lab_fold_agrees_with_the_ledgers_lab_job_rows(counted_run):
    spec, campaign, _ = counted_run
    view = campaign.ctx.view
    view.refresh()
    jobs = campaign.ledger.lab_jobs("view")
    assert view.lab.keys == {j.job_key for j in jobs}
    done = sorted((j for j in jobs if j.status == "done"), key=lambda j: j.observed_seq)
    assert view.history().results == tuple((j.candidate_id, j.arm, j.value, spec.objective.utility(j.value))
                                           for j in done)
    assert view.lab.open == {} and view.history().pending == ()


def test_a_refresh_with_nothing_new_reads_nothing(counted_run):
    _, campaign, _ = counted_run
    view = campaign.ctx.view
    view.refresh()
    before = view.n_reads
    assert view.refresh() == 0 and view.refresh() == 0
    assert view.n_reads == before
