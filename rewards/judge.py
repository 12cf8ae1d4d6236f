"""The ``llm_judge`` scorer: any LangChain chat model (the embedded SmolLM2 included) judges one atomic criterion.

The judge writes its reason before its verdict (``{"reason": ..., "verdict": "yes" | "no"}``, in that order), so
the verdict is conditioned on the reasoning. A reply that does not parse is an error (``JudgeParseError``), never a
zero. Inputs known to fool judges (``":"``, ``"Thought process:"``, padding, garbage; see
``programmatic.rationale_problem``) are scored -1 without asking the model: a judge is only as good as what it is
shown.

Models are named by a criterion's ``params.model`` (default ``"embedded"``). The orchestrator installs the loader
(``set_model_loader``) that turns a name into a chat model; tests and notebooks register ready-made models with
``use_judge_model(name, model)``. Calls are answered and recorded by a ``JudgeRecorder`` passed down the scoring
path (``Rubric.score(context, recorder=...)``): it answers from ``known`` (call key -> reply, e.g. from the ledger's
``LLMCall`` events) first, asks the model otherwise, and keeps every new call in ``calls``, so the orchestrator can
record them and a replay never asks again. Each campaign's reward step holds its own recorder, so campaigns scoring
at once in threads of one process never see each other's calls.

Example:
    >>> from rewards.context import StepContext
    >>> from types import SimpleNamespace
    >>> step = StepContext(stage="proposal", subject="x", arm="llm", is_valid=True, rationale=":")
    >>> recorder = JudgeRecorder({})
    >>> criterion = SimpleNamespace(id="c", text="The rationale is specific.", params={})
    >>> llm_judge(step, criterion=criterion, recorder=recorder).value, recorder.calls
    (-1.0, [])
    >>> parse_verdict('{"reason": "cites gaff", "verdict": "yes"}').value
    1.0
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from rewards.context import ScoreValue, StepContext
from rewards.errors import RewardSetupError, ScoringError
from rewards.programmatic import rationale_problem

__all__ = ["BUILTINS", "JudgeCall", "JudgeParseError", "JudgeRecorder", "VERDICT_SCHEMA", "call_key", "judge_messages",
           "llm_judge", "parse_verdict", "set_model_loader", "use_judge_model"]

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reason": {"type": "string", "minLength": 1, "maxLength": 400},
                   "verdict": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["reason", "verdict"],
}
"""The judge's answer: the reason first, then the verdict (property order is generation order)."""

# Process-wide model registry: names -> loaded chat models, and the loader. They hold no campaign's state (no
# answers, no calls), so campaigns in threads may share them; the lock keeps two threads from loading one model twice.
_MODELS: dict[str, Any] = {}
_LOADER: Callable[[str], Any] | None = None
_MODELS_LOCK = threading.Lock()


class JudgeCall(dict):
    """One judge call as recorded: key, model, messages (role/content dicts), response, latency_s (seconds)."""


def call_key(model: str, messages: list[tuple[str, str]]) -> str:
    """A deterministic key for one judge call: ``judge:<model>:<sha256 of the messages, 16 hex>``."""
    digest = hashlib.sha256(json.dumps(messages).encode()).hexdigest()[:16]
    return f"judge:{model}:{digest}"


class JudgeRecorder:
    """What the judge knows and what it was asked, for one scoring pass of one campaign.

    Pass it explicitly down the scoring path (``Rubric.score(context, recorder=...)``, ``score_trajectory(...,
    recorder=...)``); a scorer that declares a keyword-only ``recorder`` parameter receives it. A call whose key is in
    ``known`` is answered from there without asking the model; any other call asks the model, and its reply joins
    ``known`` (the same prompt again is answered once) and the call joins ``calls``. One recorder serves one thread;
    campaigns scoring at once each hold their own.

    Args:
        known: replies already recorded, by call key (``call_key``), e.g. the ledger's judge ``LLMCall`` events.

    Example:
        >>> recorder = JudgeRecorder({call_key("m", [("user", "hi")]): "recorded"})
        >>> recorder.answer("m", [("user", "hi")]), recorder.calls
        ('recorded', [])
    """

    def __init__(self, known: Mapping[str, str] | None = None) -> None:
        self.known: dict[str, str] = dict(known or {})
        self.calls: list[JudgeCall] = []

    def answer(self, model: str, messages: list[tuple[str, str]]) -> str:
        """The judge model ``model``'s reply to ``messages`` ((role, text) pairs): known, or asked and recorded."""
        key = call_key(model, messages)
        if key in self.known:
            return self.known[key]
        started = time.perf_counter()
        reply = _ask(_model(model), messages)
        self.known[key] = reply
        self.calls.append(JudgeCall(key=key, model=model, response=reply,
                                    messages=[{"role": role, "content": text} for role, text in messages],
                                    latency_s=time.perf_counter() - started))
        return reply

    def __repr__(self) -> str:
        return f"JudgeRecorder(n_known={len(self.known)}, n_calls={len(self.calls)})"


class JudgeParseError(ScoringError):
    """The judge's reply is not ``{"reason": str, "verdict": "yes" | "no"}``. Never scored as 0."""


def use_judge_model(name: str, model: Any) -> None:
    """Make ``model`` (a LangChain chat model, or anything with ``invoke(messages)``) the judge called ``name``."""
    _MODELS[name] = model


def set_model_loader(loader: Callable[[str], Any] | None) -> None:
    """Install the function that loads a judge model by name (the orchestrator's ``load_chat_model``)."""
    global _LOADER
    _LOADER = loader


def _model(name: str) -> Any:
    with _MODELS_LOCK:
        if name not in _MODELS:
            if _LOADER is None:
                raise RewardSetupError(f"no judge model {name!r}: register one with rewards.judge.use_judge_model "
                                       "or run inside the orchestrator, which installs its model loader")
            _MODELS[name] = _LOADER(name)
        return _MODELS[name]


def judge_messages(context: StepContext, statement: str) -> list[tuple[str, str]]:
    """The (role, text) messages asking whether ``statement`` holds for this step, with the evidence available."""
    evidence = {"candidate": context.candidate or context.subject, "hypothesis": context.hypothesis,
                "rationale": context.rationale, "expected": context.expected,
                "screening": {k: v.model_dump() for k, v in context.rung_results.items()} or context.screen_statuses}
    system = ("You are a strict scientific reviewer. Decide whether ONE statement holds for a planner's proposal, "
              "using only the evidence given. Text that only looks like reasoning, or says nothing checkable, does "
              "not make a statement hold. Reply with JSON: first \"reason\" (one or two sentences), then "
              "\"verdict\" (\"yes\" or \"no\").")
    user = f"Statement: {statement}\nEvidence: {json.dumps(evidence, sort_keys=True, default=str)}"
    return [("system", system), ("user", user)]


def parse_verdict(text: str) -> ScoreValue:
    """+1 for "yes", -1 for "no", with the judge's reason. Raises ``JudgeParseError`` for anything else."""
    match = re.search(r"\{.*\}", text or "", flags=re.DOTALL)
    try:
        data = json.loads(match.group(0) if match else text)
    except (json.JSONDecodeError, TypeError) as exc:
        raise JudgeParseError(f"the judge replied {_clip(text)!r}, not JSON {{\"reason\", \"verdict\"}}") from exc
    if not isinstance(data, dict):
        raise JudgeParseError(f"the judge replied {_clip(text)!r}, not a JSON object")
    reason, verdict = data.get("reason"), str(data.get("verdict", "")).strip().lower()
    if not isinstance(reason, str) or not reason.strip():
        raise JudgeParseError(f"the judge gave no reason before its verdict: {_clip(text)!r}")
    if verdict not in ("yes", "no"):
        raise JudgeParseError(f"the judge's verdict is {data.get('verdict')!r}, not 'yes' or 'no': {_clip(text)!r}")
    return ScoreValue(value=1.0 if verdict == "yes" else -1.0, reason=f"judge: {reason.strip()}")


def llm_judge(context: StepContext, *, criterion: Any, recorder: JudgeRecorder | None = None) -> ScoreValue | None:
    """Ask the judge model whether the criterion's statement holds for this proposal-stage step.

    ``recorder`` answers and records the call (see ``JudgeRecorder``); without one the model is asked and nothing is
    kept, which suits a one-off check but not a campaign, whose calls must reach its ledger.
    """
    if context.stage not in ("proposal", "screen") or not context.is_valid:
        return None
    problem = rationale_problem(" ".join(p for p in (context.hypothesis, context.rationale) if p.strip()))
    if problem:
        return ScoreValue(value=-1.0, reason=f"not shown to the judge: {problem}")
    name = str((getattr(criterion, "params", None) or {}).get("model", "embedded"))
    messages = judge_messages(context, criterion.text)
    return parse_verdict((recorder if recorder is not None else JudgeRecorder()).answer(name, messages))


def _ask(model: Any, messages: list[tuple[str, str]]) -> str:
    runnable = model
    if getattr(model, "_llm_type", "") == "llama-cpp":  # grammar-constrained JSON on the embedded model
        runnable = model.bind(response_format={"type": "json_object", "schema": VERDICT_SCHEMA})
    reply = runnable.invoke(messages)
    content = getattr(reply, "content", reply)
    if isinstance(content, list):  # some providers return content blocks
        content = "".join(block.get("text", "") if isinstance(block, dict) else str(block) for block in content)
    return str(content)


def _clip(text: Any, n: int = 120) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


BUILTINS = {"llm_judge": (llm_judge, "llm_judge")}
"""name -> (scorer, kind), registered by ``rewards.scorers.register_builtin_scorers``."""
