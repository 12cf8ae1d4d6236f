"""The llm arms' prior over the pool, on by default: a ``llm_prior`` rung the spec adds to the ladder (issue 51).

``planner.model_prior`` decides (``auto`` by default): the model writes an estimate of every candidate's lab value,
and the ladder judges the estimates like any proxy rung (``orchestrator/policy/planners/llm_prior.py``: a cold
start half by its ranking, a prior calibrated on the lab pairs, a batch share while the pairs leave it at least as
likely informative as not, dropped when they rule it out). With ``auto`` the rung is added for an llm arm when the
campaign has one objective and no proxy rung of its own (a simulator that estimates the objective says more than a
guess from the text), and surveyed only when its pool-wide cost fits ``AUTO_SURVEY_S`` (``ladder_view``); ``on``
adds it for any arm, surveyed within the compute budget; ``off`` never.

The added rung is marked ``added_by = "planner.model_prior"``, so a re-validated spec (``with_overrides``: another
planner, model or seed) drops it and decides again. Which estimates it holds follows the arm, so the bracket arms
keep the llm arm's slots and its lever: ``llm`` and ``llm-shuffled`` ask ``planner.model``, ``llm-random`` a seeded
coin (``COIN``, the campaign's seed), ``llm-oracle`` the truth a benchmark gives (``ORACLE``).

Example:
    >>> from types import SimpleNamespace
    >>> spec = SimpleNamespace(planner=SimpleNamespace(main="llm-random", model=None, model_prior="auto"),
    ...                        campaign=SimpleNamespace(seed=3), ladder=[], objectives=[],
    ...                        objective=SimpleNamespace(property="yield", unit="%"))
    >>> rung = model_prior_rung(spec)
    >>> rung["name"], rung["simulator"], rung["parameters"]["model"], rung["parameters"]["seed"]
    ('model_prior', 'llm_prior', 'coin', 3)
"""

from __future__ import annotations

from typing import Any

__all__ = ["ADDED_BY", "AUTO_SURVEY_S", "GUESS_SIMULATORS", "MODEL_PRIOR_ARMS", "RUNG_NAME", "is_guess",
           "model_prior_rung"]

ADDED_BY = "planner.model_prior"
RUNG_NAME = "model_prior"
MODEL_PRIOR_ARMS = ("llm", "llm-shuffled", "llm-random", "llm-oracle")
"""The arms ``auto`` adds the prior for: the llm arm and its bracket."""

AUTO_SURVEY_S = 900.0
"""The most compute seconds an ``auto`` prior's survey may cost (1,800 candidates at the embedded model's 0.5 s):
past that, the survey would hold up the first lab batch for more than a quarter of an hour, so ``auto`` leaves it
out (with a log line) and ``on`` is the way to ask for it."""


GUESS_SIMULATORS = frozenset({"llm_prior"})
"""Simulators whose values are a guess from what a model knows, not a calculation: the ladder's premise (a dearer
rung is the higher fidelity, trusted before any lab result) does not hold for them, so a cold start hedges them
(``bo.cold_start_count``)."""


def is_guess(spec, rung: str | None) -> bool:
    """Whether the ladder's rung named ``rung`` is a guess (its simulator is in ``GUESS_SIMULATORS``)."""
    return any(r.name == rung and r.simulator in GUESS_SIMULATORS for r in spec.ladder)


def _estimates_from(main: str, model: str | None, seed: int) -> dict[str, Any]:
    if main == "llm-random":
        return {"model": "coin", "seed": int(seed)}
    if main == "llm-oracle":
        return {"model": "oracle"}
    return {"model": model or "embedded"}


def model_prior_rung(spec) -> dict[str, Any] | None:
    """The ``[[ladder]]`` table ``planner.model_prior`` adds to ``spec`` (a spec without its added rung), or None."""
    planner = spec.planner
    if planner.model_prior == "off":
        return None
    if any(r.simulator == "llm_prior" for r in spec.ladder) or any(r.name == RUNG_NAME for r in spec.ladder):
        return None  # the spec has its own
    if planner.model_prior == "auto" and (planner.main not in MODEL_PRIOR_ARMS or len(spec.objectives) > 1
                                          or any(r.proxy for r in spec.ladder)):
        return None
    objective = spec.objective
    return {"name": RUNG_NAME, "simulator": "llm_prior", "property": "expected", "proxy": "expected",
            "added_by": ADDED_BY,
            "parameters": {"target": objective.property, "unit": objective.unit or "",
                           **_estimates_from(planner.main, planner.model, spec.campaign.seed)}}
