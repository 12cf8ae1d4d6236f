"""What the campaign believes about candidates' lab utilities, and how well each rung predicts the lab.

Both are read from the campaign's view (folds over the ledger), so a resumed step computes exactly what the original
computed.
"""

from __future__ import annotations

import numpy as np

from orchestrator.loop.context import CampaignContext
from orchestrator.policy.escalation import Belief, RungCalibration, calibrate_rung

__all__ = ["lab_beliefs", "prior_rung", "proxy_values", "rung_calibrations"]


def proxy_values(ctx: CampaignContext, rung: str) -> dict[str, float]:
    """Successful values of a rung's declared proxy, by candidate id (the first evaluation wins)."""
    return ctx.view.rungs.values.get(rung, {})


def rung_calibrations(ctx: CampaignContext) -> dict[str, RungCalibration]:
    """Calibration of every proxy rung against the lab results so far, value on value (objective unit): of the
    objective the rung estimates (``RungSpec.estimates``, by default the first).

    Values, not utilities: a target window's utility ``-|v - t|`` folds both sides of the target together, so among
    candidates near the window a rung that predicts the value well looks like noise in utility (FreeSolv's GAFF:
    ρ 0.94 on values, about 0 on utilities). A rung's prediction of the lab utility is the utility of its
    calibrated value. The line is shrunk on the scale of the rung (over the pool when surveyed, else over its lab
    pairs; ``escalation.shrunk_calibration``), so it is the same in the lab's unit whatever unit the rung reports in.
    """
    history = ctx.view.history()
    view = ctx.view.ladder
    out = {}
    for rung in ctx.rungs:
        if not rung.spec.proxy:
            continue
        values = proxy_values(ctx, rung.name)
        estimated = ctx.spec.estimated_objective(rung.spec)
        if estimated.property == ctx.spec.objective.property:
            pairs = [(values[cid], value) for cid, _, value, _ in history.results if cid in values]
        else:  # a later objective: its lab value is among each result's measured properties
            pairs = [(values[cid], measured[estimated.property])
                     for (cid, *_), measured in zip(history.results, history.measured, strict=False)
                     if cid in values and np.isfinite(measured.get(estimated.property, np.nan))]
        # The scale of the shrinkage: the rung over the pool when it was surveyed, else over its lab pairs (never
        # over this iteration's own evaluations, so a screen re-run after a crash calibrates exactly as before).
        surveyed = view.values.get(rung.name) if view is not None else None
        seen = (surveyed[np.isfinite(surveyed)] if surveyed is not None
                else np.asarray([x for x, _ in pairs], dtype=float))
        spread = float(np.std(seen)) if len(seen) > 1 and np.std(seen) > 0 else None
        out[rung.name] = _calibrated(ctx, rung.name, pairs, spread, float(np.mean(seen)) if len(seen) else 0.0)
    return out


def _calibrated(ctx: CampaignContext, rung: str, pairs: list[tuple[float, float]], spread: float | None,
                centre: float) -> RungCalibration:
    """``calibrate_rung`` of these inputs, or the calibration the last call for this rung returned when its inputs
    were the same: ``learn`` and the next iteration's ``screen`` ask with the same lab results, and the rank
    correlation costs about a millisecond. One calibration per rung is kept, in the view."""
    memo = ctx.view.calibration_memo
    inputs = (tuple(pairs), spread, centre)
    found = memo.get(rung)
    if found is not None and found[0] == inputs:
        return found[1]
    calibration = calibrate_rung(rung, pairs, spread=spread, centre=centre)
    memo[rung] = (inputs, calibration)
    return calibration


def prior_rung(ctx: CampaignContext) -> str | None:
    """The rung the lab surrogate already uses as its prior mean (its evidence is in every belief), or None."""
    state = ctx.view.fits.latest_state
    return ((state or {}).get("prior") or {}).get("rung")


def lab_beliefs(ctx: CampaignContext, candidate_ids: list[str]) -> dict[str, Belief] | None:
    """Beliefs about lab utility from the lab surrogate (with its ladder prior, if it has one), or from the spread of
    lab results; None with no lab data."""
    history = ctx.view.history()
    if not candidate_ids:
        return {}
    utilities = np.asarray([r[3] for r in history.results], dtype=float)
    state = ctx.view.fits.latest_state
    if state is not None and len(history.results) >= 2:
        from orchestrator.policy.planners.bo import LabUtilityModel
        from orchestrator.policy.planners.ladder_prior import (
            prior_rows,
            surrogate_features,
        )

        view = ctx.view.ladder
        X = surrogate_features(ctx.pool.features, state.get("prior"), view.values if view is not None else None)
        observed = [ctx.pool.index[r[0]] for r in history.results]
        rows = [ctx.pool.index[c] for c in candidate_ids]
        values = np.asarray([r[2] for r in history.results], dtype=float)
        prior = prior_rows(state.get("prior"), view.values if view is not None else None, ctx.spec,
                           fitted_on=state.get("fitted_on", "utility"))
        model = LabUtilityModel(state, X[observed], utilities, values, ctx.spec.objective,
                                prior_train=None if prior is None else prior[observed])
        mean, sd = model.predict(X[rows], None if prior is None else prior[rows])
        return {cid: Belief(float(m), float(s)) for cid, m, s in zip(candidate_ids, mean, sd, strict=True)}
    if len(history.results) >= 2:
        spread = float(np.std(utilities)) or 1.0
        return {cid: Belief(float(np.mean(utilities)), spread) for cid in candidate_ids}
    return None
