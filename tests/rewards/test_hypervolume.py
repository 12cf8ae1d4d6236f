"""Progress in hypervolume (rewards.hypervolume) and the outcome scorers' reading of it for several objectives."""

from __future__ import annotations

import numpy as np
import pytest

from rewards.context import StepContext
from rewards.evidence import improvement, lab_success
from rewards.hypervolume import HypervolumeProgress


def test_a_result_that_grows_the_front_adds_its_share_of_the_box_and_a_dominated_one_adds_nothing():
    progress = HypervolumeProgress(reference=np.zeros(2))
    first = progress.add([1.0, 3.0])
    assert first.hypervolume_before == 0.0 and first.hypervolume_after == pytest.approx(3.0)
    assert first.improvement == pytest.approx(1.0) and first.is_on_front  # the whole box so far is its own
    second = progress.add([3.0, 1.0])
    assert second.hypervolume_after - second.hypervolume_before == pytest.approx(2.0)
    assert second.improvement == pytest.approx(2.0 / 9.0)  # over the reference..ideal box, 3 x 3
    dominated = progress.add([0.5, 0.5])
    assert dominated.improvement == 0.0 and not dominated.is_on_front
    assert dominated.hypervolume_before == dominated.hypervolume_after == pytest.approx(5.0)


def test_a_result_missing_an_objective_or_breaking_a_constraint_is_never_progress():
    progress = HypervolumeProgress(reference=np.zeros(2))
    progress.add([1.0, 1.0])
    gain = progress.add([np.nan, np.nan])
    assert gain.improvement == 0.0 and not gain.is_on_front and gain.hypervolume_after == pytest.approx(1.0)
    assert progress.add([2.0, 2.0]).is_on_front  # later results still count


def test_an_inferred_reference_uses_only_the_results_so_far_and_stays_within_zero_and_one():
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(30, 3))
    progress = HypervolumeProgress()
    gains = [progress.add(row) for row in rows]
    assert all(0.0 <= g.improvement <= 1.0 for g in gains)
    again = HypervolumeProgress()
    assert [again.add(row).improvement for row in rows[:10]] == [g.improvement for g in gains[:10]]
    # a result that dominates none of the earlier ones and is dominated by one never grows the front
    for k, (row, gain) in enumerate(zip(rows, gains, strict=True)):
        if any((rows[j] >= row).all() for j in range(k)):
            assert not gain.is_on_front


def _outcome(**fields) -> StepContext:
    return StepContext(stage="outcome", subject="job", arm="bo", is_valid=True, lab_value=2.0, utility=2.0,
                       best_utility_before=5.0, **fields)


def test_the_outcome_scorers_read_hypervolume_progress_for_several_objectives():
    grows = _outcome(lab_values={"a": 2.0, "b": 1.0}, hypervolume_improvement=0.1, is_lab_success=True)
    assert improvement(grows).value == 1.0 and "Pareto front" in improvement(grows).reason
    assert lab_success(grows).value == 1.0 and "a=2, b=1" in lab_success(grows).reason
    stays = _outcome(lab_values={"a": 2.0, "b": 9.0}, hypervolume_improvement=0.0, is_lab_success=False)
    assert improvement(stays).value == 0.0 and lab_success(stays).value == -1.0
    breaks = _outcome(lab_values={"a": 9.0, "b": 0.1, "c": 0.0}, hypervolume_improvement=0.0, is_lab_success=False,
                      meets_constraints=False)
    assert "outcome constraint" in lab_success(breaks).reason


def test_one_objective_scores_as_before():
    step = _outcome(is_lab_success=False)  # 2.0 does not beat 5.0: no hypervolume reading at all
    assert improvement(step).value == 0.0 and improvement(step).reason.startswith("utility 2 does not beat")
    assert lab_success(step).reason == "lab measured 2: not a success"
