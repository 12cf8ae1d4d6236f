"""Failed lab jobs are retried, skipped, escalated to a human, or halt an unhealthy lab; none is lost."""

from __future__ import annotations

import pytest

import orchestrator.loop.context as context_module
from orchestrator.ledger import verify
from orchestrator.loop.campaign import Campaign
from tests.conftest import small_spec
from vocabulary.domain import InstrumentFault


def _with_oracle(monkeypatch, make_oracle):
    """Build every campaign's SimLab around ``make_oracle(pool_truth)``."""
    from instruments import SimLabDriver

    def build(spec, pool):
        truth = pool.column(spec.lab.oracle_column)
        return SimLabDriver(oracle=make_oracle(truth), noise_sd=spec.lab.noise_sd, seed=spec.campaign.seed)

    monkeypatch.setattr(context_module, "_build_driver", build)


def _flaky_first_attempt(truth):
    seen: set[str] = set()

    def oracle(candidate):
        if candidate.id not in seen:
            seen.add(candidate.id)
            raise InstrumentFault("robot jam: gripper lost the vial")
        return truth[candidate.id]

    return oracle


def _always_failing_every_other(truth):
    ids = sorted(truth)
    bad = set(ids[::2])

    def oracle(candidate):
        if candidate.id in bad:
            raise InstrumentFault("bad reading: detector saturated")
        return truth[candidate.id]

    return oracle


def _run(spec, tmp_path, cid, approval=None):
    campaign = Campaign.start(spec, db=tmp_path / f"{cid}.db", campaign_id=cid)
    summary = campaign.run()
    while approval is not None and campaign.pending_interrupt is not None:
        summary = campaign.run(approval=approval)
    events = campaign.ledger.events(cid)
    report = verify(campaign.ledger, cid)
    campaign.close()
    return summary, events, report


def _assert_nothing_lost(events):
    dispatched = [e.payload["job_key"] for e in events if e.type == "Dispatched"]
    observed = [e.payload["job_key"] for e in events if e.type == "Observed"]
    assert sorted(dispatched) == sorted(observed), "every dispatched job has exactly one result"
    assert len(set(dispatched)) == len(dispatched), "no job key dispatched twice"
    failed = {e.payload["job_key"] for e in events if e.type == "Observed" and e.payload["status"] == "failed"}
    handled = {e.payload["job_key"] for e in events if e.type == "FailureHandled"}
    assert failed <= handled, "every failure is answered"


def test_retry_with_backoff_recovers_flaky_jobs(monkeypatch, tmp_path):
    _with_oracle(monkeypatch, _flaky_first_attempt)
    spec = small_spec(lab_experiments=10, lab__tolerated_failure_rate=1.0)
    summary, events, report = _run(spec, tmp_path, "retry")
    _assert_nothing_lost(events)
    handled = [e.payload for e in events if e.type == "FailureHandled"]
    retried = [h for h in handled if h["action"] == "retry"]
    assert retried and all(h["retry_key"].endswith("/retry2") and "robot jam" in h["reason"] for h in retried)
    # a retry the budget cannot pay for is recorded as skipped, with the reason
    assert all(h["reason"].startswith("not retried: the campaign stopped") for h in handled if h["action"] == "skip")
    times = {e.payload["job_key"]: e.payload["sim_time_s"] for e in events if e.type == "Dispatched"}
    for h in handled:
        if h["retry_key"] in times:
            assert times[h["retry_key"]] >= h["not_before_s"], "the retry waits out its back-off on the lab clock"
    assert summary["n_lab"] == 10 and summary["status"] == "stopped" and report.is_identical
    retried_ok = [e.payload for e in events if e.type == "Observed" and "/retry2" in e.payload["job_key"]]
    assert retried_ok and all(p["status"] == "ok" for p in retried_ok)


def test_skip_policy_records_failures_and_goes_on(monkeypatch, tmp_path):
    _with_oracle(monkeypatch, _always_failing_every_other)
    spec = small_spec(lab_experiments=8, lab__failure_policy="skip", lab__tolerated_failure_rate=1.0)
    summary, events, report = _run(spec, tmp_path, "skip")
    _assert_nothing_lost(events)
    handled = [e.payload for e in events if e.type == "FailureHandled"]
    assert handled and {h["action"] for h in handled} == {"skip"}
    assert all("bad reading" in h["reason"] for h in handled)
    assert summary["n_lab_failed"] == len(handled) and summary["n_lab"] == 8
    assert report.is_identical


def test_abort_policy_stops_at_the_first_failure(monkeypatch, tmp_path):
    _with_oracle(monkeypatch, _always_failing_every_other)
    summary, events, _ = _run(small_spec(lab_experiments=12, lab__failure_policy="abort"), tmp_path, "abort")
    assert summary["status"] == "stopped" and summary["stop_reason"].startswith("aborted after job")
    assert summary["n_lab"] < 12
    _assert_nothing_lost(events)  # jobs still in the lab were cancelled and recorded, not abandoned
    cancelled = [e.payload for e in events if e.type == "Observed" and "cancelled" in (e.payload["reason"] or "")]
    assert all("aborted" in c["reason"] for c in cancelled)


def test_an_unhealthy_lab_is_halted_with_a_report(monkeypatch, tmp_path):
    _with_oracle(monkeypatch, _always_failing_every_other)
    spec = small_spec(lab_experiments=30, lab__failure_policy="skip", lab__tolerated_failure_rate=0.3,
                      lab__min_jobs_for_failure_rate=6)
    summary, events, _ = _run(spec, tmp_path, "sick")
    _assert_nothing_lost(events)  # the unhealthy lab is drained, not abandoned
    assert summary["stop_reason"].startswith("lab unhealthy")
    assert "bad reading" in summary["stop_reason"] and "tolerated 30%" in summary["stop_reason"]
    assert summary["n_lab"] < 30


def test_ask_policy_waits_for_a_human(monkeypatch, tmp_path):
    _with_oracle(monkeypatch, _always_failing_every_other)
    spec = small_spec(lab_experiments=6, lab__failure_policy="ask", lab__tolerated_failure_rate=1.0)
    campaign = Campaign.start(spec, db=tmp_path / "ask.db", campaign_id="ask")
    campaign.run()
    question = campaign.pending_interrupt
    assert question is not None and "failures" in question
    assert all("bad reading" in f["reason"] for f in question["failures"])
    while campaign.pending_interrupt is not None:
        campaign.run(approval="skip")
    events = campaign.ledger.events("ask")
    campaign.close()
    _assert_nothing_lost(events)
    assert {e.payload["decided_by"] for e in events if e.type == "FailureHandled"} == {"human"}


def test_a_named_human_decision_records_who_decided(monkeypatch, tmp_path):
    from orchestrator.loop.human_answer import InvalidApprover

    _with_oracle(monkeypatch, _always_failing_every_other)
    spec = small_spec(lab_experiments=6, lab__failure_policy="ask", lab__tolerated_failure_rate=1.0)
    with Campaign.start(spec, db=tmp_path / "who.db", campaign_id="who") as campaign:
        campaign.run()
        assert "failures" in campaign.pending_interrupt
        n_events = campaign.ledger.n_events("who")
        with pytest.raises(InvalidApprover, match="at most 64"):
            campaign.run(approval="skip", by="x" * 65)
        assert campaign.ledger.n_events("who") == n_events  # nothing recorded
        while campaign.pending_interrupt is not None:
            campaign.run(approval="skip", by="grace")
        handled = campaign.ledger.events("who", types=["FailureHandled"])
    assert handled and {(e.payload["decided_by"], e.actor) for e in handled} == {("human:grace", "human:grace")}


def test_pending_aware_dispatch_keeps_the_lab_full_and_drains_it(tmp_path):
    spec = small_spec(lab_experiments=14, planner__batch_size=8)
    summary, events, report = _run(spec, tmp_path, "flow")
    _assert_nothing_lost(events)
    in_lab, peak = 0, 0
    for e in events:
        in_lab += {"Dispatched": 1, "Observed": -1}.get(e.type, 0)
        peak = max(peak, in_lab)
    assert peak == 4  # SimLab's default stations hold 2 + 1 + 1 jobs
    assert summary["n_lab"] == 14 and report.is_identical
    assert events[-1].type == "CampaignStopped"


def test_out_of_envelope_jobs_are_rejected_before_the_driver(tmp_path):
    import pandas as pd

    from tests.conftest import BUCHWALD_SPEC

    frame = pd.read_csv(BUCHWALD_SPEC.parent / "data" / "experiment_index.csv")
    reagents = set(frame[["Aryl_halide_SMILES", "Additive_SMILES", "Base_SMILES", "Ligand_SMILES"]].stack())
    banned_base = sorted(frame["Base_SMILES"].unique())[0]
    envelope = {"name": "glovebox", "allowed_reagents": sorted(reagents - {banned_base})}
    spec = small_spec(BUCHWALD_SPEC, lab_experiments=12, lab__parameters={"envelope": envelope})
    summary, events, report = _run(spec, tmp_path, "envelope")
    rejected = [e.payload for e in events if e.type == "Rejected" and e.payload["stage"] == "dispatch"]
    assert rejected, "some proposals use the banned base"
    assert all("outside the lab's safety envelope" in r["reason"] and "glovebox" in r["reason"] for r in rejected)
    dispatched = {e.payload["candidate_id"] for e in events if e.type == "Dispatched"}
    assert not dispatched & {r["candidate_id"] for r in rejected}, "nothing out of envelope reaches the driver"
    assert summary["n_lab"] == 12 and report.is_identical


def test_a_four_station_protocol_from_the_spec(tmp_path):
    stations = {"synthesis": 2, "workup": 1, "purification": 1, "characterisation": 1}
    spec = small_spec(lab_experiments=8, lab__parameters={"stations": stations, "durations_s": {
        "purification": [9000.0, 0.2]}}, lab__steps=["synthesis", "workup", "purification", "characterisation"])
    campaign = Campaign.start(spec, db=tmp_path / "four.db", campaign_id="four")
    summary = campaign.run()
    assert campaign.ctx.max_pending == 5  # the lab's parallel capacity
    stations_used = {row[1] for row in campaign.ctx.driver.metrics().gantt}
    campaign.close()
    assert "purification" in stations_used and summary["n_lab"] == 8
