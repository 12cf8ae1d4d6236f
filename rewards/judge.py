"""The ``llm_judge`` scorer: any LangChain chat model (the embedded SmolLM2 included) judges one atomic criterion.

The judge writes its reason before its verdict (``{"reason": ..., "verdict": "yes" | "no"}``, in that order), so
the verdict is conditioned on the reasoning. A reply that does not parse is an error (``JudgeParseError``), never a
zero. Inputs known to fool judges (``":"``, ``"Thought process:"``, padding, garbage; see
``programmatic.rationale_problem``) are scored -1 without asking the model: a judge is only as good as what it is
shown.

Models are named by a criterion's ``params.model`` (default ``"embedded"``). The orchestrator installs the loader
(``set_model_loader``) that turns a name into a chat model; tests and notebooks register ready-made models with
``use_judge_model(name, model)``. Answers are cached per (model, prompt) for the process. Inside
``recording(known)``, answers are first looked up in ``known`` (call key -> reply, e.g. from the ledger's
``LLMCall`` events) and every new call is collected, so the orchestrator can record it and a replay never asks again.

Example:
    >>> from rewards.context import StepContext
    >>> from types import SimpleNamespace
    >>> step = StepContext(stage="proposal", subject="x", arm="llm", is_valid=True, rationale=":")
    >>> llm_judge(step, criterion=SimpleNamespace(id="c", text="The rationale is specific.", params={})).value
    -1.0
    >>> parse_verdict('{"reason": "cites gaff", "verdict": "yes"}').value
    1.0
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rewards.context import ScoreValue, StepContext
from rewards.errors import RewardSetupError, ScoringError
from rewards.programmatic import rationale_problem

__all__ = ["BUILTINS", "JudgeCall", "JudgeParseError", "VERDICT_SCHEMA", "call_key", "judge_messages", "llm_judge",
           "parse_verdict", "recording", "set_model_loader", "use_judge_model"]

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reason": {"type": "string", "minLength": 1, "maxLength": 400},
                   "verdict": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["reason", "verdict"],
}
"""The judge's answer: the reason first, then the verdict (property order is generation order)."""

_MODELS: dict[str, Any] = {}
_LOADER: Callable[[str], Any] | None = None
_ANSWERS: dict[tuple[str, str], str] = {}
_RECORDING: list[dict[str, Any]] = []
"""The active ``recording`` scopes: each {"known": {key: reply}, "calls": [JudgeCall, ...]}."""


class JudgeCall(dict):
    """One judge call as recorded: key, model, messages (role/content dicts), response, latency_s."""


def call_key(model: str, messages: list[tuple[str, str]]) -> str:
    """A deterministic key for one judge call: ``judge:<model>:<sha256 of the messages, 16 hex>``."""
    digest = hashlib.sha256(json.dumps(messages).encode()).hexdigest()[:16]
    return f"judge:{model}:{digest}"


@contextmanager
def recording(known: dict[str, str]) -> Iterator[list[JudgeCall]]:
    """Answer judge calls from ``known`` (call key -> reply) first; yield the list the new calls are appended to."""
    scope: dict[str, Any] = {"known": dict(known), "calls": []}
    _RECORDING.append(scope)
    try:
        yield scope["calls"]
    finally:
        _RECORDING.remove(scope)


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


def llm_judge(context: StepContext, *, criterion: Any) -> ScoreValue | None:
    """Ask the judge model whether the criterion's statement holds for this proposal-stage step."""
    if context.stage not in ("proposal", "screen") or not context.is_valid:
        return None
    problem = rationale_problem(" ".join(p for p in (context.hypothesis, context.rationale) if p.strip()))
    if problem:
        return ScoreValue(value=-1.0, reason=f"not shown to the judge: {problem}")
    name = str((getattr(criterion, "params", None) or {}).get("model", "embedded"))
    messages = judge_messages(context, criterion.text)
    return parse_verdict(_answer(name, messages))


def _answer(name: str, messages: list[tuple[str, str]]) -> str:
    key = call_key(name, messages)
    scope = _RECORDING[-1] if _RECORDING else None
    if scope is not None and key in scope["known"]:
        return scope["known"][key]
    cache_key = (name, json.dumps(messages))
    started = time.perf_counter()
    is_new = cache_key not in _ANSWERS
    if is_new:
        _ANSWERS[cache_key] = _ask(_model(name), messages)
    reply = _ANSWERS[cache_key]
    if scope is not None:
        scope["known"][key] = reply
        scope["calls"].append(JudgeCall(key=key, model=name, response=reply,
                                        messages=[{"role": role, "content": text} for role, text in messages],
                                        latency_s=time.perf_counter() - started if is_new else None))
    return reply


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
