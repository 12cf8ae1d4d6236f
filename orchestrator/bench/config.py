"""What a discovery benchmark measures: the pool, the objective, the rungs, the arms and the budget.

``BenchConfig`` is a frozen pydantic model built from the ``closedloop bench`` flags; every field names the flag it
comes from, so a bad value is reported as ``--flag: what is wrong; how to fix it``.

Example:
    >>> parse_objective("target:expt:-12:0.5")
    ('target', 'expt', -12.0, 0.5)
    >>> parse_rung("gaff=calc:3600")
    RungColumn(name='gaff', column='calc', cost_s=3600.0)
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from orchestrator.planner_registry import planner_names
from vocabulary.directions import normalised_direction
from vocabulary.domain import SetupError

__all__ = ["BenchConfig", "BenchError", "RungColumn", "parse_objective", "parse_rung"]



def __getattr__(name: str):
    """``ARM_NAMES``: the arms a benchmark may run, read from the planner registry when asked (``planner_names()``:
    the built-ins, installed third-party arms, arms registered in this process). Each runs as the spec's main arm
    with no control: ``bo`` (with the ladder: surveyed rungs as cold start and calibrated prior mean), ``bo-sf``
    (the same on lab results only), ``botorch`` (BoTorch SingleTaskGP + qLogNEI on the pool's features),
    ``botorch-onehot`` (the same on one-hot categories, SMILES columns included, and scaled numbers: BoTorch as a
    user sets it up for a reaction grid), ``cheap-first`` (the cheapest rung's ranking), ``llm`` (the embedded-model
    arm), ``llm-shuffled`` (the same shown shuffled lab results), ``llm-random`` and ``llm-oracle`` (its slots with a
    coin or the lab's truth in the model's place; the oracle is registered by the bench only), ``random``."""
    if name == "ARM_NAMES":
        return planner_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

Direction = Literal["maximize", "minimize", "target"]


class BenchError(SetupError):
    """A benchmark flag is invalid. ``flag`` is the offending flag, e.g. ``--objective``."""

    def __init__(self, flag: str, message: str):
        self.flag = flag
        super().__init__(f"{flag}: {message}")


class RungColumn(BaseModel):
    """A cheaper fidelity read from a pool column, with its cost per evaluation in seconds."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str = Field(min_length=1)
    column: str = Field(min_length=1)
    cost_s: float = Field(default=0.0, ge=0, description="cost of one evaluation, seconds")


def parse_objective(text: str) -> tuple[Direction, str, float | None, float | None]:
    """``maximize:COL``, ``minimize:COL`` or ``target:COL:VALUE:TOL`` as (direction, column, target, tolerance).

    The direction may be written in any case, as "maximise" / "minimise", or as "max" / "min" (``vocabulary.directions``).

    Example:
        >>> parse_objective("Maximise:yield (%)"), parse_objective("target:gap:1.4:0.1")
        (('maximize', 'yield (%)', None, None), ('target', 'gap', 1.4, 0.1))
    """
    written, _, rest = text.partition(":")
    direction = normalised_direction(written)
    if direction in ("maximize", "minimize") and rest:
        return direction, rest, None, None  # type: ignore[return-value]
    if direction == "target":
        parts = rest.rsplit(":", 2)
        if len(parts) == 3 and parts[0]:
            try:
                target, tolerance = float(parts[1]), float(parts[2])
            except ValueError:
                target = tolerance = math.nan
            if math.isfinite(target) and math.isfinite(tolerance) and tolerance > 0:
                return "target", parts[0], target, tolerance
        raise BenchError("--objective", f"{text!r} is not target:COL:VALUE:TOL with numbers and TOL > 0; "
                                        "e.g. --objective target:expt:-12:0.5")
    raise BenchError("--objective", f"{text!r} is not maximize:COL, minimize:COL or target:COL:VALUE:TOL; "
                                    "e.g. --objective maximize:yield")


def parse_rung(text: str) -> RungColumn:
    """``NAME=COL[:COST_S]`` as a ``RungColumn`` (cost 0 s when omitted)."""
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest:
        raise BenchError("--rung", f"{text!r} is not NAME=COL[:COST_S]; e.g. --rung gaff=calc:3600")
    column, cost_s = rest, 0.0
    head, sep, tail = rest.rpartition(":")
    if sep:
        try:
            column, cost_s = head, float(tail)
        except ValueError:
            column, cost_s = rest, 0.0
    if not column or not math.isfinite(cost_s) or cost_s < 0:
        raise BenchError("--rung", f"{text!r} needs a column and a non-negative cost in seconds; e.g. gaff=calc:3600")
    return RungColumn(name=name, column=column, cost_s=cost_s)


class BenchConfig(BaseModel):
    """One benchmark: every arm runs ``seeds`` times on the same pool with the same lab budget.

    Example:
        >>> config = BenchConfig(pool="p.csv", id_cols=("x",), objective="maximize:y", lab_budget=10, seeds=2,
        ...                      arms=("random",))
        >>> config.direction, config.objective_column, config.batch
        ('maximize', 'y', 5)
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    spec: str | None = Field(default=None, description="--spec: a campaign TOML benchmarked as it stands")
    pool: str | None = Field(default=None, description="--pool: CSV file")
    id_cols: tuple[str, ...] = Field(default=(), description="--id-cols: columns that identify a candidate")
    objective: str | None = Field(default=None, description="--objective: maximize:COL | minimize:COL | target:COL:VALUE:TOL"
                                                            " (the first objective when there are several)")
    objectives: tuple[str, ...] = Field(default=(), description="--objective repeated: every objective, in order "
                                                                "(empty for one objective)")
    fail_at_or_below: float | None = Field(default=None, description="--fail-at-or-below: the simulated lab fails a "
                                                                     "run whose true first-objective value is at or "
                                                                     "below this (objective unit)")
    failure_policy: Literal["retry", "skip", "learn"] | None = Field(
        default=None, description="--failure-policy: what a failed run means (lab.failure_policy; default the "
                                  "spec's, retry): 'learn' = infeasible here, never retried, and the planners learn it")
    rungs: tuple[RungColumn, ...] = Field(default=(), description="--rung: cheaper fidelities read from columns")
    feature_cols: tuple[str, ...] | Literal["auto"] = Field(default="auto", description="--feature-cols")
    lab_budget: int | None = Field(default=None, gt=0, description="--lab-budget: lab experiments per run "
                                                                   "(default with --spec: the spec's budget)")
    seeds: int = Field(gt=0, description="--seeds: independent runs per arm")
    arms: tuple[str, ...] = Field(min_length=1, description="--arms")
    batch: int = Field(default=5, gt=0, description="--batch: lab experiments per iteration")
    lab_cost_s: float = Field(default=3600.0, ge=0, description="--lab-cost-s: cost of one lab experiment, seconds")
    workers: int = Field(default=2, gt=0, description="--workers: processes running seeds in parallel")
    first_seed: int = Field(default=0, ge=0, description="--first-seed: seeds are first_seed .. first_seed+seeds-1")

    @field_validator("arms")
    @classmethod
    def _known_arms(cls, arms: tuple[str, ...]) -> tuple[str, ...]:
        from orchestrator.bench.bracket import register_bench_arms

        register_bench_arms()  # llm-oracle: a benchmark's own arm
        known = planner_names()
        unknown = [a for a in arms if a not in known]
        if unknown:
            raise ValueError(f"unknown arm(s) {unknown}; choose from {','.join(known)}")
        if len(set(arms)) != len(arms):
            raise ValueError(f"arms {list(arms)} repeat a name; list each arm once")
        return arms

    @field_validator("objective")
    @classmethod
    def _objective_parses(cls, text: str | None) -> str | None:
        if text is not None:
            parse_objective(text)
        return text

    @field_validator("objectives")
    @classmethod
    def _objectives_parse(cls, texts: tuple[str, ...]) -> tuple[str, ...]:
        columns = [parse_objective(text)[1] for text in texts]
        repeated = sorted({c for c in columns if columns.count(c) > 1})
        if repeated:
            raise BenchError("--objective", f"column(s) {repeated} are given twice; give each objective its own column")
        return texts

    @model_validator(mode="before")
    @classmethod
    def _first_objective(cls, values):
        """Several objectives given without ``objective``: the first of them is it (as the spec's ``objective``)."""
        if isinstance(values, dict) and values.get("objectives") and values.get("objective") is None:
            values = {**values, "objective": values["objectives"][0]}
        return values

    @model_validator(mode="after")
    def _consistent(self) -> BenchConfig:
        if (self.spec is None) == (self.pool is None):
            raise ValueError("give either --spec SPEC (a campaign as it stands) or --pool CSV, not both")
        if self.spec is not None:
            pool_flags = [flag for flag, value in (("--id-cols", self.id_cols), ("--objective", self.objective),
                                                   ("--rung", self.rungs),
                                                   ("--fail-at-or-below", self.fail_at_or_below is not None),
                                                   ("--failure-policy", self.failure_policy is not None)) if value]
            if pool_flags:
                raise ValueError(f"{', '.join(pool_flags)} describe a --pool; with --spec the campaign spec says it")
            return self
        if not self.id_cols:
            raise ValueError("--id-cols: name the column(s) that identify a candidate, e.g. --id-cols smiles")
        if self.objective is None:
            raise ValueError("--objective: give maximize:COL, minimize:COL or target:COL:VALUE:TOL")
        if len(self.objectives) == 1:
            raise ValueError("--objective: one objective goes in 'objective'; 'objectives' lists two or more")
        if self.objectives and self.objectives[0] != self.objective:
            raise ValueError(f"--objective: the first of the objectives {list(self.objectives)} must be the "
                             f"objective {self.objective!r}")
        if self.lab_budget is None:
            raise ValueError("--lab-budget: give the lab experiments per run, e.g. --lab-budget 50")
        if "cheap-first" in self.arms and not self.rungs:
            raise ValueError("--arms: 'cheap-first' ranks by the cheapest rung; add --rung NAME=COL[:COST_S] or drop it")
        names = [r.name for r in self.rungs]
        if len(names) != len(set(names)):
            raise ValueError(f"--rung: names {names} repeat; give each rung a distinct NAME")
        if self.batch > self.lab_budget:
            raise ValueError(f"--batch: {self.batch} exceeds --lab-budget {self.lab_budget}; lower --batch")
        return self

    @property
    def objective_list(self) -> tuple[str, ...]:
        """Every objective as written (``maximize:COL`` ...), the first one first."""
        return self.objectives or ((self.objective,) if self.objective else ())

    @property
    def is_multi_objective(self) -> bool:
        return len(self.objective_list) > 1

    @property
    def objective_columns(self) -> list[str]:
        """The pool column of each objective, in order."""
        return [parse_objective(text)[1] for text in self.objective_list]

    @property
    def direction(self) -> Direction:
        return parse_objective(self.objective)[0]

    @property
    def objective_column(self) -> str:
        return parse_objective(self.objective)[1]

    @property
    def target(self) -> float | None:
        return parse_objective(self.objective)[2]

    @property
    def tolerance(self) -> float | None:
        return parse_objective(self.objective)[3]
