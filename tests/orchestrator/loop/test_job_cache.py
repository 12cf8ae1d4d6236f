"""A long campaign's loop holds its open lab jobs, not every job it ever dispatched (issue 17's soak memory)."""

from __future__ import annotations

from orchestrator.ledger import LabJobRow
from orchestrator.loop.campaign import Campaign
from orchestrator.loop.history import lab_history


def test_the_loop_holds_open_jobs_not_every_job(tmp_path):
    from benchmarks.soak import soak_spec

    batch, n_experiments = 10, 60
    spec = soak_spec(n_experiments, batch, tmp_path)
    n_open: list[int] = []
    n_handles: list[int] = []
    cached: list[dict] = []
    with Campaign.start(spec, db=tmp_path / "soak.db", campaign_id="soak") as campaign:
        ledger = campaign.ledger

        def on_step(node: str, _update: dict) -> None:
            n_open.append(len(campaign.ctx.view.lab.open))
            n_handles.append(len(campaign.ctx.lab.handles))
            cached.append(ledger.n_cached_rows(LabJobRow, "soak"))

        campaign.run(on_step=on_step)
        assert ledger.campaign("soak").n_lab == n_experiments
    assert not any(cached), "a node read the lab-job rows instead of the view"
    assert 0 < max(n_open) <= batch, n_open  # the view's job fold: open jobs only, a few numbers per finished one
    assert 0 < max(n_handles) <= batch, n_handles  # the simulated lab's handles the loop keeps: open jobs only


def test_the_folded_history_matches_the_history_from_every_job(tmp_path):
    """The history folded step by step during the run equals one worked out from every lab-job row at the end."""
    from benchmarks.soak import soak_spec

    spec = soak_spec(30, 10, tmp_path)
    with Campaign.start(spec, db=tmp_path / "soak.db", campaign_id="soak") as campaign:
        campaign.run()
        history = lab_history(campaign.ctx)
        jobs = sorted(campaign.ledger.lab_jobs("soak"), key=lambda j: j.dispatched_seq)
    done = sorted((j for j in jobs if j.status == "done" and j.value is not None), key=lambda j: j.observed_seq)
    assert history.n_dispatched == len(jobs) == 30
    assert history.results == tuple((j.candidate_id, j.arm, j.value, spec.objective.utility(j.value)) for j in done)
    assert history.iterations == tuple(j.iteration for j in done)
    assert history.dispatched_seqs == tuple(j.dispatched_seq for j in done)
    assert history.tested == frozenset(j.candidate_id for j in jobs)
    assert history.pending == ()
    assert history.last_dispatch_iteration == max(j.iteration for j in jobs)
    ends = [j.completed_s for j in jobs if j.completed_s is not None]
    assert history.lab_time_s == max([j.submitted_s for j in jobs] + ends) - min(j.submitted_s for j in jobs)
