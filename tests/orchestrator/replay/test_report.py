"""The campaign report: its data functions on a real campaign and on hand-made ledgers, and the files it writes."""

from __future__ import annotations

import pytest

from orchestrator.ledger import Ledger, LedgerError
from orchestrator.loop.campaign import Campaign
from orchestrator.replay.report import (
    REPORT_FIGURES,
    best_so_far,
    ladder_funnel,
    rewards_by_step,
    station_gantt,
    write_report,
)
from orchestrator.replay.report_plots import (
    plot_best_so_far,
    plot_funnel,
    plot_gantt,
    plot_rewards,
)
from orchestrator.spec import load_spec
from tests.conftest import BUCHWALD_SPEC
from vocabulary.events import CampaignStarted, Dispatched, Proposed, Scored, Simulated

CID = "bh-report"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """A small finished Buchwald–Hartwig campaign on the simulated lab: (ledger path, spec)."""
    db = tmp_path_factory.mktemp("report") / "ledger.db"
    spec = load_spec(BUCHWALD_SPEC).with_overrides(lab_budget=8, planner="bo")
    with Campaign.start(spec, db=db, campaign_id=CID) as run:
        run.run()
    return db, spec


@pytest.fixture
def ledger_of(campaign):
    store = Ledger.open(campaign[0])
    yield store
    store.close()


def _assert_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path.name} is not a PNG"
    assert len(data) > 5_000, f"{path.name} is suspiciously small ({len(data)} bytes)"


# ------------------------------------------------------------------------------------------------------- the report
def test_write_report_writes_index_and_four_pngs(ledger_of, tmp_path):
    index = write_report(ledger_of, CID, tmp_path / "out")
    assert index == tmp_path / "out" / "index.html"
    text = index.read_text()
    for name in REPORT_FIGURES.values():
        _assert_png(tmp_path / "out" / name)
        assert f'src="{name}"' in text  # relative, so the folder can be moved or zipped
    assert len(REPORT_FIGURES) == 4
    assert CID in text and "bo (main)" in text and "random (control)" in text
    assert "8 of 8" in text  # lab experiments in the summary table
    assert "replay of the simulated lab" in text


def test_report_of_an_unknown_campaign_is_an_error(ledger_of, tmp_path):
    with pytest.raises(LedgerError, match="not in"):
        write_report(ledger_of, "nope", tmp_path)


# ------------------------------------------------------------------------------------------------------- data
def test_best_so_far_is_monotone_per_arm_and_ends_at_the_campaign_best(ledger_of, campaign):
    _, spec = campaign
    curves = best_so_far(ledger_of, CID, spec)
    assert set(curves) == {"bo", "random"}
    assert sum(len(points) for points in curves.values()) == 8
    for points in curves.values():
        counts, hours, values = zip(*points, strict=True)
        assert list(counts) == list(range(1, len(points) + 1))
        assert list(hours) == sorted(hours) and hours[0] >= 0
        present = [v for v in values if v is not None]
        assert present == sorted(present)  # maximize: best so far never drops
    assert max(points[-1][2] for points in curves.values()) == pytest.approx(ledger_of.campaign(CID).best_value)


def test_gantt_replays_the_simulated_stations(ledger_of, campaign):
    _, spec = campaign
    gantt = station_gantt(ledger_of, CID, spec)
    assert gantt.source == "simlab"
    assert {"synthesis", "workup", "characterisation"} <= {row[1] for row in gantt.rows}
    assert {row[0] for row in gantt.rows} == {job.job_key for job in ledger_of.lab_jobs(CID)}
    assert all(0 <= start <= end for _, _, start, end in gantt.rows)
    last_result_h = max(job.completed_s for job in ledger_of.lab_jobs(CID)) / 3600.0
    assert max(end for *_, end in gantt.rows) == pytest.approx(last_result_h, abs=1e-6)


def test_gantt_falls_back_to_job_bars_for_a_lab_it_cannot_replay(ledger_of, campaign):
    _, spec = campaign
    remote = spec.with_overrides(lab_url="http://127.0.0.1:9")
    gantt = station_gantt(ledger_of, CID, remote)
    jobs = ledger_of.lab_jobs(CID)
    assert gantt.source == "jobs" and "'http' lab" in gantt.note
    assert [row[0] for row in gantt.rows] == [j.job_key for j in sorted(jobs, key=lambda j: j.dispatched_seq)]
    by_key = {j.job_key: j for j in jobs}
    for key, _, start, end in gantt.rows:
        assert (start * 3600.0, end * 3600.0) == pytest.approx((by_key[key].submitted_s, by_key[key].completed_s))


def _candidate(n: int) -> dict:
    return {"type": "molecule", "schema_version": 1, "smiles": "C" * n, "id": f"m{n}"}


def test_funnel_counts_distinct_candidates_per_stage_and_arm(ledger):
    items = [(CampaignStarted(name="f", seed=0, spec={}), "start")]
    for n, arm in [(1, "bo"), (2, "bo"), (3, "bo"), (4, "random")]:
        items.append((Proposed(iteration=0, arm=arm, candidate_id=f"m{n}", candidate=_candidate(n)), f"p{n}"))
    items.append((Proposed(iteration=1, arm="bo", candidate_id="m1", candidate=_candidate(1)), "p1-again"))
    for n, rung in [(1, "cheap"), (2, "cheap"), (4, "cheap"), (1, "dear"), (1, "cheap")]:
        simulated = Simulated(iteration=0, candidate_id=f"m{n}", rung=rung, observation={})
        items.append((simulated, f"s{n}{rung}{len(items)}"))
    items.append((Dispatched(iteration=0, job_key="c/m1", candidate_id="m1", arm="bo", driver="simlab",
                             sim_time_s=0.0), "d1"))
    ledger.append_many("c", items)
    assert ladder_funnel(ledger, "c", ["cheap", "dear", "unused"]) == [
        ("proposed", {"bo": 3, "random": 1}),
        ("cheap", {"bo": 2, "random": 1}),
        ("dear", {"bo": 1}),
        ("unused", {}),
        ("lab", {"bo": 1}),
    ]


def test_rewards_average_current_scores_per_subject_by_stage_and_iteration(ledger):
    def scored(iteration, stage, subject, criterion, value, weight=1.0, supersedes=None):
        return Scored(iteration=iteration, stage=stage, subject=subject, rubric_id="r", rubric_version="1",
                      criterion_id=criterion, value=value, weight=weight, supersedes_seq=supersedes)

    ledger.append_many("c", [
        (CampaignStarted(name="r", seed=0, spec={}), "start"),
        (scored(0, "proposal", "a", "valid", 1.0), "s2"),
        (scored(0, "proposal", "a", "novel", 1.0, weight=0.5), "s3"),
        (scored(0, "proposal", "b", "valid", -1.0), "s4"),
        (scored(0, "outcome", "a", "hit", 0.2), "s5"),  # provisional, superseded below
        (scored(1, "proposal", "c", "valid", 1.0), "s6"),
        (scored(0, "outcome", "a", "hit", 1.0, supersedes=5), "s7"),
    ])
    assert rewards_by_step(ledger, "c") == {
        "proposal": [(0, pytest.approx((1.5 - 1.0) / 2)), (1, 1.0)],
        "outcome": [(0, 1.0)],
    }


# ------------------------------------------------------------------------------------------------------- plots
def test_each_plot_draws_a_png_from_plain_data(tmp_path):
    _assert_png(plot_best_so_far({"bo": [(1, 0.5, 1.0), (2, 1.0, 3.0)], "random": [(1, 0.7, None), (2, 2.0, 2.0)]},
                                 tmp_path / "b.png", arms=["bo", "random"], value_label="best y",
                                 reference_lines={"target": 2.5}, band=(2.0, 3.0)))
    _assert_png(plot_funnel([("proposed", {"bo": 5, "random": 2}), ("xtb", {"bo": 3}), ("lab", {"bo": 2})],
                            tmp_path / "f.png"))
    rows = [("j1", "synthesis", 0.0, 2.0), ("j2", "synthesis", 1.0, 3.0), ("j1", "workup", 2.0, 2.5)]
    _assert_png(plot_gantt(rows, {"j1": "bo", "j2": "random"}, tmp_path / "g.png", arms=["bo", "random"]))
    _assert_png(plot_rewards({"proposal": [(0, 1.0), (1, 0.5)], "outcome": [(1, -0.2)]}, tmp_path / "r.png"))


def test_plots_of_an_empty_campaign_still_draw(tmp_path):
    for path in (
        plot_best_so_far({}, tmp_path / "b.png", arms=["bo"], value_label="y"),
        plot_funnel([], tmp_path / "f.png"),
        plot_gantt([], {}, tmp_path / "g.png", arms=["bo"]),
        plot_rewards({}, tmp_path / "r.png"),
    ):
        assert path.read_bytes()[:8] == PNG_SIGNATURE


def test_a_funnel_of_stages_without_candidates_draws_without_a_legend_warning(tmp_path):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns when asked for a legend with no labelled bars
        path = plot_funnel([("proposed", {}), ("lab", {})], tmp_path / "f.png")
    assert path.read_bytes()[:8] == PNG_SIGNATURE


# ------------------------------------------------------------------------------------------------ output paths
def _one_error_line(result) -> str:
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def test_a_second_report_into_the_same_folder_needs_force(ledger_of, tmp_path):
    from orchestrator.ledger.outputs import OutputPathError

    first = write_report(ledger_of, CID, tmp_path / "out").read_bytes()
    with pytest.raises(OutputPathError, match="already exists; pass --force"):
        write_report(ledger_of, CID, tmp_path / "out")
    assert (tmp_path / "out" / "index.html").read_bytes() == first
    write_report(ledger_of, CID, tmp_path / "out", force=True)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted([*REPORT_FIGURES.values(), "index.html",
                                                                           "results.csv"])


def test_report_out_onto_a_file_link_or_fifo_is_one_error_line(campaign, tmp_path):
    import os

    from typer.testing import CliRunner

    from orchestrator.interfaces.cli import app

    db = str(campaign[0])
    invoke = CliRunner().invoke
    regular = tmp_path / "notes.txt"
    regular.write_text("keep")
    line = _one_error_line(invoke(app, ["report", CID, "--db", db, "--out", str(regular)]))
    assert "is a regular file, not a directory" in line and regular.read_text() == "keep"

    folder = tmp_path / "rep"
    folder.mkdir()
    os.symlink(regular, folder / "index.html")
    os.mkfifo(folder / REPORT_FIGURES["funnel"])
    line = _one_error_line(invoke(app, ["report", CID, "--db", db, "--out", str(folder), "--force"]))
    assert "it was left as it is" in line
    assert regular.read_text() == "keep" and (folder / "index.html").is_symlink()
    assert sorted(p.name for p in folder.iterdir()) == sorted(["index.html", REPORT_FIGURES["funnel"]])

    linked = tmp_path / "linked"
    os.symlink(folder, linked)
    assert "is a symbolic link, not a directory" in _one_error_line(
        invoke(app, ["report", CID, "--db", db, "--out", str(linked)]))
