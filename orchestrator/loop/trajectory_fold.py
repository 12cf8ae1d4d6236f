"""The ledger folded, event by event, into the trajectories the reward node scores and the lab's outlook.

A trajectory is one proposal followed along the ladder (proposal → screen → dispatch → outcome); a lab slot an arm
left empty is a one-step ``plan`` trajectory. The fold keeps only what is still needed: the open trajectories (not
yet final) with their raw facts, the lab results and first proxy values that the outlook is fitted on, and the
stored reward records of the open trajectories. A final trajectory is dropped once its final record is in the
ledger, so memory follows the trajectories in flight and the lab's results, not the length of the ledger.

Events are fed in ledger order (``feed``); ``trajectories(k)`` then gives every open trajectory as of iteration
``k`` with the potential after each step. The success bar is the one ``CampaignStarted`` recorded
(``orchestrator.policy.success_bar``); a ledger from before it was recorded keeps the old rule, the running median of the
results when the spec sets no bar (``legacy_threshold``). Events of one iteration are appended before any of a later one, so feeding
by seq and feeding iteration by iteration (``recompute``) see the same thing.

Several objectives (``spec.is_multi_objective``): every lab result is also fed, in observed order, to a
``rewards.hypervolume.HypervolumeProgress``, and its outcome step carries every measured property
(``lab_values``), whether it meets the outcome constraints and the hypervolume it adds to the front before it
(``hypervolume_improvement``). A lab success is then a result that grows the front, so the base rate is the
Laplace-smoothed share of such results; a proxy rung, calibrated on the first objective only, does not move the
potential (it stays at the base rate) because no calibrated probability of growing the front exists yet.
"""

from __future__ import annotations

import sys
from array import array
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.loop.upcast import records
from orchestrator.policy.escalation import calibrate_rung
from orchestrator.policy.success_bar import (
    SuccessBar,
    first_results_threshold,
    legacy_threshold,
)
from orchestrator.spec import CampaignSpec
from vocabulary.events import Event

__all__ = ["Outlook", "StoredRecord", "Trajectory", "TrajectoryFold", "event_iteration"]

_REWARD_TYPES = ("RewardEstimated", "RewardFinalised")


def event_iteration(event: Event) -> int | None:
    """The iteration an event belongs to (a lab result: the iteration it was observed in); None if none."""
    p = event.payload
    if event.type == "Observed":
        return p["observe_iteration"] if p.get("observe_iteration") is not None else p.get("iteration")
    return p.get("iteration")


@dataclass
class Outlook:
    """What the lab has said so far: the success bar (utility), the base rate and each proxy rung's validity."""

    threshold: float | None
    base_rate: float
    validities: dict[str, Any]
    utilities: Sequence[float]


@dataclass(frozen=True)
class StoredRecord:
    """The fields of a stored reward or criterion-score record that decide whether a new one is needed."""

    iteration: int
    seq: int
    type: str
    payload: dict


@dataclass
class Trajectory:
    id: str
    arm: str
    candidate_id: str | None
    iteration: int
    proposal: dict | None = None
    rejection: str | None = None
    rejection_kind: str | None = None
    rungs: dict[str, dict] = field(default_factory=dict)
    """rung -> the observation of this proposal's screen."""
    dispatches: list[tuple[dict, int]] = field(default_factory=list)
    """(Dispatched payload, lab experiments dispatched before it)."""
    results: dict[str, tuple[dict, float | None]] = field(default_factory=dict)
    """job key -> (lab Observed payload, best lab utility before it)."""
    gains: dict[str, Any] = field(default_factory=dict)
    """Several objectives: job key -> (``rewards.hypervolume.HypervolumeGain``, measured properties, whether the
    outcome constraints are met)."""
    handled: dict[str, str] = field(default_factory=dict)
    """job key -> failure action."""
    steps: list = field(default_factory=list)
    """(StepContext, potential after it) pairs, in order (filled by ``TrajectoryFold.trajectories``)."""
    status: str = "provisional"
    finalised_at: int | None = None
    """Iteration of the stored ``RewardFinalised`` record, once the ledger has one."""
    rewards: list[StoredRecord] = field(default_factory=list)


def _rejection_kind(reason: str) -> str:
    """duplicate, out_of_space or invalid, from the validator's message (ledgers from before ``Rejected.kind``)."""
    if reason.startswith("duplicate"):
        return "duplicate"
    if "design space" in reason or "constraint" in reason:
        return "out_of_space"
    return "invalid"


def _latest_before(records: list[StoredRecord], iteration: int) -> StoredRecord | None:
    for record in reversed(records):
        if record.iteration < iteration:
            return record
    return None


class TrajectoryFold:
    """Incremental fold of one campaign's ledger into open trajectories and the outlook.

    ``keep_records`` also folds the reward node's own records (``RewardEstimated``/``RewardFinalised``) so that
    ``previous_reward`` can tell what is already stored; a recompute leaves it off.
    """

    def __init__(self, spec: CampaignSpec, *, keep_records: bool = True):
        self.spec = spec
        self.keep_records = keep_records
        self.last_seq = 0
        self._proxy_of = {r.name: r.proxy for r in spec.ladder if r.proxy}
        self._order = [r.name for r in spec.ladder]
        self._open: dict[str, Trajectory] = {}
        self._by_iteration_candidate: dict[tuple[int, str], list[Trajectory]] = defaultdict(list)
        self._by_arm_candidate: dict[tuple[str, str], list[Trajectory]] = defaultdict(list)
        self._job_owner: dict[str, Trajectory] = {}
        self._proposed: dict[int, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        self._slots: dict[int, dict[str, int]] = {}
        """iteration -> lab slots offered per arm (one ``SlotsOffered`` per iteration)."""
        self._n_dispatched = 0
        self._best: float | None = None
        self._result_ids: list[str] = []  # the lab results' candidates (interned) and utilities, in observed order
        self._utilities = array("d")
        self._proxy_values: dict[str, dict[str, float]] = {rung: {} for rung in self._proxy_of}
        self._verdicts: dict[tuple[str, str], dict] = defaultdict(dict)
        self.judge_answers: dict[str, str] = {}
        """Judge replies already in the ledger, by call key."""
        self.bar: SuccessBar | None = None
        """The success bar ``CampaignStarted`` recorded; None for ledgers from before it was recorded."""
        self._n_outlook_changes = 0  # bumped by every event that changes what ``outlook`` reads
        self._progress = None
        """Several objectives: the results' hypervolume progress (``rewards.hypervolume.HypervolumeProgress``)."""
        self._front_flags = array("b")  # several objectives: whether each lab result grew the front, in order
        if spec.is_multi_objective:
            from rewards.hypervolume import HypervolumeProgress
            from vocabulary.pareto import reference_in_utility

            given = spec.tradeoff.reference_point
            self._progress = HypervolumeProgress(
                reference_in_utility(spec.objective_list, given) if given is not None else None)
        self._outlook: tuple[int, Outlook] | None = None

    @classmethod
    def as_of(cls, spec: CampaignSpec, events: Iterable[Event], iteration: int) -> TrajectoryFold:
        """A fold of the events that belong to ``iteration`` or earlier (stored reward records left out)."""
        fold = cls(spec, keep_records=False)
        fold.feed(e for e in events if event_iteration(e) is None or event_iteration(e) <= iteration)
        return fold

    # ------------------------------------------------------------------------------------------------ feeding
    def feed(self, events: Iterable[Event]) -> None:
        """Fold events in, in ledger order."""
        for event in events:
            handler = getattr(self, f"_on_{event.type}", None)
            if handler is not None:
                handler(event)
            self.last_seq = max(self.last_seq, event.seq)

    def _on_CampaignStarted(self, event: Event) -> None:
        recorded = event.payload.get("success_bar")
        self.bar = SuccessBar.model_validate(recorded) if recorded is not None else None
        self._n_outlook_changes += 1

    def _on_Proposed(self, event: Event) -> None:
        p = event.payload
        i, arm, cid = p["iteration"], p["arm"], p["candidate_id"]
        self._proposed[i][arm].add(cid)
        t = Trajectory(f"it{i}:{arm}:{cid}", arm, cid, i, proposal=p)
        self._open[t.id] = t
        self._by_iteration_candidate[(i, cid)].append(t)
        self._by_arm_candidate[(arm, cid)].append(t)

    def _on_Rejected(self, event: Event) -> None:
        p = event.payload
        if p["stage"] == "validate":
            for t in self._by_iteration_candidate.get((p["iteration"], p["candidate_id"]), ()):
                t.rejection = p["reason"]
                t.rejection_kind = p.get("kind") or _rejection_kind(p["reason"])

    def _on_Simulated(self, event: Event) -> None:
        self._fold_rung_result(event.payload)

    def _on_Screened(self, event: Event) -> None:
        for kind, p in records(event):
            if kind == "Simulated":
                self._fold_rung_result(p)

    def _fold_rung_result(self, p: dict[str, Any]) -> None:
        observation = p["observation"]
        for t in self._by_iteration_candidate.get((p["iteration"], p["candidate_id"]), ()):
            t.rungs[p["rung"]] = observation
        prop = self._proxy_of.get(p["rung"])
        if prop and observation["status"] == "ok" and prop in observation["properties"]:
            values = self._proxy_values[p["rung"]]
            if p["candidate_id"] not in values:  # the first evaluation wins
                values[p["candidate_id"]] = observation["properties"][prop]
                self._n_outlook_changes += 1

    def _on_Dispatched(self, event: Event) -> None:
        p = event.payload
        n_used = self._n_dispatched
        self._n_dispatched += 1
        accepted = [t for t in self._by_arm_candidate.get((p["arm"], p["candidate_id"]), ()) if t.rejection is None]
        if accepted:
            t = accepted[-1]
            t.dispatches.append((p, n_used))
            self._job_owner[p["job_key"]] = t

    def _on_Observed(self, event: Event) -> None:
        p = event.payload
        best_before = self._best
        gain = None
        if p["status"] == "ok" and p["value"] is not None:
            u = self.spec.objective.utility(p["value"])
            self._best = u if self._best is None else max(self._best, u)
            self._result_ids.append(sys.intern(p["candidate_id"]))
            self._utilities.append(u)
            self._n_outlook_changes += 1
            if self._progress is not None:
                gain = self._add_to_front(p)
        owner = self._job_owner.get(p["job_key"])
        if owner is not None and p["provenance"] == "lab":
            owner.results[p["job_key"]] = (p, best_before)
            if gain is not None:
                owner.gains[p["job_key"]] = gain

    def _add_to_front(self, p: dict[str, Any]) -> tuple[Any, dict[str, float], bool | None]:
        """Several objectives: feed one ok result to the hypervolume progress; (gain, measured, meets)."""
        from vocabulary.pareto import utility_matrix

        spec = self.spec
        measured = {spec.objective.property: float(p["value"]),
                    **{k: float(v) for k, v in (p.get("values") or {}).items()}}
        meets = all(c.is_met(measured.get(c.property)) for c in spec.constraints) if spec.constraints else None
        row = [measured.get(o.property, float("nan")) for o in spec.objective_list]
        utilities = utility_matrix(spec.objective_list, [row])[0]
        if meets is False:
            utilities[:] = float("nan")  # a result that breaks a constraint is never on the front
        gain = self._progress.add(utilities)
        self._front_flags.append(gain.is_on_front)
        return gain, measured, meets

    def _on_FailureHandled(self, event: Event) -> None:
        owner = self._job_owner.get(event.payload["job_key"])
        if owner is not None:
            owner.handled[event.payload["job_key"]] = event.payload["action"]

    def _on_HumanVerdict(self, event: Event) -> None:
        from rewards import ScoreValue

        p = event.payload
        self._verdicts[(p["stage"], p["subject"])][p["criterion_id"]] = ScoreValue(value=p["value"], reason=p["reason"])

    def _on_SlotsOffered(self, event: Event) -> None:
        self.offer_slots(event.payload["iteration"], event.payload["slots"])

    def offer_slots(self, iteration: int, slots: dict[str, int]) -> None:
        """The lab slots offered per arm at ``iteration``, as its ``SlotsOffered`` records them (the reward node
        passes them before it appends the event; taking the same iteration's event again changes nothing)."""
        self._slots[iteration] = slots

    def _on_LLMCall(self, event: Event) -> None:
        if event.payload["key"].startswith("judge:"):
            self.judge_answers[event.payload["key"]] = event.payload["response"]

    def _on_reward_record(self, event: Event) -> None:
        p = event.payload
        t = self._open.get(p["subject"]) if p.get("arm") is not None else None
        if not self.keep_records:
            return
        if t is None and event.type == "RewardFinalised" and p.get("arm") is not None:
            # A one-step trajectory (an empty slot) is only built when scored: remember that it is done.
            t = self._open.setdefault(p["subject"], Trajectory(p["subject"], p["arm"], None, p["iteration"],
                                                               status="final"))
        if t is None:
            return
        t.rewards.append(StoredRecord(p["iteration"], event.seq, event.type, p))
        if event.type == "RewardFinalised" and t.finalised_at is None:
            t.finalised_at = p["iteration"]

    _on_RewardEstimated = _on_reward_record
    _on_RewardFinalised = _on_reward_record

    # ---------------------------------------------------------------------------------------------- reading
    def previous_reward(self, trajectory: Trajectory, iteration: int) -> StoredRecord | None:
        """The trajectory's latest stored reward record from an iteration before ``iteration``."""
        return _latest_before(trajectory.rewards, iteration)

    def outlook(self) -> Outlook:
        """The success bar, the base rate of lab success and every proxy rung's validity, as fed so far (computed
        again only after a lab result, a new proxy value or the bar has been fed; treat it as read-only)."""
        if self._outlook is None or self._outlook[0] != self._n_outlook_changes:
            self._outlook = (self._n_outlook_changes, self._compute_outlook())
        return self._outlook[1]

    def _compute_outlook(self) -> Outlook:
        from rewards.process import RungValidity, auroc, base_rate

        objective = self.spec.objective
        utilities = array("d", self._utilities)  # a snapshot, 8 bytes a result
        threshold = self.success_threshold(utilities)
        n_success = sum(u >= threshold for u in utilities) if threshold is not None else 0
        validities = {}
        for rung, values in self._proxy_values.items():
            pairs = [(objective.utility(values[cid]), u) for cid, u in zip(self._result_ids, utilities, strict=True)
                     if cid in values]
            calibration = calibrate_rung(rung, pairs)
            area = None
            if threshold is not None and pairs:
                area = auroc([x for x, _ in pairs], [y >= threshold for _, y in pairs])
            validities[rung] = RungValidity(rung=rung, n_pairs=calibration.n_pairs, spearman=calibration.spearman,
                                            auroc=area, intercept=calibration.intercept, slope=calibration.slope,
                                            residual_sd=calibration.residual_sd)
        if self._progress is not None:  # several objectives: a success grows the front
            return Outlook(threshold, base_rate(sum(self._front_flags), len(self._front_flags)), validities, utilities)
        return Outlook(threshold, base_rate(n_success, len(utilities)) if threshold is not None else 0.5, validities,
                       utilities)

    def success_threshold(self, utilities: list[float]) -> float | None:
        """The lab utility counted as a success: the recorded bar, else (older ledgers) the old rule."""
        if self.bar is None:
            return legacy_threshold(self.spec, utilities)
        if self.bar.source == "first_results":
            return first_results_threshold(self.bar, utilities)
        return self.bar.utility_threshold(self.spec.objective)

    def trajectories(self, iteration: int) -> tuple[list[Trajectory], Outlook]:
        """Every trajectory not final before ``iteration``, with its steps and status as of ``iteration``.

        Trajectories whose final record is from an earlier iteration are dropped here for good.
        """
        for tid in [tid for tid, t in self._open.items() if t.finalised_at is not None and t.finalised_at < iteration]:
            self._drop(self._open[tid])
        look = self.outlook()
        out = [t for t in self._open.values() if t.proposal is not None]
        for t in out:
            self._build(t, look)
        out.extend(self._abstentions(iteration))
        for i in [i for i in self._known_iterations() if i < iteration]:
            self._forget_iteration(i)
        return out, look

    def release_final(self, trajectories: list[Trajectory]) -> None:
        """Drop trajectories that came out final (a recompute, which stores no records, calls this)."""
        for t in trajectories:
            if t.status == "final" and t.id in self._open:
                self._drop(self._open[t.id])

    # ------------------------------------------------------------------------------------------- internals
    def _drop(self, t: Trajectory) -> None:
        self._open.pop(t.id, None)
        if t.candidate_id is not None and t.proposal is not None:
            siblings = self._by_arm_candidate.get((t.arm, t.candidate_id), [])
            if t in siblings:
                siblings.remove(t)
            if not siblings:
                self._by_arm_candidate.pop((t.arm, t.candidate_id), None)
        for payload, _ in t.dispatches:
            if self._job_owner.get(payload["job_key"]) is t:
                del self._job_owner[payload["job_key"]]

    def _known_iterations(self) -> set[int]:
        return {i for i, _ in self._by_iteration_candidate} | set(self._proposed)

    def _forget_iteration(self, iteration: int) -> None:
        """Nothing of an earlier iteration arrives any more: drop its look-up entries."""
        for key in [k for k in self._by_iteration_candidate if k[0] == iteration]:
            del self._by_iteration_candidate[key]
        self._proposed.pop(iteration, None)

    def _abstentions(self, iteration: int) -> list[Trajectory]:
        from rewards import StepContext

        out = []
        for i, slots in self._slots.items():
            if i > iteration:
                continue
            proposed = self._proposed.get(i, {})
            for arm, n_slots in slots.items():
                n_proposed = len(proposed.get(arm, ()))
                for j in range(max(n_slots - n_proposed, 0)):
                    tid = f"it{i}:{arm}:abstained:{j}"
                    done = self._open.get(tid)
                    if done is not None and done.finalised_at is not None and done.finalised_at < iteration:
                        continue
                    t = Trajectory(tid, arm, None, i, status="final")
                    if done is not None:
                        t.rewards, t.finalised_at = done.rewards, done.finalised_at
                    t.steps.append((StepContext(stage="plan", subject=arm, arm=arm, is_valid=True, n_slots=n_slots,
                                                n_proposed=n_proposed), 0.0))
                    self._open[tid] = t
                    out.append(t)
        self._slots = {i: slots for i, slots in self._slots.items() if i >= iteration}
        return out

    def _build(self, t: Trajectory, look: Outlook) -> None:
        from rewards import RungResult, StepContext
        from rewards.process import potential, success_probability

        spec, prior = self.spec, look.base_rate
        p, cid, arm = t.proposal, t.candidate_id, t.arm
        kind = t.rejection_kind
        common = dict(arm=arm, candidate=p["candidate"], hypothesis=p["hypothesis"], rationale=p["rationale"],
                      expected=p["expected"])
        t.steps = [(StepContext(stage="proposal", subject=cid, is_valid=kind != "invalid",
                                reason=t.rejection if kind == "invalid" else None, is_duplicate=kind == "duplicate",
                                is_in_space=kind != "out_of_space" if kind != "invalid" else None,
                                human_verdicts=self._verdicts.get(("proposal", cid), {}), **common),
                    0.0 if kind else prior)]
        if kind:
            t.status = "final"
            return
        phi = prior
        if t.rungs:
            statuses = {r: obs["status"] for r, obs in t.rungs.items()}
            results = {}
            for rung in self._order:
                obs = t.rungs.get(rung)
                if obs is None or rung not in self._proxy_of:
                    continue
                prop = self._proxy_of[rung]
                results[rung] = RungResult(status=obs["status"], value=obs["properties"].get(prop),
                                           sd=obs.get("uncertainty", {}).get(prop))
            if any(s != "ok" for s in statuses.values()):
                phi = 0.0
            else:
                reached = [r for r in self._order if r in results and results[r].value is not None]
                if reached and look.threshold is not None and self._progress is None:
                    top = reached[-1]
                    validity = look.validities[top]
                    probability = success_probability(validity, spec.objective.utility(results[top].value),
                                                      look.threshold)
                    phi = potential(prior, probability, validity.weight)
            t.steps.append((StepContext(stage="screen", subject=cid, is_valid=True, screen_statuses=statuses,
                                        rung_results=results, human_verdicts=self._verdicts.get(("screen", cid), {}),
                                        **common), phi))
        for d, n_used in t.dispatches:
            job = d["job_key"]
            t.steps.append((StepContext(stage="dispatch", subject=job, arm=d["arm"], is_valid=True,
                                        n_lab_used=n_used, lab_budget=spec.budget.lab_experiments,
                                        human_verdicts=self._verdicts.get(("dispatch", job), {})), phi))
            if job not in t.results:
                continue
            result, best_before = t.results[job]
            ok = result["status"] == "ok" and result["value"] is not None
            utility = spec.objective.utility(result["value"]) if ok else None
            success = (utility >= look.threshold) if ok and look.threshold is not None else None
            several = {}
            if job in t.gains:  # several objectives: the success is growing the front
                gain, measured, meets = t.gains[job]
                success = gain.is_on_front
                several = dict(lab_values=measured, hypervolume_improvement=gain.improvement,
                               meets_constraints=meets)
            if success is not None:
                phi = 1.0 if success else 0.0
            t.steps.append((StepContext(stage="outcome", subject=job, arm=d["arm"], is_valid=True,
                                        lab_value=result["value"] if ok else None, utility=utility,
                                        best_utility_before=best_before, is_lab_success=success,
                                        human_verdicts=self._verdicts.get(("outcome", job), {}), **several), phi))
        if not t.dispatches:
            t.status = "final"  # held or stopped on the ladder: it will not reach the lab as this trajectory
            return
        last = t.steps[-1][0]
        is_answered = last.stage == "outcome" and (last.lab_value is not None
                                                   or t.handled.get(last.subject, "retry") != "retry")
        t.status = "final" if is_answered else "provisional"

