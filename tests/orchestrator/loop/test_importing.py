"""Past lab results from a CSV seed a campaign's history: provenance 'imported', a warm planner, no budget used."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app
from orchestrator.ledger import verify
from orchestrator.loop.campaign import Campaign
from orchestrator.loop.importing import HistoryImportError, import_history, read_history
from orchestrator.space.pool import load_pool
from tests.conftest import BUCHWALD_SPEC, small_spec

HTE = BUCHWALD_SPEC.parent / "data" / "experiment_index.csv"


@pytest.fixture
def past_csv(tmp_path):
    path = tmp_path / "past.csv"
    pd.read_csv(HTE).iloc[:20].to_csv(path, index=False)  # part of the HTE table, as a lab would have it
    return path


def test_imported_results_warm_the_planner_without_using_the_budget(tmp_path, past_csv):
    spec = small_spec(BUCHWALD_SPEC, lab_experiments=4)
    with Campaign.start(spec, db=tmp_path / "warm.db", campaign_id="warm") as campaign:
        imported = import_history(campaign.ledger, "warm", spec, campaign.ctx.pool, past_csv)
        again = import_history(campaign.ledger, "warm", spec, campaign.ctx.pool, past_csv)
        summary = campaign.run()
        events = campaign.ledger.events("warm")
        assert verify(campaign.ledger, "warm").is_identical
    assert (imported.n_rows, imported.n_appended, again.n_appended) == (20, 20, 0), "re-importing adds nothing"
    observed = [e.payload for e in events if e.type == "Observed"]
    assert sum(o["provenance"] == "imported" for o in observed) == 20
    assert summary["n_lab"] == 4 and summary["n_imported"] == 20
    past = {o["candidate_id"] for o in observed if o["provenance"] == "imported"}
    dispatched = [e.payload for e in events if e.type == "Dispatched"]
    assert len(dispatched) == 4 and not past & {d["candidate_id"] for d in dispatched}, "no past experiment is repeated"
    bo = [e.payload for e in events if e.type == "Proposed" and e.payload["arm"] == "bo"]
    assert bo and not any(p["hypothesis"].startswith("initial design") for p in bo), "the surrogate starts warm"
    trained = [e.payload["n_train"] for e in events if e.type == "SurrogateUpdated"]
    assert trained[0] == 20 and trained[-1] > 20, "fitted on the past results at import, then on the new ones too"


def test_a_bad_row_refuses_the_whole_file_with_its_line(tmp_path, past_csv):
    frame = pd.read_csv(past_csv)
    frame.loc[6, "yield"] = float("nan")
    frame.to_csv(past_csv, index=False)
    spec = small_spec(BUCHWALD_SPEC)
    with pytest.raises(HistoryImportError, match=r"line 8: yield is empty"):
        read_history(spec, load_pool(spec).copy(), past_csv)
    result = CliRunner().invoke(app, ["run", str(BUCHWALD_SPEC), "--db", str(tmp_path / "x.db"), "--history",
                                      str(past_csv), "--json"])
    assert result.exit_code == 2 and "line 8" in result.output
    assert not (tmp_path / "x.db").exists() or "x" not in CliRunner().invoke(app, ["ls", "--db", str(tmp_path / "x.db")]).output


def test_rows_outside_the_space_and_missing_columns_are_explained(tmp_path):
    spec = small_spec(BUCHWALD_SPEC)
    path = tmp_path / "odd.csv"
    path.write_text("Aryl_halide_SMILES,Additive_SMILES,Base_SMILES,Ligand_SMILES\\nC,C,C,C\\n")
    with pytest.raises(HistoryImportError, match="no 'yield' column"):
        read_history(spec, load_pool(spec).copy(), path)
    fs = small_spec()
    path.write_text("smiles,dg_hydration\nCCO,-5.0\nC1CC1C1CC1C1CC1,-3.0\n")
    with pytest.raises(HistoryImportError, match="line 3: .* not in the campaign's design space"):
        read_history(fs, load_pool(fs).copy(), path)


def test_the_cli_imports_history_before_the_first_round(tmp_path, past_csv):
    result = CliRunner().invoke(app, ["run", str(BUCHWALD_SPEC), "--db", str(tmp_path / "cli.db"), "--lab-budget", "2",
                                      "--planner", "bo", "--history", str(past_csv), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["n_imported"] == 20 and summary["n_lab"] == 2
