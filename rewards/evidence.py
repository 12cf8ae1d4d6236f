"""Scorers that read evidence rather than the proposal itself: a simulator rung, the instrument (the lab), a person.

- ``rung_agreement`` (simulator): does the planner's stated expectation agree with a rung's result, within its sd?
  A claim the cheap evidence contradicts costs reward (evidence over claims).
- ``lab_success`` and ``improvement`` (instrument): what the lab said.
- ``human``: a verdict a person recorded for this criterion and step; unscored (None) until there is one.

Example:
    >>> from rewards.context import RungResult, StepContext
    >>> step = StepContext(stage="screen", subject="x", arm="llm", is_valid=True, expected=-12.0,
    ...                    rung_results={"gaff": RungResult(status="ok", value=-12.2, sd=0.5)})
    >>> round(rung_agreement(step, criterion=None).value, 2)
    0.38
"""

from __future__ import annotations

import math
from typing import Any

from rewards.context import ScoreValue, StepContext

__all__ = ["BUILTINS", "human", "improvement", "lab_success", "rung_agreement"]


def lab_success(context: StepContext) -> ScoreValue | None:
    """Outcome stage: +1 when the lab result meets the campaign's success bar, -1 when it does not.

    Several objectives: the success is growing the measured Pareto front (``hypervolume_improvement > 0``), and a
    result that breaks an outcome constraint never succeeds.
    """
    if context.stage != "outcome" or context.is_lab_success is None:
        return None
    if context.hypervolume_improvement is not None:
        shown = _shown_values(context)
        if context.is_lab_success:
            return ScoreValue(value=1.0, reason=f"lab measured {shown}: it grows the Pareto front")
        why = ("it breaks an outcome constraint" if context.meets_constraints is False
               else "an earlier result dominates it")
        return ScoreValue(value=-1.0, reason=f"lab measured {shown}: not a success ({why})")
    shown = f"lab measured {context.lab_value:g}" if context.lab_value is not None else "the lab answered"
    if context.is_lab_success:
        return ScoreValue(value=1.0, reason=f"{shown}: a success")
    return ScoreValue(value=-1.0, reason=f"{shown}: not a success")


def improvement(context: StepContext) -> ScoreValue | None:
    """Outcome stage: +1 when the utility beats the best before it (or is the first), 0 when not, None if failed.

    Several objectives (``hypervolume_improvement`` set): +1 when the result adds hypervolume to the measured front
    (the first result on it included), 0 when it adds none (dominated, or breaking an outcome constraint).

    Example:
        >>> from rewards.context import StepContext
        >>> step = StepContext(stage="outcome", subject="job", arm="bo", is_valid=True, lab_value=2.0, utility=2.0,
        ...                    lab_values={"a": 2.0, "b": 1.0}, hypervolume_improvement=0.25)
        >>> score = improvement(step)
        >>> score.value, score.reason
        (1.0, 'a=2, b=1 grows the Pareto front: +0.25 of the reference..ideal box in hypervolume')
    """
    if context.stage != "outcome" or context.lab_value is None or context.utility is None:
        return None
    if context.hypervolume_improvement is not None:
        gain, shown = context.hypervolume_improvement, _shown_values(context)
        if gain > 0:
            return ScoreValue(value=1.0, reason=f"{shown} grows the Pareto front: +{gain:.3g} of the "
                                                "reference..ideal box in hypervolume")
        return ScoreValue(value=0.0, reason=f"{shown} adds no hypervolume to the Pareto front")
    if context.best_utility_before is None:
        return ScoreValue(value=1.0, reason=f"first successful lab result (utility {context.utility:g})")
    if context.utility > context.best_utility_before:
        return ScoreValue(
            value=1.0, reason=f"utility {context.utility:g} beats the best before, {context.best_utility_before:g}"
        )
    return ScoreValue(
        value=0.0, reason=f"utility {context.utility:g} does not beat the best before, {context.best_utility_before:g}"
    )


def _shown_values(context: StepContext) -> str:
    """Every measured property as ``name=value`` pairs (the lab value alone when only it is known)."""
    if context.lab_values:
        return ", ".join(f"{name}={value:g}" for name, value in context.lab_values.items())
    return f"{context.lab_value:g}" if context.lab_value is not None else "no value"


def _param(criterion: Any, name: str, default: Any) -> Any:
    params = getattr(criterion, "params", None) or {}
    return params.get(name, default)


def rung_agreement(context: StepContext, *, criterion: Any) -> ScoreValue | None:
    """The planner's ``expected`` value against a rung's proxy, in objective units: ``2p - 1`` with ``p`` the
    two-sided normal tail of ``|expected - proxy| / sd``.

    +1 when they agree exactly, 0 at 0.67 sd apart, towards -1 beyond 2 sd. ``params.rung`` picks the rung (default:
    the last proxy rung that ran); ``params.sd`` is used when the rung reports no sd (default 1.0, objective unit).
    None when the planner stated no expectation or the rung has no successful result.
    """
    if context.expected is None or not context.rung_results:
        return None
    name = _param(criterion, "rung", None) or list(context.rung_results)[-1]
    result = context.rung_results.get(name)
    if result is None or result.status != "ok" or result.value is None:
        return None
    sd = result.sd if result.sd else float(_param(criterion, "sd", 1.0))
    z = abs(context.expected - result.value) / sd
    p = math.erfc(z / math.sqrt(2.0))
    return ScoreValue(value=2.0 * p - 1.0, reason=f"expected {context.expected:g}, {name} gave {result.value:g} "
                                                  f"± {sd:g}: {z:.2f} sd apart")


def human(context: StepContext, *, criterion: Any) -> ScoreValue | None:
    """A person's recorded verdict on this criterion for this step; None (unscored, not 0) until there is one."""
    criterion_id = getattr(criterion, "id", None)
    return context.human_verdicts.get(criterion_id) if criterion_id else None


BUILTINS = {
    "rung_agreement": (rung_agreement, "simulator"),
    "lab_success": (lab_success, "instrument"),
    "improvement": (improvement, "instrument"),
    "human": (human, "human"),
}
"""name -> (scorer, kind), registered by ``rewards.scorers.register_builtin_scorers``."""
