"""The process reward's success bar is fixed before a campaign starts and recorded in ``CampaignStarted``; ledgers
from before it was recorded keep the running-median rule and recompute exactly as they were scored."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.loop.campaign import Campaign
from orchestrator.loop.nodes.reward import recompute_rewards, stored_rewards
from orchestrator.policy.success_bar import (
    SuccessBar,
    first_results_threshold,
    fix_success_bar,
    legacy_threshold,
)
from orchestrator.space.pool import load_pool
from orchestrator.spec import CampaignSpec, validate_spec
from rewards import load_rubric
from tests.conftest import small_spec
from vocabulary.domain import SetupError
from vocabulary.events import expand_batches

GAFF = {"name": "gaff", "simulator": "table", "column": "calc", "property": "dg_hydration_gaff",
        "proxy": "dg_hydration_gaff", "cost_s": 60.0}


def minimize_spec():
    """FreeSolv, lower hydration free energy is better, no threshold in the spec: the old rule's moving case."""
    data = small_spec(lab_experiments=12).model_dump()
    data["objective"] = {"property": "dg_hydration", "unit": "kcal/mol", "direction": "minimize"}
    data["ladder"] = [GAFF]
    data["screening"]["executor"] = "serial"
    data["budget"]["compute_seconds"] = None
    data["planner"].update(main="bo", control=None, control_share=0.0, proposals_per_slot=1)
    data["lab"]["wait"] = "any"
    return validate_spec(data)


def _run(spec, db, campaign_id):
    with Campaign.start(spec, db=db, campaign_id=campaign_id) as campaign:
        campaign.run()
        return campaign.ledger.events(campaign_id)


def _thresholds(events):
    return [e.payload["success_threshold"] for e in expand_batches(events) if e.type == "RungValidated"]


def _lab_utilities(spec, events):
    return [spec.objective.utility(e.payload["value"]) for e in events
            if e.type == "Observed" and e.payload["status"] == "ok"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    spec = minimize_spec()
    return spec, _run(spec, tmp_path_factory.mktemp("bar") / "ledger.db", "bar")


@pytest.fixture(scope="module")
def old_style(tmp_path_factory):
    """A campaign written as before the bar was recorded: ``CampaignStarted`` without a bar."""
    spec = minimize_spec()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SuccessBar, "record", lambda self: None)
        events = _run(spec, tmp_path_factory.mktemp("old") / "ledger.db", "old")
    return spec, events


def test_the_bar_is_recorded_at_start_and_does_not_move_as_the_campaign_improves(recorded):
    spec, events = recorded
    started = events[0]
    assert started.type == "CampaignStarted"
    bar = started.payload["success_bar"]
    truth = load_pool(spec).columns["expt"]
    assert bar["source"] == "quantile" and bar["quantile"] == 0.9 and not bar["is_visible"]
    assert bar["reference_from"] == "lab truth (pool column 'expt')" and "reference" not in bar
    assert bar["threshold"] == pytest.approx(np.quantile(truth, 0.1))  # minimize: the lowest tenth succeeds
    thresholds = _thresholds(events)
    assert len(thresholds) > 3 and set(thresholds) == {spec.objective.utility(bar["threshold"])}
    # the old rule would have moved the bar with the campaign's own results
    utilities = _lab_utilities(spec, events)
    assert len({legacy_threshold(spec, utilities[:k]) for k in range(1, len(utilities) + 1)}) > 2


def test_recompute_with_a_recorded_bar_equals_the_stored_rewards(recorded):
    spec, events = recorded
    recomputed, stored = recompute_rewards(events, spec, load_rubric("default")), stored_rewards(events)
    assert stored and set(recomputed) == set(stored)
    assert all(recomputed[t].reward == e.payload["reward"] for t, e in stored.items())


def test_an_old_ledger_keeps_the_running_median_and_recomputes_identically(old_style):
    spec, events = old_style
    assert events[0].payload.get("success_bar") is None
    thresholds = [t for t in _thresholds(events) if t is not None]
    assert len(set(thresholds)) > 1  # scored under the running median, as before
    recomputed, stored = recompute_rewards(events, spec, load_rubric("default")), stored_rewards(events)
    assert stored and set(recomputed) == set(stored)
    for tid, event in stored.items():
        assert recomputed[tid].reward == event.payload["reward"], tid
        assert recomputed[tid].components == event.payload["components"]


def _inline(**lab) -> CampaignSpec:
    return CampaignSpec.model_validate({
        "campaign": {"name": "demo", "kind": "molecule"}, "objective": {"direction": "maximize"},
        "space": {"inline": ["C", "CC", "CCC", "CCCC"]}, "lab": lab, "budget": {"lab_experiments": 2},
        "planner": {"n_initial": 3}})


def test_the_bar_comes_from_the_spec_then_history_and_otherwise_the_first_results():
    http = _inline(driver="http", parameters={"base_url": "http://127.0.0.1:1"})
    pool = load_pool(http)
    from_history = fix_success_bar(http, pool, history=[1.0, 2.0, 3.0, 4.0, 5.0])
    assert from_history.source == "quantile" and from_history.reference_from == "imported lab history"
    assert from_history.threshold == pytest.approx(4.6) and from_history.is_visible
    unknown = fix_success_bar(http, pool, on_unknown="first_results")
    assert unknown.source == "first_results" and unknown.threshold is None and unknown.n_first_results == 3
    with pytest.raises(SetupError, match="no known range"):
        fix_success_bar(http, pool)  # an environment needs its bar before the first step
    spec = _inline(oracle={"C": 1, "CC": 2, "CCC": 3, "CCCC": 4})
    with_threshold = validate_spec({**spec.model_dump(), "stop": {"threshold": 2.5}})
    assert fix_success_bar(with_threshold, load_pool(with_threshold)).source == "spec"


def test_a_first_results_bar_is_the_median_of_the_first_results_and_stays_there():
    bar = SuccessBar(threshold=None, source="first_results", is_visible=True, n_first_results=3)
    assert first_results_threshold(bar, [5.0, 1.0]) is None
    assert first_results_threshold(bar, [5.0, 1.0, 3.0]) == 3.0
    assert first_results_threshold(bar, [5.0, 1.0, 3.0, 10.0, 20.0, 30.0]) == 3.0
