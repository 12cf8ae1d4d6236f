"""An episode over a campaign with two objectives: the observation lists both objectives, each lab result's values
and the measured front; the rewards follow hypervolume progress and the episode ends on the share of the pool's
true hypervolume it measured."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.environment import CampaignEnvironment
from orchestrator.environment.pareto_outcome import fix_pareto_outcome
from orchestrator.space.pool import load_pool
from tests.rewards.two_objectives import pool_rows, two_objective_spec
from vocabulary.pareto import hypervolume, infer_reference_point


@pytest.fixture(scope="module")
def episode():
    env = CampaignEnvironment(two_objective_spec(), n_offer=6)
    first = env.reset(seed=0, batch_size=2)
    observations, results = [first], []
    obs = first
    while True:
        result = env.step({"type": "propose", "candidate_ids": [c.label for c in obs.offer[:obs.n_to_propose]],
                           "hypothesis": "spread the picks along x to map the trade-off between a and b"})
        results.append(result)
        obs = result.observation
        observations.append(obs)
        if result.terminated or result.truncated:
            break
    yield env, observations, results
    env.close()


def test_the_observation_lists_every_objective_and_each_results_values(episode):
    _, observations, _ = episode
    first, last = observations[0], observations[-1]
    assert [(o.property, o.direction) for o in first.objectives] == [("a", "maximize"), ("b", "minimize")]
    assert first.objective.property == "a" and first.tradeoff == "pareto" and first.front is None
    truth = {f"x={r['x']}": (r["a"], r["b"]) for r in pool_rows()}
    assert len(last.lab_results) == 8
    for r in last.lab_results:
        assert set(r.values) == {"a", "b"} and (r.values["a"], r.values["b"]) == pytest.approx(truth[r.text])
    text = last.render()
    assert "Objectives (2, traded off as a Pareto front" in text and "maximize a; minimize b" in text
    assert all(f"a={r.values['a']:.4g}, b={r.values['b']:.4g}" in text for r in last.lab_results)
    assert "Pareto front:" in text and "[on the Pareto front]" in text


def test_the_front_in_the_observation_is_the_non_dominated_results(episode):
    _, observations, _ = episode
    last = observations[-1]
    points = [(r.candidate_id, r.values["a"], r.values["b"]) for r in last.lab_results]
    front = {cid for cid, a, b in points if not any(a2 >= a and b2 <= b and (a2, b2) != (a, b) for _, a2, b2 in points)}
    assert set(last.front.candidate_ids) == front and last.front.hypervolume > 0


def test_the_episode_ends_on_its_share_of_the_true_hypervolume(episode):
    env, observations, results = episode
    assert results[-1].terminated
    truth = np.asarray([[r["a"], -r["b"]] for r in pool_rows()])
    reference = infer_reference_point(truth)
    measured = np.asarray([[r.values["a"], -r.values["b"]] for r in observations[-1].lab_results])
    share = hypervolume(measured, reference) / hypervolume(truth, reference)
    assert results[-1].info["outcome_reward"] == pytest.approx(2 * share - 1)
    outcome = fix_pareto_outcome(env.spec, load_pool(env.spec))
    assert outcome.reward(env.spec, []) == -1.0


def test_the_rewards_follow_the_rubrics_hypervolume_progress(episode):
    env, _, results = episode
    ledger, cid = env.ledger, env.state.campaign_id
    outcome_scores = [s for e in ledger.events(cid, types=["RewardFinalised"]) for step in e.payload["steps"]
                      if step["stage"] == "outcome" for s in step["scores"] if s["criterion_id"] == "improves_best"]
    assert len(outcome_scores) == 8 and {s["value"] for s in outcome_scores} == {0.0, 1.0}
    assert all("Pareto front" in s["reason"] for s in outcome_scores)
    # the shaping telescopes: the step rewards (outcome aside) sum to the final potential
    shaped = sum(r.reward for r in results) - results[-1].info["outcome_reward"]
    assert shaped == pytest.approx(results[-1].info["potential"])


def test_one_objective_observations_leave_the_new_fields_empty():
    from tests.conftest import BUCHWALD_SPEC, small_spec

    env = CampaignEnvironment(small_spec(BUCHWALD_SPEC, lab_experiments=2), n_offer=4)
    try:
        obs = env.reset(seed=0, batch_size=1, success_bar=101.0)
        obs = env.step({"type": "propose", "candidate_ids": [obs.offer[0].label], "hypothesis": "a pick"}).observation
        assert obs.objectives == () and obs.constraints == () and obs.front is None and obs.tradeoff is None
        assert all(r.values == {} for r in obs.lab_results) and "Objective: maximize" in obs.render()
    finally:
        env.close()


def test_the_ledger_tool_answers_with_every_value_and_the_front():
    env = CampaignEnvironment(two_objective_spec(), n_offer=6)
    try:
        obs = env.reset(seed=1, batch_size=2)
        env.step({"type": "propose", "candidate_ids": [c.label for c in obs.offer[:2]], "hypothesis": "two picks"})
        answer = env.step({"type": "query_ledger", "what": "lab_results"}).observation.tool_result
        assert answer["n_total"] >= 1 and all(set(r["values"]) == {"a", "b"} for r in answer["records"])
        summary = env.step({"type": "query_ledger", "what": "summary"}).observation.tool_result
        assert summary["front"]["candidate_ids"] and summary["front"]["hypervolume"] >= 0
    finally:
        env.close()
