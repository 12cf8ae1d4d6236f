"""The recorded lab values of a campaign, for the ``recorded`` lab driver of a what-if replay.

A what-if spec names the recorded campaign (``[lab] driver = "recorded"`` with ``db`` and ``campaign_id``
parameters); the engine reads that campaign's lab results here and hands the values to the driver, so the
instruments package never opens a ledger.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from orchestrator.ledger import Ledger

__all__ = ["recorded_measured", "recorded_values", "resolve_recorded_lab"]


def recorded_values(db: str, campaign_id: str) -> dict[str, float]:
    """Candidate id -> mean recorded lab value (successful lab results only)."""
    ledger = Ledger.open(db, read_only=True)  # the recorded campaign is only read (it may sit on an archive)
    try:
        values: dict[str, list[float]] = defaultdict(list)
        for event in ledger.events(campaign_id, types=["Observed"]):
            p = event.payload
            if p["status"] == "ok" and p["value"] is not None:
                values[p["candidate_id"]].append(float(p["value"]))
    finally:
        ledger.close()
    return {cid: sum(v) / len(v) for cid, v in values.items()}


def recorded_measured(db: str, campaign_id: str) -> dict[str, dict[str, float]]:
    """Every other property the recorded lab measured (further objectives, constraints): property -> candidate id ->
    mean recorded value, over successful lab results; NaN for a candidate measured without it. Empty for a
    campaign with one objective."""
    ledger = Ledger.open(db, read_only=True)
    try:
        values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        measured: set[str] = set()
        for event in ledger.events(campaign_id, types=["Observed"]):
            p = event.payload
            if p["status"] != "ok" or p["value"] is None:
                continue
            measured.add(p["candidate_id"])
            for name, value in (p.get("values") or {}).items():
                if value is not None:
                    values[name][p["candidate_id"]].append(float(value))
    finally:
        ledger.close()
    return {name: {cid: (sum(by_id[cid]) / len(by_id[cid]) if by_id.get(cid) else float("nan")) for cid in measured}
            for name, by_id in values.items()}


def resolve_recorded_lab(params: dict[str, Any]) -> dict[str, Any]:
    """The ``recorded`` driver's keyword arguments: ``db`` and ``campaign_id`` replaced by the recorded ``values``
    (and, for several measured properties, ``measured_values``)."""
    if "values" in params or "db" not in params:
        return params
    rest = {k: v for k, v in params.items() if k not in {"db", "campaign_id"}}
    measured = recorded_measured(params["db"], params["campaign_id"])
    return {**rest, "values": recorded_values(params["db"], params["campaign_id"]),
            **({"measured_values": measured} if measured else {})}
