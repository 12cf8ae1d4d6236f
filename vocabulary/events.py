"""Typed, schema-versioned events: everything that happens in a campaign is one of these, appended to the ledger.

This module is a leaf (see ``domain``). Payloads are frozen pydantic models; ``parse_payload`` rebuilds one from
its stored ``type`` and JSON. Payloads hold only deterministic values (no wall-clock readings), so the same seed
gives the same ledger; the wall-clock time of an event lives in the envelope's ``at``.

Example:
    >>> p = Dispatched(iteration=0, job_key="c1:j0", candidate_id="X", arm="bo", driver="simlab", sim_time_s=0.0)
    >>> parse_payload("Dispatched", p.model_dump_json()) == p
    True
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from vocabulary.event_base import (
    EVENT_TYPES,
    SCHEMA_VERSION,
    Event,
    EventPayload,
    batch_records,
    expand_batches,
    parse_payload,
)

__all__ = [
    "EVENT_TYPES",
    "SCHEMA_VERSION",
    "Approved",
    "BatchRequested",
    "ApprovalRequested",
    "CampaignStarted",
    "CampaignStopped",
    "ConflictSettled",
    "Dispatched",
    "EnvironmentStep",
    "Event",
    "EventPayload",
    "FailureHandled",
    "JobStatus",
    "LLMCall",
    "LabBudgetChanged",
    "PlannerModelChanged",
    "Observed",
    "ResultEntered",
    "ResultsAwaited",
    "Promoted",
    "Proposed",
    "Rejected",
    "RewardFinalised",
    "RungAssessed",
    "RungSurveyed",
    "HumanVerdict",
    "RewardEstimated",
    "RungValidated",
    "RungDecision",
    "RungRun",
    "RungsAssessed",
    "RungsValidated",
    "RungAssessment",
    "RungValidity",
    "Scored",
    "Screened",
    "Simulated",
    "SlotsOffered",
    "SurrogateUpdated",
    "batch_records",
    "expand_batches",
    "parse_payload",
]

class CampaignStarted(EventPayload):
    type: ClassVar[str] = "CampaignStarted"
    name: str
    seed: int
    spec: dict[str, Any] = Field(description="the validated campaign spec, as JSON")
    pool_rows_skipped: list[str] = Field(
        default_factory=list, description="pool rows left out under [space] on_bad_rows = 'skip', each as "
                                          "'line 7: what is wrong'; empty when none were (and in older ledgers)")
    success_bar: dict[str, Any] | None = Field(
        default=None, description="the process reward's success bar, fixed before the first experiment "
                                  "(orchestrator.policy.success_bar.SuccessBar.record()); None in ledgers from before it was "
                                  "recorded, which keep the running-median rule")


class Proposed(EventPayload):
    type: ClassVar[str] = "Proposed"
    iteration: int
    arm: str
    candidate_id: str
    candidate: dict[str, Any] = Field(description="the canonical candidate, as Candidate.model_dump()")
    hypothesis: str = ""
    rationale: str = ""
    expected: float | None = None
    expected_sd: float | None = Field(default=None, description="the planner's sd of ``expected``, objective unit; "
                                                                "None where it has none (and in older ledgers)")
    acquisition: float | None = None
    is_fallback: bool = False
    is_bo_pick: bool | None = Field(
        default=None, description="llm arms: whether bo, planning the same state for the same n, proposed it too; "
                                  "None for other arms and older ledgers")
    is_anchor: bool = Field(default=False, description="llm arms: bo's pick for a lab slot, proposed beside the "
                                                       "model's picks for the screen to weigh (not the model's choice)")
    shown_position: int | None = Field(default=None, description="llm arms, the model's own picks: the pick's "
                                                                 "0-based row in the shortlist as shown; None otherwise")
    n_shown: int | None = Field(default=None, description="llm arms, the model's own picks: shortlist rows shown")
    n_shown_bo_picks: int | None = Field(default=None, description="llm arms, the model's own picks: rows shown that "
                                                                   "were bo's own picks")
    novelty: float | None = Field(default=None, description="open spaces: 1 - max similarity to what was known")
    is_generated: bool = Field(default=False, description="open spaces: the candidate is new to the campaign")


class Rejected(EventPayload):
    type: ClassVar[str] = "Rejected"
    iteration: int
    arm: str
    stage: Literal["validate", "screen", "approve", "dispatch"]
    raw: str = Field(description="the input as given, for the record")
    reason: str
    candidate_id: str | None = None
    kind: Literal["invalid", "out_of_space", "duplicate"] | None = Field(
        default=None, description="why a proposal failed validation (None for other stages and older ledgers)")


class Simulated(EventPayload):
    type: ClassVar[str] = "Simulated"
    iteration: int
    candidate_id: str
    rung: str
    observation: dict[str, Any] = Field(description="domain.Observation.model_dump()")


class Promoted(EventPayload):
    type: ClassVar[str] = "Promoted"
    iteration: int
    candidate_id: str
    from_rung: str
    to_rung: str
    decision: Literal["promote", "skip", "hold"]
    score: float | None = None
    reason: str = ""
    numbers: dict[str, float | None] = Field(default_factory=dict, description="the numbers behind the decision")


class RungRun(BaseModel):
    """One rung result inside a ``Screened`` record: what a ``Simulated`` event says, without the iteration."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["simulated"] = "simulated"
    candidate_id: str
    rung: str
    observation: dict[str, Any] = Field(description="domain.Observation.model_dump()")


RungDecision = create_model(
    "RungDecision",
    __config__=ConfigDict(frozen=True, extra="forbid"),
    __doc__="One escalation decision inside a ``Screened`` record: a ``Promoted`` event's fields, without the "
            "iteration (derived from ``Promoted``, so the two cannot drift apart).",
    __module__=__name__,
    kind=(Literal["promoted"], "promoted"),
    **{name: (info.annotation, copy.copy(info)) for name, info in Promoted.model_fields.items() if name != "iteration"},
)


class Screened(EventPayload):
    """One screening round: every rung result and every escalation decision of the iteration, in the order made.

    Ledgers written before it hold one ``Simulated`` per result and one ``Promoted`` per decision instead; both shapes
    stay readable, and ``expand`` (or ``batch_records`` on a stored dict) gives a round's steps in the old shape, so
    a reader folds either alike.
    """

    type: ClassVar[str] = "Screened"
    items_field: ClassVar[str] = "steps"
    item_types: ClassVar[dict[str, str]] = {"simulated": "Simulated", "promoted": "Promoted"}
    iteration: int
    steps: list[Annotated[RungRun | RungDecision, Field(discriminator="kind")]]

    def expand(self) -> list[EventPayload]:
        """The round's steps as the per-step events older ledgers hold, in order."""
        return [parse_payload(t, p) for t, p in batch_records(self.type, self.model_dump(mode="json"))]


class RungAssessment(BaseModel):
    """A rung's informativeness, re-estimated against the lab results so far (one item of ``RungsAssessed``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    rung: str
    n_pairs: int
    spearman: float | None = Field(description="rank correlation of the proxy value with the lab value")
    intercept: float
    slope: float
    residual_sd: float | None = Field(description="sd of the lab value around the calibrated proxy, objective unit")
    is_informative: bool | None = Field(description="None until enough pairs are in")


class RungAssessed(RungAssessment, EventPayload):
    """One rung's assessment; ledgers from before ``RungsAssessed`` hold one per rung and iteration."""

    type: ClassVar[str] = "RungAssessed"
    iteration: int


class RungsAssessed(EventPayload):
    """Every proxy rung's informativeness in one iteration (older ledgers: a ``RungAssessed`` per rung)."""

    type: ClassVar[str] = "RungsAssessed"
    items_field: ClassVar[str] = "rungs"
    item_types: ClassVar[dict[str, str]] = {"": "RungAssessed"}
    iteration: int
    rungs: list[RungAssessment]


class ApprovalRequested(EventPayload):
    type: ClassVar[str] = "ApprovalRequested"
    iteration: int
    job_keys: list[str]
    policy: str


class Approved(EventPayload):
    type: ClassVar[str] = "Approved"
    iteration: int
    job_keys: list[str]
    approved_by: str = Field(description="'policy:auto', 'human', or 'human:<name>' when the person gave a name")
    policy: str
    denied_keys: list[str] = Field(default_factory=list)


class Dispatched(EventPayload):
    type: ClassVar[str] = "Dispatched"
    iteration: int
    job_key: str
    candidate_id: str
    arm: str
    driver: str
    sim_time_s: float = Field(description="lab clock at submission, seconds since campaign start")


class JobStatus(EventPayload):
    type: ClassVar[str] = "JobStatus"
    job_key: str
    status: Literal["queued", "running", "done", "failed", "cancelled"]
    sim_time_s: float
    reason: str | None = None


class Observed(EventPayload):
    type: ClassVar[str] = "Observed"
    iteration: int
    job_key: str
    candidate_id: str
    arm: str
    value: float | None = Field(description="objective property as measured, in its unit; None when failed")
    uncertainty: float | None = None
    status: Literal["ok", "failed"] = "ok"
    reason: str | None = None
    values: dict[str, float] = Field(default_factory=dict, description="every other measured property (further "
                                     "objectives, outcome constraints) by name, in its unit")
    infeasible: bool = Field(default=False, description="a failure the campaign learns from: the point cannot work")
    sim_time_s: float = Field(description="lab clock at completion, seconds since campaign start")
    provenance: Literal["lab", "imported"] = "lab"
    driver: str = ""
    observe_iteration: int | None = Field(default=None, description="the observe round that recorded it")


class ResultEntered(EventPayload):
    """A lab result a person entered by hand for an open job of a ``manual`` lab; ``observe`` records it as the
    job's ``Observed`` (``orchestrator.loop.manual_results``)."""

    type: ClassVar[str] = "ResultEntered"
    job_key: str
    candidate_id: str
    value: float | None = Field(description="objective property as measured, in its unit; None when failed")
    uncertainty: float | None = Field(default=None, description="one standard deviation, in the objective's unit")
    status: Literal["ok", "failed"] = "ok"
    reason: str | None = None
    values: dict[str, float] = Field(default_factory=dict, description="every other measured property by name, "
                                     "in its unit")
    infeasible: bool = Field(default=False, description="a failure that says the point cannot work")
    sim_time_s: float = Field(description="lab clock when it was measured, seconds since campaign start")
    by: str = Field(description="'human' or 'human:<name>'")
    source: str = Field(default="", description="where it came from: 'csv:<file>@<hash> line <n>', 'python', ...")


class ResultsAwaited(EventPayload):
    """A manual lab's run ended with ``job_keys`` still at the bench: the campaign waits for their results (status
    ``waiting_for_results`` until the next result or dispatch)."""

    type: ClassVar[str] = "ResultsAwaited"
    iteration: int
    job_keys: list[str]


class BatchRequested(EventPayload):
    """A person asked for the next lab batch to hold ``n`` jobs (``campaign.suggest(n)``): the next ``plan`` offers
    that many slots (at most the lab's free capacity and the budget left) instead of ``[planner] batch_size``; the
    request ends with the next ``Dispatched``."""

    type: ClassVar[str] = "BatchRequested"
    n: int = Field(gt=0, description="jobs in the next batch")
    by: str = Field(description="'human' or 'human:<name>'")


class FailureHandled(EventPayload):
    """What was done about a failed lab job: retried (under a new job key), skipped, or the campaign aborted."""

    type: ClassVar[str] = "FailureHandled"
    iteration: int
    job_key: str
    candidate_id: str
    arm: str
    action: Literal["retry", "skip", "abort"]
    reason: str = Field(description="why the job failed, as the lab said")
    decided_by: str = Field(description="'policy:<name>', 'human', or 'human:<name>' when the person gave a name")
    attempt: int = Field(description="1 for the first run of a candidate")
    retry_key: str | None = None
    not_before_s: float | None = Field(default=None, description="lab clock before which the retry may not start, s")


class Scored(EventPayload):
    type: ClassVar[str] = "Scored"
    iteration: int
    stage: str
    subject: str = Field(description="candidate id or job key the score is about")
    rubric_id: str
    rubric_version: str
    criterion_id: str
    value: float = Field(description="criterion score in [-1, 1] before weighting")
    weight: float
    is_provisional: bool = True
    supersedes_seq: int | None = None
    reason: str = ""
    trajectory: str | None = Field(default=None, description="the trajectory (one proposal followed) it belongs to")
    rubric_hash: str = Field(default="", description="sha256 of the rubric's content")


class _TrajectoryReward(EventPayload):
    """What a trajectory's reward record holds (no ``type``: the two records below are the events)."""

    iteration: int
    subject: str = Field(description="the trajectory id")
    reward: float
    components: dict[str, float] = Field(default_factory=dict)
    weights: dict[str, float] = Field(default_factory=dict, description="component name -> its weight in reward")
    arm: str = ""
    candidate_id: str | None = None
    rubric_id: str = ""
    rubric_version: str = ""
    rubric_hash: str = ""
    supersedes_seq: int | None = Field(default=None, description="the reward record this one replaces")
    steps: list[dict[str, Any]] = Field(
        default_factory=list, description="per step: stage, subject, rubric score, potentials, progress, reward")


class RewardFinalised(_TrajectoryReward):
    """A trajectory's final reward: the lab answered, or the trajectory ended before the lab."""

    type: ClassVar[str] = "RewardFinalised"


class RewardEstimated(_TrajectoryReward):
    """A trajectory's provisional reward, before the lab has answered; superseded by later records."""

    type: ClassVar[str] = "RewardEstimated"


class SlotsOffered(EventPayload):
    """The lab slots each arm was offered in one iteration, so abstentions can be scored from the ledger."""

    type: ClassVar[str] = "SlotsOffered"
    iteration: int
    slots: dict[str, int] = Field(description="arm -> lab slots offered")


class ConflictSettled(EventPayload):
    """Both arms proposed the same candidate in one iteration; a coin seeded by (campaign seed, iteration, candidate
    id) gave it to ``winner``. The other arm fills its lab slots from its other proposals."""

    type: ClassVar[str] = "ConflictSettled"
    iteration: int
    candidate_id: str
    arms: list[str] = Field(description="the arms that proposed it, main arm first")
    winner: str


class RungValidity(BaseModel):
    """A rung's validity against lab outcomes, as the process reward weighs it (one item of ``RungsValidated``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    rung: str
    n_pairs: int
    spearman: float | None = None
    auroc: float | None = None
    weight: float = Field(description="the rung's process weight in [0, 1]")
    measure: str = Field(description="auroc, spearman or prior: which statistic set the weight")


class RungValidated(RungValidity, EventPayload):
    """One rung's validity in one iteration; ledgers from before ``RungsValidated`` hold one per rung."""

    type: ClassVar[str] = "RungValidated"
    iteration: int
    base_rate: float = Field(description="Laplace-smoothed share of lab successes so far")
    success_threshold: float | None = Field(default=None, description="lab utility counted as a success")


class RungsValidated(EventPayload):
    """Every proxy rung's validity against lab outcomes, as the process reward weighs them in one iteration (older
    ledgers: a ``RungValidated`` per rung)."""

    type: ClassVar[str] = "RungsValidated"
    items_field: ClassVar[str] = "rungs"
    item_types: ClassVar[dict[str, str]] = {"": "RungValidated"}
    iteration: int
    base_rate: float = Field(description="Laplace-smoothed share of lab successes so far")
    success_threshold: float | None = Field(default=None, description="lab utility counted as a success")
    rungs: list[RungValidity]


class HumanVerdict(EventPayload):
    """A person's verdict on one criterion for one step; the ``human`` scorer reads it."""

    type: ClassVar[str] = "HumanVerdict"
    iteration: int = Field(description="rewards computed from this iteration on see it (recompute stays exact)")
    subject: str = Field(description="candidate id (proposal, screen) or job key (dispatch, outcome)")
    stage: str
    criterion_id: str
    value: float = Field(ge=-1.0, le=1.0)
    reason: str = Field(min_length=1)
    by: str = Field(description="who judged")


class SurrogateUpdated(EventPayload):
    type: ClassVar[str] = "SurrogateUpdated"
    iteration: int
    model: str
    n_train: int
    hyperparameters: dict[str, Any] = Field(default_factory=dict)
    incumbent: float | None = Field(default=None, description="best utility seen so far")


class RungSurveyed(EventPayload):
    """A proxy rung read over the whole design space, so planners can use it for every candidate.

    A table rung's values are the pool's own column and are not repeated here (``values`` is empty); a computed
    rung's values are recorded by candidate id (None where the calculation failed), so replay and resume never
    recompute them.
    """

    type: ClassVar[str] = "RungSurveyed"
    iteration: int
    rung: str
    proxy: str = Field(description="the property read, in its own unit")
    n_candidates: int
    n_failed: int = 0
    cost_s: float = Field(description="compute charged for the survey (the rung's cost model summed), seconds")
    values: dict[str, float | None] = Field(default_factory=dict)


class PoolExtended(EventPayload):
    """New candidates joined an open design space (generator mode): edits of the best so far, or a model's ideas.

    Each was parsed by rdkit or pymatgen, met the space's constraints and was new by canonical id.
    """

    type: ClassVar[str] = "PoolExtended"
    iteration: int
    source: str = Field(description="'mutation' or the arm whose proposals they were")
    candidates: list[dict[str, Any]]
    novelty: list[float] = Field(default_factory=list, description="1 - max similarity to the known candidates, each")


class ArmsCompared(EventPayload):
    """The running comparison of the main arm against the control, after each batch of new lab results.

    The arms are compared paired by dispatch, at the best level either reached (``summary.arm_comparison``):
    ``paired_experiments`` results per arm; in each pairing the level is the better of their best (clipped)
    utilities on them and each arm's count its paired results up to the first that reaches it (one more than it
    had when it never did). The figures average over the ``pairings``: ``best_level`` is the median level,
    ``experiments_to_best_level`` each arm's geometric-mean count and ``acceleration`` the geometric mean of the
    control's count over the main arm's (>=1: the main arm got there no later); None without a pair. Ledgers
    written before ``pairings`` hold one drawn pairing's integer counts.

    Ledgers written before the paired comparison hold ``main_experiments_to_control_best`` and
    ``control_experiments_to_its_best`` instead, and their ``acceleration`` is the ratio of those (biased against
    the arm with the larger share); the fields are kept so those ledgers still load, and nothing writes them now.
    """

    type: ClassVar[str] = "ArmsCompared"
    iteration: int
    main: str
    control: str
    n_lab: dict[str, int] = Field(default_factory=dict, description="ok lab results per arm")
    best_utility: dict[str, float] = Field(default_factory=dict, description="best lab utility per arm")
    best_level: float | None = Field(default=None, description="the best utility either arm reached on its paired results")
    experiments_to_best_level: dict[str, float] = Field(
        default_factory=dict,
        description="per arm, its paired results up to the first at the best level (n + 1: never), geometric mean "
                    "over the pairings")
    paired_experiments: int | None = Field(default=None, description="paired results per arm")
    pairings: int | None = Field(default=None, description="pairings averaged over (older ledgers: one, not recorded)")
    acceleration: float | None = None
    main_experiments_to_control_best: int | None = Field(default=None, description="older ledgers only")
    control_experiments_to_its_best: int | None = Field(default=None, description="older ledgers only")


class LLMCall(EventPayload):
    """One chat-model call, recorded before its answer is used, so a replay or a resume never calls the model again.

    Parameters never include API keys.
    """

    type: ClassVar[str] = "LLMCall"
    iteration: int
    key: str = Field(description="the planner's deterministic call key, e.g. it3:llm:0")
    model: str
    parameters: dict[str, Any] = Field(default_factory=dict)
    messages: list[dict[str, Any]]
    response: str
    n_prompt_tokens: int | None = None
    n_completion_tokens: int | None = None
    latency_s: float | None = Field(default=None, description="wall-clock seconds of the call")
    error: str | None = Field(default=None, description="why the call failed, credentials scrubbed")


class EnvironmentStep(EventPayload):
    """One step of an environment episode (``orchestrator.environment``): the action as given, whether it was valid,
    and the reward paid. With the campaign's own events it makes an episode replayable and exportable."""

    type: ClassVar[str] = "EnvironmentStep"
    step: int = Field(ge=0, description="0-based step of the episode")
    iteration: int = Field(ge=0, description="the campaign iteration the step acted in")
    action: dict[str, Any] = Field(description="the action as parsed (or, when it did not parse, as given)")
    is_valid: bool
    error: str | None = Field(default=None, description="why the action was refused")
    reward: float
    potential: float = Field(description="the episode's potential Φ after the step (see rewards.process.shaped_reward)")
    is_terminal: bool = False


class LabBudgetChanged(EventPayload):
    """The lab experiment budget was changed on a resume (``closedloop run --resume ID --lab-budget N``).

    Readers of a campaign's spec apply it after ``CampaignStarted``'s (``resume_policy.recorded_spec``).
    """

    type: ClassVar[str] = "LabBudgetChanged"
    lab_experiments: int = Field(gt=0, description="the new lab budget, experiments")
    previous: int = Field(gt=0, description="the budget it replaced, experiments")
    n_dispatched: int = Field(ge=0, description="lab experiments dispatched when it changed")


class PlannerModelChanged(EventPayload):
    """The llm arm's model was changed on a resume, which is allowed while the campaign's model has never answered
    (``closedloop run --resume ID --model M``). Readers of a campaign's spec apply it after ``CampaignStarted``'s."""

    type: ClassVar[str] = "PlannerModelChanged"
    model: str | None = Field(description="the new model, credentials redacted")
    previous: str | None = Field(description="the model it replaced, as recorded")


class CampaignStopped(EventPayload):
    type: ClassVar[str] = "CampaignStopped"
    reason: str
    n_lab: int
    best_candidate_id: str | None = None
    best_value: float | None = None
