"""Lab job keys and jobs. A key names one lab run of one candidate in one campaign, so it is never run twice.

Example:
    >>> job_key("c1", "ABC"), job_key("c1", "ABC", attempt=2)
    ('c1/ABC', 'c1/ABC/retry2')
    >>> parse_job_key("c1", "c1/ABC/retry2")
    ('ABC', 2)
"""

from __future__ import annotations

from typing import Any

__all__ = ["job_key", "job_parameters", "make_job", "parse_job_key"]


def job_key(campaign_id: str, candidate_id: str, attempt: int = 1) -> str:
    """The idempotency key of a candidate's ``attempt``-th lab run (1-based)."""
    return f"{campaign_id}/{candidate_id}" + (f"/retry{attempt}" if attempt > 1 else "")


def parse_job_key(campaign_id: str, key: str) -> tuple[str, int]:
    """(candidate id, attempt) of a job key."""
    rest = key.removeprefix(f"{campaign_id}/")
    candidate_id, _, retry = rest.partition("/retry")
    return candidate_id, int(retry) if retry else 1


def job_parameters(candidate, ttl_s: float | None) -> dict[str, Any]:
    """What the instrument needs to run a candidate: its conditions (which the safety envelope checks), its
    reagents, and the job's time-to-live."""
    parameters: dict[str, Any] = {}
    values = getattr(candidate, "values", None)
    if values is not None:
        parameters.update(values)
        reagents = [v for v in values.values() if isinstance(v, str)]
    else:
        reagents = [getattr(candidate, "smiles", None) or getattr(candidate, "formula")]
    parameters["reagents"] = reagents
    if ttl_s is not None:
        parameters["ttl_s"] = ttl_s
    return parameters


def make_job(ctx, key: str):
    """The ``LabJob`` for a job key."""
    from instruments import LabJob

    candidate_id, _ = parse_job_key(ctx.campaign_id, key)
    candidate = ctx.pool.get(candidate_id)
    steps = {"steps": tuple(ctx.spec.lab.steps)} if ctx.spec.lab.steps else {}
    return LabJob(job_key=key, candidate=candidate, parameters=job_parameters(candidate, ctx.spec.lab.ttl_s), **steps)
