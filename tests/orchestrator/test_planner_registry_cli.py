"""A third-party planner, installed as a package with a ``closedloop.planners`` entry point, runs a campaign from
the command line: ``closedloop run SPEC --planner NAME``, in a process of its own, as a user would."""

from __future__ import annotations

import json
import os
import subprocess

from orchestrator.space.pool import load_pool
from orchestrator.spec import load_spec
from tests.orchestrator.ledger.sandbox import ROOT, closedloop_argv, write_tiny_spec
from tests.orchestrator.test_planner_registry import install_outside_arm

LAST_FIRST = """
    from orchestrator.policy.planners import PlannerTraits
    from vocabulary.domain import Proposal


    class LastFirstPlanner:
        '''Measures the pool from its last row backwards.'''

        name = "last-first"
        traits = PlannerTraits()

        def propose(self, context, n):
            rows = sorted((int(i) for i in context.available), reverse=True)[:n]
            return [Proposal(candidate=context.pool.candidates[i], arm=self.name, hypothesis="the last rows first",
                             rationale=f"row {i} of the pool, an outside arm's pick") for i in rows]


    def make(spec):
        return LastFirstPlanner()
"""


def test_an_outside_planner_named_by_an_entry_point_runs_from_the_cli(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    install_outside_arm(site, "closedloop_last_first", {"last-first": "closedloop_last_first:make"}, LAST_FIRST)
    (tmp_path / "spec").mkdir()
    spec = write_tiny_spec(tmp_path / "spec", lab_experiments=6)
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(site), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    db = tmp_path / "outside.db"

    def closedloop(*args):
        done = subprocess.run(closedloop_argv(*args), cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout)

    summary = closedloop("run", spec, "--db", db, "--planner", "last-first", "--control-share", 0,
                         "--campaign-id", "outside", "--json")
    events = closedloop("show", "outside", "--db", db, "--json")

    pool = load_pool(load_spec(spec))
    last_first = [pool.ids[i] for i in reversed(range(len(pool)))]
    proposed = [e["payload"] for e in events if e["type"] == "Proposed"]
    dispatched = [e["payload"]["candidate_id"] for e in events if e["type"] == "Dispatched"]
    assert set(summary["arms"]) == {"last-first"} and summary["n_lab"] == 6
    started = next(e for e in events if e["type"] == "CampaignStarted")["payload"]["spec"]["planner"]
    assert started["main"] == "last-first"
    assert {p["arm"] for p in proposed} == {"last-first"}
    assert all(p["rationale"].endswith("an outside arm's pick") for p in proposed)
    assert dispatched == summary["measured"] == last_first[:6]
