"""Text a user or a ledger controls (a campaign name, a candidate label, a path, an imported export's actor), made
safe to print on a terminal.

A campaign name comes from a spec or from a colleague's export, and a terminal obeys what it prints: an escape
sequence can clear the screen, move the cursor back over a line, set the window title or open a hyperlink; a
carriage return or a newline can forge a line such as ``ledger verify: hash chain ok``; a bidi override can show
text in another order than it is stored. ``terminal_safe`` writes every such character as a visible escape
(``\\x1b``, ``\\r``, ``\\n``, ``\\u202e``), so the text reads as what it is and nothing in it acts. ``rich_safe``
does the same for text that rich prints as markup (a table cell, a ``console.print`` string), where ``[red]x`` or
``[link=...]`` would otherwise be markup: it prints literally.

``--json`` output needs neither: JSON escapes control characters itself, and a JSON reader gets the text exact.

Example:
    >>> terminal_safe("Pd/C screen")
    'Pd/C screen'
    >>> terminal_safe("x\\x1b[2J\\rledger verify: hash chain ok")
    'x\\\\x1b[2J\\\\rledger verify: hash chain ok'
    >>> rich_safe("[red]x")
    '\\\\[red]x'
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["rich_safe", "rich_safe_lines", "terminal_safe", "terminal_safe_lines"]

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

# C0 controls (ESC, CR, LF, BEL, BS, ...), DEL and the C1 controls (CSI U+009B, OSC U+009D, ...); the bidi embeddings,
# overrides and isolates, the implicit marks, and the line and paragraph separators.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_UNSAFE_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(value: Any) -> str:
    """``str(value)`` with every character that a terminal would act on written as a visible escape: one line.

    Example:
        >>> terminal_safe("a\\u202eb"), terminal_safe(None), terminal_safe("naïve ☃ 名前")
        ('a\\\\u202eb', 'None', 'naïve ☃ 名前')
    """
    return _UNSAFE.sub(_escape, str(value))


def terminal_safe_lines(value: Any) -> str:
    """``terminal_safe``, except that newlines stay line breaks, for a message written as several lines (a spec's
    problems, one a line). A line after the first that does not start with whitespace is indented by two spaces, so
    no line can pass for one the command printed itself.

    Example:
        >>> print(terminal_safe_lines("invalid spec:\\n  - name: empty\\nledger verify: hash chain ok\\x1b[0m"))
        invalid spec:
          - name: empty
          ledger verify: hash chain ok\\x1b[0m
    """
    first, *rest = _UNSAFE_BUT_NEWLINE.sub(_escape, str(value)).split("\n")
    return "\n".join([first, *(line if line[:1].isspace() or not line else f"  {line}" for line in rest)])


def rich_safe(value: Any) -> str:
    """``terminal_safe``, then escaped for rich markup: for a string that rich renders (``Console.print``, a
    ``Table`` cell or title), so that ``[bold]`` or ``[link=...]`` in the text prints as written."""
    from rich.markup import escape

    return escape(terminal_safe(value))


def rich_safe_lines(value: Any) -> str:
    """``terminal_safe_lines``, then escaped for rich markup."""
    from rich.markup import escape

    return escape(terminal_safe_lines(value))
