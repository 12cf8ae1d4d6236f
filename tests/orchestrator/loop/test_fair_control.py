"""The control is fair: both arms plan on the same state, a conflict over one candidate is settled by a recorded
seeded coin, the screen treats both arms alike, and a campaign can run without a control."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.ledger import verify
from orchestrator.loop import summary
from orchestrator.loop.campaign import Campaign
from orchestrator.loop.nodes.plan import settle_conflicts
from orchestrator.loop.nodes.reward import criterion_scores
from orchestrator.loop.summary import (
    arm_comparison,
    comparison_sentence,
    measured_order,
)
from orchestrator.policy.planners import register_planner
from orchestrator.spec import validate_spec
from vocabulary.domain import Proposal

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
    assert not [s for s in criterion_scores(events) if s["criterion_id"] == "fills_lab_slots" and s["value"] < 0]


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
    from vocabulary.events import CampaignStarted, Dispatched

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


@pytest.mark.parametrize("rows,level,reached,acceleration", [
    # equal shares pair every result: the main arm reaches the best level 3 with its second result, the control
    # never does (counted as one more than its 2)
    ([("a", "bo", 1, 1, 0), ("b", "random", 2, 2, 0), ("c", "bo", 3, 3, 1), ("d", "random", 0, 0, 1)],
     3.0, {"bo": 2, "random": 3}, 1.5),
    # the control reaches the best level 4 first; the main arm never does
    ([("a", "bo", 1, 1, 0), ("b", "random", 4, 4, 0), ("c", "bo", 3, 3, 1), ("d", "random", 0, 0, 1)],
     4.0, {"bo": 3, "random": 1}, 1 / 3),
    # both reach the best level 5, the main arm with its first experiment, the control with its second
    ([("a", "bo", 5, 5, 0), ("b", "random", 1, 1, 0), ("c", "bo", 0, 0, 1), ("d", "random", 5, 5, 1)],
     5.0, {"bo": 1, "random": 2}, 2.0),
    # as fast as the control: a tie is not behind
    ([("a", "bo", 5, 5, 0), ("b", "random", 5, 5, 0)], 5.0, {"bo": 1, "random": 1}, 1.0),
])
def test_the_arms_are_compared_at_the_best_level_either_reached(rows, level, reached, acceleration):
    comparison = arm_comparison(rows, "bo", "random")
    assert comparison["paired_experiments"] == len(rows) // 2
    assert comparison["best_level"] == level and comparison["experiments_to_best_level"] == reached
    assert comparison["acceleration"] == acceleration
    assert comparison["main_beats_control"] is (acceleration >= 1)


def test_within_an_iteration_the_arms_are_paired_rank_for_rank():
    # 3 main results and 1 control result per iteration, in dispatch (= the screen's rank) order: the main arm's
    # first choice meets the control's only one. The main arm's second pick (9) is not compared: a draw among its
    # picks would pit its average against the control's best.
    rows = [("a", "bo", 1, 1, 0), ("b", "bo", 9, 9, 0), ("c", "bo", 2, 2, 0), ("d", "random", 3, 3, 0),
            ("e", "bo", 4, 4, 1), ("f", "bo", 0, 0, 1), ("g", "bo", 0, 0, 1), ("h", "random", 8, 8, 1)]
    for seed in range(5):
        comparison = arm_comparison(rows, "bo", "random", seed=seed)
        assert comparison["paired_experiments"] == 2 and comparison["best_level"] == 8
        assert comparison["experiments_to_best_level"] == {"bo": 3, "random": 2}
        assert comparison["acceleration"] == 2 / 3 and comparison["main_beats_control"] is False
        assert comparison["arms"]["bo"]["n_lab"] == 6 and comparison["arms"]["bo"]["best_value"] == 9


def test_every_hit_in_a_target_window_is_one_level():
    # target ± 0.5: utilities -0.45 and -0.2 are both hits, so the arms tie in iteration 0; unclipped, the main arm
    # would have to reach -0.2 and be behind
    rows = [("a", "bo", -4.55, -0.45, 0), ("b", "random", -5.2, -0.2, 0),
            ("c", "bo", -8.0, -3.0, 1), ("d", "random", -8.0, -3.0, 1)]
    clipped = arm_comparison(rows, "bo", "random", ceiling=-0.5)
    assert (clipped["best_level"], clipped["acceleration"], clipped["main_beats_control"]) == (-0.5, 1.0, True)
    unclipped = arm_comparison(rows, "bo", "random")
    assert (unclipped["best_level"], unclipped["acceleration"], unclipped["main_beats_control"]) == (-0.2, 1 / 3, False)


def test_an_asynchronous_campaign_pairs_each_control_result_with_a_main_result_dispatched_around_it():
    # One dispatch per iteration (a lab that frees one slot at a time): the control's results at iterations 3 and 7
    # anchor the pairs; iteration 6 is nearest to 7, the others join 3, and one of them is drawn.
    rows = [(f"m{i}", "bo", 1, 1, i) for i in (0, 1, 2, 4, 5)] + [("m6", "bo", 9, 9, 6),
                                                                  ("c3", "random", 2, 2, 3), ("c7", "random", 5, 5, 7)]
    for seed in range(5):
        comparison = arm_comparison(rows, "bo", "random", seed=seed)
        assert comparison["paired_experiments"] == 2 and comparison["best_level"] == 9
        assert comparison["experiments_to_best_level"] == {"bo": 2, "random": 3}
        assert comparison["acceleration"] == 1.5 and comparison["main_beats_control"] is True
        assert comparison["arms"]["bo"]["n_lab"] == 6


def test_without_results_of_both_arms_nothing_is_compared():
    comparison = arm_comparison([("a", "bo", 5, 5, 0), ("b", "bo", 1, 1, 1)], "bo", "random")
    assert "acceleration" not in comparison and comparison["arms"]["bo"]["n_lab"] == 2


def _a_a_campaigns(slots: tuple[str, ...], n_campaigns: int = 1000, tolerance: float = 0.5):
    """Synthetic A/A campaigns: one policy's lab order split into arms by ``slots`` (shuffled each iteration). Each
    iteration's draws are exchangeable and succeed more often as the shared state grows; a hit is a utility within
    ``tolerance`` of 0, and the campaign stops after the first iteration with a hit. Yields each campaign's rows."""
    rng = np.random.default_rng(0)
    for _ in range(n_campaigns):
        rows = []
        for iteration in range(100):
            p_hit = min(0.9, 0.03 * (iteration + 1))
            for j, arm in enumerate(rng.permutation(slots)):
                is_hit = rng.random() < p_hit
                utility = -rng.uniform(0, tolerance) if is_hit else -tolerance - rng.exponential(4 / (1 + iteration))
                rows.append((f"{iteration}-{j}", str(arm), utility, utility, iteration))
            if any(r[3] >= -tolerance for r in rows[-len(slots):]):
                break
        yield rows


def _unpaired_acceleration(rows) -> float | None:
    """The old definition: the control's own experiments to its best over the main arm's own experiments to match it."""
    control = [r[3] for r in rows if r[1] == "control"]
    main = [r[3] for r in rows if r[1] == "main"]
    reached = next((n for n, u in enumerate(main, 1) if u >= max(control)), None)
    return None if reached is None else (control.index(max(control)) + 1) / reached


@pytest.mark.parametrize("slots", [("main", "main", "main", "control"), ("main", "main", "control", "control")],
                         ids=["3:1", "2:2"])
def test_an_a_a_split_of_one_policy_is_a_draw_at_any_share(slots):
    comparisons, unpaired = [], []
    for seed, rows in enumerate(_a_a_campaigns(slots)):
        comparisons.append(arm_comparison(rows, "main", "control", seed=seed, ceiling=-0.5))
        unpaired.append(_unpaired_acceleration(rows))
    accelerations = np.array([c["acceleration"] for c in comparisons])
    is_ahead, is_behind = np.mean(accelerations > 1), np.mean(accelerations < 1)
    assert abs(is_ahead - is_behind) < 0.1, (is_ahead, is_behind)
    beats = np.mean([c["main_beats_control"] for c in comparisons])
    assert abs(beats - (1 - (is_ahead + is_behind) / 2)) < 0.05  # half of the untied, plus every tie
    assert 0.8 <= np.exp(np.mean(np.log(accelerations))) <= 1.25
    # the unpaired definition lets the control win most of the same campaigns
    assert np.mean([a is not None and a >= 1 for a in unpaired]) < 0.4


def test_unpaired_counts_favour_the_arm_with_the_smaller_share():
    # on a 3:1 A/A split the old definition halves the main arm's acceleration
    unpaired = [a for a in map(_unpaired_acceleration, _a_a_campaigns(("main", "main", "main", "control")))
                if a is not None]
    assert np.exp(np.mean(np.log(unpaired))) < 0.7 and np.median(unpaired) <= 0.5


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


def test_the_figures_average_over_every_pairing_so_a_hit_left_out_of_one_draw_still_counts():
    # The control anchors (fewer results alone); the main results at iterations 1, 2 and 4 all meet its result at
    # iteration 3, so there are three pairings. Only the one that draws the main arm's hit (iteration 2, inside the
    # window -0.5) has it ahead (3/2); the others have it behind (2/3). One drawn pairing says 2/3 or 3/2 by the seed;
    # the average says (2/3 · 3/2 · 2/3)^(1/3) whatever the seed.
    rows = [("m0", "bo", -5, -5, 0), ("c0", "random", -4, -4, 0), ("m1", "bo", -3, -3, 1),
            ("m2", "bo", -0.3, -0.3, 2), ("c3", "random", -2, -2, 3), ("m4", "bo", -6, -6, 4)]
    for seed in range(5):
        comparison = arm_comparison(rows, "bo", "random", seed=seed, ceiling=-0.5)
        assert comparison["pairings"] == 3 and comparison["paired_experiments"] == 2
        assert comparison["acceleration"] == pytest.approx((2 / 3) ** (1 / 3))
        assert comparison["experiments_to_best_level"] == pytest.approx({"bo": 18 ** (1 / 3), "random": 12 ** (1 / 3)})
        assert comparison["best_level"] == -2 and comparison["main_beats_control"] is False
    sentence = comparison_sentence({**comparison, "main_arm": "bo", "control_arm": "random"})
    assert sentence == ("main arm did not beat the control: on 2 results each, paired by dispatch, it reached the best "
                        "level either arm reached (utility -2, median) after 2.62 experiments, the control after 2.29 "
                        "(geometric means over 3 pairings, 3 where an arm never got there); acceleration 0.87×.")


def test_beyond_max_pairings_a_seeded_sample_of_them_is_averaged(monkeypatch):
    monkeypatch.setattr(summary, "MAX_PAIRINGS", 4)
    # two control anchors, each met by one of three main results: 9 pairings, 4 drawn
    rows = [(f"m{i}", "bo", -i, -i, i) for i in (0, 1, 2, 4, 5, 6)] + [("c3", "random", -2.5, -2.5, 3),
                                                                       ("c7", "random", -3.5, -3.5, 7)]
    first = [arm_comparison(rows, "bo", "random", seed=seed) for seed in range(6)]
    again = [arm_comparison(rows, "bo", "random", seed=seed) for seed in range(6)]
    assert first == again and all(c["pairings"] == 4 for c in first)
    assert len({c["acceleration"] for c in first}) > 1  # the sample depends on the seed
    monkeypatch.setattr(summary, "MAX_PAIRINGS", 9)
    exact = {arm_comparison(rows, "bo", "random", seed=seed)["acceleration"] for seed in range(6)}
    assert len(exact) == 1  # all nine: no seed left in it


def _asynchronous_a_a_campaigns(slots: tuple[str, ...], n_campaigns: int = 1000, tolerance: float = 0.5):
    """Synthetic A/A campaigns on a lab that frees one slot at a time: a first batch of all ``slots``, then one
    dispatch per iteration, the arms taking turns in shuffled rounds of ``slots``; draws are exchangeable, succeed more
    often as the shared state grows, and the campaign stops at the first hit. Yields each campaign's rows."""
    rng = np.random.default_rng(1)
    for _ in range(n_campaigns):
        rows = [(f"0-{j}", str(arm), u, u, 0) for j, arm in enumerate(rng.permutation(slots))
                for u in [-rng.uniform(0, tolerance) if rng.random() < 0.03 else -tolerance - rng.exponential(4)]]
        iteration, is_done = 1, any(r[3] >= -tolerance for r in rows)
        while not is_done and iteration < 200:
            for arm in rng.permutation(slots):
                is_done = rng.random() < min(0.9, 0.01 * (iteration + 1))
                u = -rng.uniform(0, tolerance) if is_done else -tolerance - rng.exponential(4 / (1 + iteration / 4))
                rows.append((str(iteration), str(arm), u, u, iteration))
                iteration += 1
                if is_done:
                    break
        yield rows


@pytest.mark.parametrize("slots", [("main", "main", "main", "control"), ("main", "main", "control", "control")],
                         ids=["3:1", "2:2"])
def test_an_asynchronous_a_a_split_is_a_draw_and_averaging_the_pairings_lowers_the_noise(slots, monkeypatch):
    campaigns = list(_asynchronous_a_a_campaigns(slots))
    averaged = np.array([arm_comparison(rows, "main", "control", seed=seed, ceiling=-0.5)["acceleration"]
                         for seed, rows in enumerate(campaigns)])
    monkeypatch.setattr(summary, "MAX_PAIRINGS", 1)  # one drawn pairing: the comparison before it averaged
    one_draw = np.array([arm_comparison(rows, "main", "control", seed=seed, ceiling=-0.5)["acceleration"]
                         for seed, rows in enumerate(campaigns)])
    for accelerations in (averaged, one_draw):
        assert abs(np.mean(accelerations > 1) - np.mean(accelerations < 1)) < 0.1
        assert 0.9 <= np.exp(np.mean(np.log(accelerations))) <= 1.1
    assert np.std(np.log(averaged)) < 0.93 * np.std(np.log(one_draw))
