"""The scorer registry: scorers by name, each of one kind (programmatic, simulator, llm_judge, human, instrument).

A scorer is ``fn(context: StepContext) -> ScoreValue | None``; ``None`` means "not applicable" and the criterion is
left out of the reward (never counted as 0). A scorer that also needs its criterion (its text, its ``params``)
declares a keyword-only ``criterion`` parameter: ``fn(context, *, criterion)``; one that asks an LLM judge declares
a keyword-only ``recorder`` parameter and receives the scoring pass's ``rewards.judge.JudgeRecorder`` (passed
explicitly, never found through module state). Scorers are registered by name with ``@register_scorer(name, kind=...)``.
Third-party packages add theirs through the ``closedloop.scorers`` entry-point group: the entry point names a
zero-argument function that registers them, as ``register_builtin_scorers`` does for the built-ins.

Example:
    >>> from rewards.context import StepContext
    >>> score = get_scorer("validity")(StepContext(stage="proposal", subject="x", arm="llm", is_valid=True))
    >>> score.value
    1.0
    >>> {"validity", "novelty", "screen_pass", "within_budget", "improvement"} <= set(scorer_names())
    True
    >>> scorer_kind("lab_success"), scorer_kind("llm_judge")
    ('instrument', 'llm_judge')
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Literal, get_args

from rewards.context import ScoreValue
from rewards.errors import RewardSetupError

__all__ = [
    "ENTRY_POINT_GROUP",
    "SCORER_KINDS",
    "Scorer",
    "ScorerKind",
    "discover_scorers",
    "get_scorer",
    "improvement",
    "novelty",
    "register_builtin_scorers",
    "register_scorer",
    "scorer_kind",
    "scorer_names",
    "screen_pass",
    "takes_criterion",
    "takes_recorder",
    "validity",
    "within_budget",
]

Scorer = Callable[..., ScoreValue | None]
ScorerKind = Literal["programmatic", "simulator", "llm_judge", "human", "instrument"]
SCORER_KINDS: tuple[str, ...] = get_args(ScorerKind)
ENTRY_POINT_GROUP = "closedloop.scorers"
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_.-]*$")

_SCORERS: dict[str, Scorer] = {}
_KINDS: dict[str, str] = {}
_is_discovered = False


# --------------------------------------------------------------------------------------------------- registry
def register_scorer(name: str, *, kind: ScorerKind = "programmatic") -> Callable[[Scorer], Scorer]:
    """Decorator registering a scorer under ``name``, of one ``kind`` (what its evidence is).

    Registering the same function again is a no-op (so plug-ins may load twice); a different function under a
    taken name raises ``RewardSetupError``.

    Example:
        >>> register_scorer("validity")(validity) is validity
        True
        >>> register_scorer("validity")(lambda context: None)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        rewards.errors.RewardSetupError: scorer name 'validity' is already taken by rewards.programmatic.validity; ...
    """
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise RewardSetupError(
            f"scorer name {name!r} is not allowed; use lower-case letters, digits, '_', '.' or '-', "
            "starting with a letter, e.g. 'mylab.xrd_match'"
        )
    if kind not in SCORER_KINDS:
        raise RewardSetupError(f"scorer {name!r} has kind {kind!r}; use one of {list(SCORER_KINDS)}")

    def decorator(fn: Scorer) -> Scorer:
        if not callable(fn):
            raise RewardSetupError(f"scorer {name!r} must be a function fn(context) -> ScoreValue | None, not {fn!r}")
        existing = _SCORERS.get(name)
        if existing is not None and existing is not fn and _qualified(existing) != _qualified(fn):
            raise RewardSetupError(
                f"scorer name {name!r} is already taken by {_qualified(existing)}; "
                f"pick another name for {_qualified(fn)} (e.g. prefix it with your package name)"
            )
        # Same qualified name but a new object means the module was reloaded (a notebook): keep the fresh one.
        _SCORERS[name] = fn
        _KINDS[name] = kind
        return fn

    return decorator


def get_scorer(name: str) -> Scorer:
    """The scorer registered under ``name``, loading entry-point plug-ins on the first miss.

    Example:
        >>> get_scorer("novelty").__name__
        'novelty'
    """
    if name not in _SCORERS:
        discover_scorers()
    try:
        return _SCORERS[name]
    except KeyError:
        raise RewardSetupError(
            f"no scorer is registered as {name!r}; known scorers are {list(scorer_names())}. Register one with "
            f"@register_scorer({name!r}) or install a package that provides it under the "
            f"{ENTRY_POINT_GROUP!r} entry-point group"
        ) from None


def scorer_names() -> tuple[str, ...]:
    """Names of every registered scorer, plug-ins included, sorted."""
    discover_scorers()
    return tuple(sorted(_SCORERS))


def discover_scorers() -> None:
    """Run every ``closedloop.scorers`` entry point once per process; a broken plug-in raises ``RewardSetupError``."""
    global _is_discovered
    if _is_discovered:
        return
    for entry_point in entry_points(group=ENTRY_POINT_GROUP):
        label = f"scorer plug-in {entry_point.name!r} ({entry_point.value})"
        try:
            hook = entry_point.load()
        except Exception as exc:
            raise RewardSetupError(f"{label} failed to import: {exc}; fix or uninstall the package with it") from exc
        if not callable(hook):
            raise RewardSetupError(f"{label} is not callable; point it at a function that registers scorers")
        try:
            hook()
        except RewardSetupError:
            raise
        except Exception as exc:
            raise RewardSetupError(f"{label} raised {type(exc).__name__}: {exc} while registering its scorers") from exc
    _is_discovered = True


def _qualified(fn: object) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def scorer_kind(name: str) -> str:
    """The kind of the scorer registered under ``name`` (programmatic, simulator, llm_judge, human, instrument)."""
    get_scorer(name)
    return _KINDS.get(name, "programmatic")


def takes_criterion(fn: Scorer) -> bool:
    """Whether a scorer declares a keyword-only ``criterion`` parameter (then it is called with its criterion)."""
    return "criterion" in _keyword_only(fn)


def takes_recorder(fn: Scorer) -> bool:
    """Whether a scorer declares a keyword-only ``recorder`` parameter (then it is called with the scoring pass's
    ``rewards.judge.JudgeRecorder``, or None when the caller passed none)."""
    return "recorder" in _keyword_only(fn)


def _keyword_only(fn: Scorer) -> frozenset[str]:
    """The keyword-only parameters a scorer declares, kept per scorer (``inspect.signature`` costs tens of
    microseconds, and every step's every criterion asks); an unhashable scorer is inspected each time."""
    try:
        return _KEYWORD_ONLY[fn]
    except KeyError:
        pass
    except TypeError:  # unhashable
        return _inspect_keyword_only(fn)
    answer = _KEYWORD_ONLY[fn] = _inspect_keyword_only(fn)
    return answer


# A memo of a pure function of each scorer (its signature): no campaign's state, so threads may share it.
_KEYWORD_ONLY: dict[Scorer, frozenset[str]] = {}


def _inspect_keyword_only(fn: Scorer) -> frozenset[str]:
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins and some callables have no signature
        return frozenset()
    return frozenset(name for name, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY)


def register_builtin_scorers() -> None:
    """Register the built-in scorers of every kind; the ``builtin`` entry point. Safe to call repeatedly."""
    from rewards import evidence, judge, programmatic

    for module in (programmatic, evidence, judge):
        for name, (fn, kind) in module.BUILTINS.items():
            register_scorer(name, kind=kind)(fn)


# Re-exported for code written against the first version of this module.
from rewards.evidence import improvement  # noqa: E402
from rewards.programmatic import novelty, screen_pass, validity, within_budget  # noqa: E402

register_builtin_scorers()  # so a source checkout without installed entry points still has the built-ins
