"""A human's answer to an interrupt (an approval, or a decision on failed lab jobs), with the name of who gave it.

The graph's interrupts are resumed with a plain answer (``True``, ``False``, a list of job keys, ``"retry"``, a
mapping of job key to action) or, to name the person, with ``{"answer": <plain answer>, "by": NAME}``. Plain answers
stay valid, so checkpoints and ledgers written before names existed resume as they did. The approve and recover
nodes both read an answer through ``read_answer``; the ledger records who answered as ``"human:NAME"``, or
``"human"`` when no name was given.

An approval may also carry why jobs were denied: ``{"answer": ..., "reasons": {job_key: "why"}, "reason": "why"}``
(``"by"`` optional), ``reason`` applying to every denied job without its own; ``denial_reasons`` reads them. A reason is
printable text of at most ``MAX_REASON_CHARS`` characters (``InvalidReason`` otherwise).

A name is non-empty, printable (no newlines or control characters) and at most ``MAX_NAME_CHARS`` characters, so
it reads cleanly in an audit trail; anything else is an ``InvalidApprover``, raised before anything is recorded.

Example:
    >>> value = resume_value(True, by="ada")
    >>> value
    {'answer': True, 'by': 'ada'}
    >>> read_answer(value), read_answer(["c1/ABC"]), read_answer("skip")
    ((True, 'human:ada'), (['c1/ABC'], 'human'), ('skip', 'human'))
    >>> resume_value(False, by=None)
    False
"""

from __future__ import annotations

from typing import Any

from vocabulary.domain import SetupError

__all__ = ["HUMAN", "MAX_NAME_CHARS", "MAX_REASON_CHARS", "InvalidApprover", "InvalidReason", "actor", "checked_name",
           "asks_a_person", "denial_reasons", "lab_wait", "plain_answer", "read_answer", "resume_value"]

HUMAN = "human"
"""The actor of an answer given without a name (what the ledger recorded before names existed)."""
MAX_NAME_CHARS = 64
MAX_REASON_CHARS = 500
_KEYS = frozenset({"answer", "by", "reasons", "reason"})  # job keys always hold a "/": never one of these keys


class InvalidApprover(SetupError):
    """The name given with a human's answer is empty, not printable or too long."""


class InvalidReason(SetupError):
    """A reason given for denied jobs is not text, not printable or too long."""


def _is_wrapped(value: Any) -> bool:
    """Whether ``value`` is the ``{"answer": ..., "by"/"reasons"/"reason": ...}`` form, not a plain answer."""
    return isinstance(value, dict) and "answer" in value and set(value) <= _KEYS


def _checked_reason(reason: Any) -> str | None:
    if reason is None:
        return None
    if not isinstance(reason, str):
        raise InvalidReason(f"a reason for denied jobs must be text, not {type(reason).__name__} {reason!r}")
    text = reason.strip()
    if not text.isprintable():
        raise InvalidReason(f"the reason {text!r} holds a newline, tab or control character; give one plain line")
    if len(text) > MAX_REASON_CHARS:
        raise InvalidReason(f"a reason for denied jobs is {len(text)} characters long; give at most {MAX_REASON_CHARS}")
    return text or None


def checked_name(by: Any) -> str | None:
    """``by`` (surrounding spaces stripped) if it is a valid name, None for None; else ``InvalidApprover``."""
    if by is None:
        return None
    if not isinstance(by, str):
        raise InvalidApprover(f"the name of who answers must be text, not {type(by).__name__} {by!r}")
    name = by.strip()
    if not name:
        raise InvalidApprover("the name of who answers is empty; give a name (e.g. --by ada), or none at all")
    if not name.isprintable():
        raise InvalidApprover(f"the name of who answers, {name!r}, holds a character that is not printable "
                              f"(a newline, tab or control character); give a plain name")
    if len(name) > MAX_NAME_CHARS:
        raise InvalidApprover(f"the name of who answers is {len(name)} characters long; give at most "
                              f"{MAX_NAME_CHARS}")
    return name


def actor(by: str | None) -> str:
    """What the ledger records as who answered: ``"human:NAME"``, or ``"human"`` without a name."""
    name = checked_name(by)
    return HUMAN if name is None else f"{HUMAN}:{name}"


def resume_value(answer: Any, *, by: str | None) -> Any:
    """The value to resume an interrupt with: ``answer`` itself without a name (the old form), else the answer
    with the checked name. An ``answer`` already in the wrapped form (with reasons) keeps them and takes ``by``.

    Example:
        >>> resume_value({"answer": False, "reason": "too dear"}, by="ada")
        {'answer': False, 'reason': 'too dear', 'by': 'ada'}
    """
    name = checked_name(by)
    if _is_wrapped(answer):
        denial_reasons(answer, [])  # a bad reason is refused before the graph runs
        return answer if name is None else {**answer, "by": name}
    return answer if name is None else {"answer": answer, "by": name}


def plain_answer(value: Any) -> Any:
    """The answer itself (``True``, ``False``, job keys, an action) of a resume value, plain or wrapped."""
    return value["answer"] if _is_wrapped(value) else value


def read_answer(value: Any) -> tuple[Any, str]:
    """(the plain answer, who gave it as the ledger records it) from an interrupt's resume value, plain or named."""
    if _is_wrapped(value):
        return value["answer"], actor(value.get("by"))
    return value, HUMAN


def denial_reasons(value: Any, denied: list[str]) -> dict[str, str]:
    """Job key -> why it was denied, for the ``denied`` keys that have a reason (its own, else the answer's
    ``reason``); ``InvalidReason`` for a reason that is not one printable line or a ``reasons`` that is no mapping.

    Example:
        >>> denial_reasons({"answer": False, "reasons": {"c/a": "toxic"}, "reason": "too dear"}, ["c/a", "c/b"])
        {'c/a': 'toxic', 'c/b': 'too dear'}
    """
    if not _is_wrapped(value):
        return {}
    reasons = value.get("reasons") or {}
    if not isinstance(reasons, dict):
        raise InvalidReason(f"'reasons' must map job keys to text, not {type(reasons).__name__} {reasons!r}")
    checked = {str(k): _checked_reason(r) for k, r in reasons.items()}
    common = _checked_reason(value.get("reason"))
    found = {key: checked.get(key) or common for key in denied}
    return {key: why for key, why in found.items() if why}


def asks_a_person(spec) -> bool:
    """Whether the gate asks a person to approve a full batch: the ``interrupt`` policy, or ``auto`` with a batch
    larger than ``max_auto_jobs``."""
    approval = spec.approval
    return approval.policy == "interrupt" or spec.planner.batch_size > approval.max_auto_jobs


def lab_wait(spec) -> str:
    """How the lab waits on its jobs: the spec's ``lab.wait``, except ``"all"`` where the gate asks a person, so
    the loop plans, and the person approves, whole batches rather than one job per freed slot."""
    return "all" if asks_a_person(spec) else spec.lab.wait
