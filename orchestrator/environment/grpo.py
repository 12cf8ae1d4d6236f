"""GRPO over campaigns: the prompts a campaign's planner faced, rebuilt from its ledger, and the reward function
that scores a completion by playing it in the environment.

``ledger_situations`` rebuilds, for each planning iteration of a recorded campaign, what the environment would
have shown (``EnvironmentObservation``, rendered by its own ``render()``): the objective, the candidates on offer
(the ones the campaign's arms proposed at that iteration plus a seeded sample of the untested pool, shuffled), the
rung and lab results recorded before the planner was asked, and the budget left. The ledger keeps no per-candidate
surrogate predictions, so a rebuilt offer shows "no prediction yet" (an environment episode shows the GP's mean and
sd); ground truth is never shown, as in the environment.

``campaign_reward`` is a TRL reward function (``prompts, completions, **columns -> list[float]``). Each
completion's candidate (a ``propose`` action as JSON, else the first offer label it names) is played as the first
proposal of a one-experiment episode of ``CampaignEnvironment`` over the row's spec, with the row's offer in front of
the policy: the rubric scores the trajectory, the simulated lab answers, and the reward is the episode's return
(the shaped process reward plus the terminal outcome). A completion that names no candidate on offer earns
``REWARD_FLOOR``, what an episode that does nothing earns.

Example:
    >>> parse_completion('I pick {"type": "propose", "candidate_ids": ["o03"], "hypothesis": "polar"}', ["o03"])
    ['o03']
    >>> parse_completion("o01 looks best", ["o00", "o01"]), parse_completion("no idea", ["o00"])
    (['o01'], None)
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from typing import Any

from orchestrator.environment.core import EPISODE_FLOOR
from vocabulary.domain import SetupError
from vocabulary.events import (
    CampaignStarted,
    Dispatched,
    Observed,
    Proposed,
    Simulated,
    expand_batches,
)

__all__ = ["GRPO_REWARD_FUNCTION", "N_EXPORT_OFFER", "REWARD_FLOOR", "CampaignReward", "Situation",
           "campaign_reward", "ledger_situations", "parse_completion"]

GRPO_REWARD_FUNCTION = "closedloop.trl:campaign_reward"
"""The importable reward function the trl-grpo export names in its metadata."""
N_EXPORT_OFFER = 8
"""Candidates on offer in an exported prompt."""
REWARD_FLOOR = EPISODE_FLOOR
"""What a completion that names no candidate on offer earns: the return of an episode that does nothing."""

_LABEL = re.compile(r"\bo\d{2,}\b")
_JSON = re.compile(r"\{[^{}]*\}")


@dataclass(frozen=True)
class Situation:
    """One planning iteration as the planner faced it: the rendered observation and the task that replays it."""

    iteration: int
    observation: Any  # EnvironmentObservation
    offer_ids: tuple[str, ...]
    env_task: dict[str, Any]


def ledger_situations(ledger, campaign_id: str, iterations: list[int], *,
                      n_offer: int = N_EXPORT_OFFER) -> dict[int, Situation]:
    """The situation of each of ``iterations`` in a recorded campaign (see the module docstring).

    Raises:
        LedgerError: the campaign is not in the ledger.
        SetupError: its spec or pool cannot be loaded here (the pool file moved).
    """
    from orchestrator.environment.observation import (
        Budget,
        EnvironmentObservation,
        LabResult,
        OfferedCandidate,
        RungResult,
        constraint_views,
        measured_values,
        objective_views,
    )
    from orchestrator.environment.success import fix_success_bar
    from orchestrator.ledger import LedgerError
    from orchestrator.seeding import derive_rng
    from orchestrator.space.pool import describe, load_pool
    from orchestrator.spec import validate_spec

    events = list(expand_batches(ledger.events(campaign_id)))  # screening rounds as their old-shape steps
    started = [e for e in events if e.type == CampaignStarted.type]
    if not started:
        raise LedgerError(f"campaign {campaign_id!r} is not in {ledger.url}")
    spec_json = started[0].payload["spec"]
    spec = validate_spec(spec_json, source=f"{campaign_id} (from the ledger)")
    pool = load_pool(spec)
    bar = fix_success_bar(spec, pool)
    view, views = objective_views(spec, bar.threshold if bar.is_visible else None)
    several = dict(objectives=views, tradeoff=spec.tradeoff_method if spec.is_multi_objective else None,
                   constraints=constraint_views(spec))

    def text(cid: str) -> str:
        return describe(pool.get(cid)) if cid in pool.index else cid

    out: dict[int, Situation] = {}
    for iteration in sorted(set(iterations)):
        at = [e for e in events if e.type == Proposed.type and e.payload["iteration"] == iteration
              and e.payload["arm"] != "imported"]
        cutoff = at[0].seq if at else min((e.seq for e in events if e.payload.get("iteration") == iteration),
                                          default=events[-1].seq + 1)
        before = [e for e in events if e.seq < cutoff]
        lab = [LabResult(candidate_id=e.payload["candidate_id"], text=text(e.payload["candidate_id"]),
                         status=e.payload["status"], value=e.payload["value"] if e.payload["status"] == "ok" else None,
                         values=measured_values(spec.objective.property, e.payload))
               for e in before if e.type == Observed.type]
        rungs, compute_s = [], 0.0
        for e in before:
            if e.type == Simulated.type:
                o = e.payload["observation"]
                compute_s += float(o.get("cost_s") or 0.0)
                rungs.append(RungResult(candidate_id=e.payload["candidate_id"], text=text(e.payload["candidate_id"]),
                                        rung=e.payload["rung"], status=o["status"],
                                        properties={k: float(v) for k, v in o.get("properties", {}).items()}))
        dispatched = [e.payload["candidate_id"] for e in before if e.type == Dispatched.type]
        n_lab_observed = sum(e.type == Observed.type and e.payload.get("provenance", "lab") == "lab" for e in before)
        tested = set(dispatched) | {r.candidate_id for r in lab}
        picks = [e.payload["candidate_id"] for e in at]
        rng = derive_rng(spec.campaign.seed, iteration, "export-offer")
        offer_ids = list(dict.fromkeys(c for c in picks if c in pool.index and c not in tested))[:n_offer]
        untested = [cid for cid in pool.ids if cid not in tested and cid not in offer_ids]
        n_more = min(n_offer - len(offer_ids), len(untested))
        if n_more > 0:
            offer_ids += [untested[int(i)] for i in rng.choice(len(untested), size=n_more, replace=False)]
        offer_ids = [offer_ids[int(i)] for i in rng.permutation(len(offer_ids))]
        width = max(2, len(str(n_offer - 1)))
        offer = tuple(OfferedCandidate(label=f"o{k:0{width}d}", candidate_id=cid, text=text(cid))
                      for k, cid in enumerate(offer_ids))
        budget = spec.budget.lab_experiments
        observation = EnvironmentObservation(
            campaign_id=campaign_id, step=0, iteration=iteration, objective=view, **several,
            front=_front_view(spec, before), offer=offer, n_to_propose=1,
            rungs=tuple(r.name for r in spec.ladder), rung_results=tuple(rungs), lab_results=tuple(lab),
            budget=Budget(lab_experiments=budget, lab_experiments_left=max(budget - len(dispatched), 0),
                          n_pending=max(len(dispatched) - n_lab_observed, 0), compute_s_used=compute_s))
        env_task = {"spec": spec_json, "seed": spec.campaign.seed, "offer": offer_ids,
                    "labels": [c.label for c in offer]}
        out[iteration] = Situation(iteration, observation, tuple(offer_ids), env_task)
    return out


def _completion_text(completion: Any) -> str:
    """A completion's text: TRL passes a string (standard) or a list of messages (conversational)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "\n".join(str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in completion)
    return str(completion)


def parse_completion(text: str, labels: list[str]) -> list[str] | None:
    """The offer labels a completion proposes: a ``propose`` JSON action's ``candidate_ids``, else the first offer
    label named in the text; None when it names none."""
    for match in _JSON.finditer(text):
        try:
            action = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        if isinstance(action, dict) and ("type" in action or "candidate_ids" in action):
            ids = action.get("candidate_ids")
            is_proposal = action.get("type", "propose") == "propose"
            # the first action decides: a tool call is not answered in a one-turn task, so it proposes nothing
            return ids if is_proposal and isinstance(ids, list) and ids and all(isinstance(i, str) for i in ids) \
                else None
    for match in _LABEL.finditer(text):
        if match.group(0) in labels:
            return [match.group(0)]
    return None


class CampaignReward:
    """A TRL reward function over campaign episodes; environments and rewards are cached per spec and pick.

    Args:
        n_offer: candidates an episode may offer (at least the export's ``N_EXPORT_OFFER``).
    """

    __name__ = "campaign_reward"

    def __init__(self, *, n_offer: int = N_EXPORT_OFFER):
        self.n_offer = n_offer
        self._envs: dict[str, Any] = {}
        self._cache: dict[tuple[str, tuple[str, ...]], float] = {}
        self._lock = threading.Lock()

    def __call__(self, prompts: list[Any], completions: list[Any], env_task: list[str], **kwargs: Any) -> list[float]:
        return [self.score(_completion_text(c), task) for c, task in zip(completions, env_task, strict=True)]

    def score(self, completion: str, env_task: str | dict[str, Any]) -> float:
        """The return of the one-experiment episode that plays ``completion`` (``REWARD_FLOOR`` if it names no
        candidate on offer)."""
        task = json.loads(env_task) if isinstance(env_task, str) else env_task
        labels = list(task["labels"])
        picked = parse_completion(completion, labels)
        if not picked:
            return REWARD_FLOOR
        by_label = dict(zip(labels, task["offer"], strict=True))
        ids = tuple(by_label.get(p, p) for p in picked)
        if not set(ids) <= set(task["offer"]):
            return REWARD_FLOOR
        key = (json.dumps(task, sort_keys=True), ids)
        with self._lock:
            if key not in self._cache:
                self._cache[key] = self._play(task, ids)
            return self._cache[key]

    def _play(self, task: dict[str, Any], ids: tuple[str, ...]) -> float:
        from orchestrator.environment.core import CampaignEnvironment

        spec_key = json.dumps(task["spec"], sort_keys=True)
        env = self._envs.get(spec_key)
        if env is None:
            from orchestrator.spec import validate_spec

            env = CampaignEnvironment(validate_spec(task["spec"], source="env_task"), n_offer=self.n_offer)
            self._envs[spec_key] = env
        obs = env.reset(seed=int(task["seed"]), lab_budget=1, batch_size=1, offer=list(task["offer"]))
        labels = {c.candidate_id: c.label for c in obs.offer}
        missing = [cid for cid in ids if cid not in labels]
        if missing:
            raise SetupError(f"the episode did not offer {missing}; the row's offer must be untested pool ids")
        result = env.step({"type": "propose", "candidate_ids": [labels[cid] for cid in ids],
                           "hypothesis": "a GRPO completion"})
        if result.observation.error:
            return REWARD_FLOOR  # e.g. more candidates than the one lab slot
        total = result.reward
        while not (result.terminated or result.truncated):  # the lab's answer is still pending: let it arrive
            result = env.step({"type": "query_surrogate", "candidate_ids": [labels[ids[0]]]})
            total += result.reward
        return float(total)

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()


_DEFAULT = CampaignReward()


def campaign_reward(prompts: list[Any], completions: list[Any], env_task: list[str], **kwargs: Any) -> list[float]:
    """TRL reward function for the trl-grpo export: the return of each completion's one-experiment episode."""
    return _DEFAULT(prompts, completions, env_task, **kwargs)


def _front_view(spec, events: list):
    """Several objectives: the measured front of the lab results among ``events`` (``orchestrator.loop.front``);
    None for one objective or before a result."""
    if not spec.is_multi_objective:
        return None
    from orchestrator.environment.observation import FrontView
    from orchestrator.loop.front import campaign_front
    from orchestrator.loop.view.lab_jobs import LabJobs

    jobs = LabJobs(spec.objective.utility, property=spec.objective.property,
                   learns_failures=spec.lab.failure_policy == "learn")
    for event in events:
        if event.type in LabJobs.types:
            jobs.on(event)
    front = campaign_front(spec, jobs.history())
    if front is None:
        return None
    return FrontView(candidate_ids=tuple(p.candidate_id for p in front.points), hypervolume=front.hypervolume,
                     reference_point=tuple(front.reference_point), reference_inferred=front.reference_inferred)
