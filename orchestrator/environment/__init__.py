"""Campaigns as environments: ``CampaignEnvironment`` (``reset`` / ``step`` / ``state``) over a campaign spec, its
actions and observations, and the fixed success bar. Adapters to training libraries build on it
(``gym_env`` for gymnasium).

Importing this package registers the ``env`` planner arm, the policy's seat in the campaign.

May import: the floors below it (card, ledger, space, policy, loop, replay) and the plug-ins. Never exports, scale,
bench or interfaces; the public face ``closedloop`` wraps it for gymnasium, verifiers, OpenEnv and TRL.
"""

from orchestrator.environment.actions import (
                      Action,
                      InvalidAction,
                      ProposeAction,
                      QueryLedgerAction,
                      QuerySurrogateAction,
                      RunRungAction,
                      parse_action,
)
from orchestrator.environment.arm import ARM, EnvironmentPlanner
from orchestrator.environment.core import (
                      EPISODE_FLOOR,
                      CampaignEnvironment,
                      EnvironmentState,
                      StepResult,
)
from orchestrator.environment.observation import (
                      Budget,
                      EnvironmentObservation,
                      LabResult,
                      ObjectiveView,
                      OfferedCandidate,
                      RungResult,
)
from orchestrator.environment.success import SuccessBar, fix_success_bar

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
