"""One run of one arm on one seed: a lean closed loop against the pool's lab column.

The planner arms (``bo``, ``bo-sf``, ``llm``, ``random``) are closedloop's own planners, called through the same
``PlanningContext`` the campaign's plan node builds, with the surrogate refitted the way the learn node does. There
is no ledger, no simulated lab clock and no escalation node: the lab answers at once with the column's value, in
batches of ``batch``. ``botorch`` and ``cheap-first`` are the yardsticks.

The bo arm's ladder: half of the first batch follows the cheapest rung's ranking, then on fingerprint pools (Tanimoto)
the calibrated rung is the GP's prior mean (``RungPrior``), and on descriptor pools (Matérn, one ARD lengthscale per
feature) each rung is one more input feature, so the fit decides how much it says. A target objective is modelled by
its value, not by the folded utility, as in a campaign (``planners.bo.surrogate_targets``).

Rung costs: an arm that reads a rung reads it for the whole pool (``cheap-first`` must, to rank; ``bo`` does, for
its prior or features), and is charged ``n_pool × cost_s`` per rung; the lab is charged ``lab_cost_s`` per experiment.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import numpy as np

from ..planners import BOPlanner, PlanningContext, RandomPlanner, fit_surrogate_state, make_planner
from ..planners.bo import surrogate_targets
from ..seeding import derive_rng, derive_seed
from .problem import BenchProblem
from .rung_prior import RungPrior

__all__ = ["RunRecord", "run_arm"]

@dataclass
class RunRecord:
    """What one run did: the lab order (pool indices), the rung evaluations and what they cost, wall time in s."""

    arm: str
    seed: int
    order: list[int]
    n_rung_evaluations: int = 0
    rung_cost_s: float = 0.0
    wall_s: float = 0.0
    notes: dict = field(default_factory=dict)


def _context(problem: BenchProblem, seed: int, iteration: int, observed: list[int], state, pool=None) -> PlanningContext:
    spec = problem.spec.model_copy(update={"campaign": problem.spec.campaign.model_copy(update={"seed": seed})})
    is_tested = np.zeros(len(problem), dtype=bool)
    is_tested[observed] = True
    pool = problem.pool if pool is None else pool
    return PlanningContext(spec=spec, pool=pool, iteration=iteration, available=np.flatnonzero(~is_tested),
                           observed=np.asarray(observed, dtype=int), utilities=problem.utilities[observed],
                           values=problem.values[observed], pending=np.zeros(0, dtype=int), surrogate_state=state,
                           seed=seed)


def _rungs_as_features(problem: BenchProblem, arm: str) -> bool:
    """The bo arm's ladder on a Matérn (descriptor) pool: each rung is one more feature, weighed by its own ARD
    lengthscale. On fingerprints (Tanimoto, no lengthscales) the calibrated rung is the GP's prior mean instead."""
    return arm == "bo" and bool(problem.rung_values) and problem.kernel == "matern52"


def _arm_pool(problem: BenchProblem, arm: str):
    """The pool an arm plans over: the problem's, or with the rungs' values appended as features (scaled to [0, 1])."""
    if not _rungs_as_features(problem, arm):
        return problem.pool
    columns = []
    for values in problem.rung_values.values():
        filled = np.where(np.isfinite(values), values, np.nanmedian(values))  # a failed rung: a middling guess
        spread = float(filled.max() - filled.min()) or 1.0
        columns.append(((filled - filled.min()) / spread)[:, None])
    pool = copy.copy(problem.pool)
    pool.features = np.hstack([problem.pool.features, *columns])
    return pool


def _planner(problem: BenchProblem, arm: str, seed: int):
    models_values = problem.config.direction == "target"
    if arm == "bo" and problem.rung_values:
        s = problem.spec.screening
        by_cost = sorted(problem.config.rungs, key=lambda r: r.cost_s)
        rung_values = {r.name: problem.rung_values[r.name] for r in by_cost}
        return BOPlanner(RungPrior(rung_values, problem.values, problem.config.direction, problem.config.target,
                                   min_pairs=s.min_pairs, min_informativeness=s.min_informativeness,
                                   as_values=models_values, initial_only=_rungs_as_features(problem, arm)))
    if arm in ("bo", "bo-sf"):
        return BOPlanner()
    if arm == "llm":
        spec = problem.spec.model_copy(update={"campaign": problem.spec.campaign.model_copy(update={"seed": seed})})
        return make_planner("llm", spec)
    return RandomPlanner()


def _run_planner(problem: BenchProblem, arm: str, seed: int, record: RunRecord) -> None:
    planner = _planner(problem, arm, seed)
    pool = _arm_pool(problem, arm)
    budget, batch = problem.config.lab_budget, problem.config.batch
    observed: list[int] = []
    state, n_fitted, iteration = None, 0, 0
    n_fallback = 0
    uses_gp = arm != "random"
    while len(observed) < budget:
        context = _context(problem, seed, iteration, observed, state, pool)
        # The learn node's schedule: refit when the lab data grew by a batch or a quarter since the last fit.
        if uses_gp and len(observed) >= 2 and len(observed) >= max(n_fitted + batch, 1.25 * n_fitted):
            targets, target = surrogate_targets(context)  # values for a target objective, as the learn node fits
            if isinstance(planner, BOPlanner):
                targets = planner.training_targets(context)  # minus the rung prior, if any
            state = fit_surrogate_state(pool.features[observed], targets, kernel=problem.kernel,
                                        fitted_on="utility" if target is None else "value",
                                        seed=derive_seed(seed, iteration, "learn"))
            n_fitted = len(observed)
            context = _context(problem, seed, iteration, observed, state, pool)
        proposals = planner.propose(context, min(batch, budget - len(observed)))
        n_fallback += sum(p.is_fallback for p in proposals)
        picks = [problem.pool.index[p.candidate.id] for p in proposals]
        if not picks:
            break
        observed.extend(picks)
        iteration += 1
    record.order = observed
    if arm == "llm":
        record.notes["n_fallback_proposals"] = n_fallback
    if isinstance(planner, BOPlanner) and planner.prior_mean is not None:
        record.notes["prior_rung"] = planner.prior_mean.last.get("rung")
        if pool is not problem.pool:
            record.notes["rungs_as_features"] = list(problem.rung_values)
        _charge_rungs(problem, record)


def _run_botorch(problem: BenchProblem, seed: int, record: RunRecord) -> None:
    from .botorch_arm import propose_botorch

    budget, batch = problem.config.lab_budget, problem.config.batch
    X = problem.pool.features
    observed: list[int] = []
    iteration = 0
    while len(observed) < budget:
        n = min(batch, budget - len(observed))
        context = _context(problem, seed, iteration, observed, None)
        if len(observed) < 2:  # the same initial design as the bo arm on this seed
            picks = [problem.pool.index[p.candidate.id] for p in RandomPlanner(label="bo-initial").propose(context, n)]
        else:
            rows = propose_botorch(X[observed], problem.utilities[observed], X[context.available], n,
                                   seed=derive_seed(seed, iteration, "botorch"))
            picks = [int(context.available[r]) for r in rows]
        observed.extend(picks)
        iteration += 1
    record.order = observed


def _run_cheap_first(problem: BenchProblem, seed: int, record: RunRecord) -> None:
    cheapest = min(problem.config.rungs, key=lambda r: r.cost_s)
    utilities = problem.rung_utilities(cheapest.name)
    tie_break = derive_rng(seed, "cheap-first").random(len(problem))
    ranked = np.where(np.isfinite(utilities), utilities, -np.inf)
    order = np.lexsort((tie_break, -ranked))  # best rung utility first; failed rung values last; ties at random
    record.order = [int(i) for i in order[: problem.config.lab_budget]]
    record.n_rung_evaluations = len(problem)
    record.rung_cost_s = len(problem) * cheapest.cost_s
    record.notes["rung"] = cheapest.name


def _charge_rungs(problem: BenchProblem, record: RunRecord) -> None:
    record.n_rung_evaluations = len(problem) * len(problem.config.rungs)
    record.rung_cost_s = len(problem) * sum(r.cost_s for r in problem.config.rungs)


def run_arm(problem: BenchProblem, arm: str, seed: int) -> RunRecord:
    """Run ``arm`` once with ``seed`` until the lab budget is spent; deterministic for a given seed."""
    record = RunRecord(arm=arm, seed=seed, order=[])
    start = time.perf_counter()
    if arm == "botorch":
        _run_botorch(problem, seed, record)
    elif arm == "cheap-first":
        _run_cheap_first(problem, seed, record)
    else:
        _run_planner(problem, arm, seed, record)
    record.wall_s = time.perf_counter() - start
    return record
