"""Campaign ids with any character (``/``, ``?``, ``#``, ``%``, spaces, unicode) on the dashboard: every link the
pages write leads to that campaign, and its Approve button answers it; and the token hand-off redirects only to a
path of this server."""

from __future__ import annotations

import re
from html import unescape

import pytest

from orchestrator.ledger import Ledger
from orchestrator.loop.campaign import Campaign
from tests.conftest import small_spec

pytest.importorskip("jinja2", reason='the dashboard extra is not installed: pip install "closedloop[dashboard]"')

from fastapi.testclient import TestClient  # noqa: E402

from orchestrator.interfaces.dashboard import create_app  # noqa: E402
from orchestrator.interfaces.dashboard.auth import local_path  # noqa: E402

LOCAL = "http://127.0.0.1:8765"
HOSTILE_IDS = ["Pd/C screen", "x", "x/approve", "a?b=1#frag", "50% yield %2F %41", "naïve ☃ 名前", "../up", "a//b/"]


def gated(db, campaign_ids):
    """Campaigns in ``db``, each waiting at its first human approval."""
    spec = small_spec(lab_experiments=4, approval__policy="interrupt", planner__control_share=0.0)
    for campaign_id in campaign_ids:
        with Campaign.start(spec, db=db, campaign_id=campaign_id) as campaign:
            campaign.run()
            assert campaign.pending_interrupt is not None
    return db


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory):
    """One ledger, a campaign per hostile id."""
    return gated(tmp_path_factory.mktemp("hostile") / "hostile.db", HOSTILE_IDS)


def links(html: str, attribute: str) -> list[str]:
    return [unescape(value) for value in re.findall(rf'{attribute}="([^"]*)"', html)]


def test_every_link_of_the_pages_leads_to_its_own_campaign(hostile_db):
    with TestClient(create_app(hostile_db), base_url=LOCAL) as client:
        listing = client.get("/")
        assert listing.status_code == 200
        rows = {unescape(cid): unescape(href)
                for cid, href in re.findall(r'data-campaign="([^"]*)">\s*<td><a href="([^"]*)"', listing.text)}
        assert sorted(rows) == sorted(HOSTILE_IDS)
        for campaign_id, href in rows.items():
            page = client.get(href)
            assert page.status_code == 200, (campaign_id, href, page.text)
            assert f"<h1>{campaign_id}</h1>" in page.text
            for url in [u for u in links(page.text, "hx-get") + links(page.text, "src") if u.startswith("/campaigns/")]:
                response = client.get(url)
                assert response.status_code == 200, (campaign_id, url)
                if "/fragments/status" in url:  # the fragment is of this campaign, not of one its id contains
                    assert f'<td id="n-events">{Ledger.open(hostile_db).n_events(campaign_id)}</td>' in response.text
            [events] = re.findall(r'data-events="([^"]*)"', page.text)
            with client.stream("GET", unescape(events)) as stream:
                assert stream.status_code == 200
        # an id typed into the address bar with its / as %2F finds the campaign too
        assert client.get("/campaigns/Pd%2FC%20screen").status_code == 200
        assert client.get("/campaigns/Pd/C%20screen").status_code == 404  # a real / is a separator


def test_the_approve_button_of_a_campaign_with_a_slash_answers_it(tmp_path):
    ledger = Ledger.open(gated(tmp_path / "answer.db", ["Pd/C screen", "x/approve", "x"]))
    app = create_app(ledger)
    with TestClient(app, base_url=LOCAL) as client:
        page = client.get("/campaigns/Pd%2FC%20screen").text
        [approve] = re.findall(r'hx-post="([^"]*/approve)"', page)
        assert unescape(approve) == "/campaigns/Pd%2FC%20screen/approve"
        keys = ledger.last_event("Pd/C screen", "ApprovalRequested").payload["job_keys"]
        answered = client.post(unescape(approve), data={"n_jobs": len(keys), "job_key": keys},
                               headers={"Origin": LOCAL}, follow_redirects=False)
        assert answered.status_code != 409, answered.text
        # a plain form is sent back to the campaign's own page, its id still one segment
        assert answered.status_code == 303 and answered.headers["location"] == "/campaigns/Pd%2FC%20screen"
        app.state.runs.get("Pd/C screen").join(timeout_s=120)
        assert client.get(answered.headers["location"]).status_code == 200
    approved = ledger.events("Pd/C screen", types=["Approved"])
    assert len(approved) == 1 and approved[0].payload["job_keys"] == keys
    assert not ledger.events("x/approve", types=["Approved"]) and not ledger.events("x", types=["Approved"])
    ledger.close()


def test_the_token_hand_off_never_redirects_to_another_site(hostile_db):
    with TestClient(create_app(hostile_db, token="s3cret"), base_url=LOCAL) as client:
        for path in ("//evil.example/", "//evil.example/campaigns", "///evil.example/"):
            opened = client.get(f"{LOCAL}{path}?token=s3cret", follow_redirects=False)
            assert opened.status_code == 303 and opened.headers["location"] == "/", path
        kept = client.get("/campaigns/Pd%2FC%20screen?token=s3cret&x=a%26b&y=%23", follow_redirects=False)
        assert kept.status_code == 303
        assert kept.headers["location"] == "/campaigns/Pd%2FC%20screen?x=a%26b&y=%23"


@pytest.mark.parametrize("path", ["//evil.example", "/\\evil.example", "/\t/evil.example", "/\n/evil.example",
                                  "https://evil.example/", "evil.example", "", "\\\\evil.example", "/ /x"])
def test_a_redirect_target_off_this_server_becomes_the_root(path):
    assert local_path(path) == "/"


@pytest.mark.parametrize("path", ["/", "/campaigns/gated", "/campaigns/Pd%2FC%20screen", "/campaigns/a%2F%2Fb"])
def test_a_path_of_this_server_is_kept(path):
    assert local_path(path) == path
