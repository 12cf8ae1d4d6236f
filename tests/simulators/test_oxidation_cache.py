"""Oxidation-state guesses are remembered on disk across processes, exactly as pymatgen gives them."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from simulators import oxidation_cache
from simulators.oxidation_cache import GuessStore, cache_folder, shared_store

REPO = Path(__file__).resolve().parents[2]

_GUESSES_OF = """
import json, sys
from pymatgen.core import Composition
if sys.argv[1] == "forbid":  # a second process must not enumerate: the answer comes from the file
    def refuse(self, *args, **kwargs):
        raise AssertionError("enumerated although the cache holds the answer")
    Composition.oxi_state_guesses = refuse
from simulators.structures import oxidation_state_guesses
print(json.dumps([list(g.items()) for g in oxidation_state_guesses(Composition("Fe3O4"))]))
"""


def _in_process(mode: str, folder: Path) -> list:
    env = {**os.environ, "CLOSEDLOOP_CACHE_DIR": str(folder), "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", _GUESSES_OF, mode], env=env, capture_output=True, text=True,
                         check=True, cwd=REPO)
    return json.loads(out.stdout)


def test_a_second_process_reads_the_guesses_without_enumerating(tmp_path):
    from pymatgen.core import Composition

    first = _in_process("compute", tmp_path)
    second = _in_process("forbid", tmp_path)
    expected = [list(g.items()) for g in Composition("Fe3O4").oxi_state_guesses()]
    assert first == second == json.loads(json.dumps(expected))
    assert (tmp_path / "oxidation_states.sqlite").is_file()


def test_store_round_trips_and_never_overwrites(tmp_path):
    store = GuessStore(tmp_path / "g.sqlite")
    store.put("k", ({"Fe": 3.0, "O": -2.0}, {"Fe": 2.0, "O": -2.0}))
    store.put("k", ({"Fe": 9.0},))
    assert store.get("k") == ({"Fe": 3.0, "O": -2.0}, {"Fe": 2.0, "O": -2.0})
    store.put("none", ())
    assert store.get("none") == ()
    assert store.get("missing") is None
    store.close()


@pytest.mark.parametrize("value", ["off", "0", ""])
def test_the_cache_can_be_turned_off(monkeypatch, value):
    monkeypatch.setenv("CLOSEDLOOP_CACHE_DIR", value)
    assert cache_folder() is None
    assert shared_store() is None


def test_default_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("CLOSEDLOOP_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_folder() == tmp_path / "closedloop"


def test_an_unwritable_folder_warns_once_and_guesses_are_still_computed(monkeypatch, tmp_path, caplog):
    from pymatgen.core import Composition

    from simulators import structures

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    monkeypatch.setenv("CLOSEDLOOP_CACHE_DIR", str(blocker))
    monkeypatch.setattr(oxidation_cache, "_SHARED", {})
    monkeypatch.setattr(structures, "_GUESSES", {})
    with caplog.at_level(logging.WARNING, logger="simulators.oxidation_cache"):
        assert structures.oxidation_state_guesses(Composition("Fe2O3"))[0] == {"Fe": 3.0, "O": -2.0}
        assert structures.oxidation_state_guesses(Composition("NaCl"))[0] == {"Na": 1.0, "Cl": -1.0}
    warnings = [r for r in caplog.records if "cannot be used" in r.getMessage()]
    assert len(warnings) == 1 and "CLOSEDLOOP_CACHE_DIR" in warnings[0].getMessage()
