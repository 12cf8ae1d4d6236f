"""Campaigns as environments: ``CampaignEnvironment`` (``reset`` / ``step`` / ``state``) over a campaign spec, its
actions and observations, and the fixed success bar. Adapters to training libraries build on it
(``gym_env`` for gymnasium).

Importing this package registers the ``env`` planner arm, the policy's seat in the campaign.
"""

from .actions import (Action, InvalidAction, ProposeAction, QueryLedgerAction, QuerySurrogateAction, RunRungAction,
                      parse_action)
from .arm import ARM, EnvironmentPlanner
from .core import EPISODE_FLOOR, CampaignEnvironment, EnvironmentState, StepResult
from .observation import Budget, EnvironmentObservation, LabResult, ObjectiveView, OfferedCandidate, RungResult
from .success import SuccessBar, fix_success_bar

__all__ = [
    "ARM",
    "EPISODE_FLOOR",
    "Action",
    "Budget",
    "CampaignEnvironment",
    "EnvironmentObservation",
    "EnvironmentPlanner",
    "EnvironmentState",
    "InvalidAction",
    "LabResult",
    "ObjectiveView",
    "OfferedCandidate",
    "ProposeAction",
    "QueryLedgerAction",
    "QuerySurrogateAction",
    "RunRungAction",
    "RungResult",
    "StepResult",
    "SuccessBar",
    "fix_success_bar",
    "parse_action",
]
