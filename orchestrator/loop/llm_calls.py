"""Chat-model calls recorded in the ledger: the llm arm looks a call up before making it.

A call found in the ledger is answered from there, so a resumed step, an exact replay or a what-if replay never calls
the model again unless asked to. The calls recorded so far come from the campaign's view (``view.calls``); a call
recorded in this step joins them at once.
"""

from __future__ import annotations

from typing import Any

from vocabulary.events import LLMCall

__all__ = ["LedgerLLMRecorder"]


class LedgerLLMRecorder:
    """``LLMCallRecorder`` backed by the campaign ledger (one ``LLMCall`` event per call).

    ``known`` maps call keys to recorded ``LLMCall`` payloads (the view's ``RecordedCalls.by_key``).
    """

    def __init__(self, ledger, campaign_id: str, iteration: int, *, known: dict[str, dict[str, Any]]):
        self.ledger, self.campaign_id, self.iteration = ledger, campaign_id, iteration
        self.known = known

    def lookup(self, key: str) -> dict[str, Any] | None:
        found = self.known.get(key)
        return dict(found) if found is not None else None

    def record(self, key: str, call: dict[str, Any]) -> None:
        fields = {name: call.get(name) for name in
                  ("model", "parameters", "messages", "response", "n_prompt_tokens", "n_completion_tokens", "latency_s",
                   "error")}
        fields["parameters"] = fields["parameters"] or {}
        payload = LLMCall(iteration=self.iteration, key=key, **fields)
        self.ledger.append(self.campaign_id, payload, key=f"llm-call:{key}", actor=f"llm:{fields['model']}")
        self.known.setdefault(key, payload.model_dump(mode="json"))
