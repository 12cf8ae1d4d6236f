"""The survey says what it is doing while it runs: a pool-wide xtb survey takes minutes before the first lab job."""

from __future__ import annotations

import pytest

from orchestrator.loop.campaign import Campaign
from orchestrator.loop.nodes.survey import survey_label
from tests.conftest import surveyed_freesolv
from vocabulary.events import expand_batches


@pytest.fixture
def tiny_freesolv(tmp_path):
    """20 FreeSolv molecules with the real ladder (descriptors, GFN2-xTB, GAFF table) and a survey allowed."""
    return surveyed_freesolv(tmp_path, n_molecules=20, lab_experiments=4)


def test_the_xtb_survey_reports_n_of_n_with_a_label_before_the_first_plan(tiny_freesolv, tmp_path):
    reports: list[dict] = []
    nodes: list[str] = []
    with Campaign.start(tiny_freesolv, db=tmp_path / "p.db", campaign_id="p") as campaign:
        campaign.run(max_steps=2, on_progress=reports.append,
                     on_step=lambda node, _update: nodes.append(f"{node} after {len(reports)} reports"))
    assert reports, "the survey reported nothing"
    assert {r["type"] for r in reports} == {"survey_progress"} and {r["rung"] for r in reports} == {"xtb"}
    assert {r["label"] for r in reports} == {"surveying 20 molecules with xtb"}
    done = [r["n_done"] for r in reports]
    assert done[0] == 0 and done[-1] == 20 and done == sorted(done) and len(done) >= 3  # it moves, in steps
    assert {r["n_total"] for r in reports} == {20}
    assert nodes[0] == f"survey after {len(reports)} reports"  # every report came while the survey ran


def test_progress_leaves_the_survey_and_the_lab_order_as_they_were(tiny_freesolv, tmp_path):
    def run(campaign_id, **options):
        with Campaign.start(tiny_freesolv, db=tmp_path / f"{campaign_id}.db", campaign_id=campaign_id) as campaign:
            campaign.run(**options)
            events = list(expand_batches(campaign.ledger.events(campaign_id)))
        surveyed = [e.payload for e in events if e.type == "RungSurveyed"]
        return surveyed, [e.payload["candidate_id"] for e in events if e.type == "Dispatched"]

    assert run("quiet") == run("reported", on_progress=lambda _report: None)


def test_survey_label_names_the_kind_the_count_and_the_simulator():
    assert survey_label("molecule", 642, "xtb") == "surveying 642 molecules with xtb"
    assert survey_label("material", 3, "chgnet") == "surveying 3 materials with chgnet"
    assert survey_label("conditions", 3955, "table") == "surveying 3955 conditions with table"
