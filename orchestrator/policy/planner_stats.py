"""What the llm arm contributed, from the ledger alone: its model calls, how often it fell back to bo, and how often
it picked what bo, planning the same state, would not have.

The llm planner computes bo's batch on the state it plans on and records, for every proposal, whether bo proposed
it too (``Proposed.is_bo_pick``). A model that only echoes bo scores ``differs_from_bo_share == 0``; the
``llm-shuffled`` arm's statistics next to the ``llm`` arm's show whether the lab's answers change its picks.

Example:
    >>> from orchestrator.ledger import Ledger
    >>> ledger = Ledger.open(":memory:")
    >>> planner_stats(ledger, "no-such-campaign")
    {'llm': {}}
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from vocabulary.events import Dispatched, LLMCall, Proposed

__all__ = ["CHOOSER_ARMS", "LLM_ARMS", "planner_stats"]

LLM_ARMS = ("llm", "llm-shuffled", "llm-random", "llm-oracle")
"""Arms reported even without ``is_bo_pick`` records; any other arm whose proposals carry them is reported too."""

CHOOSER_ARMS = ("llm-random", "llm-oracle")
"""The bracket's arms: they choose without a model, so they report no model calls of their own."""


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def planner_stats(ledger, campaign_id: str) -> dict[str, Any]:
    """Per llm arm (``"llm"`` always, empty when it did not run; ``"llm-shuffled"`` and other model-backed arms when
    they ran):

    - ``calls``: model calls (``LLMCall`` events), ``n_failed_calls`` those that raised; ``n_prompt_tokens``,
      ``n_completion_tokens`` and ``model_wall_s`` (wall-clock seconds of the calls) as reported by the model.
      Only the llm arms call models, so with two of them in one campaign both report the campaign's calls; the
      bracket's chooser arms (``CHOOSER_ARMS``: a coin, an oracle) call none and report 0 for each.
    - ``n_steps``: iterations the arm proposed in; ``n_proposals``: its proposals.
    - ``n_fallback`` and ``fallback_share``: proposals filled in by bo after the model's rounds ran out, and their
      share of the model's own decisions (its picks and the fallbacks; bo's anchors are not the model's to lose;
      None without any).
    - ``n_anchor``: bo's picks the arm proposed beside the model's, one per lab slot, for the screen to weigh
      (``Proposed.is_anchor``); never counted as the model's.
    - ``n_model_picks``: the model's own proposals (neither fallback nor anchor); ``n_differs_from_bo`` and
      ``differs_from_bo_share``: those bo would not have made, over the picks for which that is recorded (None
      when none is, as in ledgers written before ``is_bo_pick`` existed); ``coin_differs_from_bo_share``: what a
      uniform choice among the same shown rows would give (mean of 1 - n_shown_bo_picks / n_shown over the picks
      that record it).
    - ``first_option_share`` and ``coin_first_option_share``: how often the model's pick was the first row shown
      (the rows are shuffled, so position carries no ranking), and a coin's rate in the same slots (mean 1 / n_shown):
      a model above the coin favours position. None where the shown rows are not recorded.
    - ``n_lab``: the arm's lab experiments; ``n_lab_model_picks``, ``n_lab_anchor`` and ``n_lab_differs_from_bo``:
      how many of them were the model's own picks, bo's anchors, and model picks bo would not have made.
    """
    proposed = [e.payload for e in ledger.events(campaign_id, types=[Proposed.type])]
    arms = [a for a in dict.fromkeys(p["arm"] for p in proposed)
            if a in LLM_ARMS or any(p.get("is_bo_pick") is not None for p in proposed if p["arm"] == a)]
    out: dict[str, Any] = {"llm": {}}
    if not arms:
        return out
    calls = [e.payload for e in ledger.events(campaign_id, types=[LLMCall.type])]
    call_stats = {
        "calls": len(calls),
        "n_failed_calls": sum(1 for c in calls if c.get("error")),
        "n_prompt_tokens": sum(c.get("n_prompt_tokens") or 0 for c in calls),
        "n_completion_tokens": sum(c.get("n_completion_tokens") or 0 for c in calls),
        "model_wall_s": round(sum(c.get("latency_s") or 0.0 for c in calls), 3),
    }
    latest: dict[tuple[str, str], dict] = {}  # (arm, candidate) -> its last proposal: what a dispatch carried out
    for p in proposed:
        latest[(p["arm"], p["candidate_id"])] = p
    dispatched: dict[str, list[dict]] = defaultdict(list)
    for e in ledger.events(campaign_id, types=[Dispatched.type]):
        proposal = latest.get((e.payload["arm"], e.payload["candidate_id"]))
        if proposal is not None:
            dispatched[e.payload["arm"]].append(proposal)

    for arm in arms:
        mine = [p for p in proposed if p["arm"] == arm]
        picks = [p for p in mine if not p.get("is_fallback") and not p.get("is_anchor")]
        known = [p for p in picks if p.get("is_bo_pick") is not None]
        differs = sum(1 for p in known if not p["is_bo_pick"])
        n_fallback = sum(1 for p in mine if p.get("is_fallback"))
        lab = dispatched.get(arm, [])
        lab_picks = [p for p in lab if not p.get("is_fallback") and not p.get("is_anchor")]
        shown = [p for p in picks if p.get("n_shown")]
        out[arm] = {
            **(dict.fromkeys(call_stats, 0) if arm in CHOOSER_ARMS else call_stats),
            "n_steps": len({p["iteration"] for p in mine}),
            "n_proposals": len(mine),
            "n_fallback": n_fallback,
            "fallback_share": _share(n_fallback, len(picks) + n_fallback),
            "n_anchor": sum(1 for p in mine if p.get("is_anchor")),
            "n_model_picks": len(picks),
            "n_differs_from_bo": differs,
            "differs_from_bo_share": _share(differs, len(known)),
            "coin_differs_from_bo_share": _mean([1.0 - (p.get("n_shown_bo_picks") or 0) / p["n_shown"] for p in shown]),
            "first_option_share": _share(sum(1 for p in shown if p.get("shown_position") == 0), len(shown)),
            "coin_first_option_share": _mean([1.0 / p["n_shown"] for p in shown]),
            "n_lab": len(lab),
            "n_lab_model_picks": len(lab_picks),
            "n_lab_anchor": sum(1 for p in lab if p.get("is_anchor")),
            "n_lab_differs_from_bo": sum(1 for p in lab_picks if p.get("is_bo_pick") is False),
        }
    return out
