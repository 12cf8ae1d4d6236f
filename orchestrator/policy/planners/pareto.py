"""The bo arm for several objectives combined as a Pareto front: batch log expected hypervolume improvement.

One GP per objective (``outcome_models.fit_outcome_gp``: the campaign's kernel choice and features), independent,
fitted on the objective's utility (maximize / minimize), or on its value for a target window, whose utility
``-|v - target|`` is then taken of every sample. The acquisition is Monte-Carlo EHVI with common random numbers
(``N_SAMPLES`` scrambled-Sobol normal draws per objective, seeded by the campaign seed and the iteration), exact
hypervolume improvement per draw (``vocabulary.pareto.HypervolumeCells``), over the front of the posterior MEANS at
the observed results that meet the outcome constraints (the noisy-EHVI plug-in: a lucky measurement does not set
the front), plus every pending job's posterior mean (Kriging believer; the GPs are conditioned on them too). The
batch's earlier picks are drawn jointly with each candidate (``JOINT_BATCH``, ``joint_log_ehvi``: in each draw a
pick takes its value and moves the candidates' means with it), qNEHVI's sequential greedy. Reference point: the spec's, else
``infer_reference_point`` of the measured utilities.

The score is log(mean HVI); a candidate none of whose draws improves the front gets ``LOG_FLOOR`` minus its
shortfall (how many of its own sds its mean must rise on its worst axis to start improving, ``shortfall``), so that
such candidates are still ordered, and always below any that improves. The log weight of the outcome constraints
and learned failures (``feasibility.outcome_log_weight``) is added. Batches are greedy, one pick at a time.
"""

from __future__ import annotations

import zlib

import numpy as np

from orchestrator.policy.planners.base import PlannerTraits, PlanningContext
from orchestrator.policy.planners.feasibility import (
    outcome_log_weight,
    success_probability,
    with_imputed_failures,
)
from orchestrator.policy.planners.outcome_models import (
    constraint_log_probability,
    fit_outcome_gp,
    has_campaign_fit,
    objective_specs,
    outcome_constraints,
    tradeoff_method,
)
from vocabulary.domain import Proposal
from vocabulary.numbers import plus_minus
from vocabulary.pareto import (
    HypervolumeCells,
    infer_reference_point,
    reference_in_utility,
    utility_matrix,
)

__all__ = ["JOINT_BATCH", "LOG_FLOOR", "N_SAMPLES", "ObjectiveModel", "ParetoPlanner", "describe_expected", "expected_objectives",
           "fit_objective_models", "joint_log_ehvi", "log_ehvi"]

N_SAMPLES = 128
"""Monte-Carlo draws per objective (a power of two, for the Sobol sequence)."""

JOINT_BATCH = True
"""Earlier picks of a batch count by their joint draws with each candidate (qNEHVI's sequential greedy), not by
their posterior means (the Kriging believer on the front); the GPs are conditioned on them either way."""

LOG_FLOOR = -1e4
"""Score of a candidate that improves the front in none of its draws, before its shortfall is taken off."""


class ObjectiveModel:
    """One objective's GP: on the utility (``is_value`` False) or, for a target window, on the value."""

    def __init__(self, objective, surrogate, is_value: bool, plain=None):
        self.objective, self.surrogate, self.is_value = objective, surrogate, is_value
        self.plain = plain or surrogate
        """The GP on the lab results alone (``surrogate`` also holds the imputed learned failures): what a
        candidate is expected to measure if its run succeeds."""

    def to_utility(self, x: np.ndarray) -> np.ndarray:
        """The objective's utility of the model's numbers (the identity on a utility model)."""
        return -np.abs(x - float(self.objective.target)) if self.is_value else x

    def to_value(self, mean: np.ndarray) -> np.ndarray:
        """The model's numbers in the objective's unit (a utility model of a minimised objective: negated)."""
        return mean if self.is_value or self.objective.direction == "maximize" else -mean


def fit_objective_models(context: PlanningContext) -> list[ObjectiveModel] | None:
    """One GP per objective on ``context.objective_values``; None while any objective has fewer than two values."""
    from orchestrator.policy.planners.surrogate import GPSurrogate

    values = getattr(context, "objective_values", None)
    objectives = objective_specs(context.spec)
    if values is None:
        return None
    values = np.asarray(values, dtype=float).reshape(len(context.observed), len(objectives))
    models = []
    for d, objective in enumerate(objectives):
        is_value = objective.direction == "target"
        y = values[:, d] if is_value else utility_matrix([objective], values[:, d:d + 1])[:, 0]
        plain = fit_outcome_gp(context, context.observed, y, f"objective:{objective.property}")
        if plain is None:
            return None
        X_fit, y_fit = with_imputed_failures(context, context.pool.features, plain.X_train, plain.y_train,
                                             float(objective.target) if is_value else None)
        surrogate = plain if len(y_fit) == len(plain.y_train) else GPSurrogate.from_hyperparameters(
            X_fit, y_fit, plain.hyperparameters)
        models.append(ObjectiveModel(objective, surrogate, is_value, plain))
    return models


def expected_objectives(models: list[ObjectiveModel], X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and sd of every objective at the rows of ``X``, in the objectives' units, each (n, m)."""
    moments = [model.plain.predict(X) for model in models]
    mean = np.stack([model.to_value(m) for model, (m, _) in zip(models, moments, strict=True)], axis=1)
    return mean, np.stack([s for _, s in moments], axis=1)


def _expected_text(models: list[ObjectiveModel], mean: np.ndarray, sd: np.ndarray) -> str:
    return ", ".join(f"{m.objective.property} {plus_minus(float(mean[d]), float(sd[d]), unit=m.objective.unit)}"
                     for d, m in enumerate(models))


def describe_expected(context: PlanningContext, rows: np.ndarray) -> list[dict]:
    """Per pool row: the ``Proposal`` fields that state every objective's expected value (``expected`` and
    ``expected_sd``: the first objective's, in its unit; the hypothesis names them all), for an arm that planned on
    a scalar of several objectives (a desirability or weighted sum)."""
    models = fit_objective_models(context)
    if models is None:
        return [{"expected": None, "expected_sd": None} for _ in rows]
    mean, sd = expected_objectives(models, np.asarray(context.pool.features[np.asarray(rows, dtype=int)], dtype=float))
    return [{"expected": float(mean[k, 0]), "expected_sd": float(sd[k, 0]),
             "hypothesis": f"expected {_expected_text(models, mean[k], sd[k])}",
             "rationale": f"highest log expected improvement of the {tradeoff_method(context.spec).replace('_', ' ')} "
                          "given the lab data and pending jobs"} for k in range(len(rows))]


def _meets_constraints(context: PlanningContext) -> np.ndarray:
    """Per observed result: whether its measured constraint values meet every constraint (an unmeasured one does)."""
    constraints = outcome_constraints(context.spec)
    values = getattr(context, "constraint_values", None)
    n = len(context.observed)
    if not constraints or values is None:
        return np.ones(n, dtype=bool)
    values = np.asarray(values, dtype=float).reshape(n, len(constraints))
    ok = np.ones(n, dtype=bool)
    for j, c in enumerate(constraints):
        v = values[:, j]
        breaks = np.zeros(n, dtype=bool)
        if c.lower is not None:
            breaks |= v < c.lower
        if c.upper is not None:
            breaks |= v > c.upper
        ok &= ~(np.isfinite(v) & breaks)
    return ok


def _reference(context: PlanningContext, objectives: list) -> np.ndarray:
    """The reference point in utility form: the spec's, else inferred from the measured utilities."""
    given = getattr(getattr(context.spec, "tradeoff", None), "reference_point", None)
    if given is not None:
        return reference_in_utility(objectives, given)
    measured = np.asarray(context.objective_values, dtype=float).reshape(len(context.observed), len(objectives))
    return infer_reference_point(utility_matrix(objectives, measured))


def _normal_draws(context: PlanningContext, m: int) -> np.ndarray:
    """(N_SAMPLES, m) standard-normal draws from a scrambled Sobol sequence, fixed by the seed and the iteration."""
    from scipy.special import ndtri
    from scipy.stats import qmc

    seed = zlib.crc32(f"{context.seed}:{context.iteration}:ehvi".encode()) & 0x7FFFFFFF
    points = qmc.Sobol(d=m, scramble=True, seed=seed).random(N_SAMPLES)
    return ndtri(np.clip(points, 1e-9, 1 - 1e-9))


def log_ehvi(cells: HypervolumeCells, models: list[ObjectiveModel], mean: np.ndarray, sd: np.ndarray,
             draws: np.ndarray) -> np.ndarray:
    """The score per candidate (``mean``, ``sd``: (N, m) in the models' numbers): log of the MC mean hypervolume
    improvement over ``cells``, or ``LOG_FLOOR`` minus the shortfall where no draw improves."""
    samples = mean[:, None, :] + sd[:, None, :] * draws[None, :, :]
    utility = np.stack([model.to_utility(samples[..., d]) for d, model in enumerate(models)], axis=-1)
    mean_utility = np.stack([model.to_utility(mean[:, d]) for d, model in enumerate(models)], axis=-1)
    hvi = np.zeros(len(mean))
    may_improve = cells.improvement(utility.max(axis=1)) > 0  # no draw beats the per-axis best draw
    if may_improve.any():
        hvi[may_improve] = cells.improvement(utility[may_improve]).mean(axis=1)
    scores = LOG_FLOOR - cells.shortfall(mean_utility, np.maximum(sd, 1e-9))
    improving = hvi > 0
    scores[improving] = np.log(hvi[improving])
    return scores


def joint_log_ehvi(cells: HypervolumeCells, front: np.ndarray, picked: np.ndarray, models: list[ObjectiveModel],
                   mean: np.ndarray, sd: np.ndarray, shift: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """``log_ehvi`` with the batch's earlier picks drawn jointly with each candidate: in draw s the front is
    ``front`` (utility form) plus every pick's value in that draw (``picked``: (S, n_picks, m)), and a candidate's
    value is its believer-conditioned mean moved by ``shift`` (N, S, m: ``PoolPosterior.shift`` of the same
    draws) plus its remaining sd times ``draws`` (S, m). The improvement over the larger front is at most the one
    over ``cells`` (the front without the picks), so only draws that improve on ``cells`` are recomputed."""
    samples = mean[:, None, :] + shift + sd[:, None, :] * draws[None, :, :]
    utility = np.stack([model.to_utility(samples[..., d]) for d, model in enumerate(models)], axis=-1)
    hvi = np.zeros(utility.shape[:2])
    may_improve = cells.improvement(utility.max(axis=1)) > 0
    if may_improve.any():
        hvi[may_improve] = cells.improvement(utility[may_improve])
    for s in np.flatnonzero((hvi > 0).any(axis=0)):
        rows = np.flatnonzero(hvi[:, s] > 0)
        with_picks = HypervolumeCells.from_front(np.vstack([front, picked[s]]), cells.reference)
        hvi[rows, s] = with_picks.improvement(utility[rows, s])
    hvi = hvi.mean(axis=1)
    mean_utility = np.stack([model.to_utility(mean[:, d]) for d, model in enumerate(models)], axis=-1)
    scores = LOG_FLOOR - cells.shortfall(mean_utility, np.maximum(sd, 1e-9))
    improving = hvi > 0
    scores[improving] = np.log(hvi[improving])
    return scores


class ParetoPlanner:
    """Proposes the batch that maximises log EHVI over the Pareto front (module docstring), greedy and
    pending-aware. Until every objective's GP can be fitted it proposes ``cold_start``'s initial design: the
    single-objective bo arm that hands over to it (``BOPlanner.propose``), so both start alike."""

    name = "bo"

    def __init__(self, cold_start):
        self.cold_start = cold_start
        self.traits = PlannerTraits(uses_surrogate=True)

    def propose(self, context: PlanningContext, n: int) -> list[Proposal]:
        n = min(n, len(context.available))
        if n == 0:
            return []
        models = fit_objective_models(context) if has_campaign_fit(context) else None
        if models is None:
            return self.cold_start._initial_design(context, n)
        objectives = [model.objective for model in models]
        X = context.pool.features
        available, pending = np.asarray(context.available, dtype=int), np.asarray(context.pending, dtype=int)
        X_available = np.asarray(X[available], dtype=float)
        front = [model.to_utility(model.plain.predict(np.asarray(X[context.observed], dtype=float))[0])
                 for model in models]
        front = np.stack(front, axis=1)[_meets_constraints(context)]
        posteriors = []
        if len(pending):  # believed to come back at their posterior means: on the front, and in every GP
            X_pending = np.asarray(X[pending], dtype=float)
            believed = [model.to_utility(model.surrogate.predict(X_pending)[0]) for model in models]
            front = np.vstack([front, np.stack(believed, axis=1)])
        for model in models:
            surrogate = model.surrogate.fantasize(X_pending) if len(pending) else model.surrogate
            posteriors.append(surrogate.pool_posterior(X_available))
        reference = _reference(context, objectives)
        m = len(models)
        draws = _normal_draws(context, m * (1 + n) if JOINT_BATCH else m)
        draws, innovations = draws[:, :m], draws[:, m:].reshape(len(draws), n, m) if JOINT_BATCH else None
        weight = outcome_log_weight(context, available)
        weight = np.zeros(len(available)) if weight is None else weight
        is_picked = np.zeros(len(available), dtype=bool)
        picks, scores_at_pick = [], []
        picked_samples: list[np.ndarray] = []  # per pick, (S, m) utility draws joint with the candidates' (JOINT_BATCH)
        cells = HypervolumeCells.from_front(front, reference)
        for _ in range(n):
            mean = np.stack([p.mean for p in posteriors], axis=1)
            sd = np.stack([p.sd for p in posteriors], axis=1)
            if JOINT_BATCH and picks:
                shift = np.stack([p.shift(innovations[:, :len(picks), d].T) for d, p in enumerate(posteriors)],
                                 axis=-1)  # (N, S, m)
                scores = joint_log_ehvi(cells, front, np.stack(picked_samples, axis=1), models, mean, sd, shift,
                                        draws) + weight
            else:
                scores = log_ehvi(cells, models, mean, sd, draws) + weight
            scores[is_picked] = -np.inf
            k = int(np.argmax(scores))  # ties resolve to the lowest pool row
            picks.append(k)
            scores_at_pick.append(float(scores[k]))
            is_picked[k] = True
            if len(picks) < n:
                for posterior in posteriors:
                    posterior.add_fantasy(k)
                if JOINT_BATCH:
                    own = np.stack([p.mean[k] + p.shift(innovations[:, :len(picks), d].T)[k]
                                    for d, p in enumerate(posteriors)], axis=-1)  # (S, m): the pick's value per draw
                    picked_samples.append(np.stack([model.to_utility(own[:, d]) for d, model in enumerate(models)],
                                                   axis=-1))
                else:
                    believed = np.array([model.to_utility(mean[k, d]) for d, model in enumerate(models)])
                    front = np.vstack([front, believed[None, :]])
                    cells = HypervolumeCells.from_front(front, reference)
        return self._proposals(context, models, available[picks], scores_at_pick)

    def _proposals(self, context: PlanningContext, models: list[ObjectiveModel], rows: np.ndarray,
                   scores: list[float]) -> list[Proposal]:
        X = np.asarray(context.pool.features[rows], dtype=float)
        mean, sd = expected_objectives(models, X)
        constraint = constraint_log_probability(context, rows)
        success = success_probability(context, rows)
        proposals = []
        for k, row in enumerate(rows):
            expected = _expected_text(models, mean[k], sd[k])
            odds = ([f"P(constraints met) {np.exp(constraint[k]):.2f}"] if constraint is not None else []) + \
                   ([f"P(success) {success[k]:.2f}"] if success is not None else [])
            proposals.append(Proposal(
                candidate=context.pool.candidates[int(row)], arm="bo",
                hypothesis=f"widens the Pareto front: expected {expected}",
                rationale="highest log expected hypervolume improvement over the Pareto front of the lab results, "
                          f"pending jobs and earlier picks: expected {expected}"
                          + (f" ({'; '.join(odds)})" if odds else ""),
                expected=float(mean[k, 0]), expected_sd=float(sd[k, 0]), acquisition=float(scores[k])))
        return proposals
