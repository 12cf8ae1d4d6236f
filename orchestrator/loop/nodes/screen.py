"""screen: climb the ladder with cost-aware escalation, then promote the most promising survivors to the lab.

Every arm gets the same screen, applied to its own proposals for its own lab slots, so the control differs from the
main arm only in its planner. The iteration's compute allowance (and a rung's capacity) is shared between the arms in
proportion to their lab slots. Per rung, in order:

- a rung without a proxy (a filter such as descriptors or charge balance) runs on every climbing candidate, in
  planner order, within the arm's allowance;
- a proxy rung that has proved uninformative about the lab is skipped by every arm;
- otherwise, once there is lab data, an arm's candidates climb in order of expected value of information per second
  of the rung's cost (``orchestrator.policy.escalation``), against the cut-off of that arm's lab slots; the rest are held at
  the rung they reached.

When no arm plans with the ladder (``uses_ladder``: random, bo-sf, botorch), proxy rungs are not run at all; filter
rungs still are. A rung surveyed over the whole pool (``ladder_view``) is read, not run, and is not fused twice when
the surrogate already uses it as its prior mean. A failed rung result stops the candidate. At the top, each arm's
survivors are ranked by expected improvement on the fused belief (lab surrogate plus calibrated rungs), or by the
proxy before any lab data, or else kept in planner order, and the best fill that arm's lab slots. With several
objectives a proxy rung estimates the objective its ``estimates`` names and is calibrated on that objective's lab
values; proxy rungs climb in planner order (the value-of-information rule is about one objective), and the survivors
are ranked by the front rank of the informative rungs' predictions (with the planner's expected value of the first
objective where no rung estimates it), planner order within a rank.

Every rung result and every decision, with the numbers behind it, is a step of the round's one ``Screened`` event, in
the order made (ledgers from before it hold a ``Simulated`` per result and a ``Promoted`` per decision).

A rung is calibrated on lab results of candidates it measured. So, once the lab candidates are chosen, a proxy rung
that is not yet calibrated (fewer than ``min_pairs`` pairs) runs on as many of them as it still needs, and one judged
uninformative runs on those it has not measured within each arm's allowance, so its verdict stays current
(``_Ladder.probe``). These calibration probes change no decision of the iteration.
"""

from __future__ import annotations

import itertools
import logging
import math

import numpy as np

from orchestrator.loop.beliefs import lab_beliefs, prior_rung, rung_calibrations
from orchestrator.loop.context import CampaignContext, Rung
from orchestrator.loop.screening import run_rung
from orchestrator.loop.state import CampaignState
from orchestrator.policy.escalation import (
    Belief,
    decision_threshold,
    promote_by_value_per_cost,
)
from vocabulary.domain import Observation
from vocabulary.events import RungDecision, RungRun, Screened

__all__ = ["apportion", "screen"]


logger = logging.getLogger(__name__)


def _promoted(cid, from_rung, to_rung, decision, reason, score=None, numbers=None) -> RungDecision:
    return RungDecision(candidate_id=cid, from_rung=from_rung, to_rung=to_rung, decision=decision, score=score,
                        reason=reason, numbers=numbers or {})


def _rung_run(cid: str, rung: Rung, observation: Observation) -> RungRun:
    return RungRun(candidate_id=cid, rung=rung.name, observation=observation.model_dump(mode="json"))


def apportion(total: int, slots: dict[str, int]) -> dict[str, int]:
    """Split a whole number between arms in proportion to their lab slots (largest remainder; ties to the earlier arm).

    Example:
        >>> apportion(5, {"bo": 3, "random": 1})
        {'bo': 4, 'random': 1}
    """
    n_slots = sum(slots.values())
    if n_slots <= 0:
        return {arm: 0 for arm in slots}
    quotas = {arm: total * n / n_slots for arm, n in slots.items()}
    out = {arm: int(math.floor(q)) for arm, q in quotas.items()}
    by_remainder = sorted(slots, key=lambda arm: -(quotas[arm] - out[arm]))  # stable: ties keep the arms' order
    for arm in by_remainder[: total - sum(out.values())]:
        out[arm] += 1
    return out


class _Ladder:
    """The climb of one iteration's candidates: who is still climbing, who survived, and what each believes."""

    def __init__(self, state: CampaignState, ctx: CampaignContext):
        self.ctx, self.iteration = ctx, state["iteration"]
        self.arm = {p.candidate_id: p.arm for p in ctx.view.proposals.of_iteration(self.iteration)}
        self.slots: dict[str, int] = state.get("slots", {})
        self.arms = list(ctx.arms)
        self.climbing = list(state.get("valid", []))
        self.survivors = list(self.climbing)
        self.calibrations = rung_calibrations(ctx)
        self.beliefs: dict[str, Belief] | None = lab_beliefs(ctx, self.climbing)
        self.proxies: dict[str, float] = {}
        self.rung_values: dict[str, dict[str, float]] = {}
        """This round's proxy values per rung, by candidate id (run or read from a survey)."""
        self.items: list[RungRun | RungDecision] = []
        """The round's rung results and decisions, in the order made: recorded as one ``Screened`` event."""
        self.previous = "proposal"
        self.ran: dict[str, set[str]] = {}
        """Who ran each rung in this iteration's climb."""
        self.spent_s = 0.0
        """Compute charged in this iteration so far, seconds."""
        total = self._compute_allowance_s()
        n_slots = sum(self.slots.get(arm, 0) for arm in self.arms)
        self.allowance_s: dict[str, float | None] = {
            arm: None if total is None else total * self.slots.get(arm, 0) / max(n_slots, 1) for arm in self.arms}

    def _compute_allowance_s(self) -> float | None:
        """Compute this iteration may spend, seconds: the budget paced over the lab budget, unspent shares carried."""
        budget = self.ctx.spec.budget
        if budget.compute_seconds is None:
            return None
        # Only earlier iterations count: a re-run of this node after a crash must see what the first run saw.
        spent = self.ctx.view.rungs.compute_s_before(self.iteration)
        history = self.ctx.view.history()
        # Paced per lab experiment with carry-over: by the end of this batch, the ladder may have spent the budget's
        # share of the lab budget dispatched by then. What an iteration leaves unspent stays available, so a rung
        # dearer than one experiment's share (FreeSolv's GAFF hour) still runs every few experiments.
        lab_budget = max(budget.lab_experiments, 1)
        share = min(1.0, (history.n_dispatched + sum(self.slots.values())) / lab_budget)
        return min(max(budget.compute_seconds * share - spent, 0.0), max(budget.compute_seconds - spent, 0.0))

    def _noise_sd(self, rung: Rung) -> float:
        sds = [b.sd for b in self.beliefs.values()] if self.beliefs else [1.0]
        return self.calibrations[rung.name].noise_sd(prior_sd=float(np.median(sds)))

    def _group(self, arm: str, candidate_ids: list[str]) -> list[str]:
        return [c for c in candidate_ids if self.arm.get(c) == arm]

    def choose(self, rung: Rung) -> list[str]:
        """Who runs this rung; records skip, hold and promote decisions, by the same rules for every arm."""
        spec = self.ctx.spec.screening
        calibration = self.calibrations.get(rung.name)
        if calibration is not None:
            informative = calibration.is_informative(min_pairs=spec.min_pairs, min_informativeness=spec.min_informativeness)
            if informative is False:
                for cid in self.climbing:
                    self.items.append(_promoted(
                        cid, self.previous, rung.name, "skip",
                        f"{rung.name} is uninformative about the lab: ρ={calibration.spearman:.2f} on "
                        f"{calibration.n_pairs} pairs rules out ρ ≥ {spec.min_informativeness}",
                        numbers=calibration.as_numbers()))
                return []
        capacity = (None if rung.spec.capacity is None
                    else apportion(rung.spec.capacity, {arm: self.slots.get(arm, 0) for arm in self.arms}))
        chosen: list[str] = []
        for arm in self.arms:
            group = self._group(arm, self.climbing)
            if not group:
                continue
            if calibration is not None and self.beliefs is not None and not self.ctx.spec.is_multi_objective:
                chosen += self._by_value_per_cost(rung, arm, group, None if capacity is None else capacity[arm])
            else:
                chosen += self._in_order(rung, arm, group, calibration is not None)
        return chosen

    def _in_order(self, rung: Rung, arm: str, group: list[str], is_proxy: bool) -> list[str]:
        """Without a basis for value of information, an arm's candidates climb in planner order, within its allowance.

        A filter rung (no proxy) always runs: it is what keeps an invalid candidate out of the lab, and a candidate
        the pacing held before it would otherwise reach the lab unfiltered. It is still charged.
        """
        reason = "no lab data yet: climbs so the rung can be calibrated" if is_proxy else "filter rung"
        chosen = []
        for cid in group:
            cost = float(rung.simulator.cost_model(self.ctx.pool.get(cid)))
            allowance = self.allowance_s[arm]
            if is_proxy and allowance is not None and cost > allowance:
                self.items.append(_promoted(cid, self.previous, rung.name, "hold",
                                            f"the {arm} arm's compute allowance is spent ({allowance:.3g} s left, "
                                            f"needs {cost:.3g} s)", numbers={"cost_s": cost, "allowance_s": allowance}))
                continue
            if allowance is not None:
                self.allowance_s[arm] = allowance - cost
            chosen.append(cid)
            if self.previous != "proposal":  # validate recorded the first step onto the ladder
                self.items.append(_promoted(cid, self.previous, rung.name, "promote", reason))
        held = set(group) - set(chosen)
        self.climbing = [c for c in self.climbing if c not in held]
        return chosen

    def _by_value_per_cost(self, rung: Rung, arm: str, group: list[str], capacity: int | None) -> list[str]:
        calibration = self.calibrations[rung.name]
        beliefs = {cid: self.beliefs[cid] for cid in group}
        threshold = decision_threshold([b.mean for b in beliefs.values()], self.slots.get(arm, 0))
        noise = self._noise_sd(rung)
        costs = {cid: float(rung.simulator.cost_model(self.ctx.pool.get(cid))) for cid in group}
        chosen = []
        ranked = promote_by_value_per_cost(beliefs, costs, noise, threshold, capacity=capacity,
                                           min_voi=1e-6 * max(noise, 1e-12), budget_s=self.allowance_s[arm])
        if self.allowance_s[arm] is not None:
            self.allowance_s[arm] -= sum(costs[cid] for cid, _, _, is_in in ranked if is_in)
        for rank, (cid, voi, per_s, is_in) in enumerate(ranked):
            numbers = {"voi": voi, "voi_per_s": per_s, "cost_s": costs[cid], "threshold": _finite(threshold),
                       "allowance_s": self.allowance_s[arm],
                       "mean": beliefs[cid].mean, "sd": beliefs[cid].sd, "noise_sd": noise, "rank": float(rank + 1),
                       **calibration.as_numbers()}
            why = (f"value of information {voi:.3g} per {costs[cid]:.3g} s = {per_s:.3g}/s, rank {rank + 1} of "
                   f"{len(ranked)} in the {arm} arm")
            self.items.append(_promoted(cid, self.previous, rung.name, "promote" if is_in else "hold",
                                        why, score=per_s, numbers=numbers))
            if is_in:
                chosen.append(cid)
        held = set(group) - set(chosen)
        self.climbing = [c for c in self.climbing if c not in held]
        return [c for c in group if c in chosen]

    def run(self, rung: Rung, to_run: list[str]) -> None:
        observations = run_rung(self.ctx, rung, [self.ctx.pool.get(cid) for cid in to_run])
        objective = self.ctx.spec.objective
        self.ran.setdefault(rung.name, set()).update(to_run)
        self.spent_s += sum(o.cost_s or 0.0 for o in observations)
        for cid, observation in zip(to_run, observations, strict=True):
            self.items.append(_rung_run(cid, rung, observation))
            if observation.status == "failed":
                if not rung.is_computed:
                    continue  # an empty cell: nobody computed it, so it says nothing; the candidate climbs on
                self.items.append(_promoted(cid, rung.name, "lab", "skip",
                                            f"{rung.name} failed: {observation.reason}"))
                self.climbing.remove(cid)
                self.survivors.remove(cid)
            elif rung.spec.proxy:
                value = observation.properties[rung.spec.proxy]
                self.proxies[cid] = value
                self.rung_values.setdefault(rung.name, {})[cid] = value
                if self.beliefs is not None and self._estimates_the_first(rung):
                    calibration = self.calibrations[rung.name]
                    self.beliefs[cid] = self.beliefs[cid].fuse(objective.utility(calibration.predict(value)),
                                                               self._noise_sd(rung))
        self.previous = rung.name

    def read_survey(self, rung: Rung, values: np.ndarray) -> None:
        """A rung surveyed over the pool is read, not run (its compute was charged by the survey; its rung result
        says ``read_from: survey`` and costs 0 s): a failed calculation stops the candidate, a table's empty cell
        does not (``is_computed``); a value is fused into the belief
        unless the surrogate already has it as its prior mean (``beliefs.prior_rung``) or the rung has proved
        uninformative."""
        spec, objective = self.ctx.spec.screening, self.ctx.spec.objective
        calibration = self.calibrations.get(rung.name)
        informative = None if calibration is None else calibration.is_informative(
            min_pairs=spec.min_pairs, min_informativeness=spec.min_informativeness)
        is_fused = (self.beliefs is not None and informative is not False and rung.name != prior_rung(self.ctx)
                    and self._estimates_the_first(rung))
        for cid in list(self.climbing):
            value = float(values[self.ctx.pool.index[cid]])
            observation = Observation(  # the trajectory's evidence, as if run; its cost was charged by the survey
                candidate_id=cid, source=rung.simulator.name, source_version=str(rung.simulator.version),
                fidelity=int(rung.simulator.fidelity), cost_s=0.0, parameters={"read_from": "survey"},
                **({"properties": {rung.spec.proxy: value}} if math.isfinite(value)
                   else {"status": "failed", "reason": f"{rung.name} failed on it in the survey" if rung.is_computed
                         else f"{rung.name} has no value for it"}))
            self.items.append(_rung_run(cid, rung, observation))
            if not math.isfinite(value) and not rung.is_computed:
                continue  # an empty cell of a table: no evidence either way, the candidate climbs on without it
            if not math.isfinite(value):
                self.items.append(_promoted(cid, rung.name, "lab", "skip",
                                            f"{rung.name} failed on it in the survey"))
                self.climbing.remove(cid)
                self.survivors.remove(cid)
                continue
            self.proxies[cid] = value
            self.rung_values.setdefault(rung.name, {})[cid] = value
            if is_fused:
                self.beliefs[cid] = self.beliefs[cid].fuse(objective.utility(calibration.predict(value)),
                                                           self._noise_sd(rung))
        self.previous = rung.name

    def promote_to_lab(self) -> list[str]:
        """Each arm's survivors, ranked by the same rule, fill that arm's lab slots."""
        top = self.previous
        promoted = []
        for arm in self.arms:
            mine, scores, ranking = self._rank(self._group(arm, self.survivors))
            n_slots = self.slots.get(arm, 0)
            for rank, cid in enumerate(mine):
                is_in = rank < n_slots
                score = scores.get(cid)
                reason = f"rank {rank + 1} of {len(mine)} in the {arm} arm for {n_slots} lab slot(s)"
                if score is not None:
                    reason += f" by {ranking} {score:.4g}"
                self.items.append(_promoted(cid, top, "lab", "promote" if is_in else "hold", reason,
                                            score=score))
                if is_in:
                    promoted.append(cid)
        return promoted

    def probe(self, promoted: list[str]) -> None:
        """Calibration probes: run a proxy rung that is not (yet) informative on candidates going to the lab that it
        has not measured, so their lab results pair with it. The ranking is done by then, so a probe changes no
        decision of this iteration, and every arm's lab candidates are probed alike (taken in turn across arms).

        - A rung with fewer than ``min_pairs`` pairs (counting jobs in the lab and this batch) is probed on as many
          as it still needs, while the compute budget lasts: until it is calibrated it can inform nothing.
        - A rung judged uninformative (skipped in the climb) is probed within each arm's remaining allowance, so
          its verdict stays current and can change.
        """
        spec, budget = self.ctx.spec.screening, self.ctx.spec.budget
        known = self.ctx.view.rungs.values
        remaining_s = (None if budget.compute_seconds is None
                       else budget.compute_seconds - self.ctx.view.rungs.compute_s_before(self.iteration) - self.spent_s)
        pending = self.ctx.view.history().pending
        by_arm = [self._group(arm, promoted) for arm in self.arms]
        in_turn = [cid for row in itertools.zip_longest(*by_arm) for cid in row if cid is not None]
        # A re-run of this node (after a crash) finds this iteration's probes in the ledger already; it must decide as
        # the first run did, so a value first measured by a probe of this iteration does not count as known. The
        # round's other records are not probes: its climb (``ran``) and its reads of a survey, whose values were
        # known before the round.
        probed_now: dict[str, set[str]] = {}
        for payload in self._recorded_runs():
            is_survey_read = payload["observation"].get("parameters", {}).get("read_from") == "survey"
            if payload["candidate_id"] not in self.ran.get(payload["rung"], set()) and not is_survey_read:
                probed_now.setdefault(payload["rung"], set()).add(payload["candidate_id"])
        for rung in self.ctx.rungs:
            calibration = self.calibrations.get(rung.name)
            if calibration is None or rung.name not in known:
                continue
            verdict = calibration.is_informative(min_pairs=spec.min_pairs, min_informativeness=spec.min_informativeness)
            if verdict is True:
                continue
            measured = (set(known[rung.name]) - probed_now.get(rung.name, set())) | self.ran.get(rung.name, set())
            lacking = [cid for cid in in_turn if cid not in measured]
            n_wanted = len(lacking)
            if verdict is None:
                n_coming = sum(cid in measured for cid in (*pending, *promoted))
                n_wanted = max(spec.min_pairs - calibration.n_pairs - n_coming, 0)
            to_run = []
            for cid in lacking[:n_wanted] if verdict is None else lacking:
                cost = float(rung.simulator.cost_model(self.ctx.pool.get(cid)))
                if verdict is None:
                    if remaining_s is not None:
                        if cost > remaining_s:
                            continue
                        remaining_s -= cost
                else:
                    arm = self.arm[cid]
                    allowance = self.allowance_s[arm]
                    if allowance is not None:
                        if cost > allowance:
                            continue
                        self.allowance_s[arm] = allowance - cost
                to_run.append(cid)
            observations = run_rung(self.ctx, rung, [self.ctx.pool.get(cid) for cid in to_run])
            for cid, observation in zip(to_run, observations, strict=True):
                self.items.append(_rung_run(cid, rung, observation))
                self.spent_s += observation.cost_s or 0.0

    def _recorded_runs(self) -> list[dict]:
        """This iteration's rung results already in the ledger (a re-run after a crash), as ``Simulated`` payloads;
        ledgers from before ``Screened`` hold them as ``Simulated`` events."""
        return self.ctx.view.rungs.runs_of(self.iteration)

    def record(self) -> None:
        """Append the round as one ``Screened`` event (none when nothing was run or decided)."""
        if self.items:
            payload = Screened(iteration=self.iteration, steps=self.items)
            self.ctx.ledger.append(self.ctx.campaign_id, payload, key=f"it{self.iteration}:screened", actor="screen")

    def _estimates_the_first(self, rung: Rung) -> bool:
        """Whether a proxy rung estimates the first objective, the one the lab beliefs are about."""
        return self.ctx.spec.estimated_objective(rung.spec).property == self.ctx.spec.objective.property

    def _rank_on_the_front(self, mine: list[str]) -> tuple[list[str], dict[str, float], str]:
        """Several objectives: survivors by the front rank (``_front_ranking``) of what the informative rungs predict
        of each objective they estimate (the highest such rung per objective, its calibrated value's utility), with
        the planner's expected value of the first objective where no rung estimates it. Planner order within a
        rank, and planner order alone while no rung has proved informative (the planner ranked on every
        objective)."""
        spec = self.ctx.spec.screening
        predictions: dict[str, dict[str, float]] = {}
        for rung in self.ctx.rungs:  # cheapest first: a higher rung replaces a lower one's prediction
            calibration = self.calibrations.get(rung.name)
            if not rung.spec.proxy or calibration is None or calibration.is_informative(
                    min_pairs=spec.min_pairs, min_informativeness=spec.min_informativeness) is not True:
                continue
            objective = self.ctx.spec.estimated_objective(rung.spec)
            values = {**self.ctx.view.rungs.values.get(rung.name, {}), **self.rung_values.get(rung.name, {})}
            predicted = {c: float(objective.utility(calibration.predict(values[c]))) for c in mine if c in values}
            if predicted:
                predictions[objective.property] = predicted
        if not predictions or not mine:
            return mine, {}, "planner order (several objectives on a front)"
        first = self.ctx.spec.objective
        if first.property not in predictions:
            expected = {p.candidate_id: p.expected for p in self.ctx.view.proposals.of_iteration(self.iteration)}
            planned = {c: float(first.utility(expected[c])) for c in mine if expected.get(c) is not None}
            if planned:
                predictions = {f"{first.property} (planner)": planned, **predictions}
        ranked, scores = _front_ranking(predictions, mine)
        return ranked, scores, f"front rank of the predictions of {', '.join(predictions)} (1: non-dominated)"

    def _rank(self, mine: list[str]) -> tuple[list[str], dict[str, float], str]:
        """An arm's survivors, best first, their scores and the name of the ranking."""
        history = self.ctx.view.history()
        if self.ctx.spec.is_multi_objective:
            return self._rank_on_the_front(mine)
        if self.beliefs is not None and history.results:
            from orchestrator.policy.planners.acquisition import (
                log_expected_improvement,
            )

            best = max(r[3] for r in history.results)
            mean = np.asarray([self.beliefs[c].mean for c in mine])
            sd = np.asarray([self.beliefs[c].sd for c in mine])
            scores = dict(zip(mine, log_expected_improvement(mean, sd, best).tolist(), strict=True)) if mine else {}
            ranking = "log expected improvement on the fused belief"
        elif self.proxies:
            scores = {c: self.ctx.spec.objective.utility(self.proxies[c]) for c in mine if c in self.proxies}
            ranking = "proxy utility"
        else:
            return mine, {}, "planner order"
        # stable sort: ties (and candidates without a score) keep the planner's own order
        return sorted(mine, key=lambda c: -scores.get(c, -math.inf)), scores, ranking


def _front_ranking(predictions: dict[str, dict[str, float]], mine: list[str]) -> tuple[list[str], dict[str, float]]:
    """``mine`` sorted by front rank (1 = non-dominated) of their predicted utilities (``predictions``: objective ->
    candidate id -> utility). A candidate without a prediction for an objective is given the others' mean there
    (neither credit nor blame). Ties keep ``mine``'s (the planner's) order."""
    from vocabulary.pareto import front_ranks

    Y = np.asarray([[column.get(c, np.nan) for column in predictions.values()] for c in mine], dtype=float)
    means = [np.nanmean(Y[:, d]) if np.isfinite(Y[:, d]).any() else 0.0 for d in range(Y.shape[1])]
    Y = np.where(np.isnan(Y), np.asarray(means)[None, :], Y)
    ranks = front_ranks(Y) + 1
    order = sorted(range(len(mine)), key=lambda k: ranks[k])
    return [mine[k] for k in order], {mine[k]: float(ranks[k]) for k in order}


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def screen(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    ladder = _Ladder(state, ctx)
    view = ctx.view.ladder
    single_fidelity = not ctx.uses_ladder
    for rung in ctx.rungs:
        if not ladder.climbing:
            break
        if single_fidelity and rung.spec.proxy:
            continue  # no arm of this campaign plans with the ladder: its proxies would inform no decision
        if view is not None and rung.name in view.values:
            ladder.read_survey(rung, view.values[rung.name])
            continue
        to_run = ladder.choose(rung)
        ladder.run(rung, to_run)
    promoted = ladder.promote_to_lab()
    if not single_fidelity:
        ladder.probe(promoted)
    ladder.record()
    logger.info("screen: iteration %d, %d valid proposal(s), %s; %d promoted to the lab, %.1f s of compute",
                ladder.iteration, len(state.get("valid", [])),
                ", ".join(f"{name} ran {len(ids)}" for name, ids in ladder.ran.items()) or "no rung run",
                len(promoted), ladder.spent_s)
    return {"promoted": promoted}
