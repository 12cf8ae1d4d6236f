"""TRL over campaigns: the reward function the trl-grpo export names.

``closedloop export CAMPAIGN --format trl-grpo`` writes ``train.jsonl`` (prompts with the candidates on offer, and an
``env_task`` column) and ``metadata.json``, whose ``reward_function`` is ``closedloop.trl:campaign_reward``. The
function plays each completion's candidate in a one-experiment episode of the campaign environment (rubric and
simulated lab) and returns the episode's return; a completion naming no candidate on offer earns ``REWARD_FLOOR``.

Example:
    >>> from closedloop.trl import REWARD_FLOOR, campaign_reward
    >>> campaign_reward(["…"], ["I would rather not say"], ['{"labels": ["o00"], "offer": ["X"]}'])
    [-2.0]
    >>> REWARD_FLOOR
    -2.0

With TRL (``pip install "closedloop[rl]"``)::

    from datasets import load_dataset
    from trl import GRPOConfig, GRPOTrainer
    from closedloop.trl import campaign_reward

    dataset = load_dataset("json", data_files="export/train.jsonl", split="train")
    GRPOTrainer(model=model, reward_funcs=campaign_reward, args=GRPOConfig(...), train_dataset=dataset).train()
"""

from __future__ import annotations

from orchestrator.environment.grpo import (
    REWARD_FLOOR,
    CampaignReward,
    campaign_reward,
    parse_completion,
)

__all__ = ["REWARD_FLOOR", "CampaignReward", "campaign_reward", "parse_completion"]
