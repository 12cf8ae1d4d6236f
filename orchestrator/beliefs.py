"""What the campaign believes about candidates' lab utilities, and how well each rung predicts the lab.

Both are folds over the ledger, so a resumed step computes exactly what the original computed.
"""

from __future__ import annotations

import math

import numpy as np

from .context import CampaignContext
from .escalation import Belief, RungCalibration, calibrate_rung
from .events import Simulated, SurrogateUpdated
from .history import lab_history

__all__ = ["lab_beliefs", "proxy_values", "rung_calibrations"]


def proxy_values(ctx: CampaignContext, rung: str, proxy: str) -> dict[str, float]:
    """Successful proxy values of one rung, by candidate id (the first evaluation wins)."""
    from .rung_digest import rung_digest

    digest = rung_digest(ctx)
    if digest.proxies.get(rung) == proxy:
        return digest.values[rung]
    values: dict[str, float] = {}  # not the rung's declared proxy: read the events
    for event in ctx.ledger.read_events(ctx.campaign_id, [Simulated.type]):
        p = event.payload
        if p["rung"] == rung and p["observation"]["status"] == "ok" and proxy in p["observation"]["properties"]:
            values.setdefault(p["candidate_id"], p["observation"]["properties"][proxy])
    return values


def rung_calibrations(ctx: CampaignContext) -> dict[str, RungCalibration]:
    """Calibration of every proxy rung against the lab results so far."""
    history = lab_history(ctx)
    objective = ctx.spec.objective
    out = {}
    for rung in ctx.rungs:
        if not rung.spec.proxy:
            continue
        values = proxy_values(ctx, rung.name, rung.spec.proxy)
        pairs = [(objective.utility(values[cid]), utility) for cid, _, _, utility in history.results if cid in values]
        out[rung.name] = calibrate_rung(rung.name, pairs)
    return out


def _latest_surrogate_state(ctx: CampaignContext) -> dict | None:
    for event in reversed(ctx.ledger.events(ctx.campaign_id, types=[SurrogateUpdated.type])):
        if event.payload["hyperparameters"]:
            return event.payload["hyperparameters"]
    return None


def lab_beliefs(ctx: CampaignContext, candidate_ids: list[str]) -> dict[str, Belief] | None:
    """Beliefs about lab utility from the lab surrogate, or from the spread of lab results; None with no lab data."""
    history = lab_history(ctx)
    if not candidate_ids:
        return {}
    utilities = np.asarray([r[3] for r in history.results], dtype=float)
    state = _latest_surrogate_state(ctx)
    if state is not None and len(history.results) >= 2:
        from .planners.bo import LabUtilityModel

        X = ctx.pool.features
        observed = [ctx.pool.index[r[0]] for r in history.results]
        values = np.asarray([r[2] for r in history.results], dtype=float)
        model = LabUtilityModel(state, X[observed], utilities, values, ctx.spec.objective)
        mean, sd = model.predict(X[[ctx.pool.index[c] for c in candidate_ids]])
        return {cid: Belief(float(m), float(s)) for cid, m, s in zip(candidate_ids, mean, sd, strict=True)}
    if len(history.results) >= 2:
        spread = float(np.std(utilities)) or 1.0
        return {cid: Belief(float(np.mean(utilities)), spread) for cid in candidate_ids}
    return None


def prior_from_proxies(calibrated: dict[str, float]) -> Belief:
    """Before any lab data: a vague belief centred on the calibrated proxies of this batch."""
    values = np.asarray(list(calibrated.values()), dtype=float)
    if len(values) == 0:
        return Belief(0.0, 1.0)
    spread = float(np.std(values)) if len(values) > 1 else 0.0
    return Belief(float(np.mean(values)), spread if spread > 0 and math.isfinite(spread) else 1.0)
