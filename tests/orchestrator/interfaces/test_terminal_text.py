"""``terminal_text``: every character a terminal acts on is written as a visible escape, and rich markup prints as
written."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.table import Table

from orchestrator.interfaces.terminal_text import (
    rich_safe,
    rich_safe_lines,
    terminal_safe,
    terminal_safe_lines,
)

CONTROLS = [chr(c) for c in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]]
BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f",
        "\u061c", "\u2028", "\u2029"]


@pytest.mark.parametrize("char", CONTROLS + BIDI)
def test_every_control_and_bidi_character_becomes_a_visible_escape(char):
    shown = terminal_safe(f"a{char}b")
    assert char not in shown and shown.startswith("a\\") and shown.endswith("b")
    assert shown.isprintable()


def test_printable_text_is_kept_as_it_is():
    text = "Pd/C screen: naïve ☃ 名前 ½ 50% [x] {y} $(z) `w` 'q' \"d\" \\"
    assert terminal_safe(text) == text


def test_the_escapes_read_as_what_they_stand_for():
    assert terminal_safe("\x1b[2J\r\n\t\x07\x9b\u202e") == "\\x1b[2J\\r\\n\\t\\x07\\x9b\\u202e"


def test_lines_keep_their_breaks_but_no_line_can_pass_for_the_commands_own():
    shown = terminal_safe_lines("invalid spec x:\n  - name: bad\x1b[0m\nledger verify: hash chain ok\r\n\nend")
    assert shown.split("\n") == ["invalid spec x:", "  - name: bad\\x1b[0m", "  ledger verify: hash chain ok\\r", "",
                                 "  end"]


def render(markup: str) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=1000, force_terminal=True, color_system="truecolor")
    table = Table(title=markup)
    table.add_column("c")
    table.add_row(markup)
    console.print(markup)
    console.print(table)
    return buffer.getvalue()


@pytest.mark.parametrize("name", ["[red]x[/red]", "[link=https://evil.example]click[/link]", "[bold]", "a\\",
                                  "[/]", "x\x1b]8;;https://evil.example\x07y"])
def test_rich_markup_in_a_name_prints_as_written(name):
    printed = render(rich_safe(name))
    assert terminal_safe(name) in printed
    assert "\x1b]8;" not in printed  # no hyperlink, whatever rich would make of it
    assert "\x1b[31m" not in printed  # nor red
    assert rich_safe_lines(name) == rich_safe(name)
