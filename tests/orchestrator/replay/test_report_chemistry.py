"""The report and ``show`` speak chemistry: molecules drawn and named by SMILES (never an InChIKey), every lab result
in a table and in results.csv, numbers rounded to their precision, the target and the best so far at the top, and the
rewards in an "RL" section at the end."""

from __future__ import annotations

import csv
import re

import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app
from orchestrator.interfaces.event_text import describe_event, job_label
from orchestrator.ledger import Ledger
from orchestrator.loop.campaign import Campaign
from orchestrator.replay.candidates import candidate_labels
from orchestrator.replay.report import REPORT_FIGURES, RESULTS_CSV, write_report
from orchestrator.replay.report_results import best_results, lab_results
from tests.conftest import small_spec
from vocabulary.events import Observed

CID = "fs-chem"
INCHIKEY = re.compile(r"\b[A-Z]{14}-[A-Z]{10}-[A-Z]\b")
RAW_FLOAT = re.compile(r"\d\.\d{7,}")  # 2.2894284851066633 and the like


@pytest.fixture(scope="module")
def molecules(tmp_path_factory):
    """A small finished FreeSolv campaign (molecules, target -12 ± 0.5 kcal/mol) and its report folder."""
    root = tmp_path_factory.mktemp("chem")
    spec = small_spec(lab_experiments=8)
    with Campaign.start(spec, db=root / "ledger.db", campaign_id=CID) as run:
        run.run()
    ledger = Ledger.open(root / "ledger.db")
    index = write_report(ledger, CID, root / "report")
    yield ledger, spec, index
    ledger.close()


def test_the_report_writes_every_lab_result_to_results_csv(molecules):
    ledger, spec, index = molecules
    with (index.parent / RESULTS_CSV).open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    observed = [e.typed() for e in ledger.events(CID, types=[Observed.type])]
    assert len(rows) == len(observed) == 8
    assert list(rows[0])[:5] == ["n", "iteration", "arm", "smiles", "dg_hydration"]
    labels = candidate_labels(ledger, CID)
    for row, result in zip(rows, observed, strict=True):
        assert row["smiles"] == labels[result.candidate_id]
        assert float(row["dg_hydration"]) == pytest.approx(result.value, abs=0.005)  # sd 0.1: two decimals
        assert len(row["dg_hydration"].partition(".")[2]) <= 2
        assert row["unit"] == "kcal/mol" and row["status"] == "ok" and row["arm"] == result.arm
    text = (index.parent / RESULTS_CSV).read_text()
    assert not INCHIKEY.search(text) and not RAW_FLOAT.search(text)


def test_the_page_names_and_draws_molecules_and_rounds_every_number(molecules):
    ledger, spec, index = molecules
    text = index.read_text()
    assert not INCHIKEY.search(text), INCHIKEY.search(text)
    assert not RAW_FLOAT.search(text), RAW_FLOAT.search(text)
    results = lab_results(ledger, CID)
    best = best_results(results, spec)
    assert len(best) == 6 and len({r.candidate_id for r in best}) == 6
    # the best-candidate cards and one thumbnail per result row are inline rdkit drawings
    assert text.count("<svg") == 1 + len(best) + len(results)
    for result in results:
        assert f'<td class="smiles">{result.label}</td>' in text


def test_the_target_and_the_best_so_far_with_its_uncertainty_open_the_page(molecules):
    ledger, spec, index = molecules
    text = index.read_text()
    headline = text[text.index('<section class="headline">'):text.index("<h2>Summary</h2>")]
    assert "target -12.0 ± 0.5 kcal/mol" in headline
    best = best_results(lab_results(ledger, CID), spec)[0]
    assert f"{best.value:.2f} ± 0.10 kcal/mol" in headline and best.label in headline and "<svg" in headline


def test_the_rewards_plot_is_in_the_rl_section_after_the_lab_plots(molecules):
    _, _, index = molecules
    text = index.read_text()
    order = [text.index(marker) for marker in ("<h2>Best candidates</h2>", "<h2>Results</h2>", "<h2>Plots</h2>",
                                               REPORT_FIGURES["best_so_far"], "<h2>RL</h2>",
                                               f'src="{REPORT_FIGURES["rewards"]}"')]
    assert order == sorted(order)
    assert "Rewards and calibration" in text[text.index("<h2>RL</h2>"):]


def test_show_names_molecules_by_smiles_not_inchikey(molecules, monkeypatch):
    from orchestrator.interfaces.cli_common import out

    ledger, _, index = molecules
    monkeypatch.setattr(out, "_width", 400)  # one table row a line, so each line holds a whole label
    result = CliRunner().invoke(app, ["show", CID, "--db", str(index.parent.parent / "ledger.db")],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    shown = [line for line in result.output.splitlines() if " Observed " in line or " Dispatched " in line]
    assert len(shown) == 16
    assert not any(INCHIKEY.search(line) for line in shown), shown[:3]
    labels = set(candidate_labels(ledger, CID).values())
    assert all(any(label in line for label in labels) for line in shown)
    assert not INCHIKEY.search(result.output) and not RAW_FLOAT.search(result.output)


def test_event_lines_name_candidates_and_job_keys_by_label():
    labels = {"LFQSCWFLJHTTHZ-UHFFFAOYSA-N": "CCO"}
    assert job_label("c/LFQSCWFLJHTTHZ-UHFFFAOYSA-N", labels) == "CCO"
    proposed = {"iteration": 0, "arm": "bo", "candidate_id": "LFQSCWFLJHTTHZ-UHFFFAOYSA-N",
                "candidate": {"type": "molecule", "smiles": "CCO", "id": "LFQSCWFLJHTTHZ-UHFFFAOYSA-N"}}
    assert describe_event("Proposed", proposed) == "it0 bo → CCO"  # the event carries its candidate
    approved = {"iteration": 1, "job_keys": ["c/LFQSCWFLJHTTHZ-UHFFFAOYSA-N"], "approved_by": "human:ada",
                "policy": "always", "denied_keys": []}
    assert describe_event("Approved", approved, labels) == "it1 human:ada approved CCO"
    rejected = {"iteration": 1, "arm": "human", "stage": "approve", "raw": "c/LFQSCWFLJHTTHZ-UHFFFAOYSA-N",
                "candidate_id": "LFQSCWFLJHTTHZ-UHFFFAOYSA-N", "reason": "denied at approval by human:ada: flammable"}
    assert describe_event("Rejected", rejected, labels) == "it1 approve CCO: denied at approval by human:ada: flammable"
    stopped = {"reason": "budget", "n_lab": 3, "best_candidate_id": "LFQSCWFLJHTTHZ-UHFFFAOYSA-N",
               "best_value": 2.2894284851066633}
    assert describe_event("CampaignStopped", stopped, labels) == "budget; best CCO = 2.289"
