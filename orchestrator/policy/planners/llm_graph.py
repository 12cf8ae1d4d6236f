"""One ``propose`` call of the llm arm as a LangGraph graph: the nodes ``gather``, ``agent``/``tools``,
``propose``, ``validate``, ``repair``, ``fallback`` and ``finish`` (``orchestrator.policy.planners.llm`` draws the
graph and says what each node does), closing over the planning context, the arm's inputs (``LLMRunInputs``) and
its tools. The planner hands its settings, its bo arm and its model over as ``LLMRunInputs``, so this module does
not know ``LLMPlanner``.

It also holds the prompt-size constants of local GGUF models. LangGraph and LangChain are imported when a graph is
built, never at import time.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from orchestrator.policy.planners.base import Planner, PlanningContext
from orchestrator.policy.planners.llm_prompt import (
    MAX_PROMPT_CHARS,
    SYSTEM_PROMPT,
    ProposalBatch,
    data_block,
    fit_to_budget,
    repair_message,
    response_schema,
    task_message,
)
from orchestrator.policy.planners.llm_recording import llm_call_key
from orchestrator.policy.planners.llm_tools import PlanningTools, SimulateFn, clip
from orchestrator.seeding import derive_rng
from vocabulary.domain import InvalidCandidate, Proposal

__all__ = ["LOCAL_PROMPT_CHARS", "Chooser", "LLMRunInputs", "ProposeRun", "RecordedCall"]

log = logging.getLogger(__name__)

N_SIMILAR = 2  # shortlist entries whose tested neighbours go into the prompt
K_SIMILAR = 2
# Local GGUF models write one bounded hypothesis per batch (llm_prompt.HYPOTHESIS_PATTERN) and candidates and
# expected values per pick: SmolLM2-135M filled 48-character hypothesis and rationale fields per proposal with SMILES
# fragments and digit runs (about 40 tokens each, half a step's CPU).
GRAMMAR_TEXT_CHARS = 0
FREE_TEXT_CHARS = 300
TOKENS_PER_PROPOSAL = 160  # an upper bound for one grammar-constrained proposal (about 25 tokens without texts)
TOKENS_PER_HYPOTHESIS = 80  # the 60-character batch hypothesis
LOCAL_PROMPT_CHARS = 2000
"""Prompt budget of local GGUF models: llama.cpp on one CPU thread reads about 130 prompt tokens a second, and
SMILES take about one token per 1.3 characters, so the prompt is most of a planning step's cost."""
LOCAL_HISTORY = (3, 2)  # best and worst lab results shown to local models

Chooser = Callable[["ProposeRun", list[str], int], list[str]]
"""``chooser(run, labels, need) -> labels``: picks ``need`` distinct shortlist labels from ``labels`` (the rows shown
to the model, in shown order, less those already accepted) wherever the model would choose: the bracket arms
(``llm_bracket``) choose by a seeded coin or by the lab's truth instead of a model call."""

RecordedCall = Callable[[str, list, Callable[[list], tuple[str, Any, float]]], dict[str, Any]]
"""``recorded_call(key, messages, invoke)``: the call recorded under ``key``, or a new one made by
``invoke(messages) -> (text, message, latency_s)`` and recorded (``LLMPlanner.recorded_call``)."""


@dataclasses.dataclass(frozen=True)
class LLMRunInputs:
    """What one ``propose`` call of the llm arm takes from its planner (``LLMPlanner.run_inputs``)."""

    arm: str
    """The arm's name, written on every proposal."""
    bo: Planner
    """The bo arm that builds the shortlist, fills fallbacks and gives the anchors."""
    chat_model: Callable[[], Any]
    """Returns the chat model, loading it on first call (never called when every call is answered from the record)."""
    recorded_call: RecordedCall
    """Answers a model call from the record, or makes and records it."""
    is_local_gguf: bool
    """A local llama.cpp model: a grammar, a soft prompt budget, shorter texts, no tool calls."""
    restricts_to_shortlist: bool
    """``candidate`` is an enum of shortlist ids in the answer schema."""
    max_repair_rounds: int
    max_tool_steps: int
    shortlist_size: int | None
    max_prompt_chars: int | None
    simulate_fn: SimulateFn | None = None
    warn_without_tools: bool = True
    """Log once that ``max_tool_steps`` needs a tool-calling model when this one is not (False: already said)."""
    shown: Callable[[PlanningContext], PlanningContext] | None = None
    """The state the model's DATA and tools are built from, given the one bo plans on (``llm-shuffled``: its lab
    results shuffled); None: the same state."""
    chooser: Chooser | None = None
    """Chooses in the model's place (no model call, no tools); None: the model chooses."""
    chooser_note: str = ""
    """The rationale written on a chooser's picks (what chose them)."""


class ProposeRun:
    """The graph and its nodes for one ``propose`` call (nodes close over the context, the inputs and the tools).

    ``n_total`` proposals are returned: ``n_anchor`` of them bo's anchors, ``n`` (the rest) the model's picks.
    """

    def __init__(self, inputs: LLMRunInputs, context: PlanningContext, n_total: int, n_anchor: int = 0):
        self.inputs = inputs
        self.has_warned_without_tools = False
        """Whether ``build_graph`` logged that this model does not call tools (the planner then says it only once)."""
        self.context = context
        self.n_total = n_total
        self.n_anchor = n_anchor
        self.n = n_total - n_anchor
        self.anchors: list[Proposal] = []
        self.anchored: set[int] = set()
        self.tools = PlanningTools(inputs.shown(context) if inputs.shown else context, inputs.simulate_fn)
        self.tested = frozenset(context.pool.ids[int(i)] for i in np.concatenate([context.observed, context.pending]))
        self.available = {int(i) for i in context.available}
        self.n_known = len(context.pool)  # open spaces: indices from here on were written by the model this call

    def build_graph(self):
        from langgraph.graph import END, START, StateGraph

        graph = StateGraph(_state_schema())
        graph.add_node("gather", self.gather)
        graph.add_node("propose", self.propose)
        graph.add_node("validate", self.validate)
        graph.add_node("repair", self.repair)
        graph.add_node("fallback", self.fallback)
        graph.add_node("finish", self.finish)
        graph.add_edge(START, "gather")
        chooses = self.inputs.chooser is None
        if chooses and self.inputs.max_tool_steps > 0 and not self._supports_tools() and self.inputs.warn_without_tools:
            self.has_warned_without_tools = True
            log.warning("llm planner: max_tool_steps=%d needs a model that calls tools (a provider model); this one "
                        "gets the tool results in its prompt instead", self.inputs.max_tool_steps)
        if self.n == 0:  # every slot is bo's anchor this time: no model call
            graph.add_edge("gather", "finish")
        elif chooses and self.inputs.max_tool_steps > 0 and self._supports_tools():
            from langgraph.prebuilt import ToolNode

            graph.add_node("agent", self.agent)
            graph.add_node("tools", ToolNode(self.lc_tools))
            graph.add_edge("gather", "agent")
            graph.add_conditional_edges("agent", self.after_agent, ["tools", "propose"])
            graph.add_edge("tools", "agent")
        else:
            graph.add_edge("gather", "propose")
        graph.add_edge("propose", "validate")
        graph.add_conditional_edges("validate", self.after_validate, ["repair", "fallback", "finish"])
        graph.add_edge("repair", "validate")
        graph.add_edge("fallback", "finish")
        graph.add_edge("finish", END)
        return graph.compile()

    def _supports_tools(self) -> bool:
        from langchain_core.language_models.chat_models import BaseChatModel

        if self.inputs.is_local_gguf:  # decided without loading the model
            return False
        return type(self.inputs.chat_model()).bind_tools is not BaseChatModel.bind_tools

    # ----------------------------------------------------------------------------------------------- gather
    def shortlist(self) -> list[int]:
        """Pool rows to show the model, in bo's order: bo's batch of ``n_total`` on this state, then the rest of
        its diversified batch of ``shortlist_size``, less the anchors (bo's first ``n_anchor``, kept as
        ``self.anchors``; the model cannot pick them). Records bo's batch as ``self.bo_picks``.

        When the lab arbitrates (one proposal per slot, some slots bo's anchors) and ``shortlist_size`` is not set,
        the model chooses its ``n`` picks from the ``2 n`` candidates that follow the anchors in bo's order: twice
        the picks it needs, as everywhere, and as a one-slot plan already gets (bo's first and second). Its
        exploration slot then costs at most the step from bo's next pick to the one after, not a draw from bo's
        whole second half."""
        bo = self.inputs.bo
        index = self.context.pool.index
        batch = bo.propose(self.context, self.n_total)
        self.bo_picks = [index[p.candidate.id] for p in batch]
        self.anchors = batch[: self.n_anchor]
        self.anchored = set(self.bo_picks[: self.n_anchor])
        self.available -= self.anchored
        size = max(self.inputs.shortlist_size or 2 * self.n_total, self.n_total)
        wider = [index[p.candidate.id] for p in bo.propose(self.context, size)] if size > len(self.bo_picks) else []
        rows = list(dict.fromkeys(self.bo_picks + wider))
        keep = size - self.n_anchor
        if self.lab_arbitrates and self.inputs.shortlist_size is None:
            keep = min(keep, 2 * self.n)
        return [i for i in rows if i in self.available][:keep]

    @property
    def lab_arbitrates(self) -> bool:
        """Whether only the lab weighs the model's picks against bo's anchors (one proposal per slot, with anchors)."""
        return self.n_anchor > 0 and int(getattr(self.context, "proposals_per_slot", 1) or 1) == 1

    def gather(self, state: dict) -> dict:
        """Shortlist the pool with bo, describe each row, shuffle the rows; the results become the prompt's DATA."""
        tools = self.tools
        ranked = self.shortlist()
        width = max(2, len(str(len(ranked) - 1)))
        provisional = {f"c{k:0{width}d}": index for k, index in enumerate(ranked)}  # bo's order, for trimming
        tools.set_labels(provisional)
        ids = list(provisional)

        local = self.inputs.is_local_gguf
        constraints = json.loads(tools.constraints())
        constraints.pop("n_available", None)  # history has the counts; constant text leads, so llama.cpp reuses its KV
        history = json.loads(tools.history(*LOCAL_HISTORY) if local else tools.history())
        predictions = {row["id"]: row for row in json.loads(tools.predict(ids)).get("predictions", [])}
        simulated = tools.simulate_values(ranked)
        novelty = dict(zip(ranked, tools.novelty(ranked), strict=True))

        value = tools.value_name
        sim_columns = sorted({key for row in simulated.values() for key in row})
        has_novelty = any(v is not None for v in novelty.values())
        columns = (["id", "candidate"] + ([f"pred_{value}", "sd"] if predictions else []) + (["novelty"] if has_novelty else [])
                   + sim_columns)
        rows = []
        for label, index in provisional.items():
            row: list[Any] = [label, tools.text(index)]
            if predictions:
                row += [predictions[label][f"pred_{value}"], predictions[label]["sd"]]
            if has_novelty:
                row.append(novelty[index])
            row += [simulated.get(index, {}).get(column) for column in sim_columns]
            rows.append(row)
        objective = constraints.pop("objective")  # trusted spec text: it goes into the task, outside DATA
        data = {
            "constraints": constraints,
            "history": history,
            "shortlist": {"columns": columns, "rows": rows},
        }
        system = SYSTEM_PROMPT
        free_form = not self.inputs.restricts_to_shortlist
        generate = self.context.spec.space.generate
        max_chars = self.inputs.max_prompt_chars or (LOCAL_PROMPT_CHARS if local else MAX_PROMPT_CHARS)
        budget = max_chars - len(system) - len(task_message(self.n, objective, {}, free_form=free_form,
                                                            generate=generate, batch_hypothesis=local))
        # Trim in bo's order (its weakest candidates go first), then shuffle what is shown.
        if local:  # a soft budget: the lab results stay even when 2 × batch rows already exceed it
            data = fit_to_budget(data, budget, min_rows=min(2 * self.n, len(rows)), droppable=())
        else:
            data = fit_to_budget(data, budget, min_rows=self.n)
        kept = data["shortlist"]["rows"]
        order = derive_rng(self.context.seed, self.context.iteration, "plan", "llm-shortlist-order").permutation(len(kept))
        labels: dict[str, int] = {}
        shown_rows = []
        for k, position in enumerate(order):
            row = list(kept[int(position)])
            labels[f"c{k:0{width}d}"] = provisional[row[0]]
            row[0] = f"c{k:0{width}d}"
            shown_rows.append(row)
        data["shortlist"]["rows"] = shown_rows
        tools.set_labels(labels)
        similar, similar_columns = {}, []
        for label in list(labels)[:N_SIMILAR]:  # the first rows shown, a seeded random choice
            found = json.loads(tools.similar(label, K_SIMILAR)).get("neighbours")
            if found:
                similar_columns = list(found[0])
                similar[label] = [list(row.values()) for row in found]
        if similar:
            with_similar = {**data, "similar": {"columns": similar_columns, "by_id": similar}}
            if len(data_block(with_similar)) <= budget:
                data = with_similar
        visible = list(labels)
        shown = data["shortlist"]["columns"][2:]
        self.shown_rows = {row[0]: dict(zip(shown, row[2:], strict=True)) for row in shown_rows}
        self.shown_labels = visible
        self.shortlist_bo_rank = {label: ranked.index(index) for label, index in labels.items()}
        prompt = [{"role": "system", "content": system},
                  {"role": "user", "content": task_message(self.n, objective, data, free_form=free_form, generate=generate,
                                                           batch_hypothesis=local)}]
        return {"prompt": prompt, "labels": visible, "n_calls": 0, "round": 0, "accepted": [], "errors": [], "steps": 0}

    # ----------------------------------------------------------------------------------------------- calls
    def _messages(self, state: dict, extra: list[dict] | None = None) -> list:
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

        kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
        messages = [kinds[m["role"]](content=m["content"]) for m in state["prompt"]]
        transcript = list(state.get("messages") or [])
        if transcript and getattr(transcript[-1], "tool_calls", None):
            transcript = transcript[:-1]  # tool calls left unanswered when the step cap was reached
        messages += transcript
        messages += [kinds[m["role"]](content=m["content"]) for m in extra or []]
        return messages

    def _structured_call(self, state: dict, extra: list[dict] | None = None) -> dict:
        from orchestrator.policy.planners.llm_models import structured_invoke

        restricted = self.inputs.restricts_to_shortlist
        need = self.n - len(state["accepted"])
        # Accepted ids leave the grammar's choices, so every repair round adds at least one distinct pick.
        taken = {self.tools.name(a["index"]) for a in state["accepted"]}
        ids = [label for label in state["labels"] if label not in taken]
        if self.inputs.chooser is not None:
            picks = self.inputs.chooser(self, ids, need)
            answer = {"proposals": [{"candidate": label, "hypothesis": "", "rationale": self.inputs.chooser_note,
                                     "expected": None} for label in picks]}
            return {"response": json.dumps(answer), "call_error": None, "n_calls": state["n_calls"],
                    "keys": list(state.get("keys", []))}
        local = self.inputs.is_local_gguf
        schema = response_schema(need, ids=ids if restricted else None,
                                 max_text_chars=GRAMMAR_TEXT_CHARS if local else FREE_TEXT_CHARS,
                                 new_candidates=self.context.spec.space.generate, batch_hypothesis=local)
        key = llm_call_key(self.context.iteration, state["n_calls"])
        min_tokens = TOKENS_PER_PROPOSAL * need + TOKENS_PER_HYPOTHESIS + 64
        call = self.inputs.recorded_call(key, self._messages(state, extra),
                                         lambda messages: structured_invoke(self.inputs.chat_model(), messages, schema,
                                                                            min_tokens=min_tokens))
        return {"response": call.get("response", ""), "call_error": call.get("error"), "n_calls": state["n_calls"] + 1,
                "keys": [*state.get("keys", []), key]}

    def propose(self, state: dict) -> dict:
        return self._structured_call(state)

    def repair(self, state: dict) -> dict:
        accepted = [self.tools.name(a["index"]) for a in state["accepted"]]
        show_answer = state["response"] and not self.inputs.is_local_gguf  # small models: fewer tokens
        extra = [{"role": "assistant", "content": clip(state["response"], 1500)}] if show_answer else []
        extra.append({"role": "user", "content": repair_message(self.n - len(state["accepted"]), state["errors"], accepted)})
        return {**self._structured_call(state, extra), "round": state["round"] + 1}

    # ----------------------------------------------------------------------------------------------- ReAct
    @property
    def lc_tools(self) -> list:
        if not hasattr(self, "_lc_tools"):
            self._lc_tools = self.tools.as_langchain_tools()
        return self._lc_tools

    def agent(self, state: dict) -> dict:
        """One ReAct step: the model may call tools; its tool calls are recorded like any other call."""
        from langchain_core.messages import AIMessage

        key = llm_call_key(self.context.iteration, state["n_calls"])

        def invoke(messages):
            import time

            start = time.perf_counter()
            message = self.inputs.chat_model().bind_tools(self.lc_tools).invoke(messages)
            text = json.dumps({"content": message.text if hasattr(message, "text") else str(message.content),
                               "tool_calls": [{"name": c["name"], "args": c["args"], "id": c.get("id")} for c in message.tool_calls]})
            return text, message, time.perf_counter() - start

        call = self.inputs.recorded_call(key, self._messages(state), invoke)
        try:
            answer = json.loads(call.get("response") or "{}")
        except json.JSONDecodeError:
            answer = {}
        tool_calls = [{"name": c["name"], "args": c.get("args") or {}, "id": c.get("id") or f"call_{state['n_calls']}_{k}",
                       "type": "tool_call"} for k, c in enumerate(answer.get("tool_calls") or [])]
        message = AIMessage(content=answer.get("content") or "", tool_calls=tool_calls)
        return {"messages": [message], "n_calls": state["n_calls"] + 1, "steps": state["steps"] + 1,
                "keys": [*state.get("keys", []), key]}

    def after_agent(self, state: dict) -> str:
        last = state["messages"][-1]
        return "tools" if last.tool_calls and state["steps"] < self.inputs.max_tool_steps else "propose"

    # ----------------------------------------------------------------------------------------------- validate
    def validate(self, state: dict) -> dict:
        """Parse the answer and apply the campaign's rules; keep the valid picks, collect the messages."""
        accepted = list(state["accepted"])
        need = self.n - len(accepted)
        if state.get("call_error"):
            return {"errors": [f"the model call failed ({clip(state['call_error'], 200)}); answer again with the JSON"]}
        try:
            batch = ProposalBatch.model_validate_json(state["response"])
        except ValueError as exc:
            return {"errors": [_parse_message(state["response"], exc)]}
        errors: list[str] = []
        seen = {self.context.pool.ids[a["index"]] for a in accepted}
        n_valid = 0
        for k, item in enumerate(batch.proposals):
            if n_valid == need:
                break
            error, index = self._check(item.candidate, seen)
            if error:
                errors.append(f"proposal {k + 1} ({clip(item.candidate, 60)!r}): {error}")
                continue
            seen.add(self.context.pool.ids[index])
            n_valid += 1
            expected = item.expected if item.expected is not None and math.isfinite(item.expected) else None
            hypothesis = (item.hypothesis or batch.hypothesis).strip()  # the model's own words, or none
            rationale = item.rationale.strip() or self._shown_note(index)
            accepted.append({"index": index, "hypothesis": clip(hypothesis, 500), "rationale": clip(rationale, 500),
                             "expected": expected, "round": state["round"]})
        if n_valid < need and not errors:
            errors.append(f"only {len(batch.proposals)} proposals were given; {need} are needed")
        return {"accepted": accepted, "errors": errors}

    def _check(self, ref: str, seen: set[str]) -> tuple[str | None, int]:
        """The campaign validator's message for one reference (or None) and its pool index."""
        from orchestrator.policy.proposal_checks import validation_error
        from vocabulary.events import Proposed

        try:
            index = self.tools.resolve(ref)
        except InvalidCandidate as exc:
            return str(exc), -1
        candidate = self.context.pool.candidates[index]
        proposed = Proposed(iteration=self.context.iteration, arm=self.inputs.arm, candidate_id=candidate.id,
                            candidate=candidate.model_dump(mode="json"))
        shim = _ValidatorContext(self.context.spec, self.context.pool)
        error = validation_error(shim, proposed, seen, self.tested)
        if error is None and index in self.anchored:
            error = f"{candidate.id} is already proposed as the surrogate's pick for a lab slot; choose another"
        elif error is None and index not in self.available and index < self.n_known:
            error = (f"{candidate.id} is not available this iteration (another arm proposed it, or it was rejected "
                     "before); propose another shortlist candidate")
        return error, index

    def _shown_note(self, index: int) -> str:
        """The planner's record of what the model was shown about its pick (where the model wrote no rationale);
        said to be the planner's, never the model's reasoning."""
        label = self.tools.name(index)
        row = getattr(self, "shown_rows", {}).get(label)
        if row is None:
            return "planner's note: the model named a candidate off the shortlist"
        facts = ", ".join(f"{clip(k, 24)}={v}" for k, v in row.items())
        note = f"planner's note: the model picked {label}, one of {len(self.shown_rows)} shortlist rows in random order"
        return note + (f"; shown {facts}" if facts else "")

    def after_validate(self, state: dict) -> str:
        if len(state["accepted"]) >= self.n:
            return "finish"
        if state["round"] < self.inputs.max_repair_rounds:
            return "repair"
        return "fallback"

    # ----------------------------------------------------------------------------------------------- finish
    def fallback(self, state: dict) -> dict:
        """Fill the rest of the batch from the bo arm, marked as fallbacks (the accepted picks count as pending)."""
        taken = [a["index"] for a in state["accepted"]] + sorted(self.anchored)
        rest = dataclasses.replace(
            self.context,
            available=np.asarray([i for i in self.context.available if int(i) not in set(taken)], dtype=int),
            pending=np.concatenate([np.asarray(self.context.pending, dtype=int), np.asarray(taken, dtype=int)]),
        )
        reason = "; ".join(state["errors"][:3]) or "no valid proposal"
        bo_picks = set(getattr(self, "bo_picks", ()))
        proposals = []
        for p in self.inputs.bo.propose(rest, self.n - len(state["accepted"])):
            proposals.append(p.model_copy(update={
                "arm": self.inputs.arm, "is_fallback": True,
                "is_bo_pick": self.context.pool.index[p.candidate.id] in bo_picks,
                "rationale": f"fallback: {p.rationale} (llm rounds exhausted: {clip(reason, 300)})",
            }))
        return {"fallbacks": proposals}

    def finish(self, state: dict) -> dict:
        pool = self.context.pool
        bo_picks = set(getattr(self, "bo_picks", ()))
        shown = list(getattr(self, "shown_labels", ()))
        position = {self.tools.labels[label]: k for k, label in enumerate(shown)}
        n_shown_bo = sum(1 for label in shown if self.tools.labels[label] in bo_picks)
        proposals = [
            Proposal(candidate=pool.candidates[a["index"]], arm=self.inputs.arm, hypothesis=a["hypothesis"],
                     rationale=a["rationale"], expected=a["expected"], is_bo_pick=a["index"] in bo_picks,
                     shown_position=position.get(a["index"]), n_shown=len(shown) or None,
                     n_shown_bo_picks=n_shown_bo if shown else None)
            for a in (state.get("accepted") or [])[: self.n]
        ]
        judge = "the screen" if int(getattr(self.context, "proposals_per_slot", 1) or 1) > 1 else "the lab"
        anchors = [p.model_copy(update={
            "arm": self.inputs.arm, "is_anchor": True, "is_bo_pick": True,
            "rationale": f"anchor: bo's pick for a lab slot, weighed by {judge} against the model's picks ({p.rationale})",
        }) for p in self.anchors]
        return {"proposals": proposals + anchors + list(state.get("fallbacks") or [])}

    def summary(self, final: dict) -> dict[str, Any]:
        accepted = final.get("accepted") or []
        return {
            "iteration": self.context.iteration,
            "keys": final.get("keys", []),
            "n_requested": self.n,
            "n_anchor": len(self.anchors),
            "n_valid_first_round": sum(1 for a in accepted if a["round"] == 0),
            "n_valid": len(accepted),
            "n_bo_picks": sum(1 for a in accepted if a["index"] in set(getattr(self, "bo_picks", ()))),
            "n_fallback": len(final.get("fallbacks") or []),
            "n_repair_rounds": final.get("round", 0),
            "errors": final.get("errors", []),
            "shortlist": {label: self.context.pool.ids[i] for label, i in self.tools.labels.items()},
            "shortlist_bo_rank": dict(getattr(self, "shortlist_bo_rank", {})),
            "bo_picks": [self.context.pool.ids[i] for i in getattr(self, "bo_picks", ())],
        }


@dataclasses.dataclass(frozen=True)
class _ValidatorContext:
    """What ``validation_error`` reads from the campaign context: the spec and the pool."""

    spec: Any
    pool: Any


def _parse_message(response: str, exc: Exception) -> str:
    if not response.strip():
        return 'the answer was empty; answer with one JSON object {"proposals": [...]}'
    if isinstance(exc, json.JSONDecodeError) or "json" in type(exc).__name__.lower() or "Invalid JSON" in str(exc):
        return f'the answer was not valid JSON ({clip(exc, 160)}); answer with one JSON object {{"proposals": [...]}}'
    return f"the answer does not follow the schema ({clip(exc, 200)}); each proposal needs candidate, hypothesis, rationale, expected"


def _state_schema():
    """The graph state (built on first use, so that importing this module does not import LangChain).

    prompt: the system and task messages, as role/content dicts. labels: shortlist ids shown to the model.
    messages: the ReAct transcript (tool-calling models only). steps: ReAct steps taken. n_calls: model calls so far
    this iteration (the next call's key is ``it{iteration}:llm:{n_calls}``). keys: recorder keys of the calls made
    or replayed. round: repair rounds done. response: the last structured answer, raw text. call_error: why the last
    call failed, if it did. accepted: valid picks so far (pool index, hypothesis, rationale, expected, round).
    errors: the validator's messages about the last answer. fallbacks: proposals filled in by the bo arm.
    proposals: the batch returned.
    """
    from typing import Annotated, TypedDict

    from langchain_core.messages import AnyMessage
    from langgraph.graph.message import add_messages

    return TypedDict("LLMPlannerState", {
        "prompt": list[dict],
        "labels": list[str],
        "messages": Annotated[list[AnyMessage], add_messages],
        "steps": int,
        "n_calls": int,
        "keys": list[str],
        "round": int,
        "response": str,
        "call_error": str | None,
        "accepted": list[dict],
        "errors": list[str],
        "fallbacks": list,
        "proposals": list,
    }, total=False)
