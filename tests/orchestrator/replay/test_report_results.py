"""The report's results: every recorded result with its provenance, the best distinct candidates, and results.csv
rows in the candidate's own columns, rounded to precision. Hand-made ledgers, so each case is exact."""

from __future__ import annotations

import pytest

from orchestrator.replay.report_html import (
    best_candidates_html,
    headline_html,
    results_table_html,
)
from orchestrator.replay.report_results import (
    best_results,
    best_so_far_result,
    lab_results,
    results_columns,
    results_rows,
)
from orchestrator.spec import load_spec
from tests.conftest import BUCHWALD_SPEC
from vocabulary.events import CampaignStarted, Dispatched, Observed, Proposed

COLUMNS = ["Aryl_halide_SMILES", "Additive_SMILES", "Base_SMILES", "Ligand_SMILES"]


def _conditions(n: int) -> dict:
    values = dict(zip(COLUMNS, ["Ic1cccnc1", "Cc1ccon1", "CN(C)C(=NC(C)(C)C)N(C)C", "C" * (n + 3)], strict=True))
    return {"type": "conditions", "schema_version": 1, "values": values, "id": f"k{n}"}


def _observed(n: int, value, *, sd=2.0, status="ok", reason=None, provenance="lab", driver="simlab", at_h=1.0):
    return Observed(iteration=0 if provenance == "lab" else -1, job_key=f"c/k{n}", candidate_id=f"k{n}",
                    arm="bo" if provenance == "lab" else "imported", value=value, uncertainty=sd, status=status,
                    reason=reason, sim_time_s=3600.0 * at_h, provenance=provenance, driver=driver)


@pytest.fixture
def recorded(ledger):
    items = [(CampaignStarted(name="bh", seed=0, spec={}), "start")]
    for n in range(1, 6):
        arm = "bo" if n <= 3 else "imported"
        items.append((Proposed(iteration=0, arm=arm, candidate_id=f"k{n}", candidate=_conditions(n)), f"p{n}"))
    items += [
        (Dispatched(iteration=0, job_key="c/k1", candidate_id="k1", arm="bo", driver="simlab", sim_time_s=1800.0),
         "d1"),
        (_observed(1, 71.2345, at_h=2.0), "o1"),
        (_observed(2, None, sd=None, status="failed", reason="the base precipitated"), "o2"),
        (_observed(3, 80.0, sd=None, at_h=3.5), "o3"),
        (_observed(1, 75.5, at_h=4.0), "o1-again"),
        (_observed(4, 99.0, provenance="imported", driver="import:past.csv@abc"), "o4"),
        (_observed(5, 90.0, provenance="imported", driver="manual:ada", at_h=5.0), "o5"),
    ]
    ledger.append_many("c", items)
    return ledger, load_spec(BUCHWALD_SPEC)


def test_every_result_is_listed_in_order_with_its_provenance(recorded):
    ledger, _ = recorded
    results = lab_results(ledger, "c")
    assert [r.n for r in results] == [1, 2, 3, 4, 5, 6]
    assert [r.provenance for r in results] == ["lab", "lab", "lab", "lab", "imported", "off-plan"]
    assert results[0].lab_hours == pytest.approx(1.5)  # since the first dispatch, at 0.5 h
    assert results[4].lab_hours is None and results[5].lab_hours == pytest.approx(4.5)
    assert "Aryl_halide_SMILES=Ic1cccnc1; " in results[0].label


def test_the_best_are_distinct_campaign_candidates_by_their_best_result(recorded):
    ledger, spec = recorded
    results = lab_results(ledger, "c")
    best = best_results(results, spec)
    assert [(r.candidate_id, r.value) for r in best] == [("k3", 80.0), ("k1", 75.5)]  # no history, no off-plan
    assert best_so_far_result(results, spec) == best[0]


def test_results_rows_use_the_candidates_own_columns_rounded_to_precision(recorded):
    ledger, spec = recorded
    rows = results_rows(lab_results(ledger, "c"), spec)
    assert list(rows[0]) == results_columns(spec) == ["n", "iteration", "arm", *COLUMNS, "yield", "sd", "unit",
                                                      "status", "hit", "reason", "provenance", "lab_hours"]
    first, failed, unknown_sd = rows[0], rows[1], rows[2]
    assert first["Aryl_halide_SMILES"] == "Ic1cccnc1" and first["yield"] == 71.0 and first["sd"] == 2.0
    assert failed["yield"] is None and failed["status"] == "failed" and failed["reason"] == "the base precipitated"
    assert unknown_sd["yield"] == 80.0 and unknown_sd["sd"] is None and unknown_sd["unit"] == "%"
    assert rows[4]["hit"] is True and rows[4]["provenance"] == "imported"  # 99 % meets the 95 % threshold


def test_the_html_shows_values_with_uncertainty_and_failures_with_their_reason(recorded):
    ledger, spec = recorded
    results = lab_results(ledger, "c")
    table = results_table_html(results, spec)
    assert "<td>71.2</td>" not in table and ">71</td>" in table  # sd 2 %: no decimals
    assert "failed: the base precipitated" in table and "(off-plan)" in table
    assert "<th>structure</th>" not in table  # conditions are drawn in the cards, not in every row
    cards = best_candidates_html(best_results(results, spec), spec)
    assert cards.count('class="card wide"') == 2 and cards.count("<svg") == 2
    headline = headline_html(spec, best_so_far_result(results, spec), len(results))
    assert "maximize yield (a hit: ≥ 95 %)" in headline and "80 %" in headline and "result 3 of 6" in headline


def test_a_campaign_without_results_reports_so_and_writes_the_csv_header(tmp_path):
    from orchestrator.ledger import Ledger
    from orchestrator.loop.campaign import Campaign
    from orchestrator.replay.report import RESULTS_CSV, write_report

    spec = load_spec(BUCHWALD_SPEC).with_overrides(lab_budget=4, planner="bo")
    with Campaign.start(spec, db=tmp_path / "new.db", campaign_id="new"):
        pass  # started, nothing run yet
    ledger = Ledger.open(tmp_path / "new.db")
    index = write_report(ledger, "new", tmp_path / "report")
    ledger.close()
    text = index.read_text()
    assert "No successful lab result yet." in text and "No lab results yet." in text
    header = (index.parent / RESULTS_CSV).read_text().splitlines()
    assert header == [",".join(results_columns(spec))]
