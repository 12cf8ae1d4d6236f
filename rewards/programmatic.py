"""Programmatic scorers: checks a program can settle from the step alone (validity, design space, novelty,
stoichiometry, synthesizability, screening, budget, filled slots, and whether a rationale is text at all).

Each is ``fn(context) -> ScoreValue | None``; None means "does not apply to this step".

Example:
    >>> from rewards.context import StepContext
    >>> step = StepContext(stage="proposal", subject="x", arm="bo", is_valid=True,
    ...                    candidate={"type": "molecule", "smiles": "CCO"}, rationale="Thought process:")
    >>> rationale_quality(step).value, stoichiometry(step).value
    (-1.0, 1.0)
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from rewards.context import ScoreValue, StepContext

__all__ = [
    "BUILTINS",
    "fills_slots",
    "in_design_space",
    "novelty",
    "rationale_quality",
    "screen_pass",
    "stoichiometry",
    "synthesizability",
    "validity",
    "within_budget",
]


def validity(context: StepContext) -> ScoreValue:
    """+1 when the proposal parsed to a valid candidate, -1 with the validator's reason otherwise."""
    if context.is_valid:
        return ScoreValue(value=1.0, reason="the proposal parses to a valid candidate")
    return ScoreValue(value=-1.0, reason=f"invalid proposal: {context.reason}")


def in_design_space(context: StepContext) -> ScoreValue | None:
    """Constraint check: +1 for a member of the campaign's design space, -1 outside it; None if unknown or invalid."""
    if not context.is_valid or context.is_in_space is None:
        return None
    if context.is_in_space:
        return ScoreValue(value=1.0, reason=f"{context.subject} is in the design space")
    return ScoreValue(value=-1.0, reason=f"{context.subject} is outside the design space (out of domain)")


def novelty(context: StepContext) -> ScoreValue | None:
    """-1 for a duplicate of a tested or pending candidate, +1 otherwise; None for an invalid proposal.

    An unparseable proposal has no identity to be novel or not; ``validity`` judges it.
    """
    if not context.is_valid:
        return None
    if context.is_duplicate:
        return ScoreValue(value=-1.0, reason=f"{context.subject} duplicates a tested or pending candidate")
    return ScoreValue(value=1.0, reason=f"{context.subject} has not been tested or queued before")


def screen_pass(context: StepContext) -> ScoreValue | None:
    """+1 when every screening rung succeeded, -1 naming the rungs that failed, None when no rung ran."""
    if not context.screen_statuses:
        return None
    failed = sorted(rung for rung, status in context.screen_statuses.items() if status != "ok")
    if failed:
        return ScoreValue(value=-1.0, reason=f"screening failed on {', '.join(failed)}")
    return ScoreValue(value=1.0, reason=f"passed every rung: {', '.join(sorted(context.screen_statuses))}")


def within_budget(context: StepContext) -> ScoreValue | None:
    """Dispatch stage: +1 when ``n_lab_used < lab_budget`` (counted before this dispatch), -1 otherwise."""
    if context.stage != "dispatch":
        return None
    used = f"{context.n_lab_used} of {context.lab_budget} lab experiments used before this one"
    if context.n_lab_used < context.lab_budget:
        return ScoreValue(value=1.0, reason=f"within budget: {used}")
    return ScoreValue(value=-1.0, reason=f"over budget: {used}")


def fills_slots(context: StepContext) -> ScoreValue | None:
    """Plan stage: -1 when the arm left lab slots without a proposal (abstention), +1 when it filled them all."""
    if context.stage != "plan" or context.n_slots == 0:
        return None
    if context.n_proposed >= context.n_slots:
        return ScoreValue(value=1.0, reason=f"{context.arm} proposed for all {context.n_slots} lab slot(s)")
    missing = context.n_slots - context.n_proposed
    return ScoreValue(value=-1.0, reason=f"{context.arm} abstained: {missing} of {context.n_slots} lab slot(s) "
                                         f"left without a proposal")


# ----------------------------------------------------------------------------------------------- chemistry
def _structure(context: StepContext) -> tuple[str, str] | None:
    """(kind, text) of a valid molecule or material candidate; None for conditions or invalid proposals."""
    if not context.is_valid:
        return None
    kind = context.candidate.get("type")
    text = context.candidate.get({"molecule": "smiles", "material": "formula"}.get(kind, ""), "")
    return (kind, text) if kind in ("molecule", "material") and text else None


def stoichiometry(context: StepContext) -> ScoreValue | None:
    """Molecules: +1 when neutral with no radicals; materials: +1 when some oxidation states balance the charge.

    Conditions have no stoichiometry (None).

    Example:
        >>> from rewards.context import StepContext
        >>> def material(formula):
        ...     return StepContext(stage="proposal", subject=formula, arm="bo", is_valid=True,
        ...                        candidate={"type": "material", "formula": formula})
        >>> stoichiometry(material("NaCl")).value, stoichiometry(material("NaCl2")).value
        (1.0, -1.0)
    """
    found = _structure(context)
    if found is None:
        return None
    kind, text = found
    if kind == "molecule":
        charge, n_radicals = _molecule_charge(text)
        if charge is None:
            return ScoreValue(value=-1.0, reason=f"rdkit cannot read {text!r}")
        if charge != 0 or n_radicals:
            return ScoreValue(value=-1.0, reason=f"{text} has net charge {charge:+d} and {n_radicals} radical electron(s)")
        return ScoreValue(value=1.0, reason=f"{text} is neutral with no radical electrons")
    guesses = _oxidation_guesses(text)
    if guesses is None:
        return ScoreValue(value=-1.0, reason=f"pymatgen cannot read the formula {text!r}")
    if not guesses:
        return ScoreValue(value=-1.0, reason=f"no oxidation states balance the charge of {text}")
    shown = ", ".join(f"{el}{state:+g}" for el, state in guesses.items())
    return ScoreValue(value=1.0, reason=f"{text} is charge-balanced with {shown}")


@lru_cache(maxsize=4096)
def _molecule_charge(smiles: str) -> tuple[int | None, int]:
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        return None, 0
    return Chem.GetFormalCharge(mol), sum(atom.GetNumRadicalElectrons() for atom in mol.GetAtoms())


@lru_cache(maxsize=4096)
def _oxidation_guesses(formula: str) -> dict[str, float] | None:
    from pymatgen.core import Composition

    from simulators.structures import oxidation_state_guesses

    try:
        # what oxi_state_guesses(max_sites=-50) does: reduce, refuse more than 50 atoms, enumerate; through the memo
        # the composition rung shares, which has usually just enumerated the same reduced formula
        reduced = Composition(formula).reduced_composition
        if reduced.num_atoms > 50:
            raise ValueError(f"{formula} has more than 50 atoms in its reduced formula")
        guesses = oxidation_state_guesses(reduced)
    except Exception:  # pymatgen raises ValueError/KeyError for unreadable formulas
        return None
    return dict(guesses[0]) if guesses else {}


_NOBLE_GASES = {"He", "Ne", "Ar", "Kr", "Xe", "Rn"}


def synthesizability(context: StepContext) -> ScoreValue | None:
    """Molecules: Ertl & Schuffenhauer's SA score (1 easy .. 10 hard) mapped to +1 at <= 3 and -1 at >= 6.

    Materials: a composition heuristic, -1 with a noble gas, an element past bismuth or more than 5 elements.

    Example:
        >>> from rewards.context import StepContext
        >>> step = StepContext(stage="proposal", subject="x", arm="bo", is_valid=True,
        ...                    candidate={"type": "molecule", "smiles": "CCO"})
        >>> synthesizability(step).value
        1.0
    """
    found = _structure(context)
    if found is None:
        return None
    kind, text = found
    if kind == "molecule":
        score = _sa_score(text)
        if score is None:
            return ScoreValue(value=-1.0, reason=f"rdkit cannot read {text!r}")
        value = max(-1.0, min(1.0, 1.0 - 2.0 * (score - 3.0) / 3.0))
        return ScoreValue(value=value, reason=f"SA score {score:.2f} (1 easy .. 10 hard; +1 at <= 3, -1 at >= 6)")
    elements = _elements(text)
    if elements is None:
        return ScoreValue(value=-1.0, reason=f"pymatgen cannot read the formula {text!r}")
    problems = [f"{el} is a noble gas" for el, _ in elements if el in _NOBLE_GASES]
    problems += [f"{el} (Z={z}) is radioactive" for el, z in elements if z > 83]
    if len(elements) > 5:
        problems.append(f"{len(elements)} elements is more than 5")
    if problems:
        return ScoreValue(value=-1.0, reason=f"{text}: " + "; ".join(problems))
    return ScoreValue(value=1.0, reason=f"{text}: {len(elements)} stable, reactive element(s)")


@lru_cache(maxsize=4096)
def _sa_score(smiles: str) -> float | None:
    import os
    import sys

    from rdkit import Chem, RDConfig, RDLogger

    RDLogger.DisableLog("rdApp.*")
    path = os.path.join(RDConfig.RDContribDir, "SA_Score")
    if path not in sys.path:
        sys.path.append(path)
    import sascorer  # rdkit's Contrib copy of Ertl & Schuffenhauer (2009)

    mol = Chem.MolFromSmiles(smiles)
    return None if mol is None else float(sascorer.calculateScore(mol))


@lru_cache(maxsize=4096)
def _elements(formula: str) -> tuple[tuple[str, int], ...] | None:
    from pymatgen.core import Composition

    try:
        return tuple((el.symbol, el.Z) for el in Composition(formula).elements)
    except Exception:
        return None


# ----------------------------------------------------------------------------------------------- rationale
CANARY_TEXTS = frozenset({":", "thought process:", "thought process", "no completion needed", "n/a", "none", "...",
                          "answer:", "reasoning:", "yes", "ok", "true", "correct"})
"""Inputs known to fool LLM judges, or to farm an empty answer (lower-cased, stripped)."""
MAX_RATIONALE_CHARS = 600
MIN_WORDS = 4


def rationale_quality(context: StepContext) -> ScoreValue | None:
    """Proposal stage: +1 for a rationale that is plain text of substance; -1 for empty, canary, garbage or padded.

    Checks, in order: present; not a known judge canary (``":"``, ``"Thought process:"``); mostly printable ASCII;
    at least 4 words; at most 600 characters; not one phrase repeated (padding). It says nothing about whether the
    rationale is right: that is for the evidence and the lab.
    """
    if context.stage != "proposal":
        return None
    text = " ".join(part.strip() for part in (context.hypothesis, context.rationale) if part.strip())
    problem = rationale_problem(text)
    if problem:
        return ScoreValue(value=-1.0, reason=problem)
    return ScoreValue(value=1.0, reason=f"a plain-text rationale of {len(_words(text))} words")


def rationale_problem(text: str) -> str | None:
    """Why ``text`` is not a rationale worth reading (empty, canary, garbage, padded), or None.

    Example:
        >>> rationale_problem("Thought process:")
        "the rationale is a judge canary ('Thought process:')"
        >>> rationale_problem("gaff predicts -11.8 kcal/mol, inside the target window") is None
        True
    """
    stripped = text.strip()
    if not stripped:
        return "no rationale was given"
    n_odd = sum(1 for ch in stripped if ord(ch) > 126 or unicodedata.category(ch).startswith("C"))
    if n_odd / len(stripped) > 0.2:
        return f"the rationale is mostly non-ASCII or control characters ({n_odd} of {len(stripped)})"
    if stripped.lower() in CANARY_TEXTS or re.fullmatch(r"[\W_]*", stripped):
        return f"the rationale is a judge canary ({_clip(stripped)!r})"
    words = _words(stripped)
    if len(words) < MIN_WORDS:
        return f"the rationale has {len(words)} word(s), fewer than {MIN_WORDS}: {_clip(stripped)!r}"
    if len(stripped) > MAX_RATIONALE_CHARS:
        return f"the rationale is padded: {len(stripped)} characters, more than {MAX_RATIONALE_CHARS}"
    distinct = len(set(words)) / len(words)
    if len(words) >= 20 and distinct < 0.35:
        return f"the rationale repeats itself: {distinct:.0%} distinct words (padding)"
    if stripped.lower().startswith(("thought process:", "answer:")) and len(words) < 2 * MIN_WORDS:
        return f"the rationale is a judge canary ({_clip(stripped)!r})"
    return None


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9][A-Za-z0-9.+\-]*", text.lower())


def _clip(text: str, n: int = 40) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


BUILTINS = {
    "validity": (validity, "programmatic"),
    "in_design_space": (in_design_space, "programmatic"),
    "novelty": (novelty, "programmatic"),
    "screen_pass": (screen_pass, "programmatic"),
    "within_budget": (within_budget, "programmatic"),
    "fills_slots": (fills_slots, "programmatic"),
    "stoichiometry": (stoichiometry, "programmatic"),
    "synthesizability": (synthesizability, "programmatic"),
    "rationale_quality": (rationale_quality, "programmatic"),
}
"""name -> (scorer, kind), registered by ``rewards.scorers.register_builtin_scorers``."""

