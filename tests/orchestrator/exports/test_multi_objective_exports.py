"""Exports of a campaign with two objectives carry every measured property of each result, and their prompts name
both objectives."""

from __future__ import annotations

import json

import pytest

from orchestrator.exports import export_campaign, trajectory_records
from orchestrator.loop.campaign import Campaign
from tests.rewards.two_objectives import pool_rows, two_objective_spec

TRUTH = {(round(r["a"], 3), round(r["b"], 3)) for r in pool_rows()}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    db = tmp_path_factory.mktemp("ex2") / "c.db"
    with Campaign.start(two_objective_spec(), db=db, campaign_id="ex2") as campaign:
        campaign.run()
        yield campaign.ledger, trajectory_records(campaign.ledger, "ex2")


def test_trajectory_records_carry_both_objectives_values(recorded):
    _, records = recorded
    measured = [r["lab"] for r in records if r["lab"] and r["lab"]["status"] == "ok"]
    assert len(measured) == 8
    for lab in measured:
        assert set(lab["values"]) == {"a", "b"} and lab["values"]["a"] == lab["value"]
        assert (lab["values"]["a"], lab["values"]["b"]) in TRUTH
    assert all("maximize a" in r["prompt"] and "minimize b" in r["prompt"] and "Pareto front" in r["prompt"]
               for r in records)


def test_every_format_carries_every_measured_property(recorded, tmp_path):
    ledger, records = recorded
    export_campaign(ledger, "ex2", "native", tmp_path / "native")
    native = [json.loads(line) for line in (tmp_path / "native" / "trajectories.jsonl").read_text().splitlines()]
    assert [r["lab"] for r in native] == [r["lab"] for r in records]
    export_campaign(ledger, "ex2", "verifiers", tmp_path / "verifiers")
    rows = [json.loads(line) for line in (tmp_path / "verifiers" / "results.jsonl").read_text().splitlines()]
    answers = [json.loads(row["answer"]) for row in rows if row["answer"]]
    assert len(answers) == 8 and all(set(a) == {"a", "b"} for a in answers)
    export_campaign(ledger, "ex2", "trl-grpo", tmp_path / "grpo")
    grpo = [json.loads(line) for line in (tmp_path / "grpo" / "train.jsonl").read_text().splitlines()]
    with_lab = [row for row in grpo if row["reference_value"] is not None]
    assert with_lab and all(set(row["reference_values"]) == {"a", "b"} for row in with_lab)
    prompt = grpo[-1]["prompt"][-1]["content"]
    assert "maximize a; minimize b" in prompt and ", b=" in prompt
