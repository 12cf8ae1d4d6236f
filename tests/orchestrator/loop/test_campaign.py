"""A whole small campaign on the simulated lab, checked through its ledger."""

from __future__ import annotations

from collections import Counter

import pytest

from orchestrator.ledger import verify
from orchestrator.loop.campaign import Campaign
from orchestrator.loop.nodes.reward import criterion_scores
from tests.conftest import BUCHWALD_SPEC, small_spec
from vocabulary.events import expand_batches

CAUSAL_ORDER = ["Proposed", "Simulated", "Dispatched", "Observed"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    db = tmp_path_factory.mktemp("campaign") / "ledger.db"
    spec = small_spec(lab_experiments=12)
    with Campaign.start(spec, db=db, campaign_id="fs") as campaign:
        summary = campaign.run()
        events = campaign.ledger.events("fs")
        jobs = campaign.ledger.lab_jobs("fs")
        report = verify(campaign.ledger, "fs")
    return spec, summary, events, jobs, report


def test_every_step_type_is_recorded(finished):
    _, _, events, _, _ = finished
    types = {e.type for e in events}
    assert {"CampaignStarted", "Proposed", "Screened", "ApprovalRequested", "Approved", "Dispatched",
            "Observed", "RewardFinalised", "SurrogateUpdated", "CampaignStopped"} <= types
    assert "Scored" not in types  # criterion scores travel inside the reward records
    # a screening round is one Screened event; each iteration's rung assessments and validities one event each
    assert {"RungsAssessed", "RungsValidated"} <= types
    assert not types & {"Simulated", "Promoted", "RungAssessed", "RungValidated"}
    assert {"Simulated", "Promoted", "RungAssessed", "RungValidated"} <= {e.type for e in expand_batches(events)}
    assert events[0].type == "CampaignStarted" and events[-1].type == "CampaignStopped"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


def test_a_campaign_writes_at_most_20_events_per_lab_experiment(finished):
    """Fewer, richer events (issue 17): a screening round is one event, not one per rung result and decision."""
    _, summary, events, _, _ = finished
    assert len(events) <= 20 * summary["n_lab"], Counter(e.type for e in events).most_common()
    rounds = [e for e in events if e.type == "Screened"]
    assert len(rounds) == len({e.payload["iteration"] for e in events if e.type == "SlotsOffered"})
    assert sum(len(e.payload["steps"]) for e in rounds) > 2 * len(rounds)


def test_each_candidate_moves_in_causal_order(finished):
    _, _, events, jobs, _ = finished
    for job in jobs:
        first_seq = {}
        for e in expand_batches(events):
            if e.payload.get("candidate_id") == job.candidate_id:
                first_seq.setdefault(e.type, e.seq)
        seqs = [first_seq[t] for t in CAUSAL_ORDER]
        assert seqs == sorted(seqs), (job.candidate_id, first_seq)
        outcome = [s["seq"] for s in criterion_scores(events) if s["subject"] == job.job_key
                   and s["stage"] == "outcome"]
        assert outcome and min(outcome) > first_seq["Observed"]


def test_budget_respected_and_shared_with_the_control(finished):
    spec, summary, _, jobs, _ = finished
    assert len(jobs) == summary["n_lab"] == spec.budget.lab_experiments
    assert len({j.job_key for j in jobs}) == len(jobs)
    assert len({j.candidate_id for j in jobs}) == len(jobs)
    n_control = sum(j.arm == "random" for j in jobs)
    assert n_control == round(spec.planner.control_share * len(jobs))
    assert summary["status"] == "stopped" and "lab budget used" in summary["stop_reason"]


def test_best_so_far_is_monotone_and_matches_the_summary(finished):
    spec, summary, events, _, _ = finished
    incumbents = [e.payload["incumbent"] for e in events if e.type == "SurrogateUpdated"]
    assert incumbents == sorted(incumbents)
    observed = [e.payload for e in events if e.type == "Observed" and e.payload["status"] == "ok"]
    best = max(observed, key=lambda p: spec.objective.utility(p["value"]))
    assert summary["best"]["candidate_id"] == best["candidate_id"]
    assert summary["best"]["value"] == best["value"]
    assert incumbents[-1] == spec.objective.utility(best["value"])


def test_lab_clock_advances_and_the_surrogate_is_fitted(finished):
    _, summary, events, jobs, _ = finished
    assert summary["lab_hours"] > 0
    dispatch_times = [j.submitted_s for j in sorted(jobs, key=lambda j: j.dispatched_seq)]
    assert dispatch_times == sorted(dispatch_times) and dispatch_times[-1] > 0
    fitted = [e.payload for e in events if e.type == "SurrogateUpdated" and e.payload["hyperparameters"]]
    assert fitted and fitted[-1]["model"].startswith("pyro-gp:tanimoto")
    assert any(f["model"].endswith("refit") for f in fitted)
    assert any(e.type == "Proposed" and e.payload["acquisition"] is not None for e in events)


def test_main_arm_proposals_are_ranked_by_the_proxy_rung(finished):
    _, _, events, _, _ = finished
    lab_promotions = [e.payload for e in expand_batches(events) if e.type == "Promoted"
                      and e.payload["to_rung"] == "lab"]
    held = [p for p in lab_promotions if p["decision"] == "hold"]
    assert held, "the main arm proposes more than its slots and holds the rest"
    first = [p for p in lab_promotions if p["score"] is not None and "proxy utility" in p["reason"]]
    later = [p for p in lab_promotions if "expected improvement on the fused belief" in p["reason"]]
    assert first and later, "ranked by the proxy before lab data, by EI on the fused belief after"


def test_the_control_gets_the_same_proposals_per_slot_and_the_same_screen(finished):
    spec, _, events, _, _ = finished
    from collections import Counter

    lost = Counter((e.payload["iteration"], arm) for e in events if e.type == "ConflictSettled"
                   for arm in e.payload["arms"] if arm != e.payload["winner"])
    offered = {e.payload["iteration"]: e.payload["slots"] for e in events if e.type == "SlotsOffered"}
    assert any("random" in slots for slots in offered.values())
    for iteration, slots in offered.items():
        for arm, n_slots in slots.items():
            n_proposed = sum(e.type == "Proposed" and e.payload["iteration"] == iteration and e.payload["arm"] == arm
                             for e in events)
            assert n_proposed == spec.planner.proposals_per_slot * n_slots - lost[(iteration, arm)], (iteration, arm)
    arm_of = {(e.payload["iteration"], e.payload["candidate_id"]): e.payload["arm"] for e in events if e.type == "Proposed"}
    to_lab = [e.payload for e in expand_batches(events) if e.type == "Promoted" and e.payload["to_rung"] == "lab"
              and e.payload["decision"] != "skip"]
    for arm in ("bo", "random"):
        mine = [p for p in to_lab if arm_of[(p["iteration"], p["candidate_id"])] == arm]
        assert {p["decision"] for p in mine} == {"promote", "hold"}, arm
        assert any("proxy utility" in p["reason"] for p in mine), arm
        assert any("expected improvement on the fused belief" in p["reason"] for p in mine), arm


def test_escalation_decisions_carry_their_numbers(finished):
    _, _, events, _, _ = finished
    to_gaff = [e.payload for e in expand_batches(events) if e.type == "Promoted" and e.payload["to_rung"] == "gaff"
               and "voi" in e.payload["numbers"]]
    assert to_gaff, "after the first lab results, climbing to the GAFF rung is decided by value of information"
    for p in to_gaff:
        n = p["numbers"]
        assert n["voi"] >= 0 and n["cost_s"] == 3600.0
        assert n["voi_per_s"] == pytest.approx(n["voi"] / n["cost_s"])
    assessed = [e.payload for e in expand_batches(events) if e.type == "RungAssessed" and e.payload["rung"] == "gaff"]
    assert assessed[-1]["n_pairs"] >= 5 and assessed[-1]["spearman"] > 0.5 and assessed[-1]["is_informative"]


def test_rewards_scored_per_step(finished):
    _, _, events, jobs, _ = finished
    scored = criterion_scores(events)
    assert {s["stage"] for s in scored} == {"proposal", "screen", "dispatch", "outcome"}
    assert {s["criterion_id"] for s in scored} >= {"valid_candidate", "improves_best"}
    outcome_subjects = {s["subject"] for s in scored if s["stage"] == "outcome"}
    assert outcome_subjects == {j.job_key for j in jobs}


def test_projections_verify(finished):
    assert finished[-1].is_identical


def test_conditions_campaign_on_buchwald_hartwig(tmp_path):
    spec = small_spec(BUCHWALD_SPEC, lab_experiments=10)
    with Campaign.start(spec, db=tmp_path / "bh.db", campaign_id="bh") as campaign:
        summary = campaign.run()
        assert summary["n_lab"] == 10
        assert summary["best"]["value"] == max(j.value for j in campaign.ledger.lab_jobs("bh"))
        assert verify(campaign.ledger, "bh").is_identical
        assert "Ligand_SMILES=" in summary["best"]["label"]


def test_a_finished_campaign_cannot_be_started_twice(tmp_path):
    spec = small_spec(lab_experiments=2)
    with Campaign.start(spec, db=tmp_path / "x.db", campaign_id="once") as campaign:
        campaign.run()
    from vocabulary.domain import SetupError

    with pytest.raises(SetupError, match="--resume once"):
        Campaign.start(spec, db=tmp_path / "x.db", campaign_id="once")


def test_human_approval_gate_interrupts_and_resumes(tmp_path):
    spec = small_spec(lab_experiments=8, approval__policy="interrupt")
    db = tmp_path / "gate.db"
    with Campaign.start(spec, db=db, campaign_id="gate") as campaign:
        summary = campaign.run()
        question = campaign.pending_interrupt
        assert question is not None and len(question["job_keys"]) == 4
        assert summary["n_lab"] == 0  # nothing reaches the lab before approval
        assert not campaign.ledger.events("gate", types=["Dispatched"])
        denied = question["job_keys"][0]
        campaign.run(approval=[k for k in question["job_keys"] if k != denied])
        approved = campaign.ledger.events("gate", types=["Approved"])[0].payload
        assert approved["approved_by"] == "human" and approved["denied_keys"] == [denied]
        dispatched = {e.payload["job_key"] for e in campaign.ledger.events("gate", types=["Dispatched"])}
        assert denied not in dispatched and len(dispatched) == 3
        assert campaign.pending_interrupt is not None  # the next batch waits again
    with Campaign.resume("gate", db=db) as campaign:  # the answer can come from another process
        while campaign.pending_interrupt is not None:
            campaign.run(approval=True)
        assert campaign.is_finished
        assert verify(campaign.ledger, "gate").is_identical


def test_running_acceleration_is_recorded_and_summarised(finished):
    _, summary, events, _, _ = finished
    compared = [e.typed() for e in events if e.type == "ArmsCompared"]
    assert compared, "the learner records the main arm against the control after new results"
    last = compared[-1]
    assert (last.main, last.control) == ("bo", "random")
    assert sum(last.n_lab.values()) == summary["n_lab"] - summary["n_lab_failed"]
    assert last.acceleration == summary["acceleration"]
    assert (last.best_level, last.paired_experiments) == (summary["best_level"], summary["paired_experiments"])
    if last.acceleration is not None:
        reached = last.experiments_to_best_level
        assert last.acceleration == pytest.approx(reached["random"] / reached["bo"])
        assert last.main_experiments_to_control_best is None  # the unpaired counts are only read from older ledgers
    assert [e.iteration for e in compared] == sorted({e.iteration for e in compared})


def test_a_loop_that_dispatches_nothing_stops_and_says_why(tmp_path):
    from orchestrator.policy.planners import register_planner
    from vocabulary.domain import Molecule, Proposal

    class OutOfSpace:
        name = "out-of-space"

        def propose(self, context, n):
            return [Proposal(candidate=Molecule.parse("C1CC1C1CC1C1CC1"), arm="out-of-space")]

    register_planner("out-of-space", lambda spec: OutOfSpace())
    spec = small_spec(planner__main="out-of-space", planner__control=None, planner__control_share=0.0)
    with Campaign.start(spec, db=tmp_path / "stuck.db", campaign_id="stuck") as campaign:
        summary = campaign.run()
    assert summary["status"] == "stopped" and summary["n_lab"] == 0
    assert summary["stop_reason"].startswith("stalled: the last 10 planning rounds dispatched nothing")


def test_a_target_objective_is_modelled_by_its_value(finished):
    spec, _, events, _, _ = finished
    assert spec.objective.direction == "target"
    results = [e.payload for e in events if e.type == "Observed" and e.payload["status"] == "ok"
               and e.payload.get("provenance", "lab") != "imported"]
    fitted = [e.payload for e in events if e.type == "SurrogateUpdated" and e.payload["model"].endswith("refit")]
    assert fitted and all(f["hyperparameters"]["fitted_on"] == "value" for f in fitted)
    for f in fitted:  # standardised on the lab values (kcal/mol), not on the utilities -|v - target|
        lab_values = [r["value"] for r in results[: f["n_train"]]]
        prior = f["hyperparameters"].get("prior")
        if prior is None:
            assert f["hyperparameters"]["y_mean"] == pytest.approx(sum(lab_values) / len(lab_values))
        else:  # the residual from the surveyed rung's calibrated value, in kcal/mol too
            assert prior["rung"] == "xtb" and abs(f["hyperparameters"]["y_mean"]) < 10.0
    ranked = [e.payload for e in events if e.type == "Proposed" and e.payload["acquisition"] is not None]
    assert ranked and all(p["expected"] is not None for p in ranked)  # a value model says which side of the target


def test_the_same_spec_and_seed_reproduce_a_campaign_under_a_new_id(tmp_path):
    """A second run of a spec (a new campaign id) proposes, measures and scores exactly what the first did."""
    spec = small_spec(lab_experiments=6)
    runs = {}
    for campaign_id in ("run-aaaa1111", "run-bbbb2222"):
        with Campaign.start(spec, db=tmp_path / f"{campaign_id}.db", campaign_id=campaign_id) as campaign:
            campaign.run()
            runs[campaign_id] = [(e.type, {k: v for k, v in e.payload.items() if k != "latency_s"})
                                 for e in campaign.ledger.events(campaign_id)]
    first, second = ([(t, str(p).replace(cid, "CID")) for t, p in runs[cid]] for cid in runs)
    assert [a for a, b in zip(first, second, strict=True) if a != b] == []
    assert sum(t == "Observed" for t, _ in first) == 6


def test_no_surrogate_is_fitted_for_an_arm_without_lab_slots(tmp_path):
    """A bo control with share 0 never plans, so learn fits nothing for it; with share 0.5 it does."""
    from vocabulary.events import SurrogateUpdated

    def models(share: float) -> set[str]:
        spec = small_spec(BUCHWALD_SPEC, lab_experiments=6, planner__main="random", planner__control="bo",
                          planner__control_share=share)
        with Campaign.start(spec, db=tmp_path / f"share{share}.db") as campaign:
            campaign.run()
            return {e.payload["model"] for e in campaign.ledger.events(campaign.campaign_id,
                                                                       types=[SurrogateUpdated.type])}

    assert models(0.0) == {"none"}
    assert any("refit" in m for m in models(0.5))


def test_an_unknown_durability_is_refused_before_the_ledger_is_opened(tmp_path):
    from vocabulary.domain import SetupError

    with pytest.raises(SetupError, match="'eventually' is not a LangGraph durability mode; use one of sync, async, exit"):
        Campaign.start(small_spec(lab_experiments=2), db=tmp_path / "never.db", durability="eventually")
    assert not (tmp_path / "never.db").exists()
    with pytest.raises(SetupError, match="durability mode"):
        Campaign.resume("any", db=tmp_path / "never.db", durability="SYNC")
    assert not (tmp_path / "never.db").exists()


@pytest.mark.parametrize("durability", ["exit", "async"])
def test_a_cheaper_durability_records_what_sync_records_and_still_stops_at_the_gate(durability):
    """Over an in-memory ledger: the same events, an approval interrupt that waits and resumes, fewer checkpoints."""
    spec = small_spec(lab_experiments=4, approval__policy="interrupt")
    runs = {}
    for mode in ("sync", durability):
        with Campaign.start(spec, db=":memory:", campaign_id="gate", durability=mode) as campaign:
            assert campaign.durability == mode
            campaign.run()
            n_interrupts = 0
            while campaign.pending_interrupt is not None:
                n_interrupts += 1
                campaign.run(approval=True)
            assert campaign.is_finished and n_interrupts >= 1
            events = [(e.type, {k: v for k, v in e.payload.items() if k != "latency_s"})
                      for e in campaign.ledger.events("gate")]
            runs[mode] = events, len(list(campaign._checkpointer.list(campaign.config)))
    assert runs[durability][0] == runs["sync"][0]
    if durability == "exit":  # one checkpoint per run() call, not one per node
        assert runs["exit"][1] <= n_interrupts + 1 < runs["sync"][1]


def test_run_without_the_summary_returns_the_status_the_summary_would_show():
    """``run(summary=False)`` (the environment's step) returns ``status()``: the summary's status and stop reason."""
    spec = small_spec(lab_experiments=4, approval__policy="interrupt")
    with Campaign.start(spec, db=":memory:", campaign_id="light", durability="exit") as campaign:
        waiting = campaign.run(summary=False)
        assert waiting == {"campaign_id": "light", "status": "waiting_for_approval", "stop_reason": None}
        assert campaign.pending_interrupt is not None
        assert campaign.run(summary=False) == waiting  # still waiting: nothing ran
        while (status := campaign.run(approval=True, summary=False))["status"] != "stopped":
            assert set(status) == {"campaign_id", "status", "stop_reason"}
        summary = campaign.summary()
        assert status == {key: summary[key] for key in ("campaign_id", "status", "stop_reason")}
        assert campaign.run(summary=False) == status and campaign.run() == summary  # a stopped campaign returns
