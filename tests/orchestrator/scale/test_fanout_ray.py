"""Several campaigns run in parallel as Ray tasks on a local Ray instance, sharing one ledger, each exactly as it runs
alone."""

from __future__ import annotations

import pytest

from orchestrator.ledger import Ledger, verify
from orchestrator.loop.campaign import Campaign
from orchestrator.scale.fanout import run_campaign_task, run_campaigns_on_ray
from tests.conftest import small_spec

pytest.importorskip("ray", reason="needs ray: pip install 'closedloop[ray]'")


def _comparable(ledger, campaign_id):
    return [(e.seq, e.type, e.payload, e.idempotency_key) for e in ledger.events(campaign_id)]


@pytest.mark.ray
@pytest.mark.slow
def test_campaigns_run_in_parallel_as_ray_tasks(tmp_path):
    specs = [small_spec(lab_experiments=4).with_overrides(seed=seed) for seed in (1, 2, 3)]
    ids = [f"ray-{n}" for n in range(len(specs))]
    db = tmp_path / "fanout.db"
    summaries = run_campaigns_on_ray(specs, db=db, campaign_ids=ids, num_cpus=2)
    assert [s["campaign_id"] for s in summaries] == ids
    assert all(s["status"] == "stopped" and s["n_lab"] == 4 for s in summaries)

    ledger = Ledger.open(db)
    try:
        for spec, campaign_id in zip(specs, ids, strict=True):
            assert verify(ledger, campaign_id).is_identical
            with Campaign.start(spec, db=tmp_path / f"{campaign_id}.db", campaign_id=campaign_id) as alone:
                alone.run()
                assert _comparable(ledger, campaign_id) == _comparable(alone.ledger, campaign_id)
    finally:
        ledger.close()


def test_a_retried_task_resumes_its_campaign(tmp_path):
    """What Ray re-runs after a lost worker: the task finds its campaign in the ledger and carries on from there."""
    spec = small_spec(lab_experiments=4)
    db = tmp_path / "retry.db"
    with Campaign.start(spec, db=db, campaign_id="again") as campaign:
        campaign.run(max_steps=8)  # the first attempt died part-way
    summary = run_campaign_task(spec.model_dump(mode="json"), str(db), "again")
    with Campaign.start(spec, db=tmp_path / "alone.db", campaign_id="again") as alone:
        alone.run()
        ledger = Ledger.open(db)
        try:
            assert summary["status"] == "stopped"
            assert _comparable(ledger, "again") == _comparable(alone.ledger, "again")
        finally:
            ledger.close()
