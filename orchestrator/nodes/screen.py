"""screen: climb the ladder with cost-aware escalation, then promote the most promising survivors to the lab.

Per rung, in order:

- a rung without a proxy (a filter such as descriptors or charge balance) runs on every climbing candidate;
- a proxy rung that has proved uninformative about the lab is skipped by the main arm (the control arm keeps
  running it, so its informativeness keeps being measured);
- otherwise, once there is lab data, main-arm candidates climb in order of expected value of information per
  second of the rung's cost (``orchestrator.escalation``); the rest are held at the rung they reached.

A failed rung result stops the candidate. Every decision is a ``Promoted`` event with its numbers. At the top, the
main arm's survivors are ranked by expected improvement on the fused belief (lab surrogate plus calibrated rungs),
or by the proxy before any lab data; the control arm is promoted in proposal order, so it stays an honest control.
"""

from __future__ import annotations

import math

import numpy as np

from ..beliefs import lab_beliefs, rung_calibrations
from ..context import CampaignContext, Rung
from ..escalation import Belief, decision_threshold, promote_by_value_per_cost
from ..events import Promoted, Proposed, Simulated
from ..history import iteration_payloads, lab_history
from ..rung_digest import rung_digest
from ..screening import run_rung
from ..state import CampaignState

__all__ = ["screen"]


def _promoted(iteration, cid, from_rung, to_rung, decision, reason, score=None, numbers=None):
    payload = Promoted(iteration=iteration, candidate_id=cid, from_rung=from_rung, to_rung=to_rung, decision=decision,
                       score=score, reason=reason, numbers=numbers or {})
    return payload, f"it{iteration}:promoted:{to_rung}:{cid}"


class _Ladder:
    """The climb of one iteration's candidates: who is still climbing, who survived, and what each believes."""

    def __init__(self, state: CampaignState, ctx: CampaignContext):
        self.ctx, self.iteration = ctx, state["iteration"]
        self.arm = {p.candidate_id: p.arm for p in iteration_payloads(ctx, Proposed.type, self.iteration)}
        self.main = ctx.spec.planner.main
        self.slots: dict[str, int] = state.get("slots", {})
        self.n_main_slots = self.slots.get(self.main, 0)
        self.climbing = list(state.get("valid", []))
        self.survivors = list(self.climbing)
        self.calibrations = rung_calibrations(ctx)
        self.beliefs: dict[str, Belief] | None = lab_beliefs(ctx, self.climbing)
        self.proxies: dict[str, float] = {}
        self.items: list = []
        self.previous = "proposal"
        self._ranking = "planner order"
        self.allowance_s = self._compute_allowance_s()

    def _compute_allowance_s(self) -> float | None:
        """Compute this iteration may spend: the remaining compute budget paced over the remaining lab budget."""
        budget = self.ctx.spec.budget
        if budget.compute_seconds is None:
            return None
        # Only earlier iterations count: a re-run of this node after a crash must see what the first run saw.
        spent = rung_digest(self.ctx).compute_s_before(self.iteration)
        history = lab_history(self.ctx)
        remaining_lab = max(budget.lab_experiments - history.n_dispatched, 1)
        share = min(1.0, sum(self.slots.values()) / remaining_lab)
        return max(budget.compute_seconds - spent, 0.0) * share

    def _noise_sd(self, rung: Rung) -> float:
        sds = [b.sd for b in self.beliefs.values()] if self.beliefs else [1.0]
        return self.calibrations[rung.name].noise_sd(prior_sd=float(np.median(sds)))

    def choose(self, rung: Rung) -> list[str]:
        """Who runs this rung; records skip, hold and promote decisions."""
        spec = self.ctx.spec.screening
        calibration = self.calibrations.get(rung.name)
        mine = [c for c in self.climbing if self.arm[c] == self.main]
        others = [c for c in self.climbing if self.arm[c] != self.main]
        if calibration is not None:
            informative = calibration.is_informative(min_pairs=spec.min_pairs, min_informativeness=spec.min_informativeness)
            if informative is False:
                for cid in mine:
                    self.items.append(_promoted(
                        self.iteration, cid, self.previous, rung.name, "skip",
                        f"{rung.name} is uninformative about the lab: |ρ|={abs(calibration.spearman):.2f} on "
                        f"{calibration.n_pairs} pairs < {spec.min_informativeness}", numbers=calibration.as_numbers()))
                return others
            if self.beliefs is not None and mine:
                return self._by_value_per_cost(rung, mine) + others
        return self._in_order(rung, mine, calibration is not None) + others

    def _in_order(self, rung: Rung, mine: list[str], is_proxy: bool) -> list[str]:
        """Without a basis for value of information, the main arm climbs in planner order, within the allowance."""
        reason = "no lab data yet: climbs so the rung can be calibrated" if is_proxy else "filter rung"
        chosen = []
        for cid in mine:
            cost = float(rung.simulator.cost_model(self.ctx.pool.get(cid)))
            if self.allowance_s is not None and cost > self.allowance_s:
                self.items.append(_promoted(self.iteration, cid, self.previous, rung.name, "hold",
                                            f"compute allowance spent ({self.allowance_s:.3g} s left, needs {cost:.3g} s)",
                                            numbers={"cost_s": cost, "allowance_s": self.allowance_s}))
                continue
            if self.allowance_s is not None:
                self.allowance_s -= cost
            chosen.append(cid)
            if self.previous != "proposal":  # validate recorded the first step onto the ladder
                self.items.append(_promoted(self.iteration, cid, self.previous, rung.name, "promote", reason))
        held = set(mine) - set(chosen)
        self.climbing = [c for c in self.climbing if c not in held]
        return chosen

    def _by_value_per_cost(self, rung: Rung, mine: list[str]) -> list[str]:
        calibration = self.calibrations[rung.name]
        beliefs = {cid: self.beliefs[cid] for cid in mine}
        threshold = decision_threshold([b.mean for b in beliefs.values()], self.n_main_slots)
        noise = self._noise_sd(rung)
        costs = {cid: float(rung.simulator.cost_model(self.ctx.pool.get(cid))) for cid in mine}
        chosen = []
        ranked = promote_by_value_per_cost(beliefs, costs, noise, threshold, capacity=rung.spec.capacity,
                                           min_voi=1e-6 * max(noise, 1e-12), budget_s=self.allowance_s)
        if self.allowance_s is not None:
            self.allowance_s -= sum(costs[cid] for cid, _, _, is_in in ranked if is_in)
        for rank, (cid, voi, per_s, is_in) in enumerate(ranked):
            numbers = {"voi": voi, "voi_per_s": per_s, "cost_s": costs[cid], "threshold": _finite(threshold),
                       "allowance_s": self.allowance_s,
                       "mean": beliefs[cid].mean, "sd": beliefs[cid].sd, "noise_sd": noise, "rank": float(rank + 1),
                       **calibration.as_numbers()}
            why = (f"value of information {voi:.3g} per {costs[cid]:.3g} s = {per_s:.3g}/s, rank {rank + 1} of "
                   f"{len(ranked)}")
            self.items.append(_promoted(self.iteration, cid, self.previous, rung.name, "promote" if is_in else "hold",
                                        why, score=per_s, numbers=numbers))
            if is_in:
                chosen.append(cid)
        held = set(mine) - set(chosen)
        self.climbing = [c for c in self.climbing if c not in held]
        return [c for c in mine if c in chosen]

    def run(self, rung: Rung, to_run: list[str]) -> None:
        observations = run_rung(self.ctx, rung, [self.ctx.pool.get(cid) for cid in to_run])
        objective = self.ctx.spec.objective
        for cid, observation in zip(to_run, observations, strict=True):
            self.items.append((Simulated(iteration=self.iteration, candidate_id=cid, rung=rung.name,
                                         observation=observation.model_dump(mode="json")),
                               f"it{self.iteration}:simulated:{rung.name}:{cid}"))
            if observation.status == "failed":
                self.items.append(_promoted(self.iteration, cid, rung.name, "lab", "skip",
                                            f"{rung.name} failed: {observation.reason}"))
                self.climbing.remove(cid)
                self.survivors.remove(cid)
            elif rung.spec.proxy:
                value = observation.properties[rung.spec.proxy]
                self.proxies[cid] = value
                if self.beliefs is not None:
                    calibration = self.calibrations[rung.name]
                    self.beliefs[cid] = self.beliefs[cid].fuse(calibration.predict(objective.utility(value)),
                                                               self._noise_sd(rung))
        self.previous = rung.name

    def promote_to_lab(self) -> list[str]:
        top = self.previous
        promoted = []
        for arm in self.ctx.arms:
            mine = [c for c in self.survivors if self.arm[c] == arm]
            if arm == self.main:
                mine, scores = self._rank_main(mine)
            else:
                scores = {}
            n_slots = self.slots.get(arm, 0)
            for rank, cid in enumerate(mine):
                is_in = rank < n_slots
                score = scores.get(cid)
                reason = f"rank {rank + 1} of {len(mine)} in the {arm} arm for {n_slots} lab slot(s)"
                if score is not None:
                    reason += f" by {self._ranking} {score:.4g}"
                self.items.append(_promoted(self.iteration, cid, top, "lab", "promote" if is_in else "hold", reason,
                                            score=score))
                if is_in:
                    promoted.append(cid)
        return promoted

    def _rank_main(self, mine: list[str]) -> tuple[list[str], dict[str, float]]:
        history = lab_history(self.ctx)
        if self.beliefs is not None and history.results:
            from ..planners.acquisition import log_expected_improvement

            best = max(r[3] for r in history.results)
            mean = np.asarray([self.beliefs[c].mean for c in mine])
            sd = np.asarray([self.beliefs[c].sd for c in mine])
            scores = dict(zip(mine, log_expected_improvement(mean, sd, best).tolist(), strict=True)) if mine else {}
            self._ranking = "log expected improvement on the fused belief"
        elif self.proxies:
            scores = {c: self.ctx.spec.objective.utility(self.proxies[c]) for c in mine if c in self.proxies}
            self._ranking = "proxy utility"
        else:
            return mine, {}
        # stable sort: ties (and candidates without a score) keep the planner's own order
        return sorted(mine, key=lambda c: -scores.get(c, -math.inf)), scores


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def screen(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    ladder = _Ladder(state, ctx)
    for rung in ctx.rungs:
        if not ladder.climbing:
            break
        to_run = ladder.choose(rung)
        ladder.run(rung, to_run)
    promoted = ladder.promote_to_lab()
    ctx.ledger.append_many(ctx.campaign_id, ladder.items, actor="screen")
    return {"promoted": promoted}
