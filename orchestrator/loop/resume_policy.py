"""What a resumed campaign does with the options that shape a new one: apply and record, or refuse; never ignore.

- ``lab_budget``: applied and recorded as ``LabBudgetChanged`` (raising or lowering the budget of a campaign that
  has not stopped is the user's call, and replays, summaries and reports must know it). Below what is already
  dispatched, or on a stopped campaign, it is refused.
- ``seed`` and ``planner``: refused when they differ from the recorded ones. Every random draw derives from the seed
  and the main arm makes the decisions, so either would make another campaign under the same id; start a new
  campaign, or ask ``closedloop replay ID --planner P`` for a what-if on the recorded history.
- ``lab_url`` and ``model``: the ledger keeps them with their credentials redacted, so a resume must be given them
  again when they had any; a value whose redacted form is the recorded one supplies the credential, any other is
  refused (another lab or model would be another campaign). One exception: a model that has never answered (no
  ``LLMCall`` of the planner with an answer in the ledger, ``model_has_answered``) made no decision, so another one
  is applied and recorded as ``PlannerModelChanged`` (the lab work of a campaign whose model could not start is not
  stranded).

Example:
    >>> from orchestrator.spec import CampaignSpec
    >>> spec = CampaignSpec.model_validate({
    ...     "campaign": {"name": "demo", "kind": "molecule", "seed": 1}, "objective": {"direction": "maximize"},
    ...     "space": {"inline": ["C", "CC"]}, "lab": {"oracle": {"C": 1, "CC": 2}}, "budget": {"lab_experiments": 2}})
    >>> resumed, [change] = resume_spec(spec, lab_budget=5, n_dispatched=2, is_stopped=False, campaign_id="demo")
    >>> resumed.budget.lab_experiments, change.previous
    (5, 2)
    >>> resume_spec(spec, seed=2, n_dispatched=2, is_stopped=False, campaign_id="demo")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    vocabulary.domain.SetupError: --seed 2 differs from campaign 'demo''s seed 1, ...
"""

from __future__ import annotations

import shlex
from typing import Any

from orchestrator.spec import CampaignSpec, validate_spec
from vocabulary.domain import SetupError, redact_urls_in
from vocabulary.events import (
    CampaignStarted,
    EventPayload,
    LabBudgetChanged,
    LLMCall,
    PlannerModelChanged,
)

__all__ = ["model_has_answered", "recorded_spec", "resume_spec"]

REDACTED = "***"


def recorded_spec(ledger: Any, campaign_id: str) -> CampaignSpec:
    """The spec a campaign runs under: its ``CampaignStarted`` spec with every ``LabBudgetChanged`` and
    ``PlannerModelChanged`` applied, in order.

    Raises:
        SetupError: the campaign is not in the ledger.
    """
    started = ledger.events(campaign_id, types=[CampaignStarted.type])
    if not started:
        known = ledger.campaign_ids_with_events()
        raise SetupError(f"campaign {campaign_id!r} is not in {ledger.url}; campaigns there: {known}")
    data = dict(started[0].payload["spec"])
    for change in ledger.events(campaign_id, types=[LabBudgetChanged.type, PlannerModelChanged.type]):
        if change.type == LabBudgetChanged.type:
            data["budget"] = {**data["budget"], "lab_experiments": change.payload["lab_experiments"]}
        else:
            data["planner"] = {**data["planner"], "model": change.payload["model"]}
    return validate_spec(data, source=f"{campaign_id} (from the ledger)")


def resume_spec(
    spec: CampaignSpec,
    *,
    campaign_id: str,
    n_dispatched: int,
    is_stopped: bool,
    lab_budget: int | None = None,
    seed: int | None = None,
    planner: str | None = None,
    lab_url: str | None = None,
    model: str | None = None,
    has_model_answered: bool = True,
) -> tuple[CampaignSpec, list[EventPayload]]:
    """The recorded ``spec`` with a resume's options applied, and the changes to record (``LabBudgetChanged``,
    ``PlannerModelChanged``), none when nothing changed. ``has_model_answered`` (``model_has_answered``) is whether
    the recorded model may no longer be replaced.

    Raises:
        SetupError: an option that would change the campaign's identity, a budget that cannot apply, or a credential
            the ledger redacted and the resume did not give again.
    """
    if seed is not None and seed != spec.campaign.seed:
        raise SetupError(f"--seed {seed} differs from campaign {campaign_id!r}'s seed {spec.campaign.seed}, and every "
                         "random draw of a campaign derives from its seed; resume without --seed, or start a new "
                         "campaign with --seed")
    if planner is not None and planner != spec.planner.main:
        raise SetupError(f"--planner {planner} differs from campaign {campaign_id!r}'s main arm {spec.planner.main}; "
                         f"resume without --planner, start a new campaign with --planner {shlex.quote(planner)}, "
                         "or compare on the recorded history with "
                         f"{shlex.join(['closedloop', 'replay', campaign_id, '--planner', planner])}")
    data = spec.model_dump()
    recorded_url = spec.lab.parameters.get("base_url") if spec.lab.driver == "http" else None
    data["lab"]["parameters"]["base_url"] = _credential("--lab-url", lab_url, recorded_url, campaign_id)
    if recorded_url is None:
        data["lab"]["parameters"].pop("base_url")
    changes: list[EventPayload] = []
    if model is not None and not has_model_answered and redact_urls_in(model) != spec.planner.model:
        data["planner"]["model"] = model
        changes.append(PlannerModelChanged(model=redact_urls_in(model), previous=spec.planner.model))
    else:
        data["planner"]["model"] = _credential("--model", model, spec.planner.model, campaign_id)
    if lab_budget is not None and lab_budget != spec.budget.lab_experiments:
        if is_stopped:
            raise SetupError(f"campaign {campaign_id!r} has stopped, so --lab-budget {lab_budget} cannot apply; start "
                             "a new campaign (--history takes its results as a warm start)")
        if lab_budget < n_dispatched:
            raise SetupError(f"--lab-budget {lab_budget} is below the {n_dispatched} experiments campaign "
                             f"{campaign_id!r} has already dispatched; give at least {n_dispatched}")
        data["budget"]["lab_experiments"] = lab_budget
        changes.append(LabBudgetChanged(lab_experiments=lab_budget, previous=spec.budget.lab_experiments,
                                        n_dispatched=n_dispatched))
    return validate_spec(data, source="resume options"), changes


def model_has_answered(ledger: Any, campaign_id: str) -> bool:
    """Whether the campaign's planner model has answered at least once: an ``LLMCall`` of the planner (not the
    reward's judge) with a response and no error. Until then it has decided nothing, and a resume may replace it."""
    return any(e.payload.get("response") and not e.payload.get("error") and not e.payload["key"].startswith("judge:")
               for e in ledger.events(campaign_id, types=[LLMCall.type]))


def _credential(flag: str, given: str | None, recorded: str | None, campaign_id: str) -> str | None:
    """The value to connect with: ``given`` when it is the recorded one with its credentials; else ``recorded``."""
    if given is None:
        if recorded is not None and REDACTED in recorded:
            raise SetupError(f"campaign {campaign_id!r} was started with credentials in {recorded}, which the ledger "
                             f"does not keep; resume with {flag} and the full URL again")
        return recorded
    if redact_urls_in(given) != recorded:
        raise SetupError(f"{flag} {redact_urls_in(given)} is not campaign {campaign_id!r}'s "
                         f"{recorded or 'default'}; a resumed campaign keeps its lab and model (start a new campaign "
                         "to use another)")
    return given
