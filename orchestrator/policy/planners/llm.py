"""The ``llm`` planner arm: a LangGraph agent that asks a chat model for a batch, validates it, repairs it, and
falls back to the bo arm when the rounds run out.

The graph, per ``propose`` call::

    gather ─▶ [agent ⇄ tools] ─▶ propose ─▶ validate ─▶ finish
                                              │   ▲
                                              ▼   │
                                  fallback ◀─ repair

- ``gather`` asks the campaign's bo arm for two things on the same state: its batch of ``n`` (what bo would
  propose here, to measure the model against) and its diversified batch of ``shortlist_size`` (default ``2 n``;
  Kriging believer, pending-aware; a seeded random or rung-ranked design before the surrogate exists). bo's batch
  plus the rest of the larger one is the **shortlist**, which bounds the worst case: a model that knows nothing
  measures bo's next-best candidates instead of some of its best. It is shown in a seeded random order, labelled
  ``c00``, ``c01``, …, so that a model that takes the first option is not bo in disguise. Each row carries what the
  planner knows: the surrogate's mean and sd, rung values where known, and novelty (distance to the nearest lab
  result). The tool results (constraints, history, similar) complete the prompt's DATA block.
- ``agent``/``tools`` (only with ``max_tool_steps > 0`` and a model that supports ``bind_tools``): a capped ReAct
  loop in which the model calls the same tools itself.
- ``propose`` and ``repair`` make one structured-output call each (``llm_prompt.response_schema``). A local model's
  grammar lets every pick name any shortlist id and asks first for the model's own short hypothesis for the batch.
- ``validate`` applies the campaign's rules (``proposal_checks.validation_error``): parses, in the pool, not tested
  or pending, no duplicates. Valid picks are kept across rounds; the messages of the rest go into the next repair.
- ``fallback`` fills what is missing from the bo arm and marks those proposals as fallbacks.
- ``finish`` returns the model's picks, then the anchors: when the screen weighs several proposals per lab slot
  (``PlanningContext.proposals_per_slot`` > 1), bo's first pick per slot is proposed beside the model's
  (``Proposal.is_anchor``; the model's shortlist leaves them out), so a model pick reaches the lab only by beating
  bo's on the screen's evidence. With one proposal per slot nothing but the lab can weigh a pick, so bo's top picks
  fill the slots the model has not earned: its share follows its lab track record against them (``model_share``),
  and it chooses its ``m`` picks from the ``2 m`` candidates that follow the anchors in bo's order.

Every proposal records ``is_bo_pick``: whether bo, planning the same state for the same ``n``, proposed it too.
``planner_stats`` turns that into the share of the model's picks that differ from bo.

Every model call goes through an ``LLMCallRecorder`` under the key ``it{iteration}:llm:{k}`` (k counts the calls of
this iteration). A recorded call is answered from the record and the model is not called, which is how crash-resume
and replay work; with every call recorded the model is not even loaded.

The recorder is the campaign's (``PlanningContext.recorder``, a ledger-backed one in a campaign, which is why the arm
declares ``PlannerTraits.records_llm_calls``); a context without one uses the planner's own (``recorder=``, default
in memory).

The graph and its nodes live in ``llm_graph`` (which takes this arm's settings as ``LLMRunInputs`` and does not
import this module), the recorder in ``llm_recording``. This module imports no LangChain or llama.cpp code at
import time.
"""


from __future__ import annotations

import dataclasses
import logging
from typing import Any

import numpy as np

from orchestrator.policy.planners.base import PlannerTraits, PlanningContext
from orchestrator.policy.planners.llm_graph import LLMRunInputs, ProposeRun
from orchestrator.policy.planners.llm_recording import (
    InMemoryLLMRecorder,
    LLMCallRecorder,
    scrub_credentials,
)
from orchestrator.policy.planners.llm_tools import SimulateFn, clip
from vocabulary.domain import Proposal, SetupError

__all__ = ["LLMPlanner", "ShuffledFeedbackLLMPlanner", "shuffle_feedback"]

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------- planner
class LLMPlanner:
    """Proposes experiments with a chat model, checked by the domain, repaired, and backed by the bo arm.

    Args:
        model: ``None``/``"embedded"``, a ``.gguf`` path or ``"provider:model[@base_url]"`` (see
            ``llm_models.load_chat_model``); loaded on the first call that is not answered from the recorder.
        chat_model: a ready LangChain chat model instead of ``model`` (tests pass scripted fakes).
        max_repair_rounds: repair calls after the first proposal call.
        shortlist_size: the size of bo's diversified batch the shortlist is drawn from (at least ``n``); default
            None: ``2 n``, so the model may swap any of bo's picks for bo's next-best ones. A local model's soft
            prompt budget may show it fewer rows, never fewer than ``2 n``.
        recorder: where model calls are recorded and replayed from when the planning context brings none
            (``PlanningContext.recorder``, which a campaign always sets); default: an in-memory recorder.
        simulate_fn: the campaign's cheap rungs for the ``simulate`` tool (``{candidate id: {property: value}}``).
        max_tool_steps: ReAct steps in which a tool-calling model may call the tools itself; 0 puts the tool
            results in the prompt only.
        restrict_to_shortlist: make ``candidate`` an enum of shortlist ids in the answer schema; default: True for
            local GGUF models (their grammar then enforces it), False for provider models.
        max_prompt_chars: prompt budget (system plus task); the DATA block is trimmed to fit (neighbours first,
            then shortlist rows). Default: ``MAX_PROMPT_CHARS`` for provider models; for local GGUF models
            ``LOCAL_PROMPT_CHARS``, a soft budget that keeps at least twice the batch in rows and always keeps the
            history (3 best and 2 worst results for them).
        temperature, seed, max_tokens: sampling parameters for a model loaded from ``model``.
        bo_planner: the bo arm that builds the shortlist, fills fallbacks and is measured against; default: the
            campaign's ``bo`` arm (``make_planner("bo", spec)``).
        anchors: when the screen weighs several proposals per lab slot (``PlanningContext.proposals_per_slot`` >
            1), one proposal per slot is bo's pick (``Proposal.is_anchor``), the model chooses the rest, and the
            screen decides on the ladder's evidence which reach the lab; with one proposal per slot, the model's
            share of the slots follows its lab track record against bo's picks (``anchor_count``). False: the
            model chooses every proposal.

    Example:
        >>> planner = LLMPlanner()  # the embedded model, loaded on first use
        >>> planner.name, planner.max_repair_rounds
        ('llm', 2)
    """

    name = "llm"
    traits = PlannerTraits(uses_surrogate=True, uses_ladder=True, reads_provenance=True, records_llm_calls=True)
    """The campaign fits its GP for this arm (the shortlist, the predictions and the fallbacks read it), surveys its
    proxy rungs (bo's shortlist and the prompt's rung columns use them), tells it which lab results were its model's
    picks and which bo's anchors (its track record), and records its model calls in the ledger."""

    def __init__(
        self,
        model: str | None = None,
        *,
        chat_model: Any | None = None,
        max_repair_rounds: int = 2,
        shortlist_size: int | None = None,
        recorder: LLMCallRecorder | None = None,
        simulate_fn: SimulateFn | None = None,
        max_tool_steps: int = 0,
        restrict_to_shortlist: bool | None = None,
        temperature: float = 0.0,
        seed: int = 0,
        max_tokens: int = 1024,
        max_prompt_chars: int | None = None,
        bo_planner: Any | None = None,
        anchors: bool = True,
    ):
        if max_repair_rounds < 0 or (shortlist_size is not None and shortlist_size < 1) or max_tool_steps < 0:
            raise SetupError(f"{max_repair_rounds=} and {max_tool_steps=} must be >= 0 and {shortlist_size=} >= 1")
        self.model = model
        self.max_repair_rounds = max_repair_rounds
        self.shortlist_size = shortlist_size
        self.recorder: LLMCallRecorder = recorder if recorder is not None else InMemoryLLMRecorder()
        self.simulate_fn = simulate_fn
        self.max_tool_steps = max_tool_steps
        self.restrict_to_shortlist = restrict_to_shortlist
        self.max_prompt_chars = max_prompt_chars
        self.sampling = {"temperature": temperature, "seed": seed, "max_tokens": max_tokens}
        self._chat_model = chat_model
        self.bo_planner = bo_planner
        self.anchors = anchors
        self._warned_tools = False
        self.track_record: tuple[float, float] | None = None
        """(wins, losses) of the model's lab results against the anchors at the last one-per-slot plan."""
        self.last_run: dict[str, Any] = {}
        """Facts about the last ``propose``: keys, counts of valid/repaired/fallback proposals (for benchmarks)."""

    # ----------------------------------------------------------------------------------------------- model
    @property
    def chat_model(self):
        """The chat model, loaded on first use."""
        if self._chat_model is None:
            from orchestrator.policy.planners.llm_models import load_chat_model

            self._chat_model = load_chat_model(self.model, **self.sampling)
        return self._chat_model

    def _is_local_gguf(self) -> bool:
        if self._chat_model is not None:
            from orchestrator.policy.planners.llm_models import LlamaCppChatModel

            return isinstance(self._chat_model, LlamaCppChatModel)
        return self.model is None or self.model.strip() in ("", "embedded") or self.model.strip().lower().endswith(".gguf")

    def _restricts(self) -> bool:
        return self._is_local_gguf() if self.restrict_to_shortlist is None else self.restrict_to_shortlist

    def check_ready(self) -> None:
        """Refuse, before a campaign dispatches anything, a model that could never answer (an unknown provider, a
        missing or foreign .gguf file; ``llm_models.check_chat_model``). A ready chat model passed in is not checked.

        Raises:
            SetupError: what is wrong with ``model`` and how to fix it.
        """
        if self._chat_model is None:
            from orchestrator.policy.planners.llm_models import check_chat_model

            check_chat_model(self.model)

    def recorded_call(self, recorder: LLMCallRecorder, key: str, messages: list, invoke) -> dict[str, Any]:
        """The call recorded in ``recorder`` under ``key``, or a new call made by ``invoke(messages)`` and recorded."""
        from orchestrator.policy.planners.llm_models import call_metadata, message_dicts

        recorded = recorder.lookup(key)
        if recorded is not None:
            if recorded.get("messages") not in (None, message_dicts(messages)):
                # Replay still answers from the record; a different prompt means the context or the code changed.
                log.warning("llm planner: the prompt of recorded call %s differs from the one built now", key)
            return recorded

        try:
            text, message, latency = invoke(messages)
            call = {**call_metadata(self.chat_model, message, latency), "response": text}
        except SetupError:
            raise
        except Exception as exc:  # a failed call is a failed round: recorded, then repaired or replaced by bo
            error = scrub_credentials(f"{type(exc).__name__}: {clip(exc, 300)}")
            log.warning("llm planner: model call %s failed: %s", key, error)
            call = {**call_metadata(self.chat_model, None, 0.0), "response": "", "error": error}
        call["messages"] = message_dicts(messages)
        recorder.record(key, call)
        return call

    def bo(self, context: PlanningContext):
        """The bo arm this planner is bounded by and measured against."""
        if self.bo_planner is None:
            from orchestrator.planner_registry import make_planner

            self.bo_planner = make_planner("bo", context.spec)
        return self.bo_planner

    def run_inputs(self, context: PlanningContext) -> LLMRunInputs:
        """What one ``propose`` on ``context`` hands its graph: the settings, the bo arm, the model (loaded on first
        use) and the recorder (the context's, else this planner's own)."""
        recorder = context.recorder if context.recorder is not None else self.recorder

        def recorded_call(key: str, messages: list, invoke) -> dict[str, Any]:
            return self.recorded_call(recorder, key, messages, invoke)

        return LLMRunInputs(
            arm=self.name, bo=self.bo(context), chat_model=lambda: self.chat_model, recorded_call=recorded_call,
            is_local_gguf=self._is_local_gguf(), restricts_to_shortlist=self._restricts(),
            max_repair_rounds=self.max_repair_rounds, max_tool_steps=self.max_tool_steps,
            shortlist_size=self.shortlist_size, max_prompt_chars=self.max_prompt_chars, simulate_fn=self.simulate_fn,
            warn_without_tools=not self._warned_tools, chooser=self.chooser(context), shown=self.shown_context,
            chooser_note=self.chooser_note,
        )

    chooser_note = ""

    def shown_context(self, context: PlanningContext) -> PlanningContext:
        """The state the model is shown (its DATA and tools), given the one bo plans on: the same, for this arm."""
        return context

    def chooser(self, context: PlanningContext):
        """What chooses in the model's place on ``context`` (``llm_graph.Chooser``); None: the model (this arm)."""
        return None

    # ----------------------------------------------------------------------------------------------- propose
    def planning_context(self, context: PlanningContext) -> PlanningContext:
        """The state this arm plans on (the ``llm-shuffled`` arm shuffles the lab results here)."""
        return context

    def anchor_count(self, context: PlanningContext, n: int) -> int:
        """How many of ``n`` proposals are bo's anchors.

        - The screen weighs several proposals per slot: one anchor per lab slot (``n // proposals_per_slot``), and
          the ladder's evidence decides which proposals reach the lab.
        - One proposal per slot: nothing checks a model pick before the lab does, so the lab arbitrates. bo's cold
          start (its initial design, before its GP is fitted) is all anchors: the conservative rule starts with the
          baseline, as no lab result has yet earned the slack an exploration slot spends. After it, the model
          gets one exploration slot per batch until its track record against the anchors shows, at 95 %
          credibility, that its picks beat bo's; then a seeded Thompson share (``model_share``). bo's top picks fill
          the rest, at least one slot. A context that does not track which
          results were whose (``provenance`` None, e.g. a direct call outside a campaign) gives no anchors.

        Example:
            >>> from types import SimpleNamespace
            >>> planner = LLMPlanner()
            >>> cold = SimpleNamespace(proposals_per_slot=1, provenance=(), utilities=(), surrogate_state=None)
            >>> untracked = SimpleNamespace(proposals_per_slot=1, provenance=None)
            >>> planner.anchor_count(SimpleNamespace(proposals_per_slot=3), 9), planner.anchor_count(cold, 4)
            (3, 4)
            >>> planner.anchor_count(untracked, 4)
            0
        """
        if not self.anchors:
            return 0
        per_slot = int(getattr(context, "proposals_per_slot", 1) or 1)
        if per_slot > 1:
            return n // per_slot
        if getattr(context, "provenance", None) is None:
            return 0
        from orchestrator.policy.planners.bo import has_fitted_surrogate
        from orchestrator.policy.planners.model_share import model_slots, track_record
        from orchestrator.seeding import derive_rng

        if not has_fitted_surrogate(context):
            return n

        block = int(getattr(getattr(getattr(context, "spec", None), "planner", None), "batch_size", 0) or n)
        wins, losses = track_record(context.provenance, context.utilities, block)
        self.track_record = (wins, losses)
        rng = derive_rng(context.seed, context.iteration, "plan", "llm-model-share")
        return n - model_slots(n, wins, losses, rng, block)

    def propose(self, context: PlanningContext, n: int) -> list[Proposal]:
        context = self.planning_context(context)
        n = min(int(n), len(context.available))
        if n <= 0:
            return []
        run = ProposeRun(self.run_inputs(context), context, n, self.anchor_count(context, n))
        graph = run.build_graph()
        self._warned_tools = self._warned_tools or run.has_warned_without_tools
        final = graph.invoke({}, {"recursion_limit": 20 + 2 * self.max_tool_steps + 3 * self.max_repair_rounds})
        self.last_run = {**run.summary(final), "track_record": self.track_record}
        return final["proposals"]


def shuffle_feedback(context: PlanningContext) -> PlanningContext:
    """The context with its lab results shuffled among the measured candidates: one seeded permutation (per seed and
    iteration) applied to ``utilities`` and ``values`` alike, so each tested candidate carries another one's result.

    The ``llm-shuffled`` arm shows the model this state (``shown_context``) while bo plans on the true one.

    Example:
        >>> import numpy as np
        >>> context = PlanningContext(spec=None, pool=None, iteration=3, available=np.arange(0), seed=0,
        ...     observed=np.array([5, 6, 7, 8]), utilities=np.array([1.0, 2.0, 3.0, 4.0]), pending=np.arange(0),
        ...     surrogate_state=None, values=np.array([10.0, 20.0, 30.0, 40.0]))
        >>> shuffled = shuffle_feedback(context)
        >>> shuffled.utilities.tolist() != [1.0, 2.0, 3.0, 4.0], sorted(shuffled.utilities.tolist())
        (True, [1.0, 2.0, 3.0, 4.0])
        >>> bool((shuffled.values == 10 * shuffled.utilities).all())
        True
    """
    from orchestrator.seeding import derive_rng

    n = len(context.utilities)
    if n < 2:
        return context
    order = derive_rng(context.seed, context.iteration, "plan", "llm-shuffled-feedback").permutation(n)
    values = None if context.values is None else np.asarray(context.values)[order]
    return dataclasses.replace(context, utilities=np.asarray(context.utilities)[order], values=values)


class ShuffledFeedbackLLMPlanner(LLMPlanner):
    """The ``llm-shuffled`` arm: the llm planner whose model is shown the lab results shuffled among the measured
    candidates (its history, and the predictions its tools condition on them); bo's shortlist, anchors, fallbacks and
    the model's track record plan on the true results.

    Compared with the ``llm`` arm on the same campaign, it shows whether the model uses the lab's answers at all:
    only what the model reads changes, so a model that ignores them does as well shuffled as not.

    Example:
        >>> ShuffledFeedbackLLMPlanner().name
        'llm-shuffled'
    """

    name = "llm-shuffled"

    def shown_context(self, context: PlanningContext) -> PlanningContext:
        return shuffle_feedback(context)
