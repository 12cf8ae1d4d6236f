"""Rewards through a real campaign's ledger: provisional scores superseded by late lab results, recompute equal to
the stored rewards, calibration records, and human verdicts."""

from __future__ import annotations

import pytest

from orchestrator.ledger import verify
from orchestrator.loop.campaign import Campaign
from orchestrator.loop.nodes.reward import (
    recompute_rewards,
    stored_rewards,
    trajectory_rewards,
)
from orchestrator.loop.trajectory_fold import TrajectoryFold
from orchestrator.spec import validate_spec
from rewards import load_rubric, parse_rubric
from tests.conftest import small_spec
from vocabulary.events import HumanVerdict, expand_batches

GAFF = {"name": "gaff", "simulator": "table", "column": "calc", "property": "dg_hydration_gaff",
        "proxy": "dg_hydration_gaff", "cost_s": 60.0}


def quick_spec(**changes):
    """FreeSolv with one table rung and the bo arm; results come back as each job ends (lab.wait = any), so
    most proposals wait for the lab over later iterations."""
    data = small_spec(lab_experiments=10).model_dump()
    data["ladder"] = [GAFF]
    data["screening"]["executor"] = "serial"
    data["budget"]["compute_seconds"] = None
    # bo reads the ladder (a random-only campaign runs no proxy rung, so no rung validity could be measured)
    data["planner"].update(main="bo", control=None, control_share=0.0, proposals_per_slot=1)
    data["lab"]["wait"] = "any"
    for section, values in changes.items():
        data[section].update(values)
    return validate_spec(data)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    db = tmp_path_factory.mktemp("rewards") / "ledger.db"
    spec = quick_spec()
    with Campaign.start(spec, db=db, campaign_id="rw") as campaign:
        campaign.run()
        yield spec, campaign.ledger, campaign.ledger.events("rw")


def test_provisional_scores_are_superseded_by_new_records_when_the_lab_answers_later(finished):
    _, ledger, events = finished
    by_seq = {e.seq: e for e in events}
    finals = [e for e in events if e.type == "RewardFinalised" and e.payload["supersedes_seq"]]
    late = [e for e in finals if by_seq[e.payload["supersedes_seq"]].type == "RewardEstimated"
            and e.payload["iteration"] > by_seq[e.payload["supersedes_seq"]].payload["iteration"]]
    assert late, "some trajectory should be estimated first and finalised when its lab result came in later"
    final = late[0]
    estimate = by_seq[final.payload["supersedes_seq"]]
    tid = final.payload["subject"]
    dispatched = next(e for e in events if e.type == "Dispatched" and f"{e.payload['arm']}:{e.payload['candidate_id']}"
                      in tid)
    observed = next(e for e in events if e.type == "Observed" and e.payload["job_key"] == dispatched.payload["job_key"])
    assert observed.payload["sim_time_s"] > dispatched.payload["sim_time_s"]  # the lab took simulated time
    assert estimate.seq < observed.seq < final.seq
    # The provisional record carried each criterion's score; the final one carries them all again, scored as final,
    # and points at it. The old record is intact.
    assert estimate.type == "RewardEstimated" and estimate.payload["steps"][0]["scores"]
    old_scores = [(st["stage"], st["subject"], sc["criterion_id"]) for st in estimate.payload["steps"]
                  for sc in st["scores"]]
    new_scores = [(st["stage"], st["subject"], sc["criterion_id"]) for st in final.payload["steps"]
                  for sc in st["scores"]]
    assert set(old_scores) <= set(new_scores) and len(new_scores) > len(old_scores)  # the outcome step joined
    # The projection marks the old record's scores superseded, and the report-facing rows count only the current ones.
    rows = ledger.scores("rw")
    old_rows = [row for row in rows if row.seq == estimate.seq]
    assert len(old_rows) == len(old_scores) and all(row.is_provisional for row in old_rows)
    assert all(row.superseded_by_seq == final.seq for row in old_rows)
    new_rows = [row for row in rows if row.seq == final.seq]
    assert len(new_rows) == len(new_scores) and not any(row.is_provisional or row.superseded_by_seq for row in new_rows)
    assert verify(ledger, "rw").is_identical


def test_every_trajectory_ends_final_once_the_lab_is_drained(finished):
    _, _, events = finished
    current = stored_rewards(events)
    assert current and all(e.type == "RewardFinalised" for e in current.values())
    assert all(-1.0 <= e.payload["reward"] <= 1.0 for e in current.values())
    outcome = [e.payload["components"]["outcome"] for e in current.values()]
    assert all(v in (-1.0, 1.0) or -1.0 < v < 1.0 for v in outcome)


def test_recompute_from_the_ledger_equals_the_stored_rewards(finished):
    spec, _, events = finished
    recomputed = recompute_rewards(events, spec, load_rubric("default"))
    stored = stored_rewards(events)
    assert set(recomputed) == set(stored)
    for tid, event in stored.items():
        assert recomputed[tid].reward == event.payload["reward"], tid
        assert recomputed[tid].components == event.payload["components"]
        assert (recomputed[tid].status == "final") == (event.type == "RewardFinalised")


def test_recompute_with_another_rubric_version_changes_the_rewards(finished):
    spec, _, events = finished
    text = (load_rubric("default").model_dump_json())
    assert '"outcome_weight":0.5' in text
    from importlib.resources import files

    toml = files("rewards").joinpath("rubrics", "default.toml").read_text()
    heavier = parse_rubric(toml.replace('version = "2"', 'version = "2.1"')
                           .replace("outcome_weight = 0.5", "outcome_weight = 0.9"))
    recomputed = recompute_rewards(events, spec, heavier)
    stored = stored_rewards(events)
    assert any(abs(recomputed[t].reward - e.payload["reward"]) > 1e-6 for t, e in stored.items())


def test_each_rungs_validity_is_re_estimated_as_results_arrive(finished):
    _, _, events = finished
    assert "RungValidated" not in {e.type for e in events}  # one RungsValidated per iteration
    validated = [e.payload for e in expand_batches(events) if e.type == "RungValidated"]
    assert [v["iteration"] for v in validated] == sorted(v["iteration"] for v in validated)
    assert validated[0]["measure"] == "prior" and validated[0]["weight"] == 0.5
    assert validated[-1]["n_pairs"] >= 5 and validated[-1]["measure"] in ("auroc", "spearman")
    assert 0.0 <= validated[-1]["weight"] <= 1.0
    assert len({v["n_pairs"] for v in validated}) > 2  # it moved as results came in


def test_a_human_verdict_in_the_ledger_reaches_the_human_scorer(finished, tmp_path):
    spec, ledger, events = finished
    proposal = next(e.payload for e in events if e.type == "Proposed")
    rubric = parse_rubric("""
[rubric]
id = "with-human"
version = "1"
[[criteria]]
id = "plausible"
text = "A chemist finds the hypothesis plausible."
category = "important"
weight = 1.0
stages = ["proposal"]
scorer = "human"
""")
    verdict = HumanVerdict(iteration=proposal["iteration"], subject=proposal["candidate_id"], stage="proposal",
                           criterion_id="plausible", value=-1.0, reason="contradicts known solvation trends",
                           by="chemist@lab")
    with_verdict = [*events, events[-1].model_copy(update={"seq": events[-1].seq + 1, "type": "HumanVerdict",
                                                           "payload": verdict.model_dump()})]
    fold = TrajectoryFold.as_of(spec, with_verdict, proposal["iteration"])
    rewards = [r for _, r in trajectory_rewards(fold, rubric, proposal["iteration"])[0]]
    tid = f"it{proposal['iteration']}:{proposal['arm']}:{proposal['candidate_id']}"
    [scored] = [r for r in rewards if r.trajectory_id == tid]
    [human] = [s for s in scored.steps[0].scores if s.criterion_id == "plausible"]
    assert (human.value, human.reason) == (-1.0, "contradicts known solvation trends")
    others = [r for r in rewards if r.trajectory_id != tid]
    assert all(not s.scores for r in others for s in r.steps if s.stage == "proposal")  # unscored, not 0


def test_the_report_shows_each_rungs_validity_and_the_rewards_by_arm(finished):
    from orchestrator.replay.report_rewards import (
        insert_rewards_section,
        rewards_section,
    )

    _, ledger, events = finished
    section = rewards_section(ledger, "rw")
    n_validated = sum(e.type == "RungValidated" for e in expand_batches(events))
    assert "Rewards and calibration" in section and "process weight" in section and "AUROC" in section
    assert section.count("<td>gaff</td>") == n_validated
    assert "<td>bo</td>" in section
    page = insert_rewards_section("<html><body><h1>x</h1></body></html>", ledger, "rw")
    assert page.index("<h1>x</h1>") < page.index("Rewards and calibration") < page.index("</body>")
