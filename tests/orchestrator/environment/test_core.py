"""The environment core, run over real campaigns: Buchwald–Hartwig without a ladder (fast), and a small grid."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from orchestrator.environment import CampaignEnvironment, ProposeAction
from tests.conftest import BUCHWALD_SPEC, small_spec
from vocabulary.events import EnvironmentStep


@pytest.fixture(scope="module")
def buchwald_env():
    env = CampaignEnvironment(small_spec(BUCHWALD_SPEC, lab_experiments=6), n_offer=12)
    yield env
    env.close()


def _run(env, choose, *, seed, **task):
    """An episode under ``choose(observation, rng) -> action``: (observations, step results)."""
    obs = env.reset(seed=seed, **task)
    rng = np.random.default_rng(seed)
    observations, results = [obs], []
    while True:
        result = env.step(choose(obs, rng))
        results.append(result)
        obs = result.observation
        observations.append(obs)
        if result.terminated or result.truncated:
            return observations, results


def _random(obs, rng):
    return {"type": "propose", "candidate_ids": [obs.offer[int(rng.integers(len(obs.offer)))].label],
            "hypothesis": "a random pick"}


def test_an_episode_is_a_campaign_in_the_ledger_and_ends_at_the_lab_budget(buchwald_env):
    observations, results = _run(buchwald_env, _random, seed=0, batch_size=1, success_bar=101.0)
    assert results[-1].terminated and observations[-1].is_done
    assert observations[-1].budget.lab_experiments_left == 0 and len(observations[-1].lab_results) == 6
    assert "lab budget used" in observations[-1].stop_reason
    ledger, cid = buchwald_env.ledger, buchwald_env.state.campaign_id
    steps = [e.payload for e in ledger.events(cid, types=[EnvironmentStep.type])]
    assert [s["step"] for s in steps] == list(range(len(results)))
    assert [s["reward"] for s in steps] == pytest.approx([r.reward for r in results])
    proposed = ledger.events(cid, types=["Proposed"])
    assert {e.payload["arm"] for e in proposed} == {"env"} and len(proposed) == 6
    assert ledger.events(cid, types=["RewardFinalised"])  # the rubric scored the policy's trajectories
    assert buchwald_env.state.episode_return == pytest.approx(sum(r.reward for r in results))
    assert "terminal" not in results[-2].info and "outcome_reward" in results[-1].info


def test_the_episode_ends_at_the_target(buchwald_env):
    _, results = _run(buchwald_env, _random, seed=1, batch_size=1, success_bar=0.0)  # any yield is a success
    assert results[-1].terminated and len(results) == 1
    assert "target reached" in results[-1].observation.stop_reason


def test_invalid_actions_get_an_error_observation_and_a_penalty_never_a_crash(buchwald_env):
    obs = buchwald_env.reset(seed=2, batch_size=1, success_bar=101.0)
    bad = ["not json", {"type": "dance"}, {"type": "propose", "candidate_ids": ["o99"]},
           {"type": "propose", "candidate_ids": [obs.offer[0].label, obs.offer[1].label]},
           {"type": "run_rung", "rung": "xtb", "candidate_id": "o00"}, 42]
    for action in bad:
        result = buchwald_env.step(action)
        assert result.observation.error and not result.terminated
        assert result.reward == pytest.approx(-buchwald_env.invalid_penalty)
        assert result.observation.offer == obs.offer  # the same situation, refused
    assert "o99" in buchwald_env.step({"type": "propose", "candidate_ids": ["o99"]}).observation.error
    good = buchwald_env.step(ProposeAction(candidate_ids=[obs.offer[0].label], hypothesis="fine"))
    assert good.observation.error is None and len(good.observation.lab_results) == 1
    steps = buchwald_env.ledger.events(buchwald_env.state.campaign_id, types=[EnvironmentStep.type])
    assert [e.payload["is_valid"] for e in steps] == [False] * (len(bad) + 1) + [True]


def test_no_op_steps_earn_nothing_so_padding_does_not_raise_the_return(buchwald_env):
    """Surrogate queries change nothing: each earns exactly 0, and the padded episode returns what the plain one
    does."""
    def plain(obs, rng):
        return {"type": "propose", "candidate_ids": [obs.offer[0].label], "hypothesis": "the first on offer"}

    padded_choices = []

    def padded(obs, rng):
        padded_choices.append(obs.step)
        if len(padded_choices) % 4:  # three queries before every proposal
            return {"type": "query_surrogate", "candidate_ids": [c.label for c in obs.offer]}
        return plain(obs, rng)

    _, plain_results = _run(buchwald_env, plain, seed=3, batch_size=1, success_bar=101.0)
    _, padded_results = _run(buchwald_env, padded, seed=3, batch_size=1, success_bar=101.0)
    assert len(padded_results) > len(plain_results)
    queries = [r for r in padded_results if r.observation.tool_result is not None]
    assert queries and all(r.reward == 0.0 for r in queries)
    assert sum(r.reward for r in padded_results) == pytest.approx(sum(r.reward for r in plain_results))


def test_the_success_bar_is_fixed_at_reset_from_the_task_or_the_pool(buchwald_env):
    buchwald_env.reset(seed=0, batch_size=1, success_quantile=0.9)
    bar = buchwald_env.state.success_bar
    truth = np.asarray(buchwald_env.campaign.ctx.pool.columns["yield"], dtype=float)
    assert bar.source == "quantile" and bar.threshold == pytest.approx(np.quantile(truth, 0.9))
    assert not bar.is_visible and buchwald_env.observation.objective.success_bar is None  # drawn from the truth
    buchwald_env.reset(seed=0, batch_size=1)
    assert buchwald_env.state.success_bar.source == "spec" and buchwald_env.state.success_bar.threshold == 95.0


def _numbers_in(text: str) -> set[str]:
    import re

    return set(re.findall(r"-?\d+\.\d+", text))


def test_the_ground_truth_never_appears_in_an_observation(buchwald_env):
    """Search every observation (structured and text) for the ground truth of candidates the lab has not
    measured: the surrogate may predict them, the lab may measure them later, but no observation may carry them."""
    observations, _ = _run(buchwald_env, _random, seed=4, batch_size=1, success_bar=101.0)
    pool = buchwald_env.campaign.ctx.pool
    truth = {cid: float(v) for cid, v in zip(pool.ids, pool.columns["yield"], strict=True)}
    for obs in observations:
        measured = {r.candidate_id for r in obs.lab_results}
        hidden = {cid: v for cid, v in truth.items() if cid not in measured and v not in (0.0, 100.0)}
        dumped = json.dumps(obs.model_dump(mode="json"))
        structured = {float(x) for x in _numbers_in(dumped)}
        offered = {c.candidate_id for c in obs.offer}
        leaked = [cid for cid in offered if cid in hidden and hidden[cid] in structured]
        assert not leaked, f"ground truth of {leaked} is in observation {obs.step}"
        text = obs.render()
        shown = {f"{hidden[cid]:.4g}" for cid in offered if cid in hidden} | {
            f"{hidden[cid]:.6f}" for cid in offered if cid in hidden}
        assert not shown & _numbers_in(text), f"ground truth in the text of observation {obs.step}"
        assert "yield=" not in text.replace("Objective", "")  # no truth column rendered beside a candidate
        assert all(math.isfinite(c.mean) for c in obs.offer if c.mean is not None)


def test_the_text_observation_shows_the_offer_budget_and_how_to_act(buchwald_env):
    obs = buchwald_env.reset(seed=5, batch_size=2, success_bar=101.0)
    text = obs.render()
    assert obs.n_to_propose == 2 and "Propose 2 candidate(s)" in text
    assert "maximize yield (%)" in text and "6 of 6 experiments left" in text
    assert all(c.label in text for c in obs.offer)
    result = buchwald_env.step({"type": "propose", "candidate_ids": [c.label for c in obs.offer[:2]],
                                "hypothesis": "two"})
    assert len(result.observation.lab_results) >= 1 and result.observation.budget.lab_experiments_left == 4


def test_query_ledger_reports_the_episode_records_and_earns_nothing(buchwald_env):
    obs = buchwald_env.reset(seed=4, batch_size=1, success_bar=101.0)
    empty = buchwald_env.step({"type": "query_ledger"})
    assert empty.reward == 0.0 and empty.observation.error is None
    assert empty.observation.tool_result["n_proposed"] == 0 and empty.observation.tool_result["best"] is None
    label = obs.offer[0].label
    buchwald_env.step({"type": "propose", "candidate_ids": [label], "hypothesis": "the first on offer"})
    proposals = buchwald_env.step({"type": "query_ledger", "what": "proposals"}).observation.tool_result
    assert proposals["n_total"] == 1 and proposals["records"][0]["hypothesis"] == "the first on offer"
    assert proposals["records"][0]["candidate_id"] == obs.offer[0].candidate_id
    lab = buchwald_env.step({"type": "query_ledger", "what": "lab_results"}).observation.tool_result
    summary = buchwald_env.step({"type": "query_ledger", "what": "summary"})
    assert lab["n_total"] == 1 and summary.reward == 0.0
    assert summary.observation.tool_result["best"]["value"] == lab["records"][0]["value"]
    assert buchwald_env.step({"type": "query_ledger", "what": "secrets"}).observation.error


# ------------------------------------------------------------------------------------------------ durability
def _seeded_episode(env, *, durability=None):
    """One seeded episode with a fixed campaign id: (its events as (type, payload), its rewards, its checkpoints)."""
    if durability is not None:
        env.durability = durability
    _, results = _run(env, _random, seed=3, batch_size=1, success_bar=101.0, campaign_id="durability")
    campaign = env.campaign
    n_checkpoints = len(list(campaign._checkpointer.list(campaign.config)))
    # a judge call's latency_s is wall-clock time; everything else in a payload is the episode's own
    events = [(e.type, {k: v for k, v in e.payload.items() if k != "latency_s"}) for e in env.ledger.events("durability")]
    return events, [r.reward for r in results], n_checkpoints


def test_an_in_memory_episode_saves_checkpoints_only_at_exit_and_records_what_sync_records():
    spec = small_spec(BUCHWALD_SPEC, lab_experiments=4)
    fast, slow = CampaignEnvironment(spec, n_offer=8), CampaignEnvironment(spec, n_offer=8)
    try:
        assert fast.durability == "exit"
        fast_events, fast_rewards, fast_checkpoints = _seeded_episode(fast)
        assert fast.campaign.durability == "exit"
        slow_events, slow_rewards, slow_checkpoints = _seeded_episode(slow, durability="sync")
        assert slow.campaign.durability == "sync"
    finally:
        fast.close()
        slow.close()
    assert len(fast_events) > 20 and [t for t, _ in fast_events] == [t for t, _ in slow_events]
    assert fast_events == slow_events  # payloads too: ids and timestamps live outside them
    assert fast_rewards == slow_rewards and len(fast_rewards) == 4
    # one checkpoint per run (the reset's and each step's), not one per node
    assert fast_checkpoints <= len(fast_rewards) + 2 < slow_checkpoints


def test_a_file_backed_episode_keeps_sync_durability(tmp_path):
    env = CampaignEnvironment(small_spec(BUCHWALD_SPEC, lab_experiments=2), db=tmp_path / "episodes.db", n_offer=8)
    try:
        assert env.durability == "sync"
        env.reset(seed=0, batch_size=1, campaign_id="kept")
        assert env.campaign.durability == "sync"
        checkpoints = list(env.campaign._checkpointer.list(env.campaign.config))
        assert len(checkpoints) > 2  # one per node that ran before the plan interrupt
        assert (tmp_path / "episodes.db.checkpoints.sqlite").is_file()
    finally:
        env.close()


def test_the_budget_an_observation_shows_is_the_ledger_s_lab_jobs(buchwald_env):
    """Lab experiments left and jobs pending, folded from the lab-job rows that changed since the last step, equal a
    full read of the lab jobs at every step (a batch of three leaves jobs pending while the graph asks again)."""
    def choose(obs, rng):
        picks = rng.choice(len(obs.offer), size=min(obs.n_to_propose, len(obs.offer)), replace=False)
        return {"type": "propose", "candidate_ids": [obs.offer[int(k)].label for k in picks], "hypothesis": "any"}

    obs = buchwald_env.reset(seed=3, batch_size=3, success_bar=101.0)
    rng, cid = np.random.default_rng(3), buchwald_env.state.campaign_id
    seen_pending = False
    while True:
        jobs = buchwald_env.ledger.lab_jobs(cid)
        assert obs.budget.lab_experiments_left == max(6 - len(jobs), 0)
        assert obs.budget.n_pending == sum(j.status == "dispatched" for j in jobs)
        seen_pending = seen_pending or obs.budget.n_pending > 0
        if obs.is_done:
            break
        obs = buchwald_env.step(choose(obs, rng)).observation
    assert len(jobs) == 6 and obs.budget.n_pending == 0
    assert seen_pending, "the test needs a step that leaves jobs in the lab"
