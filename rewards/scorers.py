"""The scorer registry and the built-in programmatic scorers.

A scorer is ``fn(context: StepContext) -> ScoreValue | None``; ``None`` means "not applicable" and the criterion is
left out of the reward (never counted as 0). Scorers are registered by name with ``@register_scorer(name)``.
Third-party packages add theirs through the ``closedloop.scorers`` entry-point group: the entry point names a
zero-argument function that registers them, as ``register_builtin_scorers`` does for the built-ins.

Example:
    >>> from rewards.context import StepContext
    >>> score = get_scorer("validity")(StepContext(stage="proposal", subject="x", arm="llm", is_valid=True))
    >>> score.value
    1.0
    >>> {"validity", "novelty", "screen_pass", "within_budget", "improvement"} <= set(scorer_names())
    True
"""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib.metadata import entry_points

from rewards.context import ScoreValue, StepContext
from rewards.errors import RewardSetupError

__all__ = [
    "ENTRY_POINT_GROUP",
    "Scorer",
    "discover_scorers",
    "get_scorer",
    "improvement",
    "novelty",
    "register_builtin_scorers",
    "register_scorer",
    "scorer_names",
    "screen_pass",
    "validity",
    "within_budget",
]

Scorer = Callable[[StepContext], ScoreValue | None]
ENTRY_POINT_GROUP = "closedloop.scorers"
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_.-]*$")

_SCORERS: dict[str, Scorer] = {}
_is_discovered = False


# --------------------------------------------------------------------------------------------------- registry
def register_scorer(name: str) -> Callable[[Scorer], Scorer]:
    """Decorator registering a scorer under ``name``.

    Registering the same function again is a no-op (so plug-ins may load twice); a different function under a
    taken name raises ``RewardSetupError``.

    Example:
        >>> register_scorer("validity")(validity) is validity
        True
        >>> register_scorer("validity")(lambda context: None)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        rewards.errors.RewardSetupError: scorer name 'validity' is already taken by rewards.scorers.validity; ...
    """
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise RewardSetupError(
            f"scorer name {name!r} is not allowed; use lower-case letters, digits, '_', '.' or '-', "
            "starting with a letter, e.g. 'mylab.xrd_match'"
        )

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


# --------------------------------------------------------------------------------------------------- built-ins
def validity(context: StepContext) -> ScoreValue:
    """+1 when the proposal parsed to a valid candidate, -1 with the validator's reason otherwise."""
    if context.is_valid:
        return ScoreValue(value=1.0, reason="the proposal parses to a valid candidate")
    return ScoreValue(value=-1.0, reason=f"invalid proposal: {context.reason}")


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


def improvement(context: StepContext) -> ScoreValue | None:
    """Outcome stage: +1 when the utility beats the best before it (or is the first), 0 when not, None if failed."""
    if context.stage != "outcome" or context.lab_value is None or context.utility is None:
        return None
    if context.best_utility_before is None:
        return ScoreValue(value=1.0, reason=f"first successful lab result (utility {context.utility:g})")
    if context.utility > context.best_utility_before:
        return ScoreValue(
            value=1.0, reason=f"utility {context.utility:g} beats the best before, {context.best_utility_before:g}"
        )
    return ScoreValue(
        value=0.0, reason=f"utility {context.utility:g} does not beat the best before, {context.best_utility_before:g}"
    )


_BUILTINS: dict[str, Scorer] = {
    "validity": validity,
    "novelty": novelty,
    "screen_pass": screen_pass,
    "within_budget": within_budget,
    "improvement": improvement,
}


def register_builtin_scorers() -> None:
    """Register the built-in programmatic scorers; the ``builtin`` entry point. Safe to call repeatedly."""
    for name, fn in _BUILTINS.items():
        register_scorer(name)(fn)


register_builtin_scorers()  # so a source checkout without installed entry points still has the built-ins
