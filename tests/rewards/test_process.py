"""Process rewards: the potential, its shaping, the step mix, the outcome anchor and the calibration weight."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rewards.context import StepContext
from rewards.errors import RewardSetupError
from rewards.process import (
    PRIOR_VALIDITY,
    RungValidity,
    auroc,
    base_rate,
    potential,
    score_trajectory,
    success_probability,
)
from rewards.rubric import load_rubric, parse_rubric

RATIONALE = "The cheap rung predicts -11.8 kcal/mol, inside the target window."


def ctx(stage="proposal", **overrides) -> StepContext:
    fields = {"stage": stage, "subject": "x", "arm": "bo", "is_valid": True, "is_in_space": True,
              "candidate": {"type": "molecule", "smiles": "CCO"}, "rationale": RATIONALE}
    return StepContext(**(fields | overrides))


def test_validity_weight_uses_auroc_then_spearman_then_the_prior():
    few = RungValidity(rung="r", n_pairs=3, spearman=0.9, auroc=0.9)
    assert few.weight == PRIOR_VALIDITY and few.measure == "prior"
    assert RungValidity(rung="r", n_pairs=8, spearman=0.9, auroc=0.75).weight == pytest.approx(0.5)
    assert RungValidity(rung="r", n_pairs=8, spearman=0.7).weight == pytest.approx(0.7)
    assert RungValidity(rung="r", n_pairs=8, spearman=-0.4).weight == 0.0  # anti-informative: no process credit
    assert RungValidity(rung="r", n_pairs=8, spearman=0.2, auroc=0.3).weight == 0.0


@given(st.lists(st.tuples(st.sampled_from([0.0, 0.5, 1.0, 2.5, -1.0]) | st.floats(-5, 5), st.booleans()),
                max_size=40))
def test_auroc_is_the_share_of_positive_negative_pairs_a_positive_wins(pairs):
    # the O(N log N) rank formula equals the O(P·N) definition exactly, ties counted half
    scores, labels = [s for s, _ in pairs], [y for _, y in pairs]
    positives = [s for s, y in pairs if y]
    negatives = [s for s, y in pairs if not y]
    if not positives or not negatives:
        assert auroc(scores, labels) is None
        return
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    assert auroc(scores, labels) == wins / (len(positives) * len(negatives))


def test_auroc_and_base_rate():
    assert auroc([1, 2, 3, 4], [False, False, True, True]) == 1.0
    assert auroc([1, 2, 3, 4], [True, True, False, False]) == 0.0
    assert auroc([1, 1], [True, False]) == 0.5
    assert auroc([1, 2], [True, True]) is None
    assert base_rate(0, 0) == 0.5 and base_rate(9, 10) == pytest.approx(10 / 12)


def test_success_probability_and_potential():
    v = RungValidity(rung="r", n_pairs=8, spearman=1.0, intercept=0.0, slope=1.0, residual_sd=1.0)
    assert success_probability(v, proxy_utility=0.0, threshold_utility=0.0) == pytest.approx(0.5)
    assert success_probability(v, proxy_utility=2.0, threshold_utility=0.0) == pytest.approx(0.97725, abs=1e-4)
    assert success_probability(RungValidity(rung="r", n_pairs=2), 1.0, 0.0) is None
    assert potential(0.3, 0.9, 0.0) == 0.3  # an uninformative rung moves nothing
    assert potential(0.3, 0.9, 1.0) == pytest.approx(0.9)
    assert potential(0.3, None, 1.0) == 0.3


def test_progress_telescopes_over_a_trajectory():
    rubric = load_rubric("default")
    steps = [(ctx(), 0.3), (ctx("screen", screen_statuses={"r": "ok"}), 0.8), (ctx("dispatch", lab_budget=8), 0.8),
             (ctx("outcome", lab_value=-12.0, utility=0.0, is_lab_success=True), 1.0)]
    r = score_trajectory(rubric, "t", "bo", "x", steps, start_potential=0.3, status="final")
    assert sum(s.progress for s in r.steps) == pytest.approx(1.0 - 0.3) == pytest.approx(r.components["progress"])
    assert [s.potential_after for s in r.steps] == [0.3, 0.8, 0.8, 1.0]


def test_the_same_checks_with_a_lab_failure_earn_less_than_with_a_success():
    rubric = load_rubric("default")
    common = [(ctx(), 0.3), (ctx("screen", screen_statuses={"r": "ok"}), 0.8), (ctx("dispatch", lab_budget=8), 0.8)]
    win = score_trajectory(rubric, "t", "bo", "x", common + [
        (ctx("outcome", lab_value=-12.0, utility=0.0, is_lab_success=True), 1.0)], start_potential=0.3, status="final")
    loss = score_trajectory(rubric, "t", "bo", "x", common + [
        (ctx("outcome", lab_value=-2.0, utility=-10.0, is_lab_success=False, best_utility_before=0.0), 0.0)],
        start_potential=0.3, status="final")
    assert win.reward > loss.reward
    assert win.components["outcome"] == 1.0 > loss.components["outcome"]


def test_a_veto_makes_the_step_minus_one_and_the_anchor_follows_the_dropped_potential():
    rubric = load_rubric("default")
    r = score_trajectory(rubric, "t", "bo", None, [(ctx(is_valid=False, reason="unclosed ring"), 0.0)],
                         start_potential=0.4, status="final")
    assert r.steps[0].is_vetoed and r.steps[0].reward == -1.0
    assert r.components["outcome"] == -1.0 and r.reward == -1.0


def test_before_the_lab_answers_the_anchor_is_the_calibrated_expectation():
    rubric = load_rubric("default")
    r = score_trajectory(rubric, "t", "bo", "x", [(ctx(), 0.3), (ctx("dispatch", lab_budget=8), 0.7)],
                         start_potential=0.3, status="provisional")
    assert r.status == "provisional" and r.components["outcome"] == pytest.approx(2 * 0.7 - 1)
    alpha = rubric.reward.outcome_weight
    assert r.reward == pytest.approx(alpha * r.components["outcome"] + (1 - alpha) * r.components["process"])
    assert r.weights == {"outcome": alpha, "process": 1 - alpha, "progress": 0.0}


def test_the_outcome_anchor_cannot_be_switched_off():
    text = load_rubric("default").model_dump_json()
    assert '"outcome_weight":0.5' in text
    toml = """
[rubric]
id = "noanchor"
version = "1"
[rubric.reward]
outcome_weight = 0.0
[[criteria]]
id = "valid"
text = "The proposal is valid."
category = "essential"
weight = 1.0
stages = ["proposal"]
scorer = "validity"
"""
    with pytest.raises(RewardSetupError, match="outcome anchor always stays in the mix"):
        parse_rubric(toml)


def test_reserved_ids_are_refused():
    toml = """
[rubric]
id = "r"
version = "1"
[[criteria]]
id = "progress"
text = "Progress."
category = "essential"
weight = 1.0
stages = ["proposal"]
scorer = "validity"
"""
    with pytest.raises(RewardSetupError, match="reserved"):
        parse_rubric(toml)


@given(start=st.floats(0, 1), potentials=st.lists(st.floats(0, 1), min_size=1, max_size=5),
       is_success=st.booleans())
def test_rewards_stay_in_range_whatever_the_potentials(start, potentials, is_success):
    rubric = load_rubric("default")
    stages = ["proposal", "screen", "dispatch", "dispatch", "dispatch"][: len(potentials)]
    steps = [(ctx(stage, screen_statuses={"r": "ok"}, lab_budget=8), phi) for stage, phi in zip(stages, potentials)]
    steps.append((ctx("outcome", lab_value=1.0, utility=1.0, is_lab_success=is_success), float(is_success)))
    r = score_trajectory(rubric, "t", "bo", "x", steps, start_potential=start, status="final")
    assert -1.0 <= r.reward <= 1.0 and all(-1.0 <= s.reward <= 1.0 for s in r.steps)
    assert math.isclose(r.components["progress"], float(is_success) - start, abs_tol=1e-12)


# ------------------------------------------------------------------------------------- the potential-based form
def _trajectory(padding: list) -> list:
    """A proposal with a weak rationale (its rubric score is below 1), then ``padding``, then screen and outcome."""
    weak = ctx(rationale="")
    return ([(weak, 0.3)] + padding + [(ctx("screen", screen_statuses={"r": "ok"}), 0.8),
                                      (ctx("dispatch", lab_budget=8), 0.8),
                                      (ctx("outcome", lab_value=-12.0, utility=0.0, is_lab_success=True), 1.0)])


def test_padding_with_well_scored_steps_raises_the_mean_form_but_not_the_potential_form():
    """The mean of step rewards can be farmed with extra good steps; the telescoped form cannot (issue 19)."""
    mean_form, potential_form = load_rubric("default"), load_rubric("environment")
    assert potential_form.reward.process == "potential" and mean_form.reward.process == "mean"
    padding = [(ctx(), 0.3)] * 6  # six more proposal steps that pass every check and move nothing
    for rubric, farmable in ((mean_form, True), (potential_form, False)):
        plain = score_trajectory(rubric, "t", "bo", "x", _trajectory([]), start_potential=0.3, status="final")
        padded = score_trajectory(rubric, "t", "bo", "x", _trajectory(padding), start_potential=0.3, status="final")
        if farmable:
            assert padded.reward > plain.reward
        else:
            assert padded.reward <= plain.reward
            assert padded.components["process"] == pytest.approx(plain.components["process"])


def test_the_potential_form_is_the_worst_step_and_the_telescoped_progress():
    rubric = load_rubric("environment")
    r = score_trajectory(rubric, "t", "bo", "x", _trajectory([]), start_potential=0.3, status="final")
    worst = min(s.rubric for s in r.steps if s.rubric is not None)
    assert r.components["process"] == pytest.approx(0.5 * worst + 0.5 * (1.0 - 0.3))
    vetoed = score_trajectory(rubric, "t", "bo", None, [(ctx(is_valid=False, reason="unclosed ring"), 0.0)],
                              start_potential=0.4, status="final")
    assert vetoed.components["process"] == pytest.approx(0.5 * -1.0 + 0.5 * (0.0 - 0.4))


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=20), st.integers(0, 10))
def test_shaped_rewards_telescope_and_repeated_states_earn_nothing(potentials, n_repeats):
    from rewards.process import shaped_reward

    padded = potentials[:1] * n_repeats + potentials  # no-op steps: the potential does not move
    for phis in (potentials, padded):
        total = sum(shaped_reward(a, b) for a, b in zip(phis, phis[1:]))
        assert total == pytest.approx(phis[-1] - phis[0], abs=1e-9)
