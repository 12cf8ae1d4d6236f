"""closedloop's engine: the campaign loop, its vocabulary, ledger, spec and planners.

Heavy dependencies (torch, pyro, pymatgen) load only when a campaign needs them.
"""

from .domain import (
    ClosedLoopError,
    ConditionSpace,
    Conditions,
    InstrumentFault,
    InvalidCandidate,
    Material,
    Molecule,
    Observation,
    Parameter,
    Proposal,
    SetupError,
    SimulationFailed,
    parse_candidate,
)
from .spec import CampaignSpec, SpecError, load_spec

__all__ = [
    "Campaign",
    "CampaignSpec",
    "ClosedLoopError",
    "ConditionSpace",
    "Conditions",
    "InstrumentFault",
    "InvalidCandidate",
    "Material",
    "Molecule",
    "Observation",
    "Parameter",
    "Proposal",
    "SetupError",
    "SimulationFailed",
    "SpecError",
    "load_spec",
    "parse_candidate",
]


def __getattr__(name: str):
    # Campaign pulls in langgraph; import it on first use so `closedloop --help` stays fast.
    if name == "Campaign":
        from .campaign import Campaign

        return Campaign
    raise AttributeError(name)
