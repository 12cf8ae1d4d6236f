"""A chat model's prior over the pool as a rung of the ladder: the model writes what it expects each candidate's
lab value to be, from what it knows, and the ladder treats that like any proxy rung.

This is the llm arm's lever with headroom (issue 51): instead of choosing between bo's next two candidates, the
model scores every candidate once. The ladder then does with the scores what it does with a cheap simulator
(``orchestrator/policy/DECISIONS.md``): the rung-ranked cold start, a prior mean calibrated against the lab pairs as
they arrive, a share of each batch matched to the evidence that the rung is informative, and nothing once the pairs
rule it out. So a model that knows the chemistry saves lab experiments, and one that does not costs the few the
calibration needs to drop it. Switch it on in a spec with a rung::

    [[ladder]]
    name = "model_prior"
    simulator = "llm_prior"
    property = "expected"
    proxy = "expected"
    parameters = { target = "toughness", unit = "J", model = "embedded" }

Candidates are scored ``batch`` at a time in one structured call (a JSON array of exactly that many numbers; a
local model's grammar enforces it), shown by their text (SMILES, formula or ``name=value`` pairs) and nothing
else: no lab value, no rung value. Its ceiling is the same rung holding the truth (``benchmarks/llm_bracket.py``).

Example:
    >>> simulator = LLMPriorSimulator(target="solubility", unit="log mol/L")
    >>> simulator.name, simulator.implemented_properties, sorted(simulator.parameters)
    ('llm_prior', ('expected',), ['batch', 'model', 'target', 'unit'])
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from simulators.base import AnyCandidate, BaseSimulator
from vocabulary.domain import Observation

__all__ = ["COIN", "ORACLE", "LLMPriorSimulator", "prior_messages", "set_oracle_truth"]

COIN = "coin"
"""``model = "coin"``: a seeded uniform number per candidate in [0, 1), knowing nothing (the lever's floor, the
``llm-random`` arm's prior)."""
ORACLE = "oracle"
"""``model = "oracle"``: the lab's truth per candidate, given by a benchmark (``set_oracle_truth``; the lever's
ceiling, the ``llm-oracle`` arm's prior). A campaign never has it."""

_ORACLE_TRUTH: dict[str, float] = {}
_ANSWERS: dict[tuple, tuple[tuple[float | None, ...], None]] = {}
"""The chat model's usable answers in this process, per (model, target, unit, the batch's texts): at temperature 0
the same call gives the same answer, so the bench's campaigns on one pool survey it once per worker."""


def set_oracle_truth(truth: dict[str, float]) -> None:
    """Give ``model = "oracle"`` the lab's truth per candidate id in this process (a benchmark's own)."""
    _ORACLE_TRUTH.clear()
    _ORACLE_TRUTH.update({str(k): float(v) for k, v in truth.items()})

SECONDS_PER_CANDIDATE = 0.5
"""Charged compute per candidate scored (the embedded SmolLM2-135M on one CPU thread, batches of 10: about 5 s a
call, measured by benchmarks/llm_bracket.py; a provider model's cost is its latency, which this does not model)."""

SYSTEM = ("You are an expert experimental scientist. From what you know, estimate the measured value of a property "
          "for each candidate. Answer only with the JSON asked for.")


def prior_messages(texts: Sequence[str], target: str, unit: str) -> list[dict[str, str]]:
    """The system and user messages asking for one estimate of ``target`` per candidate text, in order."""
    listing = "\n".join(f"- {text}" for text in texts)  # unnumbered: small models copy list numbers as answers
    unit_text = f" in {unit}" if unit else ""
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Estimate {target}{unit_text} for each of these {len(texts)} candidates:\n"
                                        f"{listing}\nAnswer {{\"values\": [...]}} with {len(texts)} numbers in order."}]


class LLMPriorSimulator(BaseSimulator):
    """The chat model's estimate of ``target`` (property ``expected``, in ``unit``) for any candidate.

    Args:
        target: what is measured, in words (the objective's property or a longer description).
        unit: its unit, shown to the model.
        model: ``embedded`` (default), a ``.gguf`` path or ``provider:model`` (``llm_models.load_chat_model``);
            ``coin`` for seeded random numbers (``COIN``), ``oracle`` for the truth a benchmark gives (``ORACLE``).
        batch: candidates per model call.
        seed: the coin's seed (the campaign's); unused otherwise.
    """

    name = "llm_prior"
    version = "1"
    fidelity = 0
    implemented_properties = ("expected",)
    applies_to = frozenset({"molecule", "material", "conditions"})

    def __init__(self, target: str = "the objective", unit: str = "", model: str = "embedded", batch: int = 10,
                 seed: int = 0):
        self.target, self.unit, self.model, self.batch, self.seed = target, unit, model, int(batch), int(seed)
        self.parameters = {"target": target, "unit": unit, "model": model, "batch": self.batch,
                           **({"seed": self.seed} if model == COIN else {})}
        self._chat_model = None
        self._truth = dict(_ORACLE_TRUTH) if model == ORACLE else {}  # travels with the simulator to a worker
        if model == ORACLE and not self._truth:
            raise ValueError("model 'oracle' reads the lab's truth and exists only in benchmarks (closedloop bench "
                             "--arms llm-oracle); use 'embedded', a .gguf path or 'provider:model'")

    def cost_model(self, candidate: AnyCandidate) -> float:
        return SECONDS_PER_CANDIDATE

    def calculate(self, candidate: AnyCandidate) -> dict[str, float]:
        [observation] = self.evaluate([candidate])
        return dict(observation.properties)

    def evaluate(self, candidates: Sequence[AnyCandidate]) -> list[Observation]:
        """One observation per candidate: ``batch`` candidates per model call; a call whose answer does not parse
        fails its candidates (with the reason), never the others."""
        out: list[Observation] = []
        for start in range(0, len(candidates), self.batch):
            chunk = list(candidates[start:start + self.batch])
            values, reason = self._scores(chunk)
            for candidate, value in zip(chunk, values, strict=True):
                common = {"candidate_id": candidate.id, "source": self.name, "source_version": self.version,
                          "fidelity": self.fidelity, "cost_s": SECONDS_PER_CANDIDATE, "parameters": self.parameters}
                if value is None:
                    out.append(Observation(status="failed", reason=reason or "no number for it", **common))
                else:
                    out.append(Observation(properties={"expected": value}, **common))
        return out

    def _scores(self, chunk: list[AnyCandidate]) -> tuple[list[float | None], str | None]:
        if self.model == COIN:
            from orchestrator.seeding import derive_rng

            return [float(derive_rng(self.seed, "llm-prior-coin", c.id).random()) for c in chunk], None
        if self.model == ORACLE:
            values = [self._truth.get(c.id) for c in chunk]
            return values, None if all(v is not None for v in values) else "the benchmark gave no truth for it"
        from orchestrator.space.pool import describe

        key = (self.model, self.target, self.unit, tuple(describe(c) for c in chunk))
        if key in _ANSWERS:
            values, reason = _ANSWERS[key]
            return list(values), reason
        values, reason = self._ask(chunk)
        if reason is None:  # a failed call may be the network's: asked again next time
            _ANSWERS[key] = (tuple(values), reason)
        return values, reason

    def _ask(self, chunk: list[AnyCandidate]) -> tuple[list[float | None], str | None]:
        from langchain_core.messages import HumanMessage, SystemMessage

        from orchestrator.policy.planners.llm_models import (
            load_chat_model,
            structured_invoke,
        )
        from orchestrator.space.pool import describe

        if self._chat_model is None:
            self._chat_model = load_chat_model(None if self.model == "embedded" else self.model, temperature=0.0)
        k = len(chunk)
        schema = {"title": "estimates", "description": f"one estimate of {self.target} per candidate, in order",
                  "type": "object", "required": ["values"],
                  "properties": {"values": {"type": "array", "minItems": k, "maxItems": k,
                                            "items": {"type": "number"}}}}
        kinds = {"system": SystemMessage, "user": HumanMessage}
        messages = [kinds[m["role"]](content=m["content"])
                    for m in prior_messages([describe(c) for c in chunk], self.target, self.unit)]
        try:
            text, _, _ = structured_invoke(self._chat_model, messages, schema, min_tokens=16 * k + 32)
            values = json.loads(text)["values"]
        except Exception as exc:  # noqa: BLE001 - a failed call fails its candidates, recorded with the reason
            return [None] * k, f"the model's answer was unusable: {type(exc).__name__}: {str(exc)[:200]}"
        numbers = [float(v) if isinstance(v, int | float) and math.isfinite(float(v)) else None for v in values[:k]]
        return numbers + [None] * (k - len(numbers)), None if len(numbers) == k else "the answer had too few numbers"
