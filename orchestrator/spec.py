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
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AllowInfNan,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from vocabulary.directions import normalised_direction
from vocabulary.domain import CandidateKind, SetupError, objective_utility
from vocabulary.text_files import TextFileError, read_text_file

__all__ = [
    "ApprovalSpec",
    "BudgetSpec",
    "CampaignSpec",
    "LabSpec",
    "ObjectiveSpec",
    "PlannerSpec",
    "RungSpec",
    "ScreeningSpec",
    "SpaceSpec",
    "SpecError",
    "StopSpec",
    "load_spec",
]


class SpecError(SetupError):
    """The campaign spec is invalid. ``problems`` holds (field path, message) pairs."""

    def __init__(self, source: str, problems: list[tuple[str, str]]):
        self.source, self.problems = source, problems
        lines = "\n".join(f"  - {path}: {message}" for path, message in problems)
        super().__init__(f"invalid campaign spec {source}:\n{lines}")


class _Spec(BaseModel):
    # TOML writes nan and inf; no number of a spec means either (a NaN target makes every utility NaN)
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class CampaignMeta(_Spec):
    name: str = Field(min_length=1, description="human-readable campaign name")
    kind: CandidateKind = Field(description="candidate kind: molecule, material or conditions")
    seed: int = Field(default=0, ge=-(2**63), lt=2**63, description="the campaign's seed, a 64-bit integer")
    description: str = ""


class ObjectiveSpec(_Spec):
    """What the lab measures and which way is better.

    ``target`` direction means "hit ``target`` within ``tolerance``"; its utility is ``-|value - target|``.
    """

    property: str = Field(default="value", description="name of the measured property")
    unit: str = ""
    direction: Literal["maximize", "minimize", "target"]
    target: float | None = None
    tolerance: float | None = Field(default=None, gt=0)

    @field_validator("direction", mode="before")
    @classmethod
    def _spelling(cls, value: Any) -> Any:
        """"maximise", "Min" and the like mean what they say (``vocabulary.directions``)."""
        return normalised_direction(value)

    @model_validator(mode="after")
    def _target_needs_value(self) -> ObjectiveSpec:
        if self.direction == "target" and (self.target is None or self.tolerance is None):
            raise ValueError("direction 'target' needs both 'target' and 'tolerance' (e.g. target = -5.0, tolerance = 0.5)")
        return self

    def utility(self, value: float) -> float:
        """Higher is better, whatever the direction."""
        return objective_utility(self.direction, value, self.target)

    def is_hit(self, value: float | None, threshold: float | None = None) -> bool:
        """True when a value meets the target window, or the stop threshold for maximize/minimize."""
        if value is None or math.isnan(value):
            return False
        if self.direction == "target":
            return abs(value - self.target) <= self.tolerance
        if threshold is None:
            return False
        return value >= threshold if self.direction == "maximize" else value <= threshold


class SpaceSpec(_Spec):
    """The design space: a CSV pool (path relative to the spec file) or an inline list.

    With ``generate = true`` the space is open: the pool is only the seed library, the llm arm may write new SMILES
    or formulas, and each iteration adds ``neighbours_per_iteration`` edits of the best candidates so far. New
    candidates must meet ``max_heavy_atoms`` / ``max_atoms`` and ``elements``.
    """

    pool: str | None = Field(default=None, description="CSV file, relative to the spec file")
    column: str | None = Field(default=None, description="the column holding SMILES or formulas")
    columns: list[str] | None = Field(default=None, description="parameter columns, for kind = conditions")
    inline: list[Any] | None = Field(default=None, description="candidates given inline instead of a pool")
    features: Literal["auto", "parameters", "columns"] = Field(
        default="auto",
        description="conditions: 'parameters' encodes each parameter (one-hot or scaled); 'columns' reads what each "
                    "column holds (Morgan bits for SMILES, composition features for formulas, scaled numbers, "
                    "one-hot categories); 'auto' is 'columns' when a column holds SMILES or formulas, else "
                    "'parameters' (the two agree on numbers and categories)")
    stream: Literal["auto"] | bool = Field(
        default="auto",
        description="conditions pools: keep only compact row codes and compute features, acquisition and dedup chunk by "
                    "chunk (true), load every row as a candidate (false), or stream when the in-memory pool would "
                    "exceed its memory budget ('auto', orchestrator.space.compact.should_stream)")
    generate: bool = Field(default=False, description="open space: propose new molecules or compositions")
    max_heavy_atoms: int | None = Field(default=30, gt=0, description="generator mode: largest molecule, heavy atoms")
    max_atoms: int | None = Field(default=12, gt=0, description="generator mode: largest formula unit, atoms")
    elements: list[str] | None = Field(default=None, description="generator mode: allowed element symbols (None: any)")
    neighbours_per_iteration: int = Field(default=48, ge=0, description="generator mode: edits of the best added per iteration")
    on_bad_rows: Literal["refuse", "skip"] = Field(
        default="refuse",
        description="a pool row whose candidate does not parse, whose lab value is empty, text or infinite, or that "
                    "repeats a candidate with different values: 'refuse' stops with the rows named; 'skip' leaves "
                    "them out and reports every one (a warning, and the CampaignStarted event)")
    replicates: Literal["must_agree", "average"] = Field(
        default="must_agree",
        description="rows of one candidate (replicates, or spellings of one molecule): 'must_agree' merges them only "
                    "when their lab and table-rung values are equal (others are bad rows); 'average' averages them, "
                    "with a warning that counts the groups")

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


class RungSpec(_Spec):
    """One rung of the fidelity ladder.

    ``simulator = "table"`` reads ``column`` of the pool. ``proxy`` marks the property (if any) that estimates the
    lab objective; promotion to the lab ranks by it.
    """

    name: str
    simulator: str = Field(description="registered simulator name, e.g. 'table' or 'rdkit_descriptors'")
    column: str | None = None
    property: str | None = None
    proxy: str | None = Field(default=None, description="property that estimates the objective, in its unit")
    cost_s: float = Field(default=0.0, ge=0, description="cost per evaluation for table rungs, seconds")
    capacity: int | None = Field(default=None, gt=0, description="most candidates this rung takes per iteration")
    parameters: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _table_needs_column(self) -> RungSpec:
        if self.simulator == "table" and not self.column:
            raise ValueError(f"rung {self.name!r} uses simulator 'table' and needs 'column' (a column of the pool)")
        return self


class ScreeningSpec(_Spec):
    """How rungs run and when a rung counts as informative about the lab."""

    executor: Literal["serial", "process", "ray"] = Field(default="process", description="where simulators run")
    cheap_s: float = Field(default=0.05, ge=0, description="rungs cheaper than this per candidate run in-process, s")
    timeout_s: float | None = Field(default=600.0, gt=0, description="per-evaluation timeout, seconds")
    min_pairs: int = Field(default=5, ge=3, description="lab pairs needed before a rung can be judged")
    min_informativeness: float = Field(default=0.3, ge=0, le=1, description="|Spearman ρ| below which a rung is skipped")
    survey_share: float = Field(
        default=0.5, ge=0, le=1,
        description="share of the compute budget that may go to reading proxy rungs over the whole design space "
                    "(a rung whose pool-wide cost fits is surveyed once; the rest is paced over escalations)")


class LabSpec(_Spec):
    """The lab: a driver and its parameters; the SimLab's ground truth is a pool column or an inline mapping."""

    driver: str = "simlab"
    oracle_column: str | None = Field(default=None, description="pool column holding the true objective")
    oracle: dict[str, Annotated[float, AllowInfNan()]] | None = Field(
        default=None, description="inline ground truth, raw input -> value")  # non-finite values: _finite_truth
    oracle_simulator: str | None = Field(
        default=None, description="a simulator whose property is the SimLab's ground truth (open spaces, digital twins)")
    oracle_property: str | None = Field(default=None, description="the oracle simulator's property, objective unit")
    oracle_parameters: dict[str, Any] = Field(default_factory=dict, description="the oracle simulator's keyword arguments")
    noise_sd: float = Field(default=0.0, ge=0, description="measurement noise, objective unit")
    parameters: dict[str, Any] = Field(default_factory=dict, description="driver keyword arguments")
    steps: list[str] | None = Field(default=None, description="the stations each job visits, in order; default: the driver's")
    wait: Literal["any", "all"] = Field(
        default="any", description="'any': refill the lab as each job finishes (pending-aware); 'all': whole batches")
    max_pending: int | None = Field(
        default=None, gt=0, description="jobs in the lab at once; default: the driver's parallel capacity")
    failure_policy: Literal["retry", "skip", "abort", "ask"] = Field(
        default="retry", description="what a failed job triggers; 'ask' waits for a human")
    max_retries: int = Field(default=2, ge=0, description="retries per candidate under the 'retry' policy")
    retry_backoff_s: float = Field(default=600.0, ge=0, description="lab-clock wait before a retry, doubling, s")
    ttl_s: float | None = Field(default=None, gt=0, description="a job not finished this long after submission fails, s")
    tolerated_failure_rate: float = Field(default=0.5, gt=0, le=1, description="halt the campaign above this rate")
    min_jobs_for_failure_rate: int = Field(default=6, ge=1, description="jobs needed before the rate is judged")

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


class BudgetSpec(_Spec):
    lab_experiments: int = Field(gt=0, description="lab experiments, count")
    lab_hours: float | None = Field(default=None, gt=0, description="simulated lab time, hours")
    compute_seconds: float | None = Field(
        default=None, gt=0,
        description="simulator compute, seconds; paced over the lab budget, it limits who climbs the ladder")


class PlannerSpec(_Spec):
    """Planner arms. ``main`` proposes most experiments; ``control`` gets ``control_share`` of the lab budget."""

    main: str = Field(default="bo", description="a planner arm: llm, bo, random or one added with register_planner")
    control: str | None = Field(default="random", description="bo, random or a registered arm; None for no control")
    model: str | None = Field(
        default=None, description="llm arm: 'provider:model', a .gguf path, or None for the embedded SmolLM2")
    max_repair_rounds: int = Field(default=2, ge=0, description="llm arm: repair rounds before the bo fallback")
    shortlist_size: int | None = Field(
        default=None, gt=0, description="llm arm: the size of bo's batch the model chooses from per call; default "
                                        "twice the proposals asked for, so a model that knows nothing measures bo's "
                                        "next-best candidates (with one proposal per lab slot, twice the model's own "
                                        "picks, the candidates that follow bo's anchors)")
    llm_tool_steps: int = Field(
        default=0, ge=0, description="llm arm: rounds in which a tool-calling model may call predict, simulate, "
                                     "history, similar and constraints itself (provider models that call tools; local "
                                     "GGUF models get the tool results in the prompt); 0 puts them in the prompt only")
    llm_anchors: bool = Field(
        default=True, description="llm arm: when the screen weighs several proposals per lab slot, one of each slot's "
                                  "proposals is bo's pick and the model chooses the others, so the ladder's evidence, "
                                  "not the model alone, decides whether a model pick displaces the surrogate's; with "
                                  "one proposal per slot, the model explores one slot per batch until its lab record "
                                  "shows (95 % credible) that its picks beat bo's, then earns a larger share (the "
                                  "rest are bo's); false lets the model choose every proposal")
    control_share: float = Field(default=0.2, ge=0, lt=1)
    batch_size: int = Field(default=4, gt=0, description="lab experiments per iteration")
    n_initial: int = Field(default=4, ge=1, description="random lab experiments before the surrogate is used")
    proposals_per_slot: int = Field(default=3, ge=1, description="proposals screened per lab slot (main arm)")
    kernel: Literal["auto", "matern52", "rbf", "tanimoto", "tanimoto_matern52", "evidence"] = Field(
        default="auto", description="the surrogate's kernel; auto chooses by the pool's columns: tanimoto on bits, "
                                    "tanimoto_matern52 on SMILES beside numbers, matern52 otherwise; evidence "
                                    "chooses at each refit by leave-one-out predictive density on the lab data")

    @field_validator("main", "control")
    @classmethod
    def _known_arm(cls, name: str | None, info: ValidationInfo) -> str | None:
        from orchestrator.planner_registry import planner_names

        if name is not None and name not in planner_names():
            raise ValueError(f"planner arm {name!r} is unknown; available arms: {list(planner_names())} "
                             "(register others with orchestrator.policy.planners.register_planner)")
        if info.field_name == "control" and name in ("llm", "llm-shuffled"):
            raise ValueError(f"the control arm cannot be the {name} arm; use 'bo' or 'random'")
        return name

    @model_validator(mode="after")
    def _control_share_needs_control(self) -> PlannerSpec:
        if self.control is None and self.control_share > 0:
            raise ValueError("control_share > 0 needs a control arm; set control = 'random' or control_share = 0")
        if self.control == self.main:
            raise ValueError(f"the control arm must differ from the main arm (both are {self.main!r})")
        return self


class ApprovalSpec(_Spec):
    """``auto`` approves batches of at most ``max_auto_jobs``; ``interrupt`` waits for a human at every batch."""

    policy: Literal["auto", "interrupt"] = "auto"
    max_auto_jobs: int = Field(default=1000, gt=0)


class RewardSpec(_Spec):
    rubric: str = Field(default="default", description="built-in rubric name or a TOML path relative to the spec")


class StopSpec(_Spec):
    on_target: bool = Field(default=False, description="stop at the first lab hit")
    threshold: float | None = Field(default=None, description="a hit for maximize/minimize, objective unit")
    max_iterations: int | None = Field(default=None, gt=0)


class CampaignSpec(_Spec):
    campaign: CampaignMeta
    objective: ObjectiveSpec
    space: SpaceSpec
    ladder: list[RungSpec] = Field(default_factory=list)
    screening: ScreeningSpec = ScreeningSpec()
    lab: LabSpec
    budget: BudgetSpec
    planner: PlannerSpec = PlannerSpec()
    approval: ApprovalSpec = ApprovalSpec()
    rewards: RewardSpec = RewardSpec()
    stop: StopSpec = StopSpec()
    base_dir: str = Field(default=".", description="directory that relative paths resolve against")

    @model_validator(mode="after")
    def _unique_rungs(self) -> CampaignSpec:
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


def validate_spec(data: dict[str, Any], *, source: str = "<dict>") -> CampaignSpec:
    """Validate a mapping; raise ``SpecError`` with field paths and hints."""
    try:
        return CampaignSpec.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            path = ".".join(str(p) for p in error["loc"]) or "(top level)"
            message = error["msg"].removeprefix("Value error, ")
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
