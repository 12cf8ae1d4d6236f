"""The llm arm's bracket: ``llm-random`` and ``llm-oracle`` keep the arm's slots, anchors and shortlist and replace
only the model's choice, by a seeded coin or by the lab's truth."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from orchestrator.planner_registry import make_planner
from orchestrator.policy.planners.llm import LLMPlanner
from orchestrator.policy.planners.llm_bracket import (
    OracleChoiceLLMPlanner,
    RandomChoiceLLMPlanner,
)
from orchestrator.spec import SpecError, load_spec, validate_spec
from tests.conftest import FREESOLV_SPEC
from tests.orchestrator.policy.planners.test_llm import (
    ScriptedChatModel,
    answer,
    make_context,
    shown,
)
from vocabulary.domain import SetupError


@pytest.fixture(scope="module")
def freesolv():
    return load_spec(FREESOLV_SPEC)


@pytest.fixture(scope="module")
def exploring(freesolv):
    """12 lab results, all the llm arm's own picks: no block with both sources, so the model explores one slot."""
    warm_context = make_context(freesolv, n_observed=12)
    return dataclasses.replace(warm_context,
                               provenance=tuple(("llm", k, "pick") for k in range(len(warm_context.observed))))


def _truth(context, pool_id: str) -> float:
    spec = context.spec
    value = context.pool.columns[spec.lab.oracle_column][context.pool.index[pool_id]]
    return spec.objective.utility(value)


def test_the_bracket_arms_keep_the_llm_arms_slots_anchors_and_shortlist(exploring):
    llm = LLMPlanner(chat_model=ScriptedChatModel(responses=[answer("c00")]))
    reference = llm.propose(exploring, 4)
    for planner in (RandomChoiceLLMPlanner(), OracleChoiceLLMPlanner()):
        proposals = planner.propose(exploring, 4)
        assert [p.candidate.id for p in proposals if p.is_anchor] == [p.candidate.id for p in reference if p.is_anchor]
        assert set(shown(planner).values()) == set(shown(llm).values()), "the rows the model would be shown"
        [own] = [p for p in proposals if not p.is_anchor]
        assert not own.is_fallback and own.candidate.id in shown(planner).values()
        assert planner.last_run["keys"] == [] and planner._chat_model is None, "no model is called or loaded"
        assert own.n_shown == len(shown(planner)) and own.shown_position is not None


def test_the_oracle_picks_the_shown_row_with_the_best_true_value(freesolv):
    for seed in range(4):
        lab = make_context(freesolv, n_observed=12, seed=seed)
        context = dataclasses.replace(lab, provenance=tuple(("llm", k, "pick") for k in range(len(lab.observed))))
        planner = OracleChoiceLLMPlanner(shortlist_size=10)
        [own] = [p for p in planner.propose(context, 4) if not p.is_anchor]
        rows = list(shown(planner).values())
        assert _truth(context, own.candidate.id) == max(_truth(context, r) for r in rows)
        assert "llm-oracle" in own.rationale


def test_the_coin_is_seeded_and_spreads_over_the_shown_rows(freesolv):
    positions, picks = [], []
    for iteration in range(1, 13):
        lab = make_context(freesolv, n_observed=12, iteration=iteration)
        context = dataclasses.replace(lab, provenance=tuple(("llm", k, "pick") for k in range(len(lab.observed))))
        [own] = [p for p in RandomChoiceLLMPlanner(shortlist_size=10).propose(context, 4) if not p.is_anchor]
        [again] = [p for p in RandomChoiceLLMPlanner(shortlist_size=10).propose(context, 4) if not p.is_anchor]
        assert own.candidate.id == again.candidate.id, "the same state and seed give the same choice"
        positions.append(own.shown_position)
        picks.append(own.candidate.id)
    assert len(set(positions)) >= 3, "a coin, not a fixed row"


def test_the_oracle_is_a_benchmarks_arm_only(freesolv, monkeypatch):
    from orchestrator import planner_registry

    monkeypatch.delitem(planner_registry._REGISTRY, "llm-oracle", raising=False)  # a bench test may have registered it
    data = freesolv.model_dump(mode="json")
    data["planner"]["main"] = "llm-oracle"
    with pytest.raises(SpecError, match="exists only in benchmarks.*closedloop bench"):
        validate_spec(data, source="test")
    with pytest.raises(SetupError, match="exists only in benchmarks"):
        make_planner("llm-oracle", freesolv)
    data["planner"]["main"] = "llm-random"
    assert validate_spec(data, source="test").planner.main == "llm-random"


def test_the_oracle_refuses_a_lab_without_ground_truth(exploring):
    spec = exploring.spec.model_copy(update={"lab": exploring.spec.lab.model_copy(update={"driver": "http"})})
    with pytest.raises(SetupError, match="simulated lab's ground truth"):
        OracleChoiceLLMPlanner().propose(dataclasses.replace(exploring, spec=spec), 4)
    assert np.isfinite(_truth(exploring, exploring.pool.ids[0]))
