"""Chat-model calls recorded in the ledger: the llm arm looks a call up before making it.

A call found in the ledger is answered from there, so a resumed step, an exact replay or a what-if replay never calls
the model again unless asked to.
"""

from __future__ import annotations

from typing import Any

from vocabulary.events import LLMCall

__all__ = ["LedgerLLMRecorder"]


class LedgerLLMRecorder:
    """``LLMCallRecorder`` backed by the campaign ledger (one ``LLMCall`` event per call)."""

    def __init__(self, ledger, campaign_id: str, iteration: int):
        self.ledger, self.campaign_id, self.iteration = ledger, campaign_id, iteration

    def lookup(self, key: str) -> dict[str, Any] | None:
        for event in self.ledger.events(self.campaign_id, types=[LLMCall.type]):
            if event.payload["key"] == key:
                return dict(event.payload)
        return None

    def record(self, key: str, call: dict[str, Any]) -> None:
        fields = {name: call.get(name) for name in
                  ("model", "parameters", "messages", "response", "n_prompt_tokens", "n_completion_tokens", "latency_s",
                   "error")}
        fields["parameters"] = fields["parameters"] or {}
        self.ledger.append(self.campaign_id, LLMCall(iteration=self.iteration, key=key, **fields),
                           key=f"llm-call:{key}", actor=f"llm:{fields['model']}")
