"""The safety envelope: what a lab agrees to run, checked before a job reaches a station.

A driver declares one ``SafetyEnvelope`` (its ``envelope`` attribute). The campaign frontend checks every job against
it before ``submit`` and records a rejection. The driver checks again in ``submit`` and so does the lab server, so a
job outside the envelope never runs, whoever sends it.

Where a job states what the envelope checks (the convention for ``LabJob.parameters``):

- **settings**: ``parameters[name]`` holds a number (or a category) for each named setting, e.g.
  ``{"temperature_c": 80.0}``. For a ``Conditions`` candidate its ``values`` are settings too, since the
  conditions *are* the process settings. When both carry a name, both are checked.
- ``parameters["reagents"]``: a list of reagent identifiers (SMILES or names, spelled as in ``allowed_reagents``).
- ``parameters["hazards"]``: a list of hazard classes the job involves (GHS-like strings such as ``"H224"``,
  ``"pyrophoric"``), compared case-insensitively with ``forbidden_hazards``.
- ``parameters["ttl_s"]`` and ``parameters["duration_s"]``: the job's time-to-live and expected duration (s), each
  at most ``max_job_duration_s``.
- ``steps``: the stations the job visits, each in ``allowed_steps`` when that is set.

The keys in ``RESERVED_PARAMETERS`` (``reagents``, ``hazards``, ``ttl_s``, ``duration_s``, ``priority``,
``consumables``) are never treated as settings.

Example:
    >>> from vocabulary.domain import Conditions
    >>> from instruments.base import LabJob
    >>> furnace = SafetyEnvelope(name="furnace", parameters={"temperature_c": (25, 250, "°C")},
    ...                          forbidden_hazards={"pyrophoric"})
    >>> job = LabJob(job_key="j1", candidate=Conditions(values={"temperature_c": 300}, id="c1"),
    ...              parameters={"hazards": ["Pyrophoric"]})
    >>> for message in furnace.check(job):
    ...     print(message)
    temperature_c=300 is outside the furnace envelope 25..250 °C; lower it or use another station
    hazard class 'Pyrophoric' is forbidden on the furnace; drop the reagent that carries it or use another lab
    >>> SafetyEnvelope().check(job)  # the default envelope is permissive
    []
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vocabulary.domain import InstrumentFault


class EnvelopeJob(Protocol):
    """What the envelope reads of a job (``instruments.base.LabJob`` has it; this module does not import that one,
    which imports this)."""

    job_key: str
    candidate: Any
    parameters: Mapping[str, Any]
    steps: Sequence[Any]

__all__ = ["RESERVED_PARAMETERS", "EnvelopeViolation", "ParameterLimit", "SafetyEnvelope"]

#: ``LabJob.parameters`` keys with a fixed meaning; never checked as settings.
RESERVED_PARAMETERS: frozenset[str] = frozenset(
    {"reagents", "hazards", "ttl_s", "duration_s", "priority", "consumables"}
)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ParameterLimit(_Frozen):
    """Allowed values of one setting: an inclusive ``low..high`` range in ``unit`` (either end may be open), or a
    set of ``choices`` for a categorical setting. ``is_required`` refuses a job that does not state the setting."""

    low: float | None = None
    high: float | None = None
    unit: str = ""
    choices: frozenset[str] | None = None
    is_required: bool = False

    @model_validator(mode="after")
    def _check(self) -> ParameterLimit:
        for bound in (self.low, self.high):
            if bound is not None and math.isnan(bound):
                raise ValueError("a parameter limit cannot be NaN; leave the end open (None) instead")
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"parameter limit low={self.low} is above high={self.high}; swap them")
        if self.choices is not None and (self.low is not None or self.high is not None):
            raise ValueError("a parameter limit has either choices (categorical) or low/high (numeric), not both")
        return self

    def describe(self) -> str:
        """The limit as people write it: ``25..250 °C``, ``>= 0 mL``, ``one of 'DMF', 'THF'``."""
        unit = f" {self.unit}" if self.unit else ""
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in sorted(self.choices))
        if self.low is not None and self.high is not None:
            return f"{self.low:g}..{self.high:g}{unit}"
        if self.low is not None:
            return f">= {self.low:g}{unit}"
        if self.high is not None:
            return f"<= {self.high:g}{unit}"
        return "any value"


def _shown(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return f"{value:g}"
    return repr(value) if isinstance(value, str) else str(value)


class SafetyEnvelope(_Frozen):
    """What a lab (or one station) agrees to run. Every limit left at its default allows anything.

    Args:
        name: how messages call the lab or station ("the furnace envelope").
        parameters: setting name -> ``ParameterLimit``; a tuple ``(low, high)`` or ``(low, high, unit)`` is
            accepted as a shorthand.
        allowed_reagents: reagent identifiers the lab stocks and may handle; None allows any.
        forbidden_hazards: hazard classes the lab refuses (matched case-insensitively).
        allowed_steps: station names a job may visit; None allows any station the driver has.
        max_job_duration_s: longest ``ttl_s`` or ``duration_s`` a job may declare, s; None for no limit.
    """

    type: Literal["safety_envelope"] = "safety_envelope"
    schema_version: int = 1
    name: str = "lab"
    parameters: dict[str, ParameterLimit] = Field(default_factory=dict)
    allowed_reagents: frozenset[str] | None = None
    forbidden_hazards: frozenset[str] = frozenset()
    allowed_steps: frozenset[str] | None = None
    max_job_duration_s: float | None = Field(default=None, gt=0.0)

    @field_validator("parameters", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        expanded = {}
        for name, limit in value.items():
            if isinstance(limit, (tuple, list)) and 2 <= len(limit) <= 3:
                low, high, *unit = limit
                limit = {"low": low, "high": high, "unit": unit[0] if unit else ""}
            expanded[name] = limit
        return expanded

    @property
    def is_permissive(self) -> bool:
        """True when the envelope refuses nothing."""
        return self == SafetyEnvelope(name=self.name)

    def check(self, job: EnvelopeJob) -> list[str]:
        """Every way ``job`` leaves the envelope, as messages naming the value, the limit and the fix.

        An empty list means the job may run.
        """
        violations: list[str] = []
        settings = self._settings(job)
        for name, value, source in settings:
            limit = self.parameters.get(name)
            if limit is not None:
                violations.extend(self._check_setting(name, value, limit, source))
        stated = {name for name, _, _ in settings}
        for name, limit in self.parameters.items():
            if limit.is_required and name not in stated:
                violations.append(
                    f"{name} is required by the {self.name} envelope ({limit.describe()}); "
                    f"set parameters[{name!r}] on the job"
                )
        violations.extend(self._check_list(job, "reagents", self._check_reagent))
        violations.extend(self._check_list(job, "hazards", self._check_hazard))
        violations.extend(self._check_durations(job))
        if self.allowed_steps is not None:
            allowed = ", ".join(sorted(self.allowed_steps)) or "none"
            for step in job.steps:
                if step not in self.allowed_steps:
                    violations.append(
                        f"step {step!r} is not allowed on the {self.name} (allowed: {allowed}); "
                        "remove it from the protocol or run the job in another lab"
                    )
        return violations

    def require(self, job: EnvelopeJob) -> None:
        """Raise ``EnvelopeViolation`` listing every violation when ``job`` leaves the envelope."""
        violations = self.check(job)
        if violations:
            raise EnvelopeViolation.for_job(job.job_key, violations, envelope_name=self.name)

    # ------------------------------------------------------------------------------------------- helpers
    @staticmethod
    def _settings(job: EnvelopeJob) -> list[tuple[str, Any, str]]:
        """``(name, value, source)`` of every setting; a job parameter repeating the candidate's value counts once."""
        values = getattr(job.candidate, "values", None)
        values = values if isinstance(values, Mapping) else {}
        settings = [(name, value, "candidate") for name, value in values.items()]
        for name, value in job.parameters.items():
            if name in RESERVED_PARAMETERS or (name in values and values[name] == value):
                continue
            settings.append((name, value, "parameters"))
        return settings

    def _check_setting(self, name: str, value: Any, limit: ParameterLimit, source: str) -> list[str]:
        where = "" if source == "candidate" else " (job parameter)"
        if limit.choices is not None:
            if str(value) not in limit.choices:
                return [f"{name}={_shown(value)}{where} is not allowed on the {self.name}; use {limit.describe()}"]
            return []
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return [f"{name}={_shown(value)}{where} is not a number; the {self.name} envelope is {limit.describe()}"]
        number = float(value)
        if math.isnan(number):
            return [f"{name}=nan{where} is not a number; the {self.name} envelope is {limit.describe()}"]
        if limit.high is not None and number > limit.high:
            return [
                f"{name}={_shown(value)}{where} is outside the {self.name} envelope {limit.describe()}; "
                "lower it or use another station"
            ]
        if limit.low is not None and number < limit.low:
            return [
                f"{name}={_shown(value)}{where} is outside the {self.name} envelope {limit.describe()}; "
                "raise it or use another station"
            ]
        return []

    def _check_list(self, job: EnvelopeJob, key: str, check_one: Any) -> list[str]:
        raw = job.parameters.get(key)
        if raw is None:
            return []
        if isinstance(raw, str) or not isinstance(raw, Iterable):
            return [f"parameters[{key!r}]={raw!r} must be a list of identifiers, e.g. [{'CCO'!r}]"]
        return [message for item in raw for message in check_one(str(item))]

    def _check_reagent(self, reagent: str) -> list[str]:
        if self.allowed_reagents is None or reagent in self.allowed_reagents:
            return []
        sample = ", ".join(repr(r) for r in sorted(self.allowed_reagents)[:3])
        more = " …" if len(self.allowed_reagents) > 3 else ""
        return [
            f"reagent {reagent!r} is not on the {self.name}'s allowed list ({sample}{more}); "
            "use an allowed reagent (same spelling) or ask the lab to approve it"
        ]

    def _check_hazard(self, hazard: str) -> list[str]:
        forbidden = {h.casefold() for h in self.forbidden_hazards}
        if hazard.casefold() not in forbidden:
            return []
        return [
            f"hazard class {hazard!r} is forbidden on the {self.name}; "
            "drop the reagent that carries it or use another lab"
        ]

    def _check_durations(self, job: EnvelopeJob) -> list[str]:
        violations: list[str] = []
        if self.max_job_duration_s is None:
            return violations
        for key in ("ttl_s", "duration_s"):
            if key not in job.parameters:
                continue
            raw = job.parameters[key]
            if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not raw > 0:
                violations.append(f"{key}={raw!r} must be a positive number of seconds")
            elif raw > self.max_job_duration_s:
                violations.append(
                    f"{key}={_shown(raw)} s exceeds the {self.name} maximum job duration "
                    f"{self.max_job_duration_s:g} s; shorten the protocol or split it into several jobs"
                )
        return violations


class EnvelopeViolation(InstrumentFault):
    """A job lies outside a lab's safety envelope; it was refused and nothing ran.

    ``violations`` holds one message per problem; ``job_key`` names the refused job.
    """

    def __init__(self, message: str, violations: Sequence[str] = (), job_key: str | None = None) -> None:
        super().__init__(message)
        self.violations: tuple[str, ...] = tuple(violations) or (message,)
        self.job_key = job_key

    @classmethod
    def for_job(cls, job_key: str, violations: Sequence[str], envelope_name: str = "lab") -> EnvelopeViolation:
        """The exception for a refused job, its message joining the violations."""
        message = f"job {job_key!r} is outside the {envelope_name} safety envelope: " + "; ".join(violations)
        return cls(message, violations, job_key)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.violations, self.job_key))
