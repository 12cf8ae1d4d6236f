"""The gymnasium adapter, run with gymnasium itself: check_env, make by id, and policies over full episodes."""

from __future__ import annotations

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")

from tests.conftest import BUCHWALD_SPEC, small_spec  # noqa: E402


def test_check_env_passes_on_buchwald_hartwig():
    from gymnasium.utils.env_checker import check_env

    from orchestrator.environment.gym_env import CampaignGymEnv

    env = CampaignGymEnv(small_spec(BUCHWALD_SPEC, lab_experiments=3), n_offer=8, success_bar=101.0)
    try:
        check_env(env, skip_render_check=False)
    finally:
        env.close()


def test_make_by_id_imports_closedloop_envs(tmp_path):
    env = gymnasium.make("closedloop.envs:closedloop/Campaign-v0", spec=str(BUCHWALD_SPEC), n_offer=4,
                         lab_budget=2, success_bar=101.0)
    try:
        obs, info = env.reset(seed=0)
        assert env.observation_space.contains(obs) and env.unwrapped.core.state.campaign_id.startswith("env-")
        obs, reward, terminated, truncated, info = env.step(int(np.argmax(obs["mask"])))
        assert env.observation_space.contains(obs) and info["error"] is None and not truncated
    finally:
        env.close()


def _grid_spec(tmp_path):
    """A 20 × 20 conditions grid whose yield peaks at (13, 6): smooth, so a surrogate learns it in a few results."""
    from orchestrator.spec import validate_spec

    rows = ["x,y,truth"] + [f"{x},{y},{100 - (x - 13) ** 2 - (y - 6) ** 2}" for x in range(20) for y in range(20)]
    (tmp_path / "grid.csv").write_text("\n".join(rows) + "\n")
    return validate_spec({
        "campaign": {"name": "grid", "kind": "conditions", "seed": 0}, "objective": {"direction": "maximize"},
        "space": {"pool": "grid.csv", "columns": ["x", "y"]},
        "lab": {"oracle_column": "truth", "noise_sd": 1.0}, "budget": {"lab_experiments": 10},
        "planner": {"n_initial": 2}, "base_dir": str(tmp_path)})


def _episode(env, policy, seed):
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    total = 0.0
    while True:
        mask = obs["mask"].astype(bool)
        if policy == "bo" and obs["has_surrogate"][0]:
            score = obs["mean"] + obs["sd"]  # upper confidence bound over the offer
            action = int(np.argmax(np.where(mask, score, -np.inf)))
        else:
            action = int(rng.choice(np.flatnonzero(mask)))
        obs, reward, terminated, truncated, info = env.step(action)
        assert info["error"] is None  # both policies act validly
        total += reward
        if terminated or truncated:
            return total, float(obs["best"][0])


def test_a_bo_like_policy_beats_a_random_valid_policy_over_seeds(tmp_path):
    """Full episodes, four seeds each: the upper-confidence-bound policy returns more than the random one on
    average and finds better yields (a ratio within one run; no wall-clock)."""
    from orchestrator.environment.gym_env import CampaignGymEnv

    env = CampaignGymEnv(_grid_spec(tmp_path), n_offer=32, success_bar=99.5)
    try:
        runs = {policy: [_episode(env, policy, seed) for seed in range(4)] for policy in ("bo", "random")}
    finally:
        env.close()
    bo_return, random_return = (np.mean([r for r, _ in runs[p]]) for p in ("bo", "random"))
    bo_best, random_best = (np.mean([b for _, b in runs[p]]) for p in ("bo", "random"))
    assert bo_return > random_return, runs
    assert bo_best > random_best, runs


def test_with_two_objectives_best_has_one_entry_per_objective_and_the_front_its_hypervolume():
    from gymnasium.utils.env_checker import check_env

    from orchestrator.environment.gym_env import CampaignGymEnv
    from tests.rewards.two_objectives import pool_rows, two_objective_spec

    env = CampaignGymEnv(two_objective_spec(), n_offer=6)
    try:
        check_env(env, skip_render_check=True)
        obs, _ = env.reset(seed=0)
        assert obs["best"].shape == (2,) and obs["hypervolume"].tolist() == [0.0]
        for _ in range(4):
            obs, _, terminated, truncated, _ = env.step(int(np.flatnonzero(obs["mask"])[0]))
            if terminated or truncated:
                break
        measured = [r.values for r in env._obs.lab_results if r.values]
        assert measured
        assert obs["best"][0] == pytest.approx(max(m["a"] for m in measured))
        assert obs["best"][1] == pytest.approx(min(m["b"] for m in measured))
        assert obs["hypervolume"][0] == pytest.approx(env._obs.front.hypervolume) and obs["hypervolume"][0] > 0
        assert {r["a"] for r in pool_rows()} >= {m["a"] for m in measured}
    finally:
        env.close()
