"""An interrupted campaign, resumed, ends with the same ledger as an uninterrupted one, on SQLite and on PostgreSQL
(with LangGraph's Postgres checkpointer)."""

from __future__ import annotations

import pytest

from orchestrator.ledger import verify
from orchestrator.loop.campaign import Campaign
from tests.conftest import small_spec


@pytest.fixture(params=["sqlite", "postgres"])
def db(request, tmp_path):
    """Where the interrupted campaign lives: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return tmp_path / "resumed.db"
    return request.getfixturevalue("postgres_url")


def _comparable(ledger, campaign_id):
    return [(e.seq, e.type, e.payload, e.idempotency_key) for e in ledger.events(campaign_id)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    spec = small_spec(lab_experiments=10)
    with Campaign.start(spec, db=tmp_path_factory.mktemp("ref") / "ref.db", campaign_id="same") as campaign:
        campaign.run()
        return spec, _comparable(campaign.ledger, "same")


@pytest.mark.parametrize("stops", [[4], [13, 7], [1, 1, 30]], ids=["mid-first-pass", "twice", "thrice"])
def test_resume_gives_the_same_ledger(reference, db, stops):
    spec, expected = reference
    with Campaign.start(spec, db=db, campaign_id="same") as campaign:
        campaign.run(max_steps=stops[0])
        assert not campaign.is_finished
    for n in stops[1:]:
        with Campaign.resume("same", db=db) as campaign:
            campaign.run(max_steps=n)
    with Campaign.resume("same", db=db) as campaign:
        summary = campaign.run()
        assert summary["status"] == "stopped"
        assert _comparable(campaign.ledger, "same") == expected
        assert verify(campaign.ledger, "same").is_identical


class SimulatedCrash(BaseException):
    """Raised inside a node, like a kill: not an Exception, so nothing on the way catches it."""


@pytest.mark.parametrize("event_type,nth", [("Dispatched", 2), ("Observed", 3), ("Observed", 6),
                                                     ("RewardEstimated", 12)])
def test_crash_inside_a_node_then_resume(reference, db, monkeypatch, event_type, nth):
    """The process dies in the middle of a node, after some of its events are in the ledger; the rerun is exact."""
    from orchestrator.ledger import Ledger

    spec, expected = reference
    original = Ledger.append_many
    seen = {"n": 0}

    def crashing_append_many(self, campaign_id, items, *, actor="orchestrator"):
        for payload, *_ in items:  # (payload, key) or (payload, key, actor, at)
            if payload.type == event_type:
                seen["n"] += 1
                if seen["n"] == nth:
                    raise SimulatedCrash(f"killed at {event_type} #{nth}")
        return original(self, campaign_id, items, actor=actor)

    monkeypatch.setattr(Ledger, "append_many", crashing_append_many)
    with pytest.raises(SimulatedCrash):
        with Campaign.start(spec, db=db, campaign_id="same") as campaign:
            campaign.run()
    monkeypatch.setattr(Ledger, "append_many", original)
    with Campaign.resume("same", db=db) as campaign:
        assert not campaign.is_finished
        campaign.run()
        assert _comparable(campaign.ledger, "same") == expected
        assert verify(campaign.ledger, "same").is_identical


def test_resume_of_unknown_campaign_is_explained(tmp_path):
    from vocabulary.domain import SetupError

    with pytest.raises(SetupError, match="not in"):
        Campaign.resume("ghost", db=tmp_path / "empty.db")


def test_crash_after_every_append_then_resume(reference, tmp_path, monkeypatch):
    """The process dies right after each append that added events, before LangGraph records the node as done, so
    every node is re-run after its own writes at every point of the campaign; the re-runs change nothing."""
    from orchestrator.ledger import Ledger

    spec, expected = reference
    db = tmp_path / "every.db"
    original = Ledger.append_many
    armed = {"on": False}

    def crashing_append_many(self, campaign_id, items, *, actor="orchestrator"):
        before = self.n_events(campaign_id)
        out = original(self, campaign_id, items, actor=actor)
        if armed["on"] and self.n_events(campaign_id) > before:
            armed["on"] = False
            raise SimulatedCrash("killed after an append")
        return out

    Campaign.start(spec, db=db, campaign_id="same").close()
    monkeypatch.setattr(Ledger, "append_many", crashing_append_many)
    n_crashes = 0
    while True:
        armed["on"] = True
        try:
            with Campaign.resume("same", db=db) as campaign:
                campaign.run()
            break
        except SimulatedCrash:
            n_crashes += 1
    monkeypatch.setattr(Ledger, "append_many", original)
    with Campaign.resume("same", db=db) as campaign:
        assert _comparable(campaign.ledger, "same") == expected
        assert verify(campaign.ledger, "same").is_identical
    assert n_crashes > 50
