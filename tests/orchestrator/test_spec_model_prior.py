"""planner.model_prior: the llm arms' prior over the pool, added to the ladder by the spec (issue 51)."""

from types import SimpleNamespace

import pytest

from orchestrator.bench.bracket import register_bench_arms
from orchestrator.loop import ladder_view
from orchestrator.policy.planners.llm_prior import LLMPriorSimulator, set_oracle_truth
from orchestrator.spec import CampaignSpec
from orchestrator.spec_model_prior import ADDED_BY, RUNG_NAME
from vocabulary.domain import Molecule


def _spec(**planner) -> CampaignSpec:
    ladder = planner.pop("ladder", [])
    return CampaignSpec.model_validate({
        "campaign": {"name": "demo", "kind": "molecule", "seed": 4},
        "objective": {"property": "solubility", "unit": "log mol/L", "direction": "maximize"},
        "space": {"inline": ["CCO", "CCCO", "CCCCO"]}, "lab": {"oracle": {"CCO": 1.0, "CCCO": 2.0, "CCCCO": 3.0}},
        "budget": {"lab_experiments": 2}, "ladder": ladder, "planner": {"control_share": 0, "control": None, **planner}})


def _prior(spec):
    rungs = [r for r in spec.ladder if r.name == RUNG_NAME]
    return rungs[0] if rungs else None


def test_an_llm_arm_without_a_proxy_rung_gets_the_models_prior():
    rung = _prior(_spec(main="llm"))
    assert rung is not None and rung.simulator == "llm_prior" and rung.proxy == "expected"
    assert rung.added_by == ADDED_BY
    assert rung.parameters == {"target": "solubility", "unit": "log mol/L", "model": "embedded"}
    assert _prior(_spec(main="llm", model="openai:gpt-4o-mini")).parameters["model"] == "openai:gpt-4o-mini"


def test_auto_leaves_bo_a_proxy_rung_and_off_alone_and_on_adds_it_for_any_arm():
    assert _prior(_spec(main="bo")) is None
    assert _prior(_spec(main="llm", model_prior="off")) is None
    with_proxy = _spec(main="llm", ladder=[{"name": "mr", "simulator": "rdkit_descriptors", "proxy": "mr"}])
    assert _prior(with_proxy) is None and [r.name for r in with_proxy.ladder] == ["mr"]
    assert _prior(_spec(main="bo", model_prior="on")) is not None


def test_the_bracket_arms_get_a_coin_and_the_truth_and_overrides_decide_again(monkeypatch):
    from orchestrator import planner_registry

    monkeypatch.setattr(planner_registry, "_REGISTRY", dict(planner_registry._REGISTRY))  # the bench's arm, undone
    spec = _spec(main="llm")
    coin = _prior(spec.with_overrides(planner="llm-random", seed=9))
    assert coin.parameters["model"] == "coin" and coin.parameters["seed"] == 9
    register_bench_arms()  # llm-oracle is the bench's own
    assert _prior(spec.with_overrides(planner="llm-oracle")).parameters["model"] == "oracle"
    back = spec.with_overrides(planner="bo")
    assert _prior(back) is None and back.ladder == [], "the added rung goes with the arm that asked for it"
    again = back.with_overrides(planner="llm")
    assert [r.name for r in again.ladder] == [RUNG_NAME], "added once, not once per re-validation"


def test_the_coin_is_seeded_and_the_oracle_exists_only_with_a_benchmarks_truth():
    molecules = [Molecule.parse(s) for s in ("CCO", "CCCO", "CCCCO")]
    draw = [o.properties["expected"] for o in LLMPriorSimulator(model="coin", seed=1).evaluate(molecules)]
    assert draw == [o.properties["expected"] for o in LLMPriorSimulator(model="coin", seed=1).evaluate(molecules)]
    assert draw != [o.properties["expected"] for o in LLMPriorSimulator(model="coin", seed=2).evaluate(molecules)]
    set_oracle_truth({})
    with pytest.raises(ValueError, match="only in benchmarks"):
        LLMPriorSimulator(model="oracle")
    set_oracle_truth({m.id: float(k) for k, m in enumerate(molecules)})
    try:
        oracle = LLMPriorSimulator(model="oracle").evaluate(molecules)
        assert [o.properties["expected"] for o in oracle] == [0.0, 1.0, 2.0]
    finally:
        set_oracle_truth({})


def test_auto_skips_a_survey_dearer_than_its_allowance_and_on_does_not(monkeypatch):
    monkeypatch.setattr("orchestrator.spec_model_prior.AUTO_SURVEY_S", 1.0)
    spec = _spec(main="llm")
    rung = SimpleNamespace(name=RUNG_NAME, spec=_prior(spec))
    ctx = SimpleNamespace(spec=spec, pool=[0, 1, 2])
    assert ladder_view._too_dear_for_auto(ctx, rung, cost=1.5)
    assert not ladder_view._too_dear_for_auto(ctx, rung, cost=0.5)
    on = _spec(main="llm", model_prior="on")
    assert not ladder_view._too_dear_for_auto(SimpleNamespace(spec=on, pool=[0]), SimpleNamespace(
        name=RUNG_NAME, spec=_prior(on)), cost=1.5)
