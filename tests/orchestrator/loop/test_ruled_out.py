"""Candidates the screen is bound to skip are never planned, so a campaign does not stall on them
(``loop/ruled_out.py``); a table rung's empty cell is no reason to skip (``Rung.is_computed``).

The computed-rung cases treat the table as a calculation (``is_computed`` patched true): its empty cells are then
deterministic failures, the same to the screen as a calculation that fails on those candidates every time."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from orchestrator.bench import BenchConfig, parse_rung
from orchestrator.bench.problem import pool_spec
from orchestrator.loop.campaign import Campaign
from orchestrator.loop.context import Rung
from orchestrator.space.pool import load_pool
from orchestrator.spec import validate_spec
from vocabulary.events import expand_batches

N, N_EMPTY = 40, 12


@pytest.fixture
def gappy_spec(tmp_path):
    """40 candidates on a line to maximise; the cheap rung (the lab value itself) is empty on the 12 best, which a
    GP extrapolating the rung-ranked cold start wants next."""
    x = np.linspace(0.0, 1.0, N)
    rung = np.where(np.arange(N) >= N - N_EMPTY, np.nan, x)
    pd.DataFrame({"x": x, "y": x, "cheap": rung}).to_csv(tmp_path / "pool.csv", index=False)
    config = BenchConfig(pool=str(tmp_path / "pool.csv"), id_cols=("x",), objective="maximize:y", lab_budget=20,
                         seeds=1, arms=("bo",), batch=4, rungs=(parse_rung("cheap=cheap:60"),))
    spec, *_ = pool_spec(config, tmp_path / "work")
    return spec


def _run(spec, tmp_path, name: str):
    with Campaign.start(spec, db=tmp_path / f"{name}.db", campaign_id=name) as campaign:
        summary = campaign.run()
        events = list(expand_batches(campaign.ledger.events(name)))
    pool = load_pool(spec)
    empty = {c.id for c, value in zip(pool.candidates, pool.columns["cheap"], strict=True) if not np.isfinite(value)}
    return summary, events, empty


@pytest.fixture
def computed(monkeypatch):
    monkeypatch.setattr(Rung, "is_computed", property(lambda self: True))


def test_a_table_rungs_empty_cell_is_no_evidence_and_the_candidate_can_reach_the_lab(gappy_spec, tmp_path):
    summary, events, empty = _run(gappy_spec, tmp_path, "table")
    assert summary["n_lab"] == 20 and summary["stop_reason"].startswith("lab budget used")
    dispatched = {e.payload["candidate_id"] for e in events if e.type == "Dispatched"}
    assert dispatched & empty, "the GP extrapolates to the best candidates, which have no rung value, and they pass"
    skipped = {e.payload["candidate_id"] for e in events if e.type == "Promoted" and e.payload["decision"] == "skip"}
    assert not skipped & empty
    no_value = [e.payload["observation"] for e in events if e.type == "Simulated"
                and e.payload["candidate_id"] in empty]
    assert no_value and all(o["status"] == "failed" and "has no value" in o["reason"] for o in no_value)


def test_a_computed_rung_that_failed_in_the_survey_rules_the_candidate_out(gappy_spec, tmp_path, computed):
    summary, events, empty = _run(gappy_spec, tmp_path, "survey")
    assert [e.payload["rung"] for e in events if e.type == "RungSurveyed"] == ["cheap"]
    assert len(empty) == N_EMPTY
    assert summary["n_lab"] == 20 and summary["stop_reason"].startswith("lab budget used")
    assert not {e.payload["candidate_id"] for e in events if e.type == "Proposed"} & empty


def test_with_more_budget_than_reachable_candidates_the_stop_says_how_many_were_left_out(gappy_spec, tmp_path,
                                                                                       computed):
    summary, _, _ = _run(gappy_spec.with_overrides(lab_budget=N - N_EMPTY + 4), tmp_path, "exhausted")
    assert summary["n_lab"] == N - N_EMPTY
    assert summary["stop_reason"].startswith("no proposals left")
    assert f"({N_EMPTY} untested candidate(s) are left out because a rung failed on them" in summary["stop_reason"]


def test_a_computed_rung_run_that_failed_is_not_planned_again(gappy_spec, tmp_path, computed):
    """Not surveyed (no share of the compute budget for it), the screen runs the rung: each empty cell fails once,
    and its candidate is never proposed again."""
    data = gappy_spec.model_dump()
    data["budget"]["compute_seconds"] = 3600.0
    data["screening"]["survey_share"] = 0.0
    summary, events, empty = _run(validate_spec(data), tmp_path, "run")
    assert not [e for e in events if e.type == "RungSurveyed"]
    failed_at = {}
    for e in events:
        if e.type == "Simulated" and e.payload["observation"]["status"] == "failed":
            assert e.payload["candidate_id"] not in failed_at, "each failing candidate is run once"
            failed_at[e.payload["candidate_id"]] = e.payload["iteration"]
    assert failed_at and set(failed_at) <= empty
    again = [e.payload["candidate_id"] for e in events if e.type == "Proposed"
             and e.payload["iteration"] > failed_at.get(e.payload["candidate_id"], 10**9)]
    assert not again, "a candidate the rung failed on is never proposed again"
    assert summary["n_lab"] == 20 and summary["stop_reason"].startswith("lab budget used")
