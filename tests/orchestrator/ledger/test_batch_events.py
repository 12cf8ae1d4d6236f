"""Batch events: one ``Screened`` per screening round, one ``RungsValidated`` and one ``RungsAssessed`` per
iteration. A ledger written before them (one ``Simulated`` per rung result, one ``Promoted`` per decision, one
``RungValidated``/``RungAssessed`` per rung) still imports, migrates, projects, verifies and recomputes its rewards,
and folds to what the same campaign in today's shape folds to.

``data/old_screen_ledger.jsonl.gz`` is a real export of such a ledger: ``small_spec(lab_experiments=6)`` run by the
code before ``Screened`` (three screening rounds, 47 rung results and 54 decisions in 101 events).
"""

from __future__ import annotations

import gzip
from datetime import UTC
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from orchestrator.ledger import Ledger, verify
from orchestrator.ledger.jsonl import export_jsonl, import_jsonl
from orchestrator.loop.nodes.reward import recompute_rewards, stored_rewards
from orchestrator.loop.summary import summarise
from orchestrator.replay.report import ladder_funnel
from orchestrator.spec import validate_spec
from rewards import load_rubric
from vocabulary.events import (
    EventPayload,
    RewardEstimated,
    RewardFinalised,
    RungAssessment,
    RungDecision,
    RungRun,
    RungsAssessed,
    RungsValidated,
    RungValidity,
    Screened,
    Simulated,
    expand_batches,
    parse_payload,
)

OLD_EXPORT = Path(__file__).parents[1] / "data" / "old_screen_ledger.jsonl.gz"
CID = "old-screen"
_SEQ_COLUMNS = {"seq", "ordinal", "updated_seq", "first_seq", "started_seq", "dispatched_seq", "observed_seq",
                "superseded_by_seq"}


def _old_ledger(tmp_path: Path, name: str = "old") -> Ledger:
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(gzip.decompress(OLD_EXPORT.read_bytes()))
    ledger = Ledger.open(tmp_path / f"{name}.db")
    import_jsonl(path, ledger)
    return ledger


def _batch_of(e) -> str | None:
    """The batch event today's code writes an old per-item event into (None: it is written as it was)."""
    return {"Simulated": "Screened", "Promoted": "Screened", "RungValidated": "RungsValidated",
            "RungAssessed": "RungsAssessed"}.get(e.type)


def _batch(kind: str, events) -> EventPayload:
    first = events[0].payload
    if kind == "Screened":
        steps = [(RungRun if e.type == Simulated.type else RungDecision)(
            **{k: v for k, v in e.payload.items() if k != "iteration"}) for e in events]
        return Screened(iteration=first["iteration"], steps=steps)
    if kind == "RungsValidated":
        common = ("iteration", "base_rate", "success_threshold")
        return RungsValidated(**{k: first[k] for k in common}, rungs=[
            RungValidity(**{k: v for k, v in e.payload.items() if k not in common}) for e in events])
    return RungsAssessed(iteration=first["iteration"], rungs=[
        RungAssessment(**{k: v for k, v in e.payload.items() if k != "iteration"}) for e in events])


_BATCH_KEYS = {"Screened": "screened", "RungsValidated": "rungs-validated", "RungsAssessed": "rungs-assessed"}


def _in_todays_shape(events) -> list[tuple]:
    """The same campaign as today's code writes it: each run of per-item events one node wrote in one iteration
    (a screen step's ``Simulated``/``Promoted``, the reward node's ``RungValidated``, the learner's ``RungAssessed``)
    as one batch event (same key scheme), every other event as it was, reward records' seqs mapped to the new ones."""
    items, run, new_seq = [], [], {}

    def close_run():
        if run:
            kind = _batch_of(run[0])
            key = f"it{run[0].payload['iteration']}:{_BATCH_KEYS[kind]}"
            items.append((_batch(kind, run), key, run[0].actor, _utc(run[0].at)))
            run.clear()

    for e in events:
        kind = _batch_of(e)
        if run and (kind != _batch_of(run[0]) or e.payload["iteration"] != run[0].payload["iteration"]):
            close_run()
        if kind is not None:
            run.append(e)
            new_seq[e.seq] = len(items) + 1
            continue
        payload = dict(e.payload)
        if e.type in (RewardEstimated.type, RewardFinalised.type) and payload.get("supersedes_seq") is not None:
            payload["supersedes_seq"] = new_seq[payload["supersedes_seq"]]
        items.append((parse_payload(e.type, payload), e.idempotency_key.removeprefix(f"{CID}:"), e.actor,
                      _utc(e.at)))
        new_seq[e.seq] = len(items)
    close_run()
    return items


def _utc(moment):
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _rows(rows) -> list[dict]:
    """Projection rows without the columns that name seqs (the two shapes number their events differently)."""
    return [{k: v for k, v in row.model_dump().items() if k not in _SEQ_COLUMNS} for row in rows]


@pytest.fixture(scope="module")
def both_shapes(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("shapes")
    old = _old_ledger(tmp_path)
    new = Ledger.open(tmp_path / "new.db")
    new.append_many(CID, _in_todays_shape(old.events(CID)))
    yield old, new
    old.close()
    new.close()


def test_the_old_export_holds_per_step_screen_events(both_shapes):
    old, new = both_shapes
    old_types = [e.type for e in old.events(CID)]
    assert old_types.count("Simulated") == 47 and old_types.count("Promoted") == 54 and "Screened" not in old_types
    new_types = [e.type for e in new.events(CID)]
    assert new_types.count("Screened") == 3 and not {"Simulated", "Promoted"} & set(new_types)
    assert old_types.count("RungValidated") == 12 == 2 * new_types.count("RungsValidated")
    assert old_types.count("RungAssessed") == 12 == 2 * new_types.count("RungsAssessed")
    assert len(new_types) == len(old_types) - 101 + 3 - 12 + 6 - 12 + 6
    unseq = lambda events: [(e.type, {k: v for k, v in e.payload.items() if k != "supersedes_seq"})  # noqa: E731
                            for e in events]
    assert unseq(expand_batches(new.events(CID))) == unseq(old.events(CID))


def test_both_shapes_verify_and_project_alike(both_shapes):
    old, new = both_shapes
    assert verify(old, CID).is_identical and verify(new, CID).is_identical
    assert _rows(old.candidates(CID)) == _rows(new.candidates(CID))
    assert _rows(old.observations(CID)) == _rows(new.observations(CID))
    assert len([o for o in new.observations(CID) if not o.is_lab]) == 47
    assert _rows(old.lab_jobs(CID)) == _rows(new.lab_jobs(CID))
    assert _rows(old.scores(CID)) == _rows(new.scores(CID))
    assert _rows([old.campaign(CID)]) == _rows([new.campaign(CID)])
    statuses = {c.status for c in old.candidates(CID)}
    assert {"observed", "held"} <= statuses


def test_both_shapes_report_and_recompute_alike(both_shapes):
    from orchestrator.replay.report_rewards import rung_validity_rows

    old, new = both_shapes
    assert rung_validity_rows(old, CID) == rung_validity_rows(new, CID) and len(rung_validity_rows(new, CID)) == 12
    rungs = ["descriptors", "xtb", "gaff"]
    assert ladder_funnel(old, CID, rungs) == ladder_funnel(new, CID, rungs)
    summary_old, summary_new = summarise(old, CID), summarise(new, CID)
    assert summary_old["compute_s"] == summary_new["compute_s"] > 0
    rubric = load_rubric("default")
    for ledger in (old, new):
        events = ledger.events(CID)
        spec = validate_spec(events[0].payload["spec"], source="the ledger")
        recomputed = recompute_rewards(events, spec, rubric)
        assert {t: r.reward for t, r in recomputed.items()} == {t: e.payload["reward"]
                                                                for t, e in stored_rewards(events).items()}


def test_a_ledger_with_per_step_screen_events_migrates_and_takes_screening_rounds(tmp_path):
    """Revision 0005 re-keys the observation table; old ``Simulated`` rows keep theirs (ordinal 0) and a ``Screened``
    round appended afterwards projects one row per result."""
    from alembic import command

    from orchestrator.ledger.migrations import alembic_config

    ledger = _old_ledger(tmp_path)
    before = _rows(ledger.observations(CID))
    ledger.close()
    engine = create_engine(f"sqlite:///{tmp_path / 'old.db'}")
    with engine.begin() as conn:  # back to the schema before screening rounds
        command.downgrade(alembic_config(conn), "0004")
    engine.dispose()

    ledger = Ledger.open(tmp_path / "old.db")  # upgrades to head
    try:
        assert _rows(ledger.observations(CID)) == before
        assert verify(ledger, CID).is_identical
        last = max(e.payload.get("iteration", 0) for e in ledger.events(CID))
        observation = {"candidate_id": "X", "source": "xtb", "source_version": "1", "fidelity": 1, "status": "ok",
                       "properties": {"dg": -1.0}, "cost_s": 2.0}
        screened = ledger.append(CID, Screened(iteration=last + 1, steps=[
            RungRun(candidate_id="X", rung="xtb", observation=observation),
            RungDecision(candidate_id="X", from_rung="xtb", to_rung="gaff", decision="hold", reason="test"),
            RungRun(candidate_id="Y", rung="xtb", observation={**observation, "candidate_id": "Y"})]), key="round")
        rows = [o for o in ledger.observations(CID) if o.seq == screened.seq]
        assert [(o.ordinal, o.candidate_id, o.cost_s) for o in rows] == [(0, "X", 2.0), (1, "Y", 2.0)]
        assert verify(ledger, CID).is_identical
    finally:
        ledger.close()


def test_a_ledger_with_screening_rounds_exports_and_imports(both_shapes, tmp_path):
    _, new = both_shapes
    n = export_jsonl(new, CID, tmp_path / "new.jsonl")
    again = Ledger.open(tmp_path / "again.db")
    try:
        import_jsonl(tmp_path / "new.jsonl", again)
        assert n == again.n_events(CID)
        assert _rows(again.observations(CID)) == _rows(new.observations(CID))
        assert verify(again, CID).is_identical
    finally:
        again.close()
