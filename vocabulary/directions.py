"""How an objective's direction may be written: any case, British or American spelling, or abbreviated.

Example:
    >>> normalised_direction("Maximise"), normalised_direction("min"), normalised_direction("upward")
    ('maximize', 'minimize', 'upward')
"""

from __future__ import annotations

__all__ = ["DIRECTION_SPELLINGS", "normalised_direction"]

DIRECTION_SPELLINGS = {"maximize": "maximize", "maximise": "maximize", "max": "maximize",
                       "minimize": "minimize", "minimise": "minimize", "min": "minimize", "target": "target"}
"""Each accepted spelling (lower case) and the direction it means."""


def normalised_direction(text: object) -> object:
    """The direction ``text`` means ("maximize", "minimize" or "target"), or ``text`` as given when it means none
    (the validator that reads it then names the three)."""
    return DIRECTION_SPELLINGS.get(text.strip().lower(), text) if isinstance(text, str) else text
