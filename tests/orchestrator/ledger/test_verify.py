"""verify: one streaming pass that checks the chain and rebuilds the projections, comparing rows as column tuples."""

from __future__ import annotations

import gc
import sqlite3
import threading

import pytest

from orchestrator.ledger import verify
from vocabulary.events import CampaignStarted, Observed


def _observations(ledger, n: int, cid: str = "v") -> None:
    ledger.append(cid, CampaignStarted(name="v", seed=0, spec={}), key="start")
    ledger.append_many(cid, [(Observed(iteration=0, job_key=f"{cid}/{i}", candidate_id=f"c{i}", arm="bo",
                                       value=float(i), sim_time_s=float(i)), f"o{i}") for i in range(n)])


def test_a_flipped_boolean_column_is_one_difference_shown_as_booleans(ledger, tmp_path):
    _observations(ledger, 30)
    assert verify(ledger, "v").is_identical  # SQLite's 0/1 equal the rebuilt False/True
    with sqlite3.connect(tmp_path / "ledger.db") as conn:
        conn.execute("UPDATE observation SET is_lab = 0 WHERE seq = 7")
    report = verify(ledger, "v")
    assert not report.is_identical and len(report.differences) == 1
    [difference] = report.differences
    assert (difference["table"], difference["key"]) == ("observation", ["v", 7, 0])  # (campaign, seq, ordinal)
    assert difference["stored"]["is_lab"] is False and difference["rebuilt"]["is_lab"] is True
    assert "updated_seq" not in difference["stored"] and "updated_seq" not in difference["rebuilt"]


def test_a_missing_and_an_extra_row_are_reported_in_key_order(ledger, tmp_path):
    _observations(ledger, 12)
    with sqlite3.connect(tmp_path / "ledger.db") as conn:
        conn.execute("DELETE FROM observation WHERE seq = 11")
        columns = ("candidate_id, source, fidelity, is_lab, status, value, properties, reason, cost_s, provenance, "
                   "sim_time_s, updated_seq")
        conn.execute(f"INSERT INTO observation (campaign_id, seq, ordinal, {columns}) "
                     f"SELECT campaign_id, 99, ordinal, {columns} FROM observation WHERE seq = 3")
    differences = verify(ledger, "v").differences
    assert [(d["key"], d["stored"] is None, d["rebuilt"] is None) for d in differences] == [
        (["v", 11, 0], True, False), (["v", 99, 0], False, True)]


@pytest.mark.parametrize("was_enabled", [True, False])
def test_verify_leaves_the_garbage_collector_as_it_found_it(ledger, was_enabled):
    _observations(ledger, 5)
    (gc.enable if was_enabled else gc.disable)()
    try:
        assert verify(ledger, "v").is_identical
        assert gc.isenabled() is was_enabled
    finally:
        gc.enable()


def test_concurrent_verifies_turn_the_collector_back_on_after_the_last(ledger):
    _observations(ledger, 200)
    assert gc.isenabled()
    barrier = threading.Barrier(4)
    results: list[bool] = []

    def run() -> None:
        barrier.wait()
        for _ in range(3):
            results.append(verify(ledger, "v").is_identical)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [True] * 12 and gc.isenabled()
