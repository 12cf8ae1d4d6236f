"""A human's answer to an interrupt (an approval, or a decision on failed lab jobs), with the name of who gave it.

The graph's interrupts are resumed with a plain answer (``True``, ``False``, a list of job keys, ``"retry"``, a
mapping of job key to action) or, to name the person, with ``{"answer": <plain answer>, "by": NAME}``. Plain answers
stay valid, so checkpoints and ledgers written before names existed resume as they did. The approve and recover
nodes both read an answer through ``read_answer``; the ledger records who answered as ``"human:NAME"``, or
``"human"`` when no name was given.

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

__all__ = ["HUMAN", "MAX_NAME_CHARS", "InvalidApprover", "actor", "checked_name", "read_answer", "resume_value"]

HUMAN = "human"
"""The actor of an answer given without a name (what the ledger recorded before names existed)."""
MAX_NAME_CHARS = 64
_KEYS = frozenset({"answer", "by"})  # job keys always hold a "/", so no mapping of job keys has exactly these keys


class InvalidApprover(SetupError):
    """The name given with a human's answer is empty, not printable or too long."""


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
    with the checked name."""
    name = checked_name(by)
    return answer if name is None else {"answer": answer, "by": name}


def read_answer(value: Any) -> tuple[Any, str]:
    """(the plain answer, who gave it as the ledger records it) from an interrupt's resume value, plain or named."""
    if isinstance(value, dict) and set(value) == _KEYS:
        return value["answer"], actor(value["by"])
    return value, HUMAN
