"""The incremental trajectory fold: what the reward node keeps between steps, and that feeding event by event gives
what a fold of the whole ledger gives."""

from __future__ import annotations

import pytest

from orchestrator.loop.campaign import Campaign
from orchestrator.loop.nodes.reward import recompute_rewards, stored_rewards
from orchestrator.loop.trajectory_fold import TrajectoryFold
from rewards import load_rubric
from tests.rewards.test_reward_ledger import quick_spec


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    db = tmp_path_factory.mktemp("fold") / "ledger.db"
    spec = quick_spec(budget={"lab_experiments": 16})
    with Campaign.start(spec, db=db, campaign_id="fold") as campaign:
        campaign.run()
        yield spec, campaign.ctx.view.trajectories, campaign.ledger.events("fold")


def test_the_reward_nodes_fold_keeps_only_trajectories_still_in_flight(finished):
    _, fold, events = finished
    n_trajectories = len(stored_rewards(events))
    assert n_trajectories >= 16
    # Only the last step's final trajectories (dropped when their records are read at the next step) remain.
    last = max(e.payload["iteration"] for e in events if e.type == "RewardFinalised")
    held = [t for t in fold._open.values()]
    assert len(held) < n_trajectories / 2
    assert all(t.finalised_at in (None, last) for t in held)
    assert not fold._job_owner.keys() - {job for t in held for job in (d["job_key"] for d, _ in t.dispatches)}
    assert all(i >= last for i, _ in fold._by_iteration_candidate) and all(i >= last for i in fold._proposed)


def test_feeding_event_by_event_equals_a_fold_of_the_whole_ledger(finished):
    spec, _, events = finished
    rubric = load_rubric("default")
    last = max(e.payload["iteration"] for e in events if e.type == "RewardFinalised")
    whole = TrajectoryFold.as_of(spec, events, last)
    stepwise = TrajectoryFold(spec, keep_records=False)
    for event in events:
        stepwise.feed([event])
    a, look_a = whole.trajectories(last)
    b, look_b = stepwise.trajectories(last)
    assert [(t.id, t.status, [s.stage for s, _ in t.steps], [phi for _, phi in t.steps]) for t in a] == \
           [(t.id, t.status, [s.stage for s, _ in t.steps], [phi for _, phi in t.steps]) for t in b]
    assert (look_a.threshold, look_a.base_rate, look_a.utilities) == (look_b.threshold, look_b.base_rate,
                                                                      look_b.utilities)
    recomputed = recompute_rewards(events, spec, rubric)
    assert {t: r.reward for t, r in recomputed.items()} == {t: e.payload["reward"]
                                                            for t, e in stored_rewards(events).items()}


def test_a_resumed_fold_does_not_record_a_finished_trajectory_again(finished):
    """A fresh process folds the whole ledger once; trajectories finalised earlier are not scored again."""
    spec, _, events = finished
    last = max(e.payload["iteration"] for e in events if e.type in ("RewardFinalised", "RewardEstimated"))
    fold = TrajectoryFold(spec)
    fold.feed(events)
    found, _ = fold.trajectories(last + 1)
    assert found == []  # the lab is drained: every trajectory's final record is in the ledger
    again, _ = TrajectoryFold(spec).trajectories(0)
    assert again == []


def test_the_loop_reads_each_event_at_most_once_outside_its_caches(tmp_path, monkeypatch):
    """Uncached reads during a campaign fetch only what is new: the whole ledger is never re-read per step (that made
    memory and time grow with the ledger: 70 MB and quadratic time per 1,000 experiments before)."""
    from benchmarks.soak import soak_spec
    from orchestrator.ledger import Ledger

    reads: list[int] = []
    original = Ledger._query_events

    def counting(self, campaign_id, *, after_seq=0):
        events = original(self, campaign_id, after_seq=after_seq)
        reads.append(len(events))
        return events

    monkeypatch.setattr(Ledger, "_query_events", counting)
    spec = soak_spec(300, 50, tmp_path)
    with Campaign.start(spec, db=tmp_path / "ledger.db", campaign_id="reads") as campaign:
        summary = campaign.run()
        n_events = campaign.ledger.n_events("reads")
    assert summary["status"] == "stopped" and summary["n_lab"] == 300
    assert len(reads) >= 6  # one incremental read per reward step
    assert sum(reads) <= n_events  # every event fetched once at most
    assert max(reads) < n_events / 3


def test_validation_names_the_kind_of_each_rejection_and_the_fold_scores_by_it(tmp_path):
    from orchestrator.loop.nodes.validate import validation_problem
    from tests.conftest import small_spec
    from vocabulary.domain import Molecule
    from vocabulary.events import Proposed

    spec = small_spec(lab_experiments=4)
    with Campaign.start(spec, db=tmp_path / "ledger.db", campaign_id="kinds") as campaign:
        ctx = campaign.ctx
        member = ctx.pool.candidates[0]
        outsider = Molecule.parse("C1CCCCCCCCCCC1")

        def proposal(candidate, candidate_id=None):
            return Proposed(iteration=0, arm="bo", candidate_id=candidate_id or candidate.id,
                            candidate=candidate.model_dump())

        assert validation_problem(ctx, proposal(member), set(), frozenset()) is None
        assert validation_problem(ctx, proposal(member), {member.id}, frozenset())[0] == "duplicate"
        assert validation_problem(ctx, proposal(member), set(), frozenset({member.id}))[0] == "duplicate"
        assert validation_problem(ctx, proposal(outsider), set(), frozenset())[0] == "out_of_space"
        kind, message = validation_problem(ctx, proposal(member, candidate_id="not-its-id"), set(), frozenset())
        assert kind == "invalid" and "canonical" in message
