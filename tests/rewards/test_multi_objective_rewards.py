"""The rubric and the process reward of a campaign with two objectives read progress in hypervolume: a result that
grows the measured Pareto front is a success and improves the best; one that an earlier result dominates is not.
Recomputing from the ledger gives the stored rewards."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.loop.campaign import Campaign
from orchestrator.loop.nodes.reward import recompute_rewards, stored_rewards
from rewards import load_rubric
from tests.rewards.two_objectives import two_objective_spec
from vocabulary.events import expand_batches


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    spec = two_objective_spec()
    db = tmp_path_factory.mktemp("two") / "c.db"
    with Campaign.start(spec, db=db, campaign_id="two") as c:
        c.run()
        yield spec, c.ledger


def _grew_front(observed: list[dict]) -> dict[str, bool]:
    """job key -> whether no earlier lab result dominates it (maximise a, minimise b), computed here directly."""
    out, seen = {}, []
    for p in observed:
        a, b = p["value"], p["values"]["b"]
        out[p["job_key"]] = not any(a2 >= a and b2 <= b for a2, b2 in seen)
        seen.append((a, b))
    return out


def test_the_progress_criteria_rise_exactly_when_the_front_grows(campaign):
    spec, ledger = campaign
    observed = [e.payload for e in ledger.events("two", types=["Observed"]) if e.payload["status"] == "ok"]
    assert len(observed) == 8 and all(set(p["values"]) == {"b"} for p in observed)
    grew = _grew_front(observed)
    assert 0 < sum(grew.values()) < len(grew)  # the tiny pool has dominated results and front-growing ones
    scores: dict[str, dict[str, float]] = {}
    for event in stored_rewards(ledger.events("two")).values():
        for step in event.payload["steps"]:
            if step["stage"] == "outcome":
                scores[step["subject"]] = {s["criterion_id"]: s["value"] for s in step["scores"]}
                assert step["potential_after"] == (1.0 if grew[step["subject"]] else 0.0)
    assert set(scores) == set(grew)
    for job, grows in grew.items():
        assert scores[job]["improves_best"] == (1.0 if grows else 0.0)
        assert scores[job]["lab_success"] == (1.0 if grows else -1.0)


def test_the_base_rate_is_the_share_of_results_that_grew_the_front(campaign):
    _, ledger = campaign
    records = [e.payload for e in ledger.events("two", types=["RungsValidated"])]
    observed = [e.payload for e in ledger.events("two", types=["Observed"]) if e.payload["status"] == "ok"]
    grew = list(_grew_front(observed).values())
    rates = {(sum(grew[:n]) + 1) / (n + 2) for n in range(len(grew) + 1)}
    finalised = [e.payload for e in ledger.events("two", types=["RewardFinalised"])]
    starts = {step["potential_before"] for p in finalised for step in p["steps"][:1]}
    assert starts <= rates | {0.0}, (starts, rates, records)


def test_recompute_equals_the_stored_rewards(campaign):
    spec, ledger = campaign
    events = list(expand_batches(ledger.events("two")))
    recomputed = recompute_rewards(events, spec, load_rubric(spec.rewards.rubric))
    stored = {tid: e.payload["reward"] for tid, e in stored_rewards(events).items()}
    assert {tid: r.reward for tid, r in recomputed.items()} == pytest.approx(stored)


def test_a_given_reference_point_scores_the_same_fronts(tmp_path):
    spec = two_objective_spec(tradeoff={"reference_point": [-1.0, 15.0]}, budget={"lab_experiments": 4})
    with Campaign.start(spec, db=tmp_path / "r.db", campaign_id="r") as c:
        c.run()
        observed = [e.payload for e in c.ledger.events("r", types=["Observed"]) if e.payload["status"] == "ok"]
        grew = _grew_front(observed)
        values = {}
        for event in stored_rewards(c.ledger.events("r")).values():
            for step in event.payload["steps"]:
                if step["stage"] == "outcome":
                    values[step["subject"]] = next(s["value"] for s in step["scores"]
                                                   if s["criterion_id"] == "improves_best")
    assert values == {job: (1.0 if g else 0.0) for job, g in grew.items()}
    assert np.isfinite(list(values.values())).all()
