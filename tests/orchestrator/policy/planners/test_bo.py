"""What the campaign's surrogate is fitted on, and how every reader conditions it on the same numbers."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from orchestrator.policy.planners import (
    BOPlanner,
    PlanningContext,
    fit_surrogate_state,
    surrogate_targets,
)
from orchestrator.policy.planners.bo import (
    LabUtilityModel,
    campaign_surrogate_state,
    folded_utility_moments,
)
from orchestrator.policy.planners.llm_tools import PlanningTools, select_shortlist
from orchestrator.policy.planners.surrogate import GPSurrogate
from orchestrator.space.pool import load_pool
from orchestrator.spec import load_spec, validate_spec
from tests.conftest import BUCHWALD_SPEC, FREESOLV_SPEC


@pytest.fixture(scope="module")
def freesolv():
    """FreeSolv, a target objective (-12 kcal/mol), with 30 lab results."""
    spec = load_spec(FREESOLV_SPEC)
    pool = load_pool(spec)
    rng = np.random.default_rng(3)
    observed = np.sort(rng.choice(len(pool), size=30, replace=False))
    values = np.asarray(pool.columns[spec.lab.oracle_column], dtype=float)[observed]
    return spec, pool, observed, values


def _context(spec, pool, observed, values, state, *, with_values=True) -> PlanningContext:
    utilities = np.asarray([spec.objective.utility(v) for v in values], dtype=float)
    available = np.setdiff1d(np.arange(len(pool)), observed)
    return PlanningContext(spec=spec, pool=pool, iteration=3, available=available, observed=observed,
                           utilities=utilities, values=values if with_values else None,
                           pending=np.zeros(0, dtype=int), surrogate_state=state, seed=0)


def test_folded_moments_match_monte_carlo():
    rng = np.random.default_rng(0)
    mean, sd = np.array([-12.0, -11.5, -9.0, -14.0]), np.array([0.3, 1.0, 0.5, 2.0])
    got_mean, got_sd = folded_utility_moments(mean, sd, -12.0)
    draws = -np.abs(rng.normal(mean, sd, size=(200_000, 4)) + 12.0)
    assert np.allclose(got_mean, draws.mean(axis=0), atol=0.01)
    assert np.allclose(got_sd, draws.std(axis=0), atol=0.01)


def test_a_target_campaign_fits_values_and_a_maximize_campaign_utilities(freesolv):
    spec, pool, observed, values = freesolv
    state = campaign_surrogate_state(spec, pool.features[observed], values, seed=0)
    assert spec.objective.direction == "target" and state["fitted_on"] == "value"
    assert state["y_mean"] == pytest.approx(values.mean())  # standardised on the values, not on -|v - t|
    buchwald = load_spec(BUCHWALD_SPEC)
    assert buchwald.objective.direction == "maximize"
    other = campaign_surrogate_state(buchwald, pool.features[observed], values, seed=0)
    assert other["fitted_on"] == "utility"


def test_readers_follow_what_the_state_was_fitted_on(freesolv):
    spec, pool, observed, values = freesolv
    value_state = campaign_surrogate_state(spec, pool.features[observed], values, seed=0)
    context = _context(spec, pool, observed, values, value_state)
    y, target = surrogate_targets(context)
    assert target == -12.0 and np.array_equal(y, values) and BOPlanner().models_values(context)
    # A state from before value models (no "fitted_on") was fitted on utilities and is conditioned on them.
    old_state = {k: v for k, v in fit_surrogate_state(pool.features[observed], context.utilities, kernel="tanimoto",
                                                       seed=0).items() if k != "fitted_on"}
    y, target = surrogate_targets(_context(spec, pool, observed, values, old_state))
    assert target is None and np.array_equal(y, context.utilities)
    # Without the values (a caller that does not know them) the planner models utilities.
    assert surrogate_targets(_context(spec, pool, observed, values, None, with_values=False))[1] is None
    assert surrogate_targets(_context(spec, pool, observed, values, None))[1] == -12.0


def test_the_lab_utility_model_folds_a_value_posterior(freesolv):
    spec, pool, observed, values = freesolv
    state = campaign_surrogate_state(spec, pool.features[observed], values, seed=0)
    context = _context(spec, pool, observed, values, state)
    model = LabUtilityModel(state, pool.features[observed], context.utilities, values, spec.objective)
    X = pool.features[context.available[:20]]
    value_mean, value_sd = GPSurrogate.from_hyperparameters(pool.features[observed], values, state).predict(X)
    mean, sd = model.predict(X)
    assert np.allclose((mean, sd), folded_utility_moments(value_mean, value_sd, -12.0))
    assert np.all(mean <= 0)
    utility_state = fit_surrogate_state(pool.features[observed], context.utilities, kernel="tanimoto", seed=0)
    plain = LabUtilityModel(utility_state, pool.features[observed], context.utilities, values, spec.objective)
    direct = GPSurrogate.from_hyperparameters(pool.features[observed], context.utilities, utility_state).predict(X)
    assert np.allclose(plain.predict(X), direct)


def test_the_llm_shortlist_ranks_by_window_improvement_on_a_value_model(freesolv):
    spec, pool, observed, values = freesolv
    state = campaign_surrogate_state(spec, pool.features[observed], values, seed=0)
    context = _context(spec, pool, observed, values, state)
    rows, log_ei = select_shortlist(PlanningTools(context), 10)
    model = LabUtilityModel(state, pool.features[observed], context.utilities, values, spec.objective)
    expected = model.log_improvement(pool.features[context.available], float(context.utilities.max()))
    top = context.available[np.argsort(-expected, kind="stable")[:10]]
    assert rows == [int(i) for i in top] and np.all(np.diff(log_ei) <= 0)


def test_bo_proposals_on_a_value_model_carry_the_expected_value(freesolv):
    spec, pool, observed, values = freesolv
    spec = validate_spec({**spec.model_dump(), "planner": {**spec.planner.model_dump(), "n_initial": 2}})
    state = campaign_surrogate_state(spec, pool.features[observed], values, seed=0)
    proposals = BOPlanner().propose(_context(spec, pool, observed, values, state), 3)
    assert len(proposals) == 3 and all(p.expected is not None for p in proposals)
    assert all("predicted value" in p.hypothesis for p in proposals)


def test_the_incumbent_is_the_best_posterior_mean_so_one_lucky_measurement_does_not_set_it(freesolv):
    spec, pool, observed, values = freesolv
    utilities = np.asarray([spec.objective.utility(v) for v in values], dtype=float)
    lucky = 4
    utilities[lucky] = utilities.max() + 3.0  # one measurement far above its neighbours
    X = pool.features[observed]
    state = {**fit_surrogate_state(X, utilities, kernel="tanimoto", seed=0), "noise": 0.3}
    context = PlanningContext(spec=spec, pool=pool, iteration=4, available=np.setdiff1d(np.arange(len(pool)), observed),
                              observed=observed, utilities=utilities, pending=np.zeros(0, dtype=int),
                              surrogate_state=state, seed=0)
    surrogate = GPSurrogate.from_hyperparameters(X, utilities, state)
    planner = BOPlanner()
    posterior = planner._incumbent(context, surrogate, X, None, None)
    assert posterior == pytest.approx(float(np.max(surrogate.predict(X)[0])))
    assert posterior < utilities[lucky] - 0.5
    planner.incumbent = "observed"
    assert planner._incumbent(context, surrogate, X, None, None) == utilities[lucky]


def test_a_ladder_prior_recorded_in_the_state_is_used_by_every_reader(freesolv):
    """The GP is fitted on the residual from the calibrated rung; bo, and the model the screen and the llm arm read,
    add the same prior back, so a perfect rung predicts the lab everywhere, tested or not."""
    from orchestrator.loop.ladder_view import LadderView
    from orchestrator.policy.planners.bo import campaign_utility_model, state_prior
    from orchestrator.policy.planners.ladder_prior import choose_prior, prior_rows

    spec, pool, observed, values = freesolv
    truth = np.asarray(pool.columns[spec.lab.oracle_column], dtype=float)
    ladder = LadderView(values={"perfect": 2.0 * truth + 1.0}, cost_s={"perfect": 1.0})  # a rung in other units
    prior = choose_prior(ladder.values, observed, values, spec)
    assert prior["rung"] == "perfect" and prior["is_calibrated"]
    # the line is shrunk towards the identity with the weight of one pair: after 30 pairs, nearly (v - 1) / 2
    assert prior["slope"] == pytest.approx(0.5, abs=0.03) and prior["intercept"] == pytest.approx(-0.5, abs=0.5)
    rows = prior_rows(prior, ladder.values, spec, fitted_on="value")
    assert np.corrcoef(rows, truth)[0, 1] > 0.999 and np.max(np.abs(rows - truth)) < 1.0
    state = campaign_surrogate_state(spec, pool.features[observed], values, seed=0, prior=prior,
                                     prior_train=rows[observed])
    assert state["prior"]["rung"] == "perfect"
    context = PlanningContext(spec=spec, pool=pool, iteration=5, available=np.setdiff1d(np.arange(len(pool)), observed),
                              observed=observed, utilities=np.asarray([spec.objective.utility(v) for v in values]),
                              values=values, pending=np.zeros(0, dtype=int), surrogate_state=state, seed=0,
                              ladder=ladder)
    assert np.allclose(state_prior(context), rows)
    assert np.allclose(BOPlanner().training_targets(context), values - rows[observed])  # the GP models the residual
    untested = context.available[:50]
    mean, _ = campaign_utility_model(context).predict_rows(untested)
    expected = np.asarray([spec.objective.utility(v) for v in truth[untested]])
    assert np.corrcoef(mean, expected)[0, 1] > 0.99  # the folded utility of the (perfectly) predicted value
    proposals = BOPlanner().propose(context, 4)
    picked = [pool.index[p.candidate.id] for p in proposals]
    assert min(abs(truth[picked] - spec.objective.target)) <= spec.objective.tolerance  # into the window at once
    assert BOPlanner(uses_ladder=False).traits.uses_ladder is False


def test_no_informative_rung_means_no_prior(freesolv):
    from orchestrator.policy.planners.ladder_prior import choose_prior

    spec, pool, observed, values = freesolv
    noise = {"coin": np.random.default_rng(5).normal(size=len(pool))}
    truth = np.asarray(pool.columns[spec.lab.oracle_column], dtype=float)
    many = np.arange(0, len(pool), 4)  # enough pairs to rule a coin out (30 can only fail to prove it)
    assert choose_prior(noise, many, truth[many], spec) is None
    undecided = choose_prior(noise, observed, values, spec)
    assert not undecided["is_calibrated"] and undecided["evidence"] < 0.4  # 30 pairs: doubted, not ruled out
    before = choose_prior(noise, observed[:3], values[:3], spec)  # too few pairs to judge: shrunk to the identity
    assert before["rung"] == "coin" and not before["is_calibrated"]
    assert choose_prior(noise, observed[:0], values[:0], spec)["slope"] == 1.0  # no pair: the rung as it stands


def test_half_of_each_batch_follows_the_prior_rung_as_it_stands(freesolv):
    """To maximise, a portfolio of the calibrated model and the rung's own order: batch slots 2 and 4 of 5 are the
    untested candidates the rung ranks best (a noisy rung in other units); bo-sf, a state without a prior and a
    target window give the model every slot; one-slot plans alternate."""
    from orchestrator.loop.ladder_view import LadderView
    from orchestrator.policy.planners.bo import rung_slots
    from orchestrator.policy.planners.ladder_prior import choose_prior, prior_rows

    spec, pool, observed, _ = freesolv
    spec = spec.model_copy(update={"objective": spec.objective.model_copy(update={"direction": "maximize",
                                                                                   "target": None})})
    truth = np.asarray(pool.columns[spec.lab.oracle_column], dtype=float)
    values = truth[observed]
    raw = 2.0 * truth + 1.0 + np.random.default_rng(1).normal(scale=4.0, size=len(pool))
    ladder = LadderView(values={"scaled": raw}, cost_s={"scaled": 1.0})
    prior = choose_prior(ladder.values, observed, values, spec)
    assert prior is not None
    rows = prior_rows(prior, ladder.values, spec, fitted_on="utility")
    state = campaign_surrogate_state(spec, pool.features[observed], values, seed=0, prior=prior,
                                     prior_train=rows[observed])
    context = dataclasses.replace(_context(spec, pool, observed, values, state), ladder=ladder)

    def rationales(planner, ctx, n):
        return [p.rationale for p in planner.propose(ctx, n)]

    proposals = BOPlanner().propose(context, 5)
    picked = [pool.index[p.candidate.id] for p in proposals]
    assert len(set(picked)) == 5 and not set(picked) & set(observed.tolist())
    free = np.setdiff1d(context.available, [picked[k] for k in (0, 2, 4)])
    by_rung = free[np.argsort(-raw[free], kind="stable")[:2]].tolist()
    assert [picked[1], picked[3]] == by_rung
    assert all("log expected improvement" in proposals[k].rationale for k in (0, 2, 4))
    assert all("as it stands" in proposals[k].hypothesis for k in (1, 3))
    assert state["prior"]["evidence"] > 0.99  # the pairs leave no doubt that this rung tracks the lab

    def rung_picks(evidence):  # the rung keeps its half while it is at least as likely informative as not
        prior = dict(state["prior"], evidence=evidence) if evidence is not None else {
            k: v for k, v in state["prior"].items() if k != "evidence"}
        doubted = dataclasses.replace(context, surrogate_state={**state, "prior": prior})
        return sum("as it stands" in p.hypothesis for p in BOPlanner().propose(doubted, 5))

    assert [rung_picks(0.9), rung_picks(0.5), rung_picks(0.45), rung_picks(0.1), rung_picks(None)] == [2, 2, 0, 0, 2]
    model_only = "highest log expected improvement given the lab data and pending jobs"
    assert set(rationales(BOPlanner(uses_ladder=False), context, 5)) == {model_only}  # bo-sf
    no_prior = dataclasses.replace(context, surrogate_state=campaign_surrogate_state(
        spec, pool.features[observed], values, seed=0))
    assert set(rationales(BOPlanner(), no_prior, 5)) == {model_only}
    target, t_pool, t_observed, t_values = freesolv  # a target window: the raw order is off by the rung's offset
    t_ladder = LadderView(values={"scaled": 2.0 * np.asarray(t_pool.columns[target.lab.oracle_column]) + 1.0},
                          cost_s={"scaled": 1.0})
    t_prior = choose_prior(t_ladder.values, t_observed, t_values, target)
    t_state = campaign_surrogate_state(target, t_pool.features[t_observed], t_values, seed=0, prior=t_prior,
                                       prior_train=prior_rows(t_prior, t_ladder.values, target,
                                                              fitted_on="value")[t_observed])
    t_context = dataclasses.replace(_context(target, t_pool, t_observed, t_values, t_state), ladder=t_ladder)
    assert set(rationales(BOPlanner(), t_context, 5)) == {model_only}
    assert [rung_slots(1, started=k) for k in range(4)] == [0, 1, 0, 1] and rung_slots(10) == 5
    odd = dataclasses.replace(context, observed=observed[:-1], utilities=context.utilities[:-1],
                              values=values[:-1])  # 29 started: the rung's turn
    assert "as it stands" in BOPlanner().propose(odd, 1)[0].hypothesis
    pending = dataclasses.replace(odd, pending=observed[-1:])  # 29 + 1 pending: the model's
    assert "log expected improvement" in BOPlanner().propose(pending, 1)[0].rationale
