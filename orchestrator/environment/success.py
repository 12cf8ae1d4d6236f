"""The success bar and the terminal reward of an episode, both fixed at reset.

The bar is ``orchestrator.policy.success_bar``'s, the one every campaign records at its start: an episode takes it from
the task (``success_bar=``), the task's ``success_quantile=`` of the reference, the spec (``stop.threshold`` or the
target window), or the default quantile of the reference (the simulated lab's ground truth, imported history or
the first table proxy rung's column). It never moves with the episode's own results. A spec with none of these is
refused at reset (``SetupError``) rather than fixed at the first results, as a campaign would: an episode's bar is
its terminal reward's scale and must be known before the first step.

The reference serves the reward only and never appears in an observation; a bar drawn from the ground truth is not
shown either (``is_visible``). The terminal reward is where the episode's best lab result ranks in the reference,
``2·F(best) − 1`` in [-1, 1] (−1 without a result); without a reference it is +1 for a success and −1 otherwise
(``SuccessBar.outcome_reward``).
"""

from __future__ import annotations

from orchestrator.policy.success_bar import (
    DEFAULT_SUCCESS_QUANTILE,
    SuccessBar,
    fix_success_bar,
)

__all__ = ["DEFAULT_SUCCESS_QUANTILE", "SuccessBar", "fix_success_bar"]
