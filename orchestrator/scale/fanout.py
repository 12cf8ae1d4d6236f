"""Many campaigns in parallel, each a Ray task (``pip install 'closedloop[ray]'``).

Every task opens the shared ledger (a PostgreSQL URL, or a SQLite file when the Ray cluster is one machine), starts
its campaign, or resumes it if it is already in the ledger, and runs it to the end. A task whose worker dies is
retried by Ray and resumes from the campaign's last checkpoint, so a lost worker costs time, not results: the
campaign's idempotency keys make the retry's repeated steps no-ops.

The database URL travels to the tasks as an argument (Ray's object store), not in a ``runtime_env``, which Ray
records in its job metadata; closedloop itself never logs it unmasked.

Example (not run here: it starts a Ray instance)::

    summaries = run_campaigns_on_ray([spec_a, spec_b, spec_c], db="postgresql://…", num_cpus=4)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchestrator.spec import CampaignSpec
from vocabulary.domain import SetupError, import_optional

__all__ = ["run_campaign_task", "run_campaigns_on_ray"]

_SINGLE_THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def run_campaign_task(spec_json: dict[str, Any], db: str, campaign_id: str) -> dict[str, Any]:
    """The body of one Ray task: start or resume one campaign and run it to the end; return its summary."""
    from orchestrator.ledger import Ledger
    from orchestrator.loop.campaign import Campaign
    from orchestrator.spec import validate_spec

    spec = validate_spec(spec_json, source=f"campaign {campaign_id} (Ray task)")
    ledger = Ledger.open(db)
    try:
        if ledger.n_events(campaign_id):
            campaign = Campaign.resume(campaign_id, db=ledger)  # a retried task: carry on from the checkpoint
        else:
            campaign = Campaign.start(spec, db=ledger, campaign_id=campaign_id)
        with campaign:
            return campaign.run()
    finally:
        ledger.close()


def run_campaigns_on_ray(
    specs: Sequence[CampaignSpec],
    *,
    db: str | Path,
    campaign_ids: Sequence[str] | None = None,
    address: str | None = None,
    num_cpus: int | None = None,
    max_retries: int = 3,
) -> list[dict[str, Any]]:
    """Run campaigns as parallel Ray tasks; return their summaries in the order of ``specs``.

    Args:
        specs: one spec per campaign.
        db: the ledger they share: a PostgreSQL URL, or a SQLite file path on a one-machine cluster.
        campaign_ids: their ids (default ``{name}-{n}``); a campaign already in the ledger is resumed.
        address: the Ray cluster to join; None joins the one this process is connected to, or starts a local one.
        num_cpus: CPUs of a local instance started here.
        max_retries: how often Ray re-runs a task whose worker died (each retry resumes the campaign).
    """
    ray = import_optional("ray", "ray", "running campaigns on Ray")
    from orchestrator.ledger import database_url

    ids = list(campaign_ids) if campaign_ids is not None else [f"{s.campaign.name}-{n}" for n, s in enumerate(specs)]
    if len(ids) != len(specs) or len(set(ids)) != len(ids):
        raise SetupError(f"give one distinct campaign id per spec; got {len(ids)} ids for {len(specs)} specs: {ids}")
    url = database_url(db)
    if url == "sqlite://":
        raise SetupError("Ray tasks run in other processes and cannot share an in-memory ledger; give a file or URL")
    is_owner = not ray.is_initialized()
    if is_owner:
        local = {"num_cpus": num_cpus} if address is None else {}
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": dict(_SINGLE_THREAD_ENV)}, **local)
    try:
        task = ray.remote(num_cpus=1, max_retries=max_retries)(run_campaign_task)
        refs = [task.remote(spec.model_dump(mode="json"), url, cid) for spec, cid in zip(specs, ids, strict=True)]
        return ray.get(refs)
    finally:
        if is_owner:
            ray.shutdown()
