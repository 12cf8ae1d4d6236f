"""The rewards error tree: one root, a setup branch (before scoring) and a scoring branch (during)."""

from __future__ import annotations

from vocabulary.domain import ClosedLoopError, SetupError

__all__ = ["RewardError", "RewardSetupError", "ScoringError"]


class RewardError(ClosedLoopError):
    """Root of every error the rewards package raises on purpose."""


class RewardSetupError(RewardError, SetupError):
    """A rubric file, a scorer registration or a scorer plug-in is wrong; nothing has been scored yet."""


class ScoringError(RewardError):
    """A scorer failed or misbehaved while scoring a step. The message names the criterion and the scorer."""
