"""The campaign page's Pareto front (issue 48): its plots and the table of non-dominated results for several
objectives, nothing new for one."""

from __future__ import annotations

import re

import pytest

from orchestrator.ledger import Ledger
from orchestrator.loop.campaign import Campaign
from orchestrator.loop.front import ledger_front
from tests.orchestrator.replay.test_report_front import front_spec

pytest.importorskip("jinja2", reason='the dashboard extra is not installed: pip install "closedloop[dashboard]"')

from fastapi.testclient import TestClient  # noqa: E402

from orchestrator.interfaces.dashboard import create_app  # noqa: E402
from orchestrator.interfaces.dashboard.views import pareto_front  # noqa: E402

LOCAL = "http://127.0.0.1:8765"


@pytest.fixture(scope="module")
def ledger_db(tmp_path_factory):
    """One ledger with a two-objective campaign ("two") and a one-objective one ("one") on the same pool."""
    tmp = tmp_path_factory.mktemp("front-dash")
    pool = tmp / "pool.csv"
    pool.write_text("\n".join(["x,y,a,b,c"] + [f"{x},{y},{x + y},{x - y + 10},{(3 * x + y) % 4}"
                                              for x in range(4) for y in range(4)]) + "\n")
    db = tmp / "ledger.db"
    for campaign_id, n in (("two", 2), ("one", 1)):
        spec = front_spec(str(pool), n_objectives=n, seed=5, lab_experiments=8)
        with Campaign.start(spec, db=db, campaign_id=campaign_id) as run:
            run.run()
    return db


@pytest.fixture
def client(ledger_db):
    with TestClient(create_app(ledger_db, poll_s=0.05), base_url=LOCAL) as test_client:
        yield test_client


def test_the_page_of_a_two_objective_campaign_shows_the_front(client, ledger_db):
    page = client.get("/campaigns/two")
    assert page.status_code == 200
    assert 'id="front-table"' in page.text
    for name in ("pareto", "hypervolume"):
        assert f'src="/campaigns/two/plots/{name}.png' in page.text
        response = client.get(f"/campaigns/two/plots/{name}.png")
        assert response.status_code == 200 and response.content[:4] == b"\x89PNG" and len(response.content) > 5_000
    ledger = Ledger.open(ledger_db)
    try:
        from orchestrator.loop.resume_policy import recorded_spec

        front = ledger_front(ledger, "two", recorded_spec(ledger, "two"))
    finally:
        ledger.close()
    table = re.search(r'<table class="front" id="front-table">(.*?)</table>', page.text, re.S).group(1)
    labels = re.findall(r'<td class="label">(.*?)</td>', table)
    assert sorted(labels) == sorted(p.label for p in front.points)  # exactly the non-dominated results, by label
    assert all(label.startswith("x=") for label in labels)
    assert f"{len(front.points)} of {front.n_results} results non-dominated" in page.text
    headers = re.findall(r"<th>(.*?)</th>", table)
    assert headers == ["candidate", "arm", "a (%)", "b (nm)", "c (constraint)"]
    # the plots fragment htmx swaps in carries the front too
    fragment = client.get("/campaigns/two/fragments/plots")
    assert fragment.status_code == 200 and 'id="front-table"' in fragment.text


def test_a_one_objective_campaign_shows_nothing_new(client):
    page = client.get("/campaigns/one")
    assert page.status_code == 200
    assert "Pareto front" not in page.text and "front-table" not in page.text
    assert "pareto.png" not in page.text and "hypervolume.png" not in page.text
    for name in ("funnel", "best_so_far", "gantt", "rewards"):
        assert f'src="/campaigns/one/plots/{name}.png' in page.text
    assert client.get("/campaigns/one/plots/pareto.png").status_code == 404


def test_the_front_panel_reads_the_ledger_alone(ledger_db):
    from orchestrator.loop.resume_policy import recorded_spec

    ledger = Ledger.open(ledger_db)
    try:
        panel = pareto_front(ledger, "two", recorded_spec(ledger, "two"))
        assert pareto_front(ledger, "one", recorded_spec(ledger, "one")) is None
    finally:
        ledger.close()
    assert panel["rows"] and all(len(r["values"]) == 3 for r in panel["rows"])
    assert all(float(r["values"][2]) >= 1.0 for r in panel["rows"])  # every front point meets the constraint


def test_the_lab_results_table_lists_every_other_measurement_with_its_unit(client):
    two = client.get("/campaigns/two/fragments/results").text
    assert "other measurements" in two and re.search(r"b [\d.]+ nm, c [\d.]+", two)
    assert "other measurements" not in client.get("/campaigns/one/fragments/results").text
