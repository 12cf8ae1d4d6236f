"""The control is fair: both arms plan on the same state, a conflict over one candidate is settled by a recorded
seeded coin, the screen treats both arms alike, and a campaign can run without a control."""

from __future__ import annotations

import pytest

from orchestrator.campaign import Campaign
from orchestrator.domain import Proposal
from orchestrator.ledger import verify
from orchestrator.nodes.plan import settle_conflicts
from orchestrator.planners import register_planner
from orchestrator.spec import validate_spec
from orchestrator.summary import arm_comparison, measured_order

MOLECULES = ["C", "CC", "CCC", "CCCC", "CCCCC", "CCCCCC", "CCO", "CCCO", "CCCCO", "CO", "OCCO", "CC(C)C"]

SEEN: list[tuple[str, int, tuple[int, ...]]] = []
"""(arm, iteration, the available pool indices it was shown), appended by the scripted planners."""


class FirstAvailable:
    """A scripted arm: the first ``n`` available candidates in pool order, so two such arms always collide."""

    def __init__(self, name: str):
        self.name = name

    def propose(self, context, n):
        SEEN.append((self.name, context.iteration, tuple(int(i) for i in context.available)))
        return [Proposal(candidate=context.pool.candidates[int(i)], arm=self.name) for i in context.available[:n]]


def _scripted_main(spec):
    return FirstAvailable("scripted-main")


def _scripted_control(spec):
    return FirstAvailable("scripted-control")


register_planner("scripted-main", _scripted_main)
register_planner("scripted-control", _scripted_control)


def _spec(seed: int = 0, **planner):
    return validate_spec({
        "campaign": {"name": "fair", "kind": "molecule", "seed": seed},
        "objective": {"direction": "maximize"},
        "space": {"inline": MOLECULES},
        "lab": {"oracle": {m: float(i % 5) for i, m in enumerate(MOLECULES)}},
        "budget": {"lab_experiments": 8},
        "planner": {"main": "scripted-main", "control": "scripted-control", "control_share": 0.25, "batch_size": 4,
                    **planner},
    })


def _run(spec, tmp_path, campaign_id="fair"):
    SEEN.clear()
    with Campaign.start(spec, db=tmp_path / f"{campaign_id}.db", campaign_id=campaign_id) as campaign:
        summary = campaign.run()
        events = campaign.ledger.events(campaign_id)
        assert verify(campaign.ledger, campaign_id).is_identical
        n_planners = len(campaign.ctx.planners)
    return summary, events, list(SEEN), n_planners


def _conflicts(events):
    return [(e.payload["iteration"], e.payload["candidate_id"], e.payload["winner"])
            for e in events if e.type == "ConflictSettled"]


def test_both_arms_plan_on_the_same_available_set(tmp_path):
    _, _, seen, _ = _run(_spec(), tmp_path)
    by_iteration: dict[int, dict[str, tuple[int, ...]]] = {}
    for arm, iteration, available in seen:
        by_iteration.setdefault(iteration, {})[arm] = available
    both = [shown for shown in by_iteration.values() if len(shown) == 2]
    assert both, "some iteration gave slots to both arms"
    for shown in both:
        assert shown["scripted-main"] == shown["scripted-control"]


def test_a_conflict_is_settled_by_a_recorded_seeded_coin(tmp_path):
    summary, events, _, _ = _run(_spec(seed=0), tmp_path)
    conflicts = _conflicts(events)
    assert conflicts, "two arms proposing the first available candidates collide"
    settled = [e.payload for e in events if e.type == "ConflictSettled"]
    assert all(p["arms"] == ["scripted-main", "scripted-control"] for p in settled)
    proposed = [(e.payload["iteration"], e.payload["candidate_id"], e.payload["arm"])
                for e in events if e.type == "Proposed"]
    dispatched = {e.payload["candidate_id"]: e.payload["arm"] for e in events if e.type == "Dispatched"}
    for iteration, cid, winner in conflicts:
        # only the winner's proposal is recorded; the coin is the one settle_conflicts tosses for this seed
        assert [arm for i, c, arm in proposed if (i, c) == (iteration, cid)] == [winner]
        assert settle_conflicts(0, iteration, {"scripted-main": [cid], "scripted-control": [cid]})[cid][1] == winner
        assert dispatched.get(cid, winner) == winner
    keys = {e.idempotency_key for e in events if e.type == "ConflictSettled"}
    assert keys == {f"fair:it{i}:conflict:{cid}" for i, cid, _ in conflicts}  # the ledger prefixes the campaign id
    assert summary["n_lab"] == 8


def test_the_coin_is_deterministic_per_seed_and_differs_across_seeds(tmp_path):
    first = _conflicts(_run(_spec(seed=0), tmp_path, "a")[1])
    assert _conflicts(_run(_spec(seed=0), tmp_path, "b")[1]) == first
    winners = {seed: tuple(w for _, _, w in _conflicts(_run(_spec(seed=seed), tmp_path, f"s{seed}")[1]))
               for seed in range(1, 5)}
    winners[0] = tuple(w for _, _, w in first)
    assert len(set(winners.values())) > 1, winners


def test_the_loser_of_a_coin_is_not_scored_as_abstaining(tmp_path):
    _, events, _, _ = _run(_spec(seed=0), tmp_path)
    offered = {e.payload["iteration"]: e.payload["slots"] for e in events if e.type == "SlotsOffered"}
    for iteration, _, winner in _conflicts(events):
        loser = "scripted-control" if winner == "scripted-main" else "scripted-main"
        n_proposed = sum(e.type == "Proposed" and e.payload["iteration"] == iteration and e.payload["arm"] == loser
                         for e in events)
        assert offered[iteration].get(loser, 0) == n_proposed  # one proposal per slot: the lost slot is not offered
    assert not [e for e in events if e.type == "Scored" and e.payload["criterion_id"] == "fills_lab_slots"
                and e.payload["value"] < 0]


def test_control_share_zero_turns_the_control_off(tmp_path):
    spec = _spec().with_overrides(control_share=0)
    assert spec.planner.control is None and spec.planner.control_share == 0
    summary, events, seen, n_planners = _run(spec, tmp_path)
    assert n_planners == 1 and {arm for arm, _, _ in seen} == {"scripted-main"}
    assert {e.payload["arm"] for e in events if e.type in ("Proposed", "Dispatched")} == {"scripted-main"}
    assert not _conflicts(events)
    assert summary["control_arm"] is None and "main_beats_control" not in summary
    assert summary["n_lab"] == 8


def test_a_positive_control_share_adds_a_control_when_the_spec_has_none():
    spec = _spec(control=None, control_share=0.0)
    assert spec.with_overrides(control_share=0.5).planner.control == "random"
    assert spec.with_overrides(planner="random", control_share=0.5).planner.control == "bo"


def test_measured_is_the_dispatch_order_and_a_retry_does_not_repeat_it(ledger):
    from orchestrator.events import CampaignStarted, Dispatched

    spec = _spec()
    ledger.append("m", CampaignStarted(name="m", seed=0, spec=spec.model_dump(mode="json")), key="started")
    for n, key in enumerate(["m/X", "m/Y", "m/X/retry1", "m/Z"]):
        ledger.append("m", Dispatched(iteration=n, job_key=key, candidate_id=key.split("/")[1], arm="bo",
                                      driver="simlab", sim_time_s=float(n)), key=f"dispatched:{key}")
    assert measured_order(ledger, "m") == ["X", "Y", "Z"]


def test_measured_in_the_summary_follows_the_dispatched_events(tmp_path):
    summary, events, _, _ = _run(_spec(), tmp_path)
    dispatched = [e.payload["candidate_id"] for e in events if e.type == "Dispatched"]
    assert summary["measured"] == list(dict.fromkeys(dispatched)) and len(summary["measured"]) == 8


@pytest.mark.parametrize("rows,acceleration,beats", [
    # the main arm's best (3) beats the control's (2), but it needed 2 experiments where the control needed 1
    ([("a", "bo", 1, 1), ("b", "random", 2, 2), ("c", "bo", 3, 3), ("d", "random", 0, 0)], 0.5, False),
    # the main arm reaches the control's best with its first experiment; the control needed 2
    ([("a", "bo", 5, 5), ("b", "random", 1, 1), ("c", "random", 5, 5)], 2.0, True),
    # as fast as the control: acceleration 1 counts as beating it
    ([("a", "bo", 5, 5), ("b", "random", 5, 5)], 1.0, True),
    # never reaches the control's best
    ([("a", "bo", 1, 1), ("b", "random", 5, 5), ("c", "bo", 2, 2)], None, False),
])
def test_main_beats_control_agrees_with_the_acceleration(rows, acceleration, beats):
    comparison = arm_comparison(rows, "bo", "random")
    assert comparison["acceleration"] == acceleration
    assert comparison["main_beats_control"] is beats


def test_a_ledger_with_settled_conflicts_exports_imports_and_replays(tmp_path):
    from orchestrator.ledger import Ledger
    from orchestrator.ledger.jsonl import export_jsonl, import_jsonl

    _run(_spec(), tmp_path)
    source = Ledger.open(tmp_path / "fair.db")
    target = Ledger.open(tmp_path / "copy.db")
    try:
        export_jsonl(source, "fair", tmp_path / "fair.jsonl")
        import_jsonl(tmp_path / "fair.jsonl", target)
        copied = target.events("fair", types=["ConflictSettled"])
        assert copied and [e.typed() for e in copied] == [e.typed() for e in source.events("fair", types=["ConflictSettled"])]
        assert verify(target, "fair").is_identical
    finally:
        source.close()
        target.close()
