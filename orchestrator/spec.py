"""The campaign spec: a TOML file mapped onto frozen pydantic models.

An invalid spec raises ``SpecError`` listing each bad field by its path, what is wrong, and a hint.

Example:
    >>> spec = CampaignSpec.model_validate({
    ...     "campaign": {"name": "demo", "kind": "molecule"},
    ...     "objective": {"direction": "maximize"},
    ...     "space": {"inline": ["CCO", "CCCO"]},
    ...     "lab": {"oracle": {"CCO": 1.0, "CCCO": 2.0}},
    ...     "budget": {"lab_experiments": 2},
    ... })
    >>> spec.objective.utility(2.0), spec.planner.main
    (2.0, 'bo')
"""

from __future__ import annotations

import math
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AllowInfNan,
    BaseModel,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from orchestrator.spec_fields import SpecModel, spec_field
from orchestrator.spec_objectives import (
    ObjectiveSpec,
    OutcomeConstraintSpec,
    TradeoffSpec,
    check_objectives,
    objective_tables,
)
from vocabulary.domain import CandidateKind, SetupError
from vocabulary.text_files import TextFileError, read_text_file

__all__ = [
    "ApprovalSpec",
    "BudgetSpec",
    "CampaignSpec",
    "LabSpec",
    "ObjectiveSpec",
    "OutcomeConstraintSpec",
    "PlannerSpec",
    "RungSpec",
    "ScreeningSpec",
    "SpaceSpec",
    "SpecError",
    "StopSpec",
    "TradeoffSpec",
    "load_spec",
]


REFERENCE = "docs/spec.md"
"""The spec reference, generated from these models (``orchestrator.interfaces.spec_reference``)."""


def reference_anchor(path: str) -> str:
    """Where in docs/spec.md a field path is documented: ``"ladder.0.simulator"`` -> ``"docs/spec.md#ladder-simulator"``,
    a section for a path inside a free-form table, the top for "(file)" or "(top level)"."""
    parts = [part for part in path.split(".") if not part.isdigit()]
    if not parts or parts[0] not in CampaignSpec.model_fields:
        return REFERENCE
    section = CampaignSpec.model_fields[parts[0]].annotation
    fields = getattr(section, "model_fields", None) or getattr(_item_model(parts[0]), "model_fields", {})
    if len(parts) > 1 and parts[1] in fields:
        return f"{REFERENCE}#{parts[0]}-{parts[1]}"
    return f"{REFERENCE}#{parts[0]}"


def _item_model(section: str) -> type[BaseModel] | None:
    return RungSpec if section == "ladder" else None


class SpecError(SetupError):
    """The campaign spec is invalid. ``problems`` holds (field path, message) pairs; the message links each field's
    entry in docs/spec.md."""

    def __init__(self, source: str, problems: list[tuple[str, str]]):
        self.source, self.problems = source, problems
        lines = "\n".join(f"  - {path}: {message} (see {reference_anchor(path)})" for path, message in problems)
        super().__init__(f"invalid campaign spec {source}:\n{lines}")


class CampaignMeta(SpecModel):
    """What the campaign is called, what it searches and its seed."""

    name: str = spec_field(description="human-readable campaign name", example="freesolv-hydration", min_length=1)
    kind: CandidateKind = spec_field(description="candidate kind: 'molecule' (SMILES), 'material' (formulas) or "
                                             "'conditions' (rows of parameter values)", example="molecule")
    seed: int = spec_field(0, "the campaign's seed, a 64-bit integer; one seed replays one campaign", example=7,
                           ge=-(2**63), lt=2**63)
    description: str = spec_field("", "free text shown with the campaign", example="hydration free energies, FreeSolv")


class SpaceSpec(SpecModel):
    """The design space: a CSV pool (path relative to the spec file) or an inline list.

    With ``generate = true`` the space is open: the pool is only the seed library, the llm arm may write new SMILES
    or formulas, and each iteration adds ``neighbours_per_iteration`` edits of the best candidates so far. New
    candidates must meet ``max_heavy_atoms`` / ``max_atoms`` and ``elements``. Inline conditions are tables of
    parameter values; a key named by ``lab.oracle_column`` (or a table rung's ``column``) is that row's measured value,
    not a parameter.
    """

    pool: str | None = spec_field(None, "CSV file, relative to the spec file (give pool or inline)",
                                  example="freesolv.csv")
    column: str | None = spec_field(None, "the pool column holding SMILES or formulas (molecules, materials)",
                                    example="smiles")
    columns: list[str] | None = spec_field(None, "parameter columns, for kind = conditions",
                                           example=["base", "temperature_c"])
    inline: list[Any] | None = spec_field(
        None, "candidates given inline instead of a pool: SMILES or formulas, or tables of parameter values for "
              "conditions", example=[{"temperature_c": 60, "solvent": "water", "yield_pct": 71.0}])
    features: Literal["auto", "parameters", "columns"] = spec_field(
        "auto",
        "conditions: 'parameters' encodes each parameter (one-hot or scaled); 'columns' reads what each column holds "
        "(Morgan bits for SMILES, composition features for formulas, scaled numbers, one-hot categories); 'auto' is "
        "'columns' when a column holds SMILES or formulas, else 'parameters' (the two agree on numbers and "
        "categories). A column that mixes formulas and SMILES needs 'parameters'", example="parameters")
    stream: Literal["auto"] | bool = spec_field(
        "auto",
        "conditions pools: keep only compact row codes and compute features, acquisition and dedup chunk by chunk "
        "(true), load every row as a candidate (false), or stream when the in-memory pool would exceed its memory "
        "budget ('auto', orchestrator.space.compact.should_stream)", example=True)
    generate: bool = spec_field(False, "open space: propose new molecules or compositions", example=True)
    max_heavy_atoms: int | None = spec_field(30, "generator mode: largest molecule", unit="heavy atoms", example=25, gt=0)
    max_atoms: int | None = spec_field(12, "generator mode: largest formula unit", unit="atoms", example=10, gt=0)
    elements: list[str] | None = spec_field(None, "generator mode: allowed element symbols (None: any)",
                                            example=["Li", "Fe", "P", "O"])
    neighbours_per_iteration: int = spec_field(48, "generator mode: edits of the best added per iteration",
                                               unit="candidates", example=24, ge=0)
    on_bad_rows: Literal["refuse", "skip"] = spec_field(
        "refuse",
        "a pool row whose candidate does not parse, whose lab value is empty, text or infinite, or that repeats a "
        "candidate with different values: 'refuse' stops with the rows named; 'skip' leaves them out and reports "
        "every one (a warning, and the CampaignStarted event)", example="skip")
    replicates: Literal["must_agree", "average"] = spec_field(
        "must_agree",
        "rows of one candidate (replicates, or spellings of one molecule): 'must_agree' merges them only when their "
        "lab and table-rung values are equal (others are bad rows); 'average' averages them, with a warning that "
        "counts the groups", example="average")

    @model_validator(mode="after")
    def _one_source(self) -> SpaceSpec:
        if (self.pool is None) == (self.inline is None):
            raise ValueError("give exactly one of 'pool' (a CSV path) or 'inline' (a list of candidates)")
        if self.pool is not None and not (self.column or self.columns):
            raise ValueError("a pool needs 'column' (molecules, materials) or 'columns' (conditions)")
        if self.stream is True and (self.pool is None or self.generate):
            raise ValueError("stream = true streams a fixed pool file; an inline or open (generate = true) space is "
                             "held in memory, so leave stream out")
        return self


class RungSpec(SpecModel):
    """One rung of the fidelity ladder (a ``[[ladder]]`` table per rung, cheapest first).

    ``simulator = "table"`` reads ``column`` of the pool. ``proxy`` marks the property (if any) that estimates the
    lab objective (with several, the one ``estimates`` names); promotion to the lab ranks by it.
    """

    name: str = spec_field(description="the rung's name, unique in the ladder ('lab' is reserved)", example="xtb")
    simulator: str = spec_field(description="registered simulator name (see Simulators below)", example="xtb")
    column: str | None = spec_field(None, "simulator 'table': the pool column holding this rung's values",
                                    example="calc")
    property: str | None = spec_field(None, "the simulator property the rung reports", example="dg_solv_kcal_mol")
    proxy: str | None = spec_field(None, "property that estimates the objective, in the objective's unit",
                                   example="dg_solv_kcal_mol")
    estimates: str | None = spec_field(
        None, "several objectives: the objective (its property) the proxy estimates; default the first objective",
        example="encap_efficiency")
    cost_s: float = spec_field(0.0, "cost per evaluation for table rungs", unit="s", example=30.0, ge=0)
    capacity: int | None = spec_field(None, "most candidates this rung takes per iteration", unit="candidates",
                                      example=16, gt=0)
    parameters: dict[str, Any] = Field(default_factory=dict, description="the simulator's keyword arguments",
                                       examples=[{"method": "GFN2-xTB"}])
    added_by: str | None = spec_field(
        None, "set by closedloop on a rung it adds itself (planner.model_prior), which a re-validated spec decides "
              "again; leave it out", example="planner.model_prior")

    @model_validator(mode="after")
    def _table_needs_column(self) -> RungSpec:
        if self.simulator == "table" and not self.column:
            raise ValueError(f"rung {self.name!r} uses simulator 'table' and needs 'column' (a column of the pool)")
        return self


class ScreeningSpec(SpecModel):
    """How rungs run and when a rung counts as informative about the lab."""

    executor: Literal["serial", "process", "ray"] = spec_field("process", "where simulators run", example="serial")
    cheap_s: float = spec_field(0.05, "rungs cheaper than this per candidate run in-process", unit="s", example=0.1,
                                ge=0)
    timeout_s: float | None = spec_field(600.0, "per-evaluation timeout", unit="s", example=120.0, gt=0)
    min_pairs: int = spec_field(5, "lab pairs needed before a rung can be judged", unit="pairs", example=8, ge=3)
    min_informativeness: float = spec_field(0.3, "|Spearman ρ| below which a rung is skipped", example=0.4, ge=0, le=1)
    survey_share: float = spec_field(
        0.5, "share of the compute budget that may go to reading proxy rungs over the whole design space (a rung "
             "whose pool-wide cost fits is surveyed once; the rest is paced over escalations)", unit="fraction",
        example=0.25, ge=0, le=1)


class LabSpec(SpecModel):
    """The lab: a driver and its parameters; the SimLab's ground truth is a pool column or an inline mapping."""

    driver: str = spec_field("simlab", "registered driver name (see Lab drivers below); 'manual': a person enters "
                                   "results", example="manual")
    oracle_column: str | None = spec_field(None, "pool column (or inline conditions key) holding the true objective",
                                           example="expt")
    oracle: dict[str, Annotated[float, AllowInfNan()]] | None = spec_field(  # non-finite values: _finite_truth
        None, "inline ground truth for inline molecules or materials, raw input -> value (objective unit)",
        example={"CCO": 1.0, "CCCO": 2.0})
    oracle_simulator: str | None = spec_field(
        None, "a simulator whose property is the SimLab's ground truth (open spaces, digital twins)", example="xtb")
    oracle_property: str | None = spec_field(None, "the oracle simulator's property, objective unit",
                                             example="dg_solv_kcal_mol")
    oracle_parameters: dict[str, Any] = Field(default_factory=dict, description="the oracle simulator's keyword "
                                              "arguments", examples=[{"method": "GFN2-xTB"}])
    noise_sd: float = spec_field(0.0, "measurement noise (sd)", unit="objective unit", example=0.3, ge=0)
    parameters: dict[str, Any] = Field(
        default_factory=dict, description="driver keyword arguments; for simlab see Lab parameters and "
                                          "[lab.parameters.envelope] below",
        examples=[{"transfer_s": 60.0, "envelope": {"parameters": {"temperature_c": [25, 120, "°C"]}}}])
    steps: list[str] | None = spec_field(None, "the stations each job visits, in order; default: the driver's",
                                         example=["synthesis", "characterisation"])
    wait: Literal["any", "all"] = spec_field(
        "any", "'any': refill the lab as each job finishes (pending-aware); 'all': whole batches", example="all")
    max_pending: int | None = spec_field(None, "jobs in the lab at once; default: the driver's parallel capacity",
                                         unit="jobs", example=4, gt=0)
    failure_policy: Literal["retry", "skip", "abort", "ask", "learn"] = spec_field(
        "retry", "what a failed job triggers; 'ask' waits for a human; 'learn': the failure means 'infeasible here': "
                 "never retried, and the planners learn where runs fail", example="learn")
    fails_at_or_below: float | None = spec_field(
        None, "simulated lab: a job whose true first-objective value is at or below this fails (no product); "
              "failure_policy says what that means", unit="objective unit", example=0.0)
    max_retries: int = spec_field(2, "retries per candidate under the 'retry' policy", unit="retries", example=1, ge=0)
    retry_backoff_s: float = spec_field(600.0, "lab-clock wait before a retry, doubling", unit="s", example=300.0, ge=0)
    ttl_s: float | None = spec_field(None, "a job not finished this long after submission fails", unit="s",
                                     example=86400.0, gt=0)
    tolerated_failure_rate: float = spec_field(0.5, "halt the campaign above this failure rate", unit="fraction",
                                               example=0.3, gt=0, le=1)
    min_jobs_for_failure_rate: int = spec_field(6, "jobs needed before the rate is judged", unit="jobs", example=10,
                                                ge=1)

    @field_validator("oracle")
    @classmethod
    def _finite_truth(cls, oracle: dict[str, float] | None) -> dict[str, float] | None:
        bad = {raw: value for raw, value in (oracle or {}).items() if not math.isfinite(value)}
        if bad:
            raise ValueError(f"the ground truth must be finite numbers; {bad} are not: give a measured value or "
                             "leave the candidate out")
        return oracle

    @model_validator(mode="after")
    def _simlab_needs_truth(self) -> LabSpec:
        if self.driver == "simlab" and self.oracle_column is None and self.oracle is None and self.oracle_simulator is None:
            raise ValueError("the simulated lab needs ground truth: set 'oracle_column' (a pool column), 'oracle' "
                             "(inline values) or 'oracle_simulator' (a simulator that computes it)")
        return self


class BudgetSpec(SpecModel):
    """What the campaign may spend: lab experiments, and optionally lab time and simulator compute."""

    lab_experiments: int = spec_field(description="lab experiments", unit="experiments", example=24, gt=0)
    lab_hours: float | None = spec_field(None, "simulated lab time", unit="h", example=72.0, gt=0)
    compute_seconds: float | None = spec_field(
        None, "simulator compute, paced over the lab budget; it limits who climbs the ladder", unit="s",
        example=3600.0, gt=0)


class PlannerSpec(SpecModel):
    """Planner arms. ``main`` proposes most experiments; ``control`` gets ``control_share`` of the lab budget."""

    main: str = spec_field("bo", "a planner arm (see Planner arms below) or one added with register_planner",
                           example="llm")
    control: str | None = spec_field("random", "bo, random or a registered arm; leave it out with control_share = 0 "
                                           "for no control", example="bo")
    model: str | None = spec_field(
        None, "llm arm: 'provider:model', a .gguf path, or None for the embedded SmolLM2",
        example="anthropic:claude-sonnet-4-5")
    max_repair_rounds: int = spec_field(2, "llm arm: repair rounds before the bo fallback", unit="rounds", example=1,
                                        ge=0)
    shortlist_size: int | None = spec_field(
        None, "llm arm: the size of bo's batch the model chooses from per call; default twice the proposals asked "
              "for, so a model that knows nothing measures bo's next-best candidates (with one proposal per lab "
              "slot, twice the model's own picks, the candidates that follow bo's anchors)", unit="candidates",
        example=16, gt=0)
    llm_tool_steps: int = spec_field(
        0, "llm arm: rounds in which a tool-calling model may call predict, simulate, history, similar and "
           "constraints itself (provider models that call tools; local GGUF models get the tool results in the "
           "prompt); 0 puts them in the prompt only", unit="rounds", example=3, ge=0)
    llm_anchors: bool = spec_field(
        True, "llm arm: when the screen weighs several proposals per lab slot, one of each slot's proposals is bo's "
              "pick and the model chooses the others, so the ladder's evidence, not the model alone, decides whether "
              "a model pick displaces the surrogate's; with one proposal per slot, the model explores one slot per "
              "batch until its lab record shows (95 % credible) that its picks beat bo's, then earns a larger share "
              "(the rest are bo's); false lets the model choose every proposal", example=False)
    model_prior: Literal["auto", "on", "off"] = spec_field(
        "auto", "llm arms: the model's estimate of every candidate's lab value, read by the ladder as a rung "
                "(llm_prior: a cold start half by it, a prior calibrated on the lab results, dropped when they rule "
                "it out); auto adds it for an llm arm with one objective and no proxy rung of its own, when the "
                "survey costs at most 900 CPU-s (1,800 candidates for the embedded model); on adds it for any arm "
                "within the compute budget; off never", example="off")
    control_share: float = spec_field(0.2, "share of the lab budget that goes to the control arm", unit="fraction",
                                      example=0.0, ge=0, lt=1)
    batch_size: int = spec_field(4, "lab experiments per iteration", unit="experiments", example=8, gt=0)
    n_initial: int = spec_field(4, "random lab experiments before the surrogate is used", unit="experiments",
                                example=6, ge=1)
    proposals_per_slot: int = spec_field(3, "proposals screened per lab slot (main arm)", unit="proposals", example=2,
                                         ge=1)
    kernel: Literal["auto", "matern52", "rbf", "tanimoto", "tanimoto_matern52", "evidence"] = spec_field(
        "auto", "the surrogate's kernel; auto chooses by the pool's columns: tanimoto on bits, tanimoto_matern52 on "
                "SMILES beside numbers, matern52 otherwise; evidence chooses at each refit by leave-one-out "
                "predictive density on the lab data", example="tanimoto")

    @field_validator("main", "control")
    @classmethod
    def _known_arm(cls, name: str | None, info: ValidationInfo) -> str | None:
        from orchestrator.planner_registry import planner_names, unknown_arm_message

        if name is not None and name not in planner_names():
            raise ValueError(unknown_arm_message(name))
        if info.field_name == "control" and name in ("llm", "llm-shuffled", "llm-random", "llm-oracle"):
            raise ValueError(f"the control arm cannot be the {name} arm; use 'bo' or 'random'")
        return name

    @model_validator(mode="after")
    def _control_share_needs_control(self) -> PlannerSpec:
        if self.control is None and self.control_share > 0:
            raise ValueError("control_share > 0 needs a control arm; set control = 'random' or control_share = 0")
        if self.control == self.main:
            raise ValueError(f"the control arm must differ from the main arm (both are {self.main!r})")
        return self


class ApprovalSpec(SpecModel):
    """``auto`` approves batches of at most ``max_auto_jobs``; ``interrupt`` waits for a human at every batch."""

    policy: Literal["auto", "interrupt"] = spec_field(
        "auto", "'auto' approves batches up to max_auto_jobs; 'interrupt' asks a person to approve each batch "
                "(the campaign waits for approval)", example="interrupt")
    max_auto_jobs: int = spec_field(1000, "largest batch approved without asking", unit="jobs", example=8, gt=0)


class RewardSpec(SpecModel):
    """The rubric that scores the campaign's decisions (for the planners' training and the report's RL section)."""

    rubric: str = spec_field("default", "built-in rubric name or a TOML path relative to the spec",
                             example="rubrics/strict.toml")


class StopSpec(SpecModel):
    """When the campaign stops before its budget is spent."""

    on_target: bool = spec_field(False, "stop at the first lab hit", example=True)
    threshold: float | None = spec_field(None, "a hit for maximize/minimize", unit="objective unit", example=85.0)
    max_iterations: int | None = spec_field(None, "most plan-measure iterations", unit="iterations", example=10, gt=0)


class CampaignSpec(SpecModel):
    """A campaign: one TOML file with the sections below; relative paths in it resolve against its directory."""

    campaign: CampaignMeta = spec_field(description="[campaign]: name, kind and seed")
    objective: ObjectiveSpec = spec_field(description="[objective]: the measured property and which way is better; "
                                                  "[[objective]] repeated for several (this is the first)")
    objectives: list[ObjectiveSpec] = Field(
        default_factory=list, description="[[objective]] repeated: every objective, the first one is 'objective'; "
                                          "empty for one objective")
    tradeoff: TradeoffSpec = spec_field(TradeoffSpec(), "[tradeoff]: how several objectives are weighed")
    constraints: list[OutcomeConstraintSpec] = Field(
        default_factory=list, description="[[constraint]]: measured properties that must stay within bounds")
    space: SpaceSpec = spec_field(description="[space]: the design space, a CSV pool or inline candidates")
    ladder: list[RungSpec] = Field(default_factory=list,
                                   description="[[ladder]]: the fidelity ladder, cheapest rung first; may be empty")
    screening: ScreeningSpec = spec_field(ScreeningSpec(), "[screening]: how rungs run and are judged")
    lab: LabSpec = spec_field(description="[lab]: the lab driver, its parameters and the simulated lab's ground truth")
    budget: BudgetSpec = spec_field(description="[budget]: lab experiments, lab time and compute")
    planner: PlannerSpec = spec_field(PlannerSpec(), "[planner]: the planner arms and their settings")
    approval: ApprovalSpec = spec_field(ApprovalSpec(), "[approval]: the approval gate before each batch")
    rewards: RewardSpec = spec_field(RewardSpec(), "[rewards]: the rubric that scores decisions")
    stop: StopSpec = spec_field(StopSpec(), "[stop]: early stopping")
    base_dir: str = spec_field(".", "directory that relative paths resolve against; load_spec sets it to the spec "
                                "file's directory", example="campaigns/freesolv")

    @model_validator(mode="before")
    @classmethod
    def _objective_tables(cls, data: Any) -> Any:
        return objective_tables(data)

    def estimated_objective(self, rung: RungSpec) -> ObjectiveSpec:
        """The objective a proxy rung estimates: the one its ``estimates`` names, else the first."""
        return next((o for o in self.objective_list if o.property == rung.estimates), self.objective)

    @property
    def objective_list(self) -> list[ObjectiveSpec]:
        """Every objective, the first one ``objective``."""
        return list(self.objectives) or [self.objective]

    @property
    def is_multi_objective(self) -> bool:
        return len(self.objectives) > 1

    @property
    def tradeoff_method(self) -> Literal["single", "pareto", "desirability", "weighted_sum"]:
        """"single" for one objective; else the ``[tradeoff]`` method, ``pareto`` by default."""
        return (self.tradeoff.method or "pareto") if self.is_multi_objective else "single"

    @property
    def measured_properties(self) -> list[str]:
        """Every property the lab returns: the objectives' in order, then the constraints' not already listed."""
        names = [o.property for o in self.objective_list]
        return names + [c.property for c in self.constraints if c.property not in names]

    @model_validator(mode="after")
    def _unique_rungs(self) -> CampaignSpec:
        check_objectives(self)
        self._decide_model_prior()
        names = [r.name for r in self.ladder]
        if len(names) != len(set(names)):
            raise ValueError(f"rung names must be unique; got {names}")
        if "lab" in names:
            raise ValueError("'lab' is reserved for the last rung; rename that rung")
        if self.space.columns and self.campaign.kind != "conditions":
            raise ValueError("'space.columns' is for kind = 'conditions'; use 'space.column' for molecules and materials")
        described_by = set(self.space.columns or []) | ({self.space.column} if self.space.column else set())
        if self.lab.oracle_column and self.lab.oracle_column in described_by:
            raise ValueError(f"lab.oracle_column {self.lab.oracle_column!r} is also a space column: a candidate "
                             "described by its own lab value gives the planners the answer; take it out of the space")
        self._no_rung_reads_the_truth()
        if self.space.generate:
            if self.campaign.kind == "conditions":
                raise ValueError("space.generate is for molecules and materials; a conditions space is already a grid")
            tables = [r.name for r in self.ladder if r.simulator == "table"]
            if tables:
                raise ValueError(f"rungs {tables} read pool columns, which new candidates do not have; with "
                                 "space.generate use simulators that compute (rdkit_descriptors, xtb, composition, ...)")
            if self.lab.driver == "simlab" and not self.lab.oracle_simulator:
                raise ValueError("a simulated lab in an open space needs a ground truth for new candidates: set "
                                 "lab.oracle_simulator and lab.oracle_property (e.g. 'xtb' and 'dg_solv_kcal_mol')")
        if self.lab.oracle_simulator and not self.lab.oracle_property:
            raise ValueError("lab.oracle_simulator needs lab.oracle_property: the simulator property the lab measures")
        return self

    def _decide_model_prior(self) -> None:
        """Drop the rung ``planner.model_prior`` added before and add it again if it still applies
        (``spec_model_prior``): a spec revalidated with another planner, model or seed decides afresh."""
        from orchestrator.spec_model_prior import ADDED_BY, model_prior_rung

        own = [r for r in self.ladder if r.added_by != ADDED_BY]
        object.__setattr__(self, "ladder", own)  # the spec is frozen once validated; this is its validation
        rung = model_prior_rung(self)
        if rung is not None:
            object.__setattr__(self, "ladder", [*own, RungSpec.model_validate(rung)])

    def _no_rung_reads_the_truth(self) -> None:
        """A table rung that reads the lab's ground truth is a perfect rung by construction (a typo for the column
        meant): refused, as a space column holding it is."""
        truth = {self.lab.oracle_column: "lab.oracle_column"} if self.lab.oracle_column else {}
        if self.lab.oracle is not None:
            truth["_oracle"] = "the inline lab.oracle"  # where the pool holds the inline ground truth
        for rung in self.ladder:
            if rung.simulator == "table" and rung.column in truth:
                raise ValueError(f"rung {rung.name!r} reads column {rung.column!r}, which is {truth[rung.column]}: the "
                                 "lab's ground truth, so the rung would predict the lab perfectly; give the rung the "
                                 "column of its own (cheaper) measurement")

    def resolve(self, path: str) -> Path:
        """A spec-relative path made absolute."""
        candidate = Path(path)
        return candidate if candidate.is_absolute() else (Path(self.base_dir) / candidate).resolve()

    def with_overrides(
        self,
        *,
        seed: int | None = None,
        lab_budget: int | None = None,
        lab_url: str | None = None,
        planner: str | None = None,
        model: str | None = None,
        control_share: float | None = None,
    ) -> CampaignSpec:
        """A copy with the CLI's --seed / --lab-budget / --lab-url / --planner / --model / --control-share applied.

        A lab URL replaces the lab's driver with the HTTP driver; the ground truth then lives on the server. A control
        share of 0 turns the control arm off (every lab slot goes to the main arm); a positive share on a spec without
        a control arm adds the random arm (bo when the main arm is random).

        Example:
            >>> spec = CampaignSpec.model_validate({
            ...     "campaign": {"name": "demo", "kind": "molecule"}, "objective": {"direction": "maximize"},
            ...     "space": {"inline": ["CCO", "CCCO"]}, "lab": {"oracle": {"CCO": 1.0, "CCCO": 2.0}},
            ...     "budget": {"lab_experiments": 2}})
            >>> off = spec.with_overrides(control_share=0)
            >>> off.planner.control, off.planner.control_share, spec.with_overrides(control_share=0.5).planner.control
            (None, 0.0, 'random')
        """
        data = self.model_dump()
        if seed is not None:
            data["campaign"]["seed"] = seed
        if lab_budget is not None:
            data["budget"]["lab_experiments"] = lab_budget
        if planner is not None:
            data["planner"]["main"] = planner
            if data["planner"]["control"] == planner:
                data["planner"]["control"] = "random" if planner == "bo" else "bo"
        if model is not None:
            data["planner"]["model"] = model
        if control_share is not None:
            data["planner"]["control_share"] = control_share
            if control_share == 0:
                data["planner"]["control"] = None
            elif data["planner"]["control"] is None:
                data["planner"]["control"] = "bo" if data["planner"]["main"] == "random" else "random"
        if lab_url is not None:
            data["lab"].update(driver="http", oracle_column=None, oracle=None,
                               parameters={"base_url": lab_url, "retries": 30, "backoff_s": 0.2})
        return validate_spec(data, source="overrides")


_HINTS = {
    "direction": "use 'maximize', 'minimize' or 'target'",
    "kind": "use 'molecule', 'material' or 'conditions'",
    "lab_experiments": "a whole number of lab experiments greater than 0, e.g. 24",
    "seed": "a whole number from -2**63 to 2**63 - 1, e.g. 0",
    "extra_forbidden": "remove it or check its spelling against the documented fields",
    "missing": "add it",
    "finite_number": "give a finite number (nan and inf are not values here; leave an optional field out instead)",
}


def _hint(error: dict) -> str:
    if error["type"] == "literal_error":  # pydantic's message already lists the allowed values
        return ""
    for part in reversed(error["loc"]):
        if isinstance(part, str) and part in _HINTS:
            return _HINTS[part]
    return _HINTS.get(error["type"], "")


_NAMED_FIELD = re.compile(r"^([a-z_]+(?:\[\d+\])?(?:\.[a-z_]+(?:\[\d+\])?)*(?:\.|\[\d+\])[a-z_.]*) (.+)$",
                          re.DOTALL)
"""A top-level message that opens with a field path (``objective[1].property 'x' is listed twice``)."""


def validate_spec(data: dict[str, Any], *, source: str = "<dict>") -> CampaignSpec:
    """Validate a mapping; raise ``SpecError`` with field paths and hints."""
    try:
        return CampaignSpec.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            path = ".".join(str(p) for p in error["loc"]) or "(top level)"
            message = error["msg"].removeprefix("Value error, ")
            named = _NAMED_FIELD.match(message) if path == "(top level)" else None
            if named:  # a whole-spec check that names its field first: show that field as the path
                path, message = named.group(1), named.group(2)
            hint = _hint(error)
            problems.append((path, f"{message}" + (f"; {hint}" if hint else "")))
        raise SpecError(source, problems) from exc


def load_spec(path: str | Path) -> CampaignSpec:
    """Read a campaign TOML file (UTF-8, with or without a byte-order mark; any line ends). Relative paths inside it
    resolve against its directory."""
    file = Path(path)
    if not file.is_file():
        raise SpecError(str(path), [("(file)", "no such file; give the path to a campaign TOML, e.g. campaigns/freesolv/campaign.toml")])
    try:
        data = tomllib.loads(read_text_file(file))
    except TextFileError as exc:  # a byte-order mark and CRLF line ends are no error
        raise SpecError(str(path), [("(file)", exc.problem)]) from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(str(path), [("(toml)", f"{exc}; fix the TOML syntax")]) from exc
    data.setdefault("base_dir", str(file.resolve().parent))
    return validate_spec(data, source=str(path))
