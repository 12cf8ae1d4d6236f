"""Where the llm arm's model calls are recorded and answered from: ``LLMCallRecorder`` (the campaign backs it with
``LLMCall`` ledger events), ``InMemoryLLMRecorder`` for tests and notebooks, the calls' deterministic keys, and the
scrubbing of credentials from a failed call's message before it is recorded.

A recorded call is answered from the record and the model is not called, which is how crash-resume and replay work.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Protocol, runtime_checkable

from vocabulary.domain import redact_urls_in

__all__ = ["InMemoryLLMRecorder", "LLMCallRecorder", "llm_call_key", "scrub_credentials"]


@runtime_checkable
class LLMCallRecorder(Protocol):
    """Where model calls are recorded and looked up (the campaign backs it with ``LLMCall`` ledger events).

    ``call`` is JSON-safe: ``model``, ``parameters`` (temperature, seed, max_tokens, base_url; never a key),
    ``messages`` (``{"role", "content"}`` dicts), ``response`` (the raw text), ``n_prompt_tokens``,
    ``n_completion_tokens``, ``latency_s``, and ``error`` when the call raised.
    """

    def lookup(self, key: str) -> dict[str, Any] | None: ...

    def record(self, key: str, call: dict[str, Any]) -> None: ...


class InMemoryLLMRecorder:
    """A recorder in a dict, for tests and notebooks.

    Example:
        >>> recorder = InMemoryLLMRecorder()
        >>> recorder.record("it0:llm:0", {"response": "{}"})
        >>> recorder.lookup("it0:llm:0"), recorder.lookup("it0:llm:1")
        ({'response': '{}'}, None)
    """

    def __init__(self) -> None:
        self.calls: dict[str, dict[str, Any]] = {}

    def lookup(self, key: str) -> dict[str, Any] | None:
        return self.calls.get(key)

    def record(self, key: str, call: dict[str, Any]) -> None:
        self.calls[key] = json.loads(json.dumps(call))  # what a ledger would store: JSON, not live objects


def llm_call_key(iteration: int, k: int) -> str:
    """The deterministic key of the k-th model call of an iteration."""
    return f"it{iteration}:llm:{k}"


def scrub_credentials(text: str) -> str:
    """Remove anything that looks like a credential from an error message before it is recorded or logged."""
    for name, value in os.environ.items():
        if value and len(value) >= 6 and name.endswith(("_API_KEY", "_TOKEN", "_SECRET")):
            text = text.replace(value, "***")
    return re.sub(r"\b(sk|pk|key)-[A-Za-z0-9_\-]{6,}", r"\1-***", redact_urls_in(text))
