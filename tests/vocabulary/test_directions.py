"""An objective's direction in any accepted spelling means one of three words; anything else is left for the
validator to refuse."""

import pytest

from vocabulary.directions import DIRECTION_SPELLINGS, normalised_direction


@pytest.mark.parametrize(("written", "meant"), [("maximize", "maximize"), ("Maximise", "maximize"), (" MAX ", "maximize"),
                                                ("minimise", "minimize"), ("Min", "minimize"), ("TARGET", "target")])
def test_each_spelling_means_one_direction(written, meant):
    assert normalised_direction(written) == meant


def test_anything_else_is_left_as_given():
    assert normalised_direction("upward") == "upward" and normalised_direction(3) == 3
    assert set(DIRECTION_SPELLINGS.values()) == {"maximize", "minimize", "target"}
