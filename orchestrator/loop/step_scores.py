"""The rubric's criterion scores of the open trajectories' steps, kept between reward steps so an unchanged step is
not scored again."""

from __future__ import annotations

from typing import Any

__all__ = ["StepScoreMemo"]


class StepScoreMemo:
    """The rubric's criterion scores of each step of the open trajectories, by (trajectory, stage, subject).

    Scorers read only the step's context (``rewards.context.StepContext``), so a step whose context equals the one it
    was scored with gets the same scores back without calling them (a judge's answer would come from the ledger
    anyway). ``keep`` forgets the trajectories that were not scored again, so the memo follows the open trajectories.
    """

    def __init__(self, rubric):
        self.rubric = rubric
        self._scores: dict[tuple[str, str, str], tuple[Any, list]] = {}

    def scorer(self, trajectory_id: str, recorder=None):
        """``score_step`` for ``rewards.process.score_trajectory`` on one trajectory; ``recorder`` (a
        ``rewards.judge.JudgeRecorder``) answers and records the judge calls of the steps scored anew."""

        def score(context) -> list:
            key = (trajectory_id, context.stage, context.subject)
            found = self._scores.get(key)
            if found is not None and found[0] == context:
                return found[1]
            scores = self.rubric.score(context, recorder=recorder)
            self._scores[key] = (context, scores)
            return scores

        return score

    def keep(self, trajectory_ids: set[str]) -> None:
        """Forget the steps of every trajectory not in ``trajectory_ids``."""
        self._scores = {key: found for key, found in self._scores.items() if key[0] in trajectory_ids}
