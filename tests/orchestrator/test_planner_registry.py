"""Planner arms by name: the ``closedloop.planners`` entry points (built-ins and third-party alike) and arms
registered in one process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from orchestrator import planner_registry
from vocabulary.domain import SetupError

ROOT = Path(__file__).resolve().parents[2]


def install_outside_arm(folder: Path, module: str, entries: dict[str, str], body: str) -> None:
    """A package installed into ``folder``: ``module.py`` holding ``body`` and a dist-info whose entry points map
    arm names to targets in it (what ``pip install`` of a lab's own planner package leaves on disk)."""
    (folder / f"{module}.py").write_text(textwrap.dedent(body))
    dist = folder / f"{module}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 0.1\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entries.items())
    (dist / "entry_points.txt").write_text(f"[{planner_registry.ENTRY_POINT_GROUP}]\n{lines}")


OUTSIDE_ARM = """
    from vocabulary.domain import Proposal


    class OddFirstPlanner:
        name = "odd-first"

        def propose(self, context, n):
            rows = sorted(int(i) for i in context.available if int(i) % 2)[:n]
            return [Proposal(candidate=context.pool.candidates[i], arm=self.name, hypothesis="odd rows first",
                             rationale="an outside arm") for i in rows]


    def make(spec):
        return OddFirstPlanner()


    def make_nothing(spec):
        return object()
"""


def test_the_built_in_arms_are_the_entry_points_pyproject_declares():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["closedloop.planners"]
    assert set(declared) <= set(planner_registry.planner_names())
    assert {"bo", "bo-sf", "botorch", "botorch-onehot", "cheap-first", "llm", "llm-shuffled", "random"} <= set(declared)


def test_the_card_lists_and_checks_arm_names_without_importing_a_planner():
    script = ("import sys; from orchestrator.planner_registry import planner_names; "
              "from orchestrator.spec import load_spec; "
              "assert 'bo' in planner_names(); "
              "load_spec('campaigns/freesolv/campaign.toml').with_overrides(planner='bo-sf'); "
              "print(sorted(m for m in sys.modules if m.startswith('orchestrator.policy')))")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("name", ["bo", "bo-sf", "random", "cheap-first"])
def test_a_built_in_arm_is_made_without_anyone_importing_the_planners_first(name):
    arm = planner_registry.make_planner(name)
    assert hasattr(arm, "propose")


def test_a_built_in_name_cannot_be_taken_by_another_arm():
    with pytest.raises(SetupError, match="already registered"):
        planner_registry.register_planner("bo", lambda spec: None)


def test_an_arm_registered_in_process_is_listed_made_and_kept():
    class Scripted:
        name = "registry-scripted"

        def propose(self, context, n):
            return []

    def factory(spec):
        return Scripted()

    planner_registry.register_planner("registry-scripted", factory)
    planner_registry.register_planner("registry-scripted", factory)  # the same factory again: a no-op
    assert "registry-scripted" in planner_registry.planner_names()
    assert isinstance(planner_registry.make_planner("registry-scripted"), Scripted)
    with pytest.raises(SetupError, match="'registry-scripted' is already registered"):
        planner_registry.register_planner("registry-scripted", lambda spec: Scripted())


def test_an_unknown_arm_names_the_ones_there_are_and_how_to_add_one():
    with pytest.raises(SetupError, match=r"unknown; available arms: \[.*'bo'.*closedloop\.planners.*register_planner"):
        planner_registry.make_planner("no-such-arm")


def test_an_installed_outside_arm_is_listed_made_and_its_name_reserved(tmp_path, monkeypatch):
    install_outside_arm(tmp_path, "registry_outside_arm", {"odd-first": "registry_outside_arm:make",
                                                           "hollow": "registry_outside_arm:make_nothing",
                                                           "broken": "registry_outside_arm:no_such_factory"},
                        OUTSIDE_ARM)
    assert "odd-first" not in planner_registry.planner_names()
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    assert {"odd-first", "hollow", "broken", "bo"} <= set(planner_registry.planner_names())
    assert type(planner_registry.make_planner("odd-first")).__name__ == "OddFirstPlanner"
    with pytest.raises(SetupError, match="already registered"):
        planner_registry.register_planner("odd-first", lambda spec: None)
    with pytest.raises(SetupError, match=r"'hollow' \(registry_outside_arm:make_nothing\) built object, which has no "
                                         r"propose\(context, n\)"):
        planner_registry.make_planner("hollow")
    with pytest.raises(SetupError, match=r"'broken' \(registry_outside_arm:no_such_factory\) cannot be imported"):
        planner_registry.make_planner("broken")


def test_an_arm_two_packages_install_under_one_name_is_refused(tmp_path, monkeypatch):
    for k in (1, 2):
        (tmp_path / f"site{k}").mkdir()
        install_outside_arm(tmp_path / f"site{k}", f"registry_clash_{k}", {"clash": f"registry_clash_{k}:make"},
                            OUTSIDE_ARM)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site1"), str(tmp_path / "site2"), *sys.path])
    with pytest.raises(SetupError, match=r"'clash' is registered more than once \(registry_clash_1:make, "
                                         r"registry_clash_2:make\); uninstall one"):
        planner_registry.make_planner("clash")
