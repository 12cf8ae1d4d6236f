"""The OpenEnv adapter: ``CampaignOpenEnv``, an OpenEnv ``Environment`` over ``CampaignEnvironment``, and
``build_app``, its FastAPI app from OpenEnv's ``create_app``.

- ``CampaignAction``: one flat model for the core's actions (``type`` picks ``propose``, ``run_rung``,
  ``query_surrogate`` or ``query_ledger``; the fields the type does not use stay unset). The core validates it, so a
  bad action comes back as an observation with ``error`` set and the invalid-action penalty, never as a crash.
- ``CampaignObservation``: the core's observation as ``text`` (what a language model reads) and ``observation``
  (the structured object), with OpenEnv's ``reward`` and ``done``; ``info`` carries the step's info (OpenEnv's
  serializer drops ``metadata``).
- ``CampaignState``: the episode's campaign id (OpenEnv's ``episode_id``), step, potential and return.

OpenEnv's HTTP ``/reset``, ``/step`` and ``/state`` build a fresh environment per request (stateless), so an episode
runs over its WebSocket session (``/ws``, what ``EnvClient`` uses); a ``/step`` without an episode answers with an
error observation. The folder ``closedloop/openenv/`` carries OpenEnv's layout (``openenv.yaml``, ``pyproject.toml``,
``server/app.py``); ``closedloop env serve SPEC --port P`` serves ``build_app(SPEC)`` on 127.0.0.1.

This module imports openenv: ``pip install "closedloop[openenv]"``.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from orchestrator.environment.core import CampaignEnvironment
from vocabulary.domain import import_optional

_types = import_optional("openenv.core.env_server.types", "openenv", "the OpenEnv environment")
_interfaces = import_optional("openenv.core.env_server.interfaces", "openenv", "the OpenEnv environment")

__all__ = ["CampaignAction", "CampaignObservation", "CampaignOpenEnv", "CampaignState", "build_app"]

ENV_NAME = "closedloop"

# The core's fields for each action type; the others are dropped so the core's strict models accept the action.
_FIELDS: dict[str, tuple[str, ...]] = {
    "propose": ("candidate_ids", "structures", "hypothesis", "rationale", "expected"),
    "run_rung": ("rung", "candidate_id", "structure"),
    "query_surrogate": ("candidate_ids", "structures"),
    "query_ledger": ("what", "limit"),
}


class CampaignAction(_types.Action):
    """One environment action. ``propose`` fills lab slots from the offer (and, in an open space, with new
    ``structures``); the others are tools."""

    type: Literal["propose", "run_rung", "query_surrogate", "query_ledger"]
    candidate_ids: list[str] | None = Field(default=None, description="propose / query_surrogate: offer labels "
                                                                      "(o00, o01, …) or pool ids")
    structures: list[str] | None = Field(default=None, description="propose / query_surrogate, open spaces only: "
                                         "new candidates, SMILES for molecules or formulas for materials")
    hypothesis: str | None = Field(default=None, description="propose: why these candidates")
    rationale: str | None = None
    expected: float | None = Field(default=None, description="propose: the expected lab value, objective unit")
    rung: str | None = Field(default=None, description="run_rung: a rung of the campaign's ladder")
    candidate_id: str | None = Field(default=None, description="run_rung: an offer label or a pool id")
    structure: str | None = Field(default=None, description="run_rung, open spaces only: a new candidate written "
                                                            "out (SMILES or formula) instead of candidate_id")
    what: Literal["summary", "proposals", "lab_results", "rung_results"] | None = Field(
        default=None, description="query_ledger: which records")
    limit: int | None = Field(default=None, description="query_ledger: the newest records to return")

    def to_core(self) -> dict[str, Any]:
        """The action as the environment core reads it."""
        fields = {name: getattr(self, name) for name in _FIELDS[self.type] if getattr(self, name) is not None}
        return {"type": self.type, **fields}


class CampaignObservation(_types.Observation):
    """What the policy sees: text for a language model, the structured observation for code."""

    text: str = Field(default="", description="the observation rendered for a language model")
    observation: dict[str, Any] = Field(default_factory=dict,
                                        description="orchestrator.environment.EnvironmentObservation, as JSON")
    error: str | None = Field(default=None, description="why the last action was refused")
    info: dict[str, Any] = Field(default_factory=dict, description="is_valid, potential, episode_return and, on the "
                                                                   "last step, outcome_reward")


class CampaignState(_types.State):
    """Where the episode stands (``episode_id`` is the campaign's id in the ledger)."""

    iteration: int = 0
    potential: float = 0.0
    episode_return: float = 0.0
    is_done: bool = False


class CampaignOpenEnv(_interfaces.Environment):
    """A campaign spec as an OpenEnv environment; one instance per WebSocket session, each with its own ledger.

    Args:
        spec: a ``CampaignSpec`` or the path of a campaign TOML.
        n_offer: candidates on offer per planning step.
        task: the episode options every ``reset`` starts from (``lab_budget``, ``batch_size``, ``success_bar``, …);
            ``reset``'s own keyword arguments override them.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True  # each instance has its own in-memory ledger and campaign
    REQUIRES_SINGLE_THREAD_EXECUTOR = True  # a campaign's graph and ledger stay on one thread

    def __init__(self, spec: Any, *, n_offer: int = 16, task: dict[str, Any] | None = None):
        super().__init__()
        self.core = CampaignEnvironment(Path(spec) if isinstance(spec, str) else spec, n_offer=n_offer)
        self.task = dict(task or {})

    def reset(self, seed: int | None = None, episode_id: str | None = None, **task: Any) -> CampaignObservation:
        options = {**self.task, **task}
        if episode_id is not None:
            options["campaign_id"] = episode_id
        return self._to_observation(self.core.reset(seed=seed, **options), reward=None, info={})

    def step(self, action: CampaignAction, timeout_s: float | None = None, **kwargs: Any) -> CampaignObservation:
        if self.core.campaign is None:
            message = ("no episode in this session: call reset first, over the WebSocket session (/ws) that "
                       "EnvClient opens; HTTP /step starts from a fresh environment every time")
            return CampaignObservation(text=f"ERROR: {message}", error=message, done=False, reward=None)
        if self.core.observation is not None and self.core.observation.is_done:
            message = "the episode has ended; call reset to start another"
            return CampaignObservation(text=f"ERROR: {message}", error=message, done=True, reward=0.0,
                                       observation=self.core.observation.model_dump(mode="json"))
        if isinstance(action, dict):
            action = CampaignAction.model_validate(action)
        result = self.core.step(action.to_core())
        info = {k: v for k, v in result.info.items() if k != "campaign_id"}
        return self._to_observation(result.observation, reward=result.reward, info=info,
                                    done=result.terminated or result.truncated)

    @staticmethod
    def _to_observation(obs, *, reward: float | None, info: dict[str, Any], done: bool | None = None):
        return CampaignObservation(text=obs.render(), observation=obs.model_dump(mode="json"), error=obs.error,
                                   done=obs.is_done if done is None else done, reward=reward, info=info)

    @property
    def state(self) -> CampaignState:
        s = self.core.state
        return CampaignState(episode_id=s.campaign_id, step_count=s.step, iteration=s.iteration,
                             potential=s.potential, episode_return=s.episode_return, is_done=s.is_done)

    def get_metadata(self):
        spec = self.core.base_spec
        return _types.EnvironmentMetadata(
            name=ENV_NAME, version="1",
            description=f"closedloop campaign {spec.campaign.name!r} as an environment: propose candidates for the "
                        f"simulated lab, run rungs, query the surrogate and the ledger; rewards from the rubric.")

    def close(self) -> None:
        self.core.close()


def build_app(spec: Any, *, n_offer: int = 16, max_concurrent_envs: int = 4, **task: Any):
    """OpenEnv's FastAPI app over ``spec``: ``/health``, ``/schema``, ``/metadata``, ``/reset``, ``/step``,
    ``/state``, ``/ws`` and ``/mcp``.

    The spec is loaded once here, so a bad spec fails before the server binds anything.
    """
    http_server = import_optional("openenv.core.env_server.http_server", "openenv", "the OpenEnv server")
    from orchestrator.spec import CampaignSpec, load_spec

    loaded = spec if isinstance(spec, CampaignSpec) else load_spec(spec)
    probe = CampaignEnvironment(loaded, n_offer=n_offer)
    try:
        probe.episode_spec(None, task)  # unknown task options and an unfixable success bar fail here
    finally:
        probe.close()
    factory = functools.partial(CampaignOpenEnv, loaded, n_offer=n_offer, task=task)
    return http_server.create_app(factory, CampaignAction, CampaignObservation, env_name=ENV_NAME,
                                  max_concurrent_envs=max_concurrent_envs)
