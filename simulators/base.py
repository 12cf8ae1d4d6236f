"""The simulator interface, in the manner of ASE calculators.

``Simulator`` is the protocol the orchestrator relies on; ``BaseSimulator`` implements its rules once, so a concrete
simulator only declares its metadata and writes ``calculate(candidate)``:

- ``evaluate(candidates)`` is a batch call that returns exactly one ``Observation`` per input, in input order.
- Setup errors (wrong candidate kind, bad parameters, a missing optional dependency) raise ``SetupError`` before
  any calculation runs.
- A calculation that fails for one candidate comes back as an ``Observation`` with ``status="failed"`` and a reason;
  it never disappears and never raises.
- ``cost_s`` comes from ``cost_model`` (seconds, measured once on a reference machine), never from the wall clock,
  so replays charge the same budget.

Example:
    >>> from vocabulary.domain import Material
    >>> class AtomCountSimulator(BaseSimulator):
    ...     name, version, fidelity = "atom_count", "1", 0
    ...     implemented_properties = ("n_atoms",)
    ...     applies_to = frozenset({"material"})
    ...     def cost_model(self, candidate):
    ...         return 0.001
    ...     def calculate(self, candidate):
    ...         return {"n_atoms": candidate.n_atoms}
    >>> [obs] = AtomCountSimulator().evaluate([Material.parse("Fe2O3")])
    >>> obs.status, obs.properties, obs.cost_s
    ('ok', {'n_atoms': 5.0}, 0.001)
"""

from __future__ import annotations

import importlib.util
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, get_args, runtime_checkable

from vocabulary.domain import (
    CandidateKind,
    Conditions,
    Material,
    MissingDependency,
    Molecule,
    Observation,
    SetupError,
    SimulationFailed,
)

__all__ = ["CANDIDATE_KINDS", "AnyCandidate", "BaseSimulator", "Result", "Simulator", "require"]

AnyCandidate = Molecule | Material | Conditions
CANDIDATE_KINDS: frozenset[str] = frozenset(get_args(CandidateKind))
_CANDIDATE_TYPES = (Molecule, Material, Conditions)


@runtime_checkable
class Simulator(Protocol):
    """What the orchestrator needs from a rung of the fidelity ladder."""

    name: str
    version: str
    fidelity: int
    """Rung order: 0 is the cheapest; the lab is above every simulator."""
    implemented_properties: tuple[str, ...]
    applies_to: frozenset[str]
    """Candidate kinds it accepts: a subset of {"molecule", "material", "conditions"}."""
    parameters: dict[str, Any]
    """JSON-serialisable settings; with name and version, part of the result-cache key."""

    def cost_model(self, candidate: AnyCandidate) -> float:
        """Expected compute cost of one candidate, in seconds, as a function of its size."""
        ...

    def evaluate(self, candidates: Sequence[AnyCandidate]) -> list[Observation]:
        """One observation per candidate, in order. Raises ``SetupError`` before running anything."""
        ...


@dataclass(frozen=True)
class Result:
    """What ``calculate`` returns when it also knows uncertainties (one standard deviation per property)."""

    properties: Mapping[str, float]
    uncertainty: Mapping[str, float] = field(default_factory=dict)


def require(module: str, extra: str, purpose: str) -> None:
    """Raise ``MissingDependency`` (a ``SetupError``) naming the extra when an optional dependency is not installed.

    Only looks the module up (``importlib.util.find_spec``); it does not import it. ``vocabulary.domain``'s
    ``import_optional`` is the importing counterpart, with the same message.

    Example:
        >>> require("json", extra="xtb", purpose="the xtb rung")
        >>> require("closedloop_no_such_module", extra="xtb", purpose="the xtb rung")
        Traceback (most recent call last):
        ...
        vocabulary.domain.MissingDependency: the xtb rung needs closedloop_no_such_module, which is not installed; \
install it with pip install "closedloop[xtb]"
    """
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a missing parent package, or a module with no spec
        found = False
    if not found:
        raise MissingDependency(module, extra, purpose)


class BaseSimulator(ABC):
    """Implements the ``Simulator`` rules; subclasses declare metadata and write ``calculate``.

    Subclasses set the class attributes (or instance attributes before calling ``super().__init__``), implement
    ``cost_model`` and ``calculate``, and may override ``calculate_batch`` when the backend batches natively
    (for example an ML potential). ``requires`` lists optional dependencies as ``(module, extra)`` pairs; they are
    checked at construction and again before each batch.
    """

    name: str = ""
    version: str = ""
    fidelity: int = 0
    implemented_properties: tuple[str, ...] = ()
    applies_to: frozenset[str] = frozenset()
    requires: ClassVar[tuple[tuple[str, str], ...]] = ()

    def __init__(self, parameters: Mapping[str, Any] | None = None) -> None:
        self._check_declaration()
        self.parameters: dict[str, Any] = _json_parameters(parameters or {}, self.name)
        self.check_dependencies()

    # ------------------------------------------------------------------------------------------- to implement
    @abstractmethod
    def cost_model(self, candidate: AnyCandidate) -> float:
        """Expected compute cost of one candidate, in seconds."""

    @abstractmethod
    def calculate(self, candidate: AnyCandidate) -> Mapping[str, float] | Result:
        """Properties of one candidate. Raise ``SimulationFailed`` with a reason when the calculation fails."""

    def calculate_batch(self, candidates: Sequence[AnyCandidate]) -> list[Mapping[str, float] | Result | Exception]:
        """One outcome per candidate: properties, or the exception that stopped it. Override to batch natively."""
        outcomes: list[Mapping[str, float] | Result | Exception] = []
        for candidate in candidates:
            try:
                outcomes.append(self.calculate(candidate))
            except Exception as exc:  # one candidate's failure must not sink the batch
                outcomes.append(exc)
        return outcomes

    # ------------------------------------------------------------------------------------------- the contract
    def check_dependencies(self) -> None:
        """Raise ``SetupError`` with an install hint if an optional dependency is missing."""
        for module, extra in self.requires:
            require(module, extra, purpose=f"simulator {self.name!r}")

    def check_setup(self, candidates: Sequence[AnyCandidate]) -> None:
        """Raise ``SetupError`` if this batch cannot run at all: missing dependencies or wrong candidate kinds."""
        self.check_dependencies()
        for index, candidate in enumerate(candidates):
            if not isinstance(candidate, _CANDIDATE_TYPES):
                raise SetupError(
                    f"candidate {index} is a {type(candidate).__name__}, not a Molecule, Material or Conditions; "
                    "parse raw input first, e.g. Molecule.parse('CCO')"
                )
            if candidate.type not in self.applies_to:
                raise SetupError(
                    f"simulator {self.name!r} applies to {sorted(self.applies_to)}, but candidate {index} "
                    f"({candidate.id}) is a {candidate.type}; send it to a rung that handles {candidate.type}s"
                )

    def evaluate(self, candidates: Sequence[AnyCandidate]) -> list[Observation]:
        """Evaluate a batch: one ``Observation`` per candidate, in order.

        Raises:
            SetupError: before anything runs, for a wrong candidate kind, a non-sequence or a missing dependency.
        """
        if isinstance(candidates, (str, bytes, *_CANDIDATE_TYPES)):
            raise SetupError(
                f"evaluate takes a sequence of candidates, not a {type(candidates).__name__}; wrap it: [candidate]"
            )
        batch = list(candidates)
        self.check_setup(batch)
        return [self._observe(c, outcome) for c, outcome in zip(batch, self._run(batch), strict=True)]

    # ------------------------------------------------------------------------------------------- internals
    def _check_declaration(self) -> None:
        owner = type(self).__name__
        problems = []
        if not isinstance(self.name, str) or not self.name:
            problems.append("name must be a non-empty string")
        if not isinstance(self.version, str) or not self.version:
            problems.append("version must be a non-empty string")
        if isinstance(self.fidelity, bool) or not isinstance(self.fidelity, int) or self.fidelity < 0:
            problems.append(f"fidelity={self.fidelity!r} must be an int >= 0")
        if not self.implemented_properties or not all(isinstance(p, str) and p for p in self.implemented_properties):
            problems.append("implemented_properties must be a non-empty tuple of names")
        if not self.applies_to or not set(self.applies_to) <= CANDIDATE_KINDS:
            kinds = sorted(CANDIDATE_KINDS)
            problems.append(f"applies_to={sorted(self.applies_to)} must be a non-empty subset of {kinds}")
        if problems:
            raise SetupError(f"{owner} is declared wrongly: " + "; ".join(problems))

    def _run(self, batch: list[AnyCandidate]) -> list[Mapping[str, float] | Result | Exception]:
        try:
            outcomes = list(self.calculate_batch(batch))
        except Exception as exc:  # a native batch that fails as a whole fails every candidate in it
            return [exc] * len(batch)
        if len(outcomes) != len(batch):
            bug = SimulationFailed(
                f"{type(self).__name__}.calculate_batch returned {len(outcomes)} results for {len(batch)} "
                "candidates; this is a bug in the simulator"
            )
            return [bug] * len(batch)
        return outcomes

    def _observe(self, candidate: AnyCandidate, outcome: Mapping[str, float] | Result | Exception) -> Observation:
        common = dict(
            candidate_id=candidate.id,
            source=self.name,
            source_version=self.version,
            fidelity=self.fidelity,
            parameters=self.parameters,
        )
        try:
            cost_s = float(self.cost_model(candidate))
            if not math.isfinite(cost_s) or cost_s < 0:
                raise SimulationFailed(f"cost model gave {cost_s} s; it must be finite and >= 0")
        except Exception as exc:
            return Observation(status="failed", reason=f"cost model failed: {_reason(exc)}", cost_s=0.0, **common)
        if isinstance(outcome, Exception):
            return Observation(status="failed", reason=_reason(outcome), cost_s=cost_s, **common)
        try:
            properties, uncertainty = self._checked(outcome)
        except SimulationFailed as exc:
            return Observation(status="failed", reason=str(exc), cost_s=cost_s, **common)
        return Observation(properties=properties, uncertainty=uncertainty, cost_s=cost_s, **common)

    def _checked(self, outcome: Mapping[str, float] | Result) -> tuple[dict[str, float], dict[str, float]]:
        result = outcome if isinstance(outcome, Result) else Result(outcome)
        if not isinstance(result.properties, Mapping) or not result.properties:
            raise SimulationFailed(f"{self.name} returned no properties ({outcome!r})")
        unknown = sorted(set(result.properties) - set(self.implemented_properties))
        if unknown:
            raise SimulationFailed(f"{self.name} returned undeclared properties {unknown}; this is a bug")
        properties = {key: _finite(key, value) for key, value in result.properties.items()}
        uncertainty = {key: _finite(f"uncertainty of {key}", value) for key, value in result.uncertainty.items()}
        if not set(uncertainty) <= set(properties) or any(u < 0 for u in uncertainty.values()):
            raise SimulationFailed(f"{self.name} returned uncertainties {uncertainty} that are negative or unmatched")
        return properties, uncertainty

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, version={self.version!r}, fidelity={self.fidelity})"


def _finite(label: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise SimulationFailed(f"{label} is {value!r}, not a number") from exc
    if not math.isfinite(number):
        raise SimulationFailed(f"{label} came out {number}; the calculation gave no usable value")
    return number


def _reason(exc: BaseException) -> str:
    if isinstance(exc, SimulationFailed):
        return str(exc) or type(exc).__name__
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _json_parameters(parameters: Mapping[str, Any], name: str) -> dict[str, Any]:
    try:
        return json.loads(json.dumps(dict(parameters), sort_keys=True, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise SetupError(
            f"parameters of simulator {name!r} must be JSON-serialisable (they key the result cache): {exc}; "
            "use str, int, float, bool, None, lists and dicts with string keys"
        ) from exc
