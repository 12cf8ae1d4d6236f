"""``CampaignEnvClient``: OpenEnv's WebSocket client for the closedloop environment.

Example (against ``closedloop env serve campaigns/freesolv/campaign.toml --port 8000``)::

    from closedloop.openenv.client import CampaignEnvClient
    from orchestrator.environment.openenv_env import CampaignAction

    with CampaignEnvClient(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(seed=0, lab_budget=4)
        label = result.observation.observation["offer"][0]["label"]
        result = env.step(CampaignAction(type="propose", candidate_ids=[label], hypothesis="small and polar"))
"""

from __future__ import annotations

from typing import Any

from openenv.core import EnvClient
from openenv.core.client_types import StepResult

from orchestrator.environment.openenv_env import (
    CampaignAction,
    CampaignObservation,
    CampaignState,
)

__all__ = ["CampaignEnvClient"]


class CampaignEnvClient(EnvClient[CampaignAction, CampaignObservation, CampaignState]):
    def _step_payload(self, action: CampaignAction) -> dict[str, Any]:
        return action.model_dump(mode="json", exclude_none=True)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[CampaignObservation]:
        data = dict(payload.get("observation", {}))
        observation = CampaignObservation(**data, done=payload.get("done", False), reward=payload.get("reward"))
        return StepResult(observation=observation, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: dict[str, Any]) -> CampaignState:
        return CampaignState(**payload)
