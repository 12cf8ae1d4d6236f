"""Registers the campaign environments with gymnasium when imported.

Example:
    >>> import gymnasium
    >>> import closedloop.envs
    >>> "closedloop/Campaign-v0" in gymnasium.registry
    True

``gymnasium.make("closedloop.envs:closedloop/Campaign-v0", spec="path/to/campaign.toml")`` imports this module
before the colon, so the id resolves without an explicit import.
"""

from __future__ import annotations

from vocabulary.domain import import_optional

gymnasium = import_optional("gymnasium", "rl", "closedloop.envs")

__all__ = ["CAMPAIGN_ENV_ID"]

CAMPAIGN_ENV_ID = "closedloop/Campaign-v0"

if CAMPAIGN_ENV_ID not in gymnasium.registry:
    gymnasium.register(id=CAMPAIGN_ENV_ID, entry_point="orchestrator.environment.gym_env:CampaignGymEnv",
                       disable_env_checker=True)  # tests run gymnasium.utils.env_checker.check_env themselves
