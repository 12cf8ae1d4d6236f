"""The verifiers adapter (verifiers 0.4, ``import verifiers.v1 as vf``): a campaign spec as a ``vf.Taskset``.

- ``CampaignTaskset`` yields one ``CampaignTask`` per seed: a campaign episode whose prompt is the environment's
  first observation (the same seed and campaign id give the tool server the same episode).
- ``CampaignToolset`` is the task's tool server (an MCP server verifiers launches per rollout): ``propose``,
  ``run_rung``, ``query_surrogate`` and ``query_ledger``, each one ``CampaignEnvironment.step``, answering with the
  next observation as text. It keeps the episode's rewards in the rollout's shared state (``CampaignEpisodeState``).
- The task's ``@vf.reward`` functions are the rubric: ``process`` is the sum of the step rewards (potential-based
  shaping on the environment rubric, less the invalid-action penalties) and ``outcome`` the terminal lab outcome
  (−1, the floor, for an episode the model abandons). Together they are the core's episode return. A ``@vf.stop``
  ends the rollout when the episode ends.
- ``CampaignHarness`` runs the chat loop in-process (model calls through verifiers' interception, tools over MCP):
  verifiers' own chat harnesses (``null``, ``bash``) build a uv script environment from PyPI on first use, which an
  offline machine cannot do. Pick another with ``--env.agent.harness.id``.

verifiers finds them under the taskset id ``closedloop`` (``import closedloop`` exports them lazily)::

    vf-eval closedloop --env.taskset.spec campaigns/freesolv/campaign.toml --env.taskset.num-tasks 4 -m MODEL

This module imports verifiers: ``pip install "closedloop[verifiers]"``.
"""

from __future__ import annotations

import json
import re
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from pydantic import Field

from orchestrator.environment.core import CampaignEnvironment
from vocabulary.domain import SetupError, import_optional

vf = import_optional("verifiers.v1", "verifiers", "the verifiers taskset")

__all__ = ["CampaignEpisodeState", "CampaignHarness", "CampaignTask", "CampaignTaskData", "CampaignTaskset",
           "CampaignToolset"]

TOOL_PREFIX = "campaign"
SYSTEM_PROMPT = (
    "You plan a closed-loop lab campaign. Each lab experiment is precious: choose candidates from the offer that you "
    "expect to reach the objective. Act only through the tools: campaign_propose sends candidates (offer labels such "
    "as o00) to the lab, and in an open design space also new structures (SMILES or formulas, when the situation "
    "says so); campaign_run_rung runs a cheap simulator rung on a candidate; campaign_query_surrogate "
    "returns the surrogate's predictions; campaign_query_ledger shows what the campaign has proposed and measured. "
    "Every tool answers with the new situation. Keep proposing until the episode ends.")


class CampaignTaskData(vf.TaskData):
    """One episode: the spec (as JSON), its seed and campaign id, and the episode's task options."""

    spec: dict[str, Any] = Field(description="orchestrator.spec.CampaignSpec, as JSON")
    seed: int
    campaign_id: str
    options: dict[str, Any] = Field(default_factory=dict, description="reset options: lab_budget, batch_size, …")
    n_offer: int = 16


class CampaignEpisodeState(vf.State):
    """The rollout's shared state, written by the tool server after every step and read by the rewards."""

    step_rewards: list[float] = Field(default_factory=list)
    n_invalid: int = 0
    n_lab_results: int = 0
    outcome_reward: float | None = Field(default=None, description="the terminal reward, once the episode ended")
    is_done: bool = False


class CampaignToolset(vf.Toolset[vf.ToolsetConfig, CampaignEpisodeState]):
    """The episode's tools; each is one environment step and answers with the next observation."""

    TOOL_PREFIX = TOOL_PREFIX

    def __init__(self, config: vf.ToolsetConfig) -> None:
        super().__init__(config)
        self.env: CampaignEnvironment | None = None

    async def setup_task(self, task: CampaignTaskData) -> None:
        from orchestrator.spec import CampaignSpec

        self.env = CampaignEnvironment(CampaignSpec.model_validate(task.spec), n_offer=task.n_offer)
        self.env.reset(seed=task.seed, campaign_id=task.campaign_id, **task.options)

    def _act(self, action: dict[str, Any]) -> str:
        if self.env is None:
            return "ERROR: this tool server has no episode (it was started without a task)"
        if self.env.observation is not None and self.env.observation.is_done:
            return f"The episode has ended: {self.env.observation.stop_reason}. Stop calling tools."
        result = self.env.step(action)
        state = self.state
        state.step_rewards.append(float(result.reward) - float(result.info.get("outcome_reward", 0.0)))
        state.n_invalid += 0 if result.info["is_valid"] else 1
        state.n_lab_results = len(result.observation.lab_results)
        if "outcome_reward" in result.info:
            state.outcome_reward = float(result.info["outcome_reward"])
        state.is_done = bool(result.terminated or result.truncated)
        return result.observation.render()

    @vf.tool
    def propose(self, candidate_ids: list[str] | None = None, hypothesis: str = "", expected: float | None = None,
                structures: list[str] | None = None) -> str:
        """Send candidates to the lab (at most the open lab slots) with the hypothesis behind them and, optionally,
        the value you expect the lab to measure: offer labels such as o00 in candidate_ids and, when the situation
        says the design space is open, new structures (SMILES for molecules, formulas for materials)."""
        return self._act({"type": "propose", "candidate_ids": candidate_ids or [], "structures": structures or [],
                          "hypothesis": hypothesis, "expected": expected})

    @vf.tool
    def run_rung(self, rung: str, candidate_id: str | None = None, structure: str | None = None) -> str:
        """Run one rung (a simulator) of the campaign's ladder on one candidate: an offer label or a pool id in
        candidate_id or, when the situation says the design space is open, a new structure (SMILES or formula)."""
        return self._act({"type": "run_rung", "rung": rung,
                          **({"candidate_id": candidate_id} if candidate_id is not None else {}),
                          **({"structure": structure} if structure is not None else {})})

    @vf.tool
    def query_surrogate(self, candidate_ids: list[str] | None = None, structures: list[str] | None = None) -> str:
        """The surrogate model's mean and standard deviation for candidates: offer labels or pool ids in
        candidate_ids and, when the design space is open, new structures (SMILES or formulas)."""
        return self._act({"type": "query_surrogate", "candidate_ids": candidate_ids or [],
                          "structures": structures or []})

    @vf.tool
    def query_ledger(self, what: str = "summary", limit: int = 20) -> str:
        """What the campaign's ledger holds: what is 'summary', 'proposals', 'lab_results' or 'rung_results'."""
        return self._act({"type": "query_ledger", "what": what, "limit": limit})


class CampaignTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class CampaignTask(vf.Task[CampaignTaskData, CampaignEpisodeState, CampaignTaskConfig]):
    """A campaign episode; its rewards are the environment rubric's."""

    @classmethod
    def toolsets(cls, config: CampaignTaskConfig) -> list:
        return [CampaignToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def process(self, trace) -> float:
        """The summed step rewards: potential-based shaping on the rubric, less invalid-action penalties."""
        return float(sum(trace.state.step_rewards))

    @vf.reward(weight=1.0)
    async def outcome(self, trace) -> float:
        """The terminal lab outcome in [-1, 1]; the floor (-1) when the episode did not end."""
        return trace.state.outcome_reward if trace.state.outcome_reward is not None else -1.0

    @vf.metric
    async def n_lab_results(self, trace) -> float:
        return float(trace.state.n_lab_results)

    @vf.metric
    async def n_invalid_actions(self, trace) -> float:
        return float(trace.state.n_invalid)

    @vf.stop
    async def episode_ended(self, trace: vf.Trace) -> bool:
        return trace.state.is_done


class CampaignTasksetConfig(vf.TasksetConfig):
    spec: str | None = None
    """The campaign TOML the episodes run."""
    num_tasks: int = Field(4, ge=1)
    """Episodes (seeds seed, seed+1, …)."""
    seed: int = 0
    lab_budget: int | None = None
    """Lab experiments per episode (default: the spec's budget)."""
    batch_size: int = 1
    success_bar: float | None = None
    success_quantile: float | None = None
    n_offer: int = Field(16, ge=1)
    task: CampaignTaskConfig = CampaignTaskConfig()


class CampaignTaskset(vf.Taskset[CampaignTask, CampaignTasksetConfig]):
    """Campaign episodes over one spec, one per seed."""

    def load(self):
        from orchestrator.spec import load_spec

        if not self.config.spec:
            raise SetupError("the closedloop taskset needs a campaign spec: --env.taskset.spec "
                             "campaigns/freesolv/campaign.toml")
        spec = load_spec(Path(self.config.spec))
        options = {key: getattr(self.config, key) for key in ("lab_budget", "batch_size", "success_bar",
                                                              "success_quantile") if getattr(self.config, key) is not None}
        slug = re.sub(r"[^a-z0-9]+", "-", spec.campaign.name.lower()).strip("-")
        env = CampaignEnvironment(spec, n_offer=self.config.n_offer)
        try:
            for k in range(self.config.num_tasks):
                seed = self.config.seed + k
                campaign_id = f"vf-{slug}-{seed}"
                first = env.reset(seed=seed, campaign_id=campaign_id, **options)
                data = CampaignTaskData(id=campaign_id, name=f"{spec.campaign.name} seed {seed}",
                                        prompt=first.render(), system_prompt=SYSTEM_PROMPT,
                                        spec=spec.model_dump(mode="json"), seed=seed, campaign_id=campaign_id,
                                        options=options, n_offer=self.config.n_offer)
                yield CampaignTask(data, self.config.task)
        finally:
            env.close()


class CampaignHarnessConfig(vf.HarnessConfig):
    max_turns: int = Field(64, ge=1)
    """Model turns before the harness gives up on an episode."""


class CampaignHarness(vf.Harness[CampaignHarnessConfig]):
    """An in-process tool-calling chat loop: every model call goes through the interception endpoint."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_MCP = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint: str, secret: str, mcp_urls: dict[str, str], data,
                     tool_interception_url: str | None = None):
        from openai import APIStatusError, AsyncOpenAI
        from verifiers.v1.harnesses.utils.mcp import call_mcp, connect_mcp
        from verifiers.v1.runtimes import ProgramResult

        system, prompt = self.resolve_text_prompt(data)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": prompt or ""})
        client = AsyncOpenAI(base_url=endpoint, api_key=secret, max_retries=0)
        try:
            async with AsyncExitStack() as stack:
                servers = {name: {"url": url, "timeout": self.config.tool_timeout} for name, url in mcp_urls.items()}
                tools, dispatch, connections = await connect_mcp({"mcpServers": servers}, stack)
                for _ in range(self.config.max_turns):
                    try:
                        completion = await client.chat.completions.create(model=ctx.model, messages=messages,
                                                                          tools=tools or None)
                    except APIStatusError:
                        if trace.stop_condition is not None:  # a @vf.stop ended the rollout: expected
                            break
                        raise
                    message = completion.choices[0].message
                    messages.append(message.model_dump(exclude_none=True))
                    if not message.tool_calls:
                        break
                    for call in message.tool_calls:
                        messages.append({"role": "tool", "tool_call_id": call.id,
                                         "content": await self._call(call, dispatch, connections, call_mcp)})
        finally:
            await client.close()
        return ProgramResult(exit_code=0, stdout="", stderr="")

    @staticmethod
    async def _call(call, dispatch, connections, call_mcp) -> Any:
        try:
            arguments = json.loads(call.function.arguments or "{}")
        except json.JSONDecodeError as exc:
            return f"error: the tool arguments are not JSON ({exc}); resend them as a JSON object"
        if not isinstance(arguments, dict):
            return "error: the tool arguments must be a JSON object"
        if call.function.name not in dispatch:
            return f"error: no tool {call.function.name!r}; the tools are {sorted(dispatch)}"
        return await call_mcp(connections, dispatch, call.function.name, arguments)


if __name__ == "__main__":  # verifiers launches the tool server as `python -m <this module>`
    CampaignToolset.run()
