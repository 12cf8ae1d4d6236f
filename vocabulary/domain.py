"""The shared vocabulary: candidate kinds, design spaces, proposals, observations and the error tree.

This module is a leaf. It imports no other project module, so ``simulators``, ``instruments`` and ``rewards``
may import it freely. rdkit and pymatgen are imported inside the functions that need them, which keeps
``import orchestrator`` fast.

Example:
    >>> Molecule.parse("OCC").smiles
    'CCO'
    >>> Material.parse("Fe2O3 ").formula
    'Fe2O3'
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import re
import sys
from collections.abc import Mapping, Sequence
from functools import lru_cache
from types import ModuleType
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "Candidate",
    "CandidateKind",
    "ClosedLoopError",
    "ConditionSpace",
    "Conditions",
    "InstrumentFault",
    "InvalidCandidate",
    "Material",
    "MissingDependency",
    "Molecule",
    "Observation",
    "Parameter",
    "Proposal",
    "SetupError",
    "SimulationFailed",
    "candidate_from_dict",
    "featurise",
    "import_optional",
    "objective_utility",
    "parse_candidate",
    "redact",
    "redact_url",
    "redact_urls_in",
]

CandidateKind = Literal["molecule", "material", "conditions"]
ArmName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_\-:.]*$", max_length=64)]
"""A planner arm's name: the built-ins llm, bo, random, plus human, imported and any registered arm."""


# --------------------------------------------------------------------------------------------------- errors
class ClosedLoopError(Exception):
    """Root of every error closedloop raises on purpose."""


class SetupError(ClosedLoopError):
    """Something is wrong before anything runs: a spec, a missing dependency, an impossible configuration."""


class InvalidCandidate(ClosedLoopError, ValueError):
    """A candidate cannot be parsed or lies outside the design space. The message names the value and the fix."""


class SimulationFailed(ClosedLoopError):
    """A calculation failed while running (no convergence, embedding failure, timeout)."""


class InstrumentFault(ClosedLoopError):
    """An instrument failed while running a job (jam, timeout, crashed driver)."""


class MissingDependency(SetupError):
    """An optional dependency is not installed. The one-line message names the extra that installs it.

    Attributes:
        module: the module that could not be imported (the missing one, when a dependency of it is what is missing).
        extra: the ``closedloop[...]`` extra that installs it; empty for a core dependency (a broken install).
        purpose: what needed it (may be empty).
        reason: import's own message when the module is installed but cannot be imported; empty when it is absent.
    """

    def __init__(self, module: str, extra: str, purpose: str = "", reason: str = ""):
        self.module, self.extra, self.purpose, self.reason = module, extra, purpose, reason
        install = f'pip install "closedloop[{extra}]"' if extra else "pip install closedloop (pip install -e . in a clone)"
        if reason:  # installed but broken (a missing shared library, a version clash): say what import said
            what = f"{module} cannot be imported ({' '.join(reason.split())})"
            super().__init__(f"{purpose + ' needs ' if purpose else ''}{what}; reinstall it with {install}")
        else:
            what = f"needs {module}, which is not installed" if purpose else f"{module} is not installed"
            super().__init__(f"{purpose + ' ' if purpose else ''}{what}; install it with {install}")

    def __reduce__(self):  # picklable across processes (Ray, multiprocessing): rebuild from the fields, not the text
        return type(self), (self.module, self.extra, self.purpose, self.reason)


def import_optional(module: str, extra: str, purpose: str = "") -> ModuleType:
    """Import an optional dependency, or raise ``MissingDependency`` naming the extra that installs it.

    Every import of a module outside the core dependencies goes through this (or ``simulators.require``), so a
    missing one is one line with its install command, never a traceback.

    Args:
        module: the dotted module name, e.g. ``"pyscf"`` or ``"langgraph.checkpoint.postgres"``.
        extra: the extra of ``closedloop`` that installs it, e.g. ``"dft"``; ``""`` for a core dependency, which
            only a broken or ``--no-deps`` install lacks.
        purpose: what needs it, e.g. ``"the dft rung"``; it starts the message.

    Example:
        >>> import_optional("json", "dev").__name__
        'json'
        >>> import_optional("closedloop_no_such_module", "dft", "the dft rung")
        Traceback (most recent call last):
        ...
        vocabulary.domain.MissingDependency: the dft rung needs closedloop_no_such_module, which is not installed; \
install it with pip install "closedloop[dft]"
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        # A package that is present but lacks one of its own dependencies names that one: the extra installs both.
        missing = exc.name or module
        parts = missing.split(".")
        for n_parts in range(1, len(parts)):  # a package blocked by sys.modules[name] = None fails on its submodule
            if sys.modules.get(".".join(parts[:n_parts]), missing) is None:
                missing = ".".join(parts[:n_parts])
                break
        raise MissingDependency(missing, extra, purpose) from exc
    except ImportError as exc:
        raise MissingDependency(module, extra, purpose, reason=str(exc)) from exc


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------------------------------- molecules
class Molecule(_Frozen):
    """A molecule, canonicalised by rdkit. ``id`` is its InChIKey."""

    type: Literal["molecule"] = "molecule"
    schema_version: int = 1
    smiles: str = Field(description="rdkit canonical SMILES")
    id: str = Field(description="standard InChIKey")

    @classmethod
    def parse(cls, smiles: str) -> Molecule:
        """Parse and canonicalise a SMILES string.

        Raises:
            InvalidCandidate: when rdkit cannot read it, it has no atoms, or it has whitespace inside (which rdkit
                would read as the end of the SMILES and the start of a name).
        """
        from rdkit import Chem, RDLogger

        RDLogger.DisableLog("rdApp.*")
        if not isinstance(smiles, str):
            raise InvalidCandidate(f"SMILES {smiles!r} is not text; give a SMILES string, e.g. 'CCO'")
        text = smiles.strip()
        if any(character.isspace() for character in text):
            # rdkit reads what follows the first blank as the molecule's name: 'CCO C' would silently be ethanol
            raise InvalidCandidate(
                f"SMILES {smiles!r} has whitespace inside, and rdkit would read only {text.split()[0]!r}; write one "
                "SMILES without spaces, e.g. 'CCO.O' for a mixture, and put a name in another column")
        mol = Chem.MolFromSmiles(text) if text else None
        if mol is None or mol.GetNumAtoms() == 0:
            raise InvalidCandidate(
                f"SMILES {smiles!r} is not a valid molecule (rdkit could not parse it); "
                "check ring closures, brackets and valences, e.g. 'c1ccccc1O' for phenol"
            )
        key = Chem.MolToInchiKey(mol)
        if not key:
            raise InvalidCandidate(f"SMILES {smiles!r} parsed but has no InChIKey; give a complete, neutral structure")
        return cls(smiles=Chem.MolToSmiles(mol), id=key)

    def to_rdkit(self):
        """Return a fresh rdkit ``Mol``."""
        from rdkit import Chem

        return Chem.MolFromSmiles(self.smiles)

    @property
    def n_heavy_atoms(self) -> int:
        """Number of heavy atoms; the size measure for cost models."""
        return self.to_rdkit().GetNumHeavyAtoms()

    def features(self, n_bits: int = 1024) -> np.ndarray:
        """Morgan fingerprint (radius 2) as a float vector of shape (n_bits,)."""
        return _morgan_bits(self.smiles, n_bits).copy()


@lru_cache(maxsize=65536)
def _morgan_bits(smiles: str, n_bits: int) -> np.ndarray:
    from rdkit import Chem
    from rdkit.Chem import rdFingerprintGenerator

    generator = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=n_bits)
    return generator.GetFingerprintAsNumPy(Chem.MolFromSmiles(smiles)).astype(float)


# --------------------------------------------------------------------------------------------------- materials
MIN_AMOUNT = 1e-6
"""The smallest amount of an element per formula unit a formula may give: pymatgen writes amounts to 8 decimals and
drops those below 1e-8, so a smaller one would not survive a round trip through the formula."""
MAX_AMOUNT = 1e6
"""The largest amount of an element per formula unit: far beyond any real composition, and well inside the integers
a float holds exactly."""
_ELEMENT_SYMBOL = re.compile(r"[A-Z][a-z]*")


class Material(_Frozen):
    """An inorganic composition, normalised by pymatgen. ``id`` is the reduced formula."""

    type: Literal["material"] = "material"
    schema_version: int = 1
    formula: str = Field(description="pymatgen formula (whole-number amounts when possible)")
    id: str = Field(description="reduced formula, e.g. 'Fe2O3'")

    @classmethod
    def parse(cls, formula: str) -> Material:
        """Parse a chemical formula such as ``"LiFePO4"``.

        Every element written must keep a positive amount between ``MIN_AMOUNT`` and ``MAX_AMOUNT`` per formula unit:
        pymatgen drops an element whose amount is zero or underflows (``Fe1e-400O`` would read as O), and rounds
        amounts beyond what a float holds exactly, so either would silently give another composition.

        Raises:
            InvalidCandidate: for unknown elements, empty, non-positive, vanishing or huge amounts.

        Example:
            >>> Material.parse("Fe1e-400O")
            Traceback (most recent call last):
            ...
            vocabulary.domain.InvalidCandidate: formula 'Fe1e-400O' gives Fe an amount of zero (or one too small \
to keep, below 1e-06 per formula unit); write each element with a positive amount, or leave it out
        """
        from pymatgen.core import Composition

        if not isinstance(formula, str):
            raise InvalidCandidate(f"formula {formula!r} is not text; give a formula string, e.g. 'Fe2O3'")
        text = formula.strip()
        if not text:
            raise InvalidCandidate("formula '' is empty; give a composition such as 'LiFePO4'")
        try:
            comp = Composition(text, strict=True)
        except Exception as exc:  # pymatgen raises ValueError or KeyError depending on the fault
            raise InvalidCandidate(
                f"formula {formula!r} is not a valid composition ({exc}); "
                "use element symbols with positive amounts, e.g. 'Fe2O3' or 'Li0.5CoO2'"
            ) from exc
        if not all(math.isfinite(amount) for amount in comp.values()):
            raise InvalidCandidate(f"formula {formula!r} has an infinite amount; use finite amounts, e.g. 'Fe2O3'")
        amounts = {element.symbol: amount for element, amount in comp.items()}
        lost = [symbol for symbol in dict.fromkeys(_ELEMENT_SYMBOL.findall(text))
                if amounts.get(symbol, 0.0) < MIN_AMOUNT]
        if lost:
            raise InvalidCandidate(
                f"formula {formula!r} gives {', '.join(lost)} an amount of zero (or one too small to keep, below "
                f"{MIN_AMOUNT:g} per formula unit); write each element with a positive amount, or leave it out")
        if comp.num_atoms <= 0 or any(amount <= 0 for amount in comp.values()):
            raise InvalidCandidate(f"formula {formula!r} has no positive amounts; e.g. 'NaCl'")
        for element in comp.elements:
            if getattr(element, "Z", 0) == 0 or element.symbol in {"D", "T"}:
                raise InvalidCandidate(f"formula {formula!r} contains {element.symbol!r}, which is not an element")
        huge = [f"{symbol}={amount:g}" for symbol, amount in amounts.items() if amount > MAX_AMOUNT]
        if huge:
            raise InvalidCandidate(
                f"formula {formula!r} has amounts above {MAX_AMOUNT:g} atoms per formula unit ({', '.join(huge)}), "
                "which cannot be kept exactly; write the ratio with smaller numbers, e.g. 'Fe2O3'")
        try:
            return cls(formula=comp.formula.replace(" ", ""), id=comp.reduced_formula)
        except (ArithmeticError, ValueError) as exc:  # pymatgen's formula writer on extreme amounts
            raise InvalidCandidate(f"formula {formula!r} cannot be written as a formula unit ({exc}); "
                                   "use moderate amounts, e.g. 'Fe2O3'") from exc

    def to_composition(self):
        """Return the pymatgen ``Composition``."""
        from pymatgen.core import Composition

        return Composition(self.formula)

    @property
    def n_atoms(self) -> int:
        """Atoms in the formula unit; the size measure for cost models."""
        return int(round(self.to_composition().num_atoms))

    def features(self) -> np.ndarray:
        """Element fractions over Z=1..103 plus mean and spread of electronegativity and atomic radius, shape (107,)."""
        return _composition_features(self.formula).copy()


@lru_cache(maxsize=65536)
def _composition_features(formula: str) -> np.ndarray:
    from pymatgen.core import Composition

    comp = Composition(formula).fractional_composition
    fractions = np.zeros(103)
    electroneg, radius, weights = [], [], []
    for element, fraction in comp.items():
        fractions[element.Z - 1] = fraction
        electroneg.append(float(element.X) if not math.isnan(element.X) else 0.0)
        radius.append(float(element.atomic_radius or 0.0))
        weights.append(fraction)
    w = np.asarray(weights)
    x, r = np.asarray(electroneg), np.asarray(radius)
    stats = [w @ x, math.sqrt(max(w @ (x - w @ x) ** 2, 0.0)), w @ r, math.sqrt(max(w @ (r - w @ r) ** 2, 0.0))]
    return np.concatenate([fractions, stats])


# --------------------------------------------------------------------------------------------------- conditions
class Parameter(_Frozen):
    """One named parameter of a conditions space.

    Continuous and integer parameters carry ``low``/``high`` bounds (inclusive) in ``unit``; categorical ones carry
    ``choices``.
    """

    name: str
    kind: Literal["continuous", "integer", "categorical"]
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] | None = None
    unit: str = ""

    @model_validator(mode="after")
    def _check(self) -> Parameter:
        if self.kind == "categorical":
            if not self.choices:
                raise ValueError(f"categorical parameter {self.name!r} needs a non-empty 'choices' list")
        elif self.low is None or self.high is None or not self.low <= self.high:
            raise ValueError(f"{self.kind} parameter {self.name!r} needs bounds with low <= high")
        return self

    def check(self, value: Any) -> float | int | str:
        """Validate one value and return it normalised; raise ``InvalidCandidate`` naming the fix."""
        if self.kind == "categorical":
            text = str(value)
            if text not in self.choices:
                shown = ", ".join(repr(c) for c in self.choices[:5]) + (" …" if len(self.choices) > 5 else "")
                raise InvalidCandidate(f"{self.name}={value!r} is not an allowed choice; pick one of {shown}")
            return text
        try:
            number = float(value)
        except OverflowError:  # an integer too large for a float lies outside every range
            digits = str(value)
            raise InvalidCandidate(f"{self.name}={digits[:12]}… (an integer of {len(digits.lstrip('-'))} digits) is "
                                   f"outside its range {self._range()}; move it inside") from None
        except (TypeError, ValueError) as exc:
            raise InvalidCandidate(f"{self.name}={value!r} is not a number; give a value in {self._range()}") from exc
        if math.isnan(number) or not self.low <= number <= self.high:
            raise InvalidCandidate(f"{self.name}={value!r} is outside its range {self._range()}; move it inside")
        if self.kind == "integer":
            if number != int(number):
                raise InvalidCandidate(f"{self.name}={value!r} must be a whole number in {self._range()}")
            return int(number)
        return number

    def _range(self) -> str:
        return f"{self.low:g}..{self.high:g}{(' ' + self.unit) if self.unit else ''}"

    def encode(self, value: Any) -> list[float]:
        """One-hot for categorical, min-max scaled to [0, 1] otherwise."""
        if self.kind == "categorical":
            return [1.0 if value == choice else 0.0 for choice in self.choices]
        span = (self.high - self.low) or 1.0
        return [(float(value) - self.low) / span]


class Conditions(_Frozen):
    """Reaction or process conditions: named parameter values, checked against a ``ConditionSpace``.

    ``id`` is a short hash of the canonical JSON of the values, so equal conditions share an id.
    """

    type: Literal["conditions"] = "conditions"
    schema_version: int = 1
    values: dict[str, float | int | str]
    id: str


class ConditionSpace(_Frozen):
    """The named parameters of a conditions design space.

    Example:
        >>> space = ConditionSpace(parameters=(Parameter(name="T", kind="continuous", low=20, high=80, unit="°C"),))
        >>> space.parse({"T": 25}).values
        {'T': 25.0}
    """

    parameters: tuple[Parameter, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    def parse(self, values: Mapping[str, Any]) -> Conditions:
        """Validate a mapping of parameter values; unknown and missing names are errors."""
        if not isinstance(values, Mapping):
            raise InvalidCandidate(f"conditions {values!r} must be a mapping of parameter names to values")
        unknown = sorted(set(values) - set(self.names))
        if unknown:
            raise InvalidCandidate(f"conditions name unknown parameters {unknown}; the space has {list(self.names)}")
        missing = [name for name in self.names if name not in values]
        if missing:
            raise InvalidCandidate(f"conditions lack parameters {missing}; give a value for each of {list(self.names)}")
        checked = {p.name: p.check(values[p.name]) for p in self.parameters}
        digest = hashlib.sha256(json.dumps(checked, sort_keys=True).encode()).hexdigest()[:16]
        return Conditions(values=checked, id=f"cond-{digest}")

    def features(self, conditions: Conditions) -> np.ndarray:
        """Concatenated encodings of every parameter, in space order."""
        return np.asarray([x for p in self.parameters for x in p.encode(conditions.values[p.name])], dtype=float)


Candidate = Annotated[Molecule | Material | Conditions, Field(discriminator="type")]


def parse_candidate(kind: CandidateKind, raw: Any, space: ConditionSpace | None = None) -> Molecule | Material | Conditions:
    """Parse raw input of the given kind (a SMILES, a formula or a mapping) into a canonical candidate."""
    if kind == "molecule":
        return Molecule.parse(raw)
    if kind == "material":
        return Material.parse(raw)
    if kind == "conditions":
        if space is None:
            raise SetupError("parsing conditions needs the campaign's ConditionSpace; pass space=")
        return space.parse(raw)
    raise SetupError(f"candidate kind {kind!r} is unknown; use 'molecule', 'material' or 'conditions'")


def candidate_from_dict(data: Mapping[str, Any]) -> Molecule | Material | Conditions:
    """Rebuild a candidate from its ``model_dump()`` (as stored in events)."""
    kinds = {"molecule": Molecule, "material": Material, "conditions": Conditions}
    return kinds[data["type"]].model_validate(dict(data))


def featurise(candidates: Sequence[Molecule | Material | Conditions], space: ConditionSpace | None = None) -> np.ndarray:
    """Feature matrix of shape (n_candidates, n_features) for candidates of one kind."""
    rows = []
    for candidate in candidates:
        if isinstance(candidate, Conditions):
            if space is None:
                raise SetupError("featurising conditions needs the campaign's ConditionSpace; pass space=")
            rows.append(space.features(candidate))
        else:
            rows.append(candidate.features())
    return np.vstack(rows) if rows else np.zeros((0, 0))


# --------------------------------------------------------------------------------------------------- objective
def objective_utility(direction: str, value: float, target: float | None = None) -> float:
    """Utility of a measured value: higher is better whatever the direction (``-|value - target|`` for a target).

    Example:
        >>> objective_utility("minimize", 2.0), objective_utility("target", -11.0, target=-12.0)
        (-2.0, -1.0)
    """
    if direction == "maximize":
        return float(value)
    if direction == "minimize":
        return -float(value)
    if direction == "target":
        return -abs(float(value) - float(target))
    raise SetupError(f"objective direction {direction!r} is unknown; use 'maximize', 'minimize' or 'target'")


# --------------------------------------------------------------------------------------------------- steps
class Proposal(_Frozen):
    """A candidate plus the reasoning that put it forward, and the arm that did."""

    candidate: Candidate
    arm: ArmName
    hypothesis: str = ""
    rationale: str = ""
    expected: float | None = Field(default=None, description="expected objective value, in the objective's unit")
    expected_sd: float | None = Field(default=None, description="sd of the expected value, in the objective's unit")
    acquisition: float | None = Field(default=None, description="acquisition value that ranked it, if any")
    is_fallback: bool = Field(default=False, description="filled in by the bo arm after the llm arm's repair rounds ran out")
    is_bo_pick: bool | None = Field(
        default=None, description="llm arms: whether the bo arm, planning the same state for the same n, proposed it too")
    is_anchor: bool = Field(
        default=False, description="llm arms: the surrogate's own pick for a lab slot, proposed beside the model's picks "
                                   "for the screen to weigh against them (not the model's choice)")
    shown_position: int | None = Field(
        default=None, ge=0, description="llm arms, the model's own picks: the pick's 0-based row in the shortlist as "
                                        "shown to the model (seeded random order); None for anchors, fallbacks, other arms")
    n_shown: int | None = Field(default=None, ge=1, description="llm arms, the model's own picks: shortlist rows shown")
    n_shown_bo_picks: int | None = Field(
        default=None, ge=0, description="llm arms, the model's own picks: how many rows shown were bo's own picks "
                                        "(a coin choosing among the rows differs from bo with probability "
                                        "1 - n_shown_bo_picks / n_shown)")


class Observation(_Frozen):
    """A measured or simulated result for one candidate.

    ``cost_s`` is the compute or instrument cost in seconds as charged to the budget (from the cost model, so that
    replays are deterministic).
    """

    type: Literal["observation"] = "observation"
    schema_version: int = 1
    candidate_id: str
    source: str = Field(description="simulator or driver name")
    source_version: str = ""
    fidelity: int = Field(default=0, description="rung order; the lab is the highest")
    properties: dict[str, float] = Field(default_factory=dict)
    uncertainty: dict[str, float] = Field(default_factory=dict, description="one standard deviation per property")
    status: Literal["ok", "failed"] = "ok"
    reason: str | None = None
    cost_s: float = 0.0
    parameters: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _failed_has_reason(self) -> Observation:
        if self.status == "failed" and not self.reason:
            raise ValueError("a failed observation must say why (reason=...)")
        return self


# --------------------------------------------------------------------------------------------------- secrets in URLs
REDACTED = "***"
_SECRET_QUERY_NAMES = frozenset({
    "token", "key", "api_key", "apikey", "api-key", "access_token", "refresh_token", "id_token", "auth", "password",
    "passwd", "pwd", "secret", "client_secret", "sig", "signature", "x-amz-signature", "x-amz-credential",
    "x-goog-signature", "code",
})
_URL_IN_TEXT = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s'\"<>]+")


def _is_secret_name(name: str) -> bool:
    name = name.lower()
    return name in _SECRET_QUERY_NAMES or name.endswith(("_token", "_key", "_secret", "_password", "-token", "-key"))


def redact_url(url: str) -> str:
    """``url`` with its credentials replaced by ``***``: the userinfo password (a lone user name too, which is
    usually a token) and the values of secret-looking query parameters (``token``, ``key``, ``api_key``, ``sig``, …).

    For the record, logs and the terminal; the connection itself uses the real URL.

    Example:
        >>> redact_url("http://user:pa55@lab.example:8000/v1?api_key=abc&batch=2")
        'http://user:***@lab.example:8000/v1?api_key=***&batch=2'
        >>> redact_url("http://127.0.0.1:8000")
        'http://127.0.0.1:8000'
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, has_password, _ = userinfo.partition(":")
        netloc = f"{user}:{REDACTED}@{host}" if has_password else f"{REDACTED}@{host}"
    pairs = []
    for pair in parts.query.split("&") if parts.query else []:
        name, sep, value = pair.partition("=")
        pairs.append(f"{name}={REDACTED}" if sep and value and _is_secret_name(name) else pair)
    return urlunsplit(parts._replace(netloc=netloc, query="&".join(pairs)))


def redact_urls_in(text: str) -> str:
    """``text`` with every URL in it passed through ``redact_url`` (messages, model strings like
    ``openai:MODEL@http://user:pw@host/v1``).

    Example:
        >>> redact_urls_in("openai:gpt-4o-mini@http://me:hunter2@llm.local/v1 failed")
        'openai:gpt-4o-mini@http://me:***@llm.local/v1 failed'
    """
    return _URL_IN_TEXT.sub(lambda match: redact_url(match.group(0)), text) if "://" in text else text


def redact(data: Any) -> Any:
    """A copy of JSON-like ``data`` (dicts, lists, strings) with the credentials of every URL in it redacted."""
    if isinstance(data, str):
        return redact_urls_in(data)
    if isinstance(data, Mapping):
        return {key: redact(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [redact(value) for value in data]
    return data
