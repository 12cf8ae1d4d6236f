"""closedloop's engine: the campaign loop, its vocabulary, ledger, spec and planners.

Heavy dependencies (torch, pyro, pymatgen) load only when a campaign needs them. Importing the engine checks that
no other installed package shadows one of closedloop's top-level names (``vocabulary.namespace``).

The floors, each a folder whose docstring says what it owns and may import, from the ground up:
``spec``/``seeding``/``planner_registry`` (the campaign card), ``ledger/``, ``space/``, ``policy/``, ``loop/``,
``replay/``, ``environment/``, ``exports/``, ``scale/``, ``bench/``, ``interfaces/``.
"""

__distribution__ = "closedloop"  # vocabulary.namespace reads this line to tell our packages from others

try:  # ours checks every other name when it is imported (vocabulary/__init__.py)
    import vocabulary.namespace  # noqa: F401
except ImportError as exc:
    raise ImportError(f"closedloop's package 'vocabulary' is missing or shadowed by another installed package ({exc}); "
                      "reinstall closedloop in a virtual environment of its own") from exc

from orchestrator.spec import CampaignSpec, SpecError, load_spec
from vocabulary.domain import (
    ClosedLoopError,
    Conditions,
    ConditionSpace,
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
        from orchestrator.loop.campaign import Campaign

        return Campaign
    raise AttributeError(name)
