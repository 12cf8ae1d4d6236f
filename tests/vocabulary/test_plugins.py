"""Entry points are read once per process and sys.path, and read again when sys.path changes."""

from __future__ import annotations

import sys

from vocabulary.plugins import entry_points


def test_the_same_group_is_read_once():
    first = entry_points(group="closedloop.simulators")
    assert {"table", "xtb"} <= {ep.name for ep in first}
    assert entry_points(group="closedloop.simulators") is first


def test_a_package_added_to_sys_path_is_seen(tmp_path, monkeypatch):
    before = entry_points(group="closedloop.simulators")
    dist = tmp_path / "closedloop_test_rung-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: closedloop-test-rung\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[closedloop.simulators]\ntest_rung = some.module:Rung\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    after = entry_points(group="closedloop.simulators")
    assert "test_rung" in {ep.name for ep in after} and "test_rung" not in {ep.name for ep in before}
