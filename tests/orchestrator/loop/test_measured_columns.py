"""Results entered by hand and imported history read a column per measured property (issue 48): every objective's
is required, a constraint's may be empty, and an infeasible run is entered as such and learned."""

from __future__ import annotations

import pytest

from orchestrator.ledger import Ledger
from orchestrator.loop.campaign import Campaign
from orchestrator.loop.importing import (
    HistoryImportError,
    import_history,
    read_measured_history,
)
from orchestrator.loop.manual_results import (
    ResultsEntryError,
    add_results,
    export_results,
    pending_jobs,
    read_results_csv,
)
from orchestrator.space.pool import load_pool
from orchestrator.spec import CampaignSpec
from tests.orchestrator.loop.test_measured_values import spec_for
from vocabulary.events import Observed

SMILES = ["C", "CC", "CCC", "CCCC", "CCCCC", "CCO", "CCN", "CCCl"]


def manual_spec(policy: str = "skip") -> CampaignSpec:
    return CampaignSpec.model_validate({
        "campaign": {"name": "bench", "kind": "molecule", "seed": 5},
        "objective": [{"property": "yield", "direction": "maximize", "unit": "%"},
                      {"property": "purity", "direction": "maximize", "unit": "%"}],
        "constraint": [{"property": "side", "upper": 5.0, "unit": "%"}],
        "space": {"inline": SMILES},
        "lab": {"driver": "manual", "parameters": {"max_parallel_jobs": 3}, "failure_policy": policy},
        "budget": {"lab_experiments": 6},
        "planner": {"main": "random", "control": None, "control_share": 0, "batch_size": 3, "n_initial": 3},
    })


@pytest.fixture
def bench(tmp_path):
    db = tmp_path / "bench.db"
    with Campaign.start(manual_spec(), db=db, campaign_id="bench") as campaign:
        campaign.run()
    ledger = Ledger.open(db)
    yield db, ledger, list(pending_jobs(ledger, "bench")["job"])
    ledger.close()


def write(tmp_path, text: str):
    path = tmp_path / "results.csv"
    path.write_text(text)
    return read_results_csv(path)


def test_a_results_csv_carries_every_measured_property_and_infeasible_runs(tmp_path, bench):
    db, ledger, (j1, j2, j3) = bench
    receipt = add_results(ledger, "bench", write(tmp_path, f"job,yield,purity,side,status,reason\n"
                                                           f"{j1},70,91.5,2.5,,\n{j2},60,88,,ok,\n"
                                                           f"{j3},,,,infeasible,phase separated\n"))
    assert [r.outcome for r in receipt.rows] == ["recorded"] * 3
    with Campaign.resume("bench", db=db) as campaign:
        campaign.run()
        history = campaign.ctx.view.history()
    observed = {e.payload["job_key"]: e.payload for e in ledger.events("bench", types=[Observed.type])}
    assert observed[j1]["values"] == {"purity": 91.5, "side": 2.5}
    assert observed[j2]["values"] == {"purity": 88.0}, "a constraint left empty is not measured"
    assert observed[j3]["status"] == "failed" and observed[j3]["infeasible"] and not observed[j3]["values"]
    handled = [e.payload for e in ledger.events("bench", types=["FailureHandled"])]
    assert [(h["job_key"], h["action"]) for h in handled] == [(j3, "skip")], "infeasible: never retried"
    assert observed[j3]["candidate_id"] in history.learned_failures
    exported = export_results(ledger, "bench")
    assert {"purity", "side"} <= set(exported.columns) and "infeasible" in set(exported["status"])
    head = ledger.head_seq("bench")
    again = add_results(ledger, "bench", exported)
    assert {r.outcome for r in again.rows} == {"duplicate"} and ledger.head_seq("bench") == head


def test_a_row_missing_an_objective_is_refused_naming_the_line_and_column(tmp_path, bench):
    _, ledger, (j1, j2, _) = bench
    head = ledger.head_seq("bench")
    with pytest.raises(ResultsEntryError, match=r"^line 3, column purity: no value for the objective 'purity'"):
        add_results(ledger, "bench", write(tmp_path, f"job,yield,purity\n{j1},70,90\n{j2},60,\n"))
    with pytest.raises(ResultsEntryError, match=r"^line 2, column purity: no value"):
        add_results(ledger, "bench", write(tmp_path, f"job,yield\n{j1},70\n"))
    with pytest.raises(ResultsEntryError, match=r"^line 2, column yield: no value for the objective 'yield'"):
        add_results(ledger, "bench", write(tmp_path, f"job,yield,purity\n{j1},,90\n"))
    with pytest.raises(ResultsEntryError, match=r"line 2, column side: 'lots' is not a number"):
        add_results(ledger, "bench", write(tmp_path, f"job,yield,purity,side\n{j1},1,2,lots\n"))
    assert ledger.head_seq("bench") == head, "nothing was entered"
    skipped = add_results(ledger, "bench", write(tmp_path, f"job,yield,purity\n{j1},,\n"))
    assert [r.outcome for r in skipped.rows] == ["skipped"], "no value at all: the job stays pending"


def test_history_import_reads_a_column_per_measured_property(tmp_path):
    spec = spec_for(tmp_path)
    pool = load_pool(spec).copy()
    path = tmp_path / "past.csv"
    path.write_text("x,y,a,b,pdi\n1,1,5.0,101,0.2\n2,3,7.5,99,\n")
    rows = read_measured_history(spec, pool, path)
    assert [(line, value, values) for line, _, value, values in rows] == [(2, 5.0, {"b": 101.0, "pdi": 0.2}),
                                                                       (3, 7.5, {"b": 99.0})]
    with Campaign.start(spec, db=tmp_path / "h.db", campaign_id="h") as campaign:
        import_history(campaign.ledger, "h", spec, campaign.ctx.pool, path)
        imported = [e.payload for e in campaign.ledger.events("h", types=[Observed.type])]
        assert [p["values"] for p in imported] == [{"b": 101.0, "pdi": 0.2}, {"b": 99.0}]
        campaign.ctx.view.refresh()
        history = campaign.ctx.view.history()
        assert history.measured == ({"a": 5.0, "b": 101.0, "pdi": 0.2}, {"a": 7.5, "b": 99.0})


@pytest.mark.parametrize(("text", "message"), [
    ("x,y,a\n1,1,5.0\n", r"has no column\(s\) \['b'\]"),
    ("x,y,a,b\n1,1,5.0,\n", r"line 2: b is empty"),
    ("x,y,a,b\n1,1,5.0,wide\n", r"line 2: b='wide' is not a finite number"),
])
def test_history_import_refuses_a_missing_objective(tmp_path, text, message):
    spec = spec_for(tmp_path)
    path = tmp_path / "past.csv"
    path.write_text(text)
    with pytest.raises(HistoryImportError, match=message):
        read_measured_history(spec, load_pool(spec).copy(), path)
