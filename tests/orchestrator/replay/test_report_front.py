"""The report's "Pareto front" section (issue 48): a real two-objective campaign with an outcome constraint on the
simulated lab, its plots and the table of non-dominated results, checked against the ledger's own events."""

from __future__ import annotations

import csv
import re

import pytest

from orchestrator.ledger import Ledger
from orchestrator.loop.campaign import Campaign
from orchestrator.replay.candidates import candidate_labels
from orchestrator.replay.report import REPORT_FIGURES, RESULTS_CSV, write_report
from orchestrator.replay.report_front import FRONT_FIGURES, front_data, front_steps
from orchestrator.replay.report_plots import plot_hypervolume, plot_pareto
from orchestrator.spec import CampaignSpec
from vocabulary.events import Observed

CID = "front-report"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _pool(tmp_path) -> str:
    """16 conditions: a = x + y (maximise), b = x - y + 10 (minimise), c a constraint property that some break."""
    lines = ["x,y,a,b,c"] + [f"{x},{y},{x + y},{x - y + 10},{(3 * x + y) % 4}" for x in range(4) for y in range(4)]
    path = tmp_path / "pool.csv"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def front_spec(pool: str, *, n_objectives: int = 2, seed: int = 3, lab_experiments: int = 10) -> CampaignSpec:
    """A campaign on ``pool`` (columns x, y, a, b, c): maximise a (%), minimise b (nm), with c >= 1 for several
    objectives; random planner, batches of 2."""
    objectives = [{"property": "a", "direction": "maximize", "column": "a", "unit": "%"},
                  {"property": "b", "direction": "minimize", "column": "b", "unit": "nm"}]
    return CampaignSpec.model_validate({
        "campaign": {"name": "front", "kind": "conditions", "seed": seed},
        "objective": objectives[:n_objectives] if n_objectives > 1 else objectives[0],
        "constraint": [{"property": "c", "lower": 1.0, "column": "c"}] if n_objectives > 1 else [],
        "space": {"pool": pool, "columns": ["x", "y"]},
        "lab": {"driver": "simlab", "oracle_column": "a"},
        "budget": {"lab_experiments": lab_experiments},
        "planner": {"main": "random", "control": None, "control_share": 0, "batch_size": 2, "n_initial": 2},
        "stop": {"on_target": False},
    })


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """A finished two-objective campaign with a constraint: (ledger path, spec)."""
    tmp = tmp_path_factory.mktemp("front")
    spec = front_spec(_pool(tmp))
    db = tmp / "ledger.db"
    with Campaign.start(spec, db=db, campaign_id=CID) as run:
        run.run()
    return db, spec


@pytest.fixture
def ledger_of(campaign):
    store = Ledger.open(campaign[0])
    yield store
    store.close()


def _measured(ledger) -> list[tuple[str, dict[str, float]]]:
    """(candidate id, every measured property) of each successful lab result, straight from the events."""
    rows = []
    for event in ledger.events(CID, types=[Observed.type]):
        p = event.payload
        if p["status"] == "ok":
            rows.append((p["candidate_id"], {"a": p["value"], **p["values"]}))
    return rows


def _expected_front(measured) -> set[tuple[str, float, float]]:
    """Non-dominated (max a, min b) among results meeting c >= 1, by brute force."""
    feasible = [(cid, m) for cid, m in measured if m["c"] >= 1.0]

    def dominates(p, q):
        return p["a"] >= q["a"] and p["b"] <= q["b"] and (p["a"] > q["a"] or p["b"] < q["b"])

    return {(cid, m["a"], m["b"]) for cid, m in feasible if not any(dominates(o, m) for _, o in feasible)}


def _front_table(text: str) -> list[list[str]]:
    table = re.search(r'<table class="front">(.*?)</table>', text, re.S).group(1)
    return [[re.sub(r"<br>", "; ", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1])]


def _assert_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path.name} is not a PNG"
    assert len(data) > 5_000, f"{path.name} is suspiciously small ({len(data)} bytes)"


def test_the_report_has_a_pareto_section_with_its_plots_and_the_non_dominated_results(ledger_of, tmp_path):
    index = write_report(ledger_of, CID, tmp_path / "out")
    text = index.read_text()
    assert "<h2>Pareto front</h2>" in text
    assert text.index("<h2>Pareto front</h2>") < text.index("<h2>Best candidates</h2>")
    for name in (*REPORT_FIGURES.values(), *FRONT_FIGURES.values()):
        _assert_png(tmp_path / "out" / name)
        assert f'src="{name}"' in text
    measured = _measured(ledger_of)
    assert len(measured) == 10
    expected = _expected_front(measured)
    assert any(m["c"] < 1.0 for _, m in measured), "the pool should give results that break the constraint"
    labels = candidate_labels(ledger_of, CID)
    rows = _front_table(text)
    # exactly the non-dominated results, each named by its conditions (never its id), with both objectives
    assert sorted((r[0], float(r[2]), float(r[3])) for r in rows) == sorted(
        (labels[cid], a, b) for cid, a, b in expected)
    assert all(r[0].startswith("x=") and "cond-" not in r[0] for r in rows)
    assert all(float(r[4]) >= 1.0 for r in rows)  # the constraint's column: every front row meets it
    assert f"{len(expected)} of 10 measured results" in text
    assert "break an outcome constraint" in text
    head = re.search(r'<table class="front"><thead><tr>(.*?)</tr>', text).group(1)
    assert re.findall(r"<th>(.*?)</th>", head) == ["candidate", "arm", "a (%)", "b (nm)", "c (constraint)"]


def test_results_csv_has_a_column_per_measured_property(ledger_of, campaign, tmp_path):
    _, spec = campaign
    write_report(ledger_of, CID, tmp_path / "out")
    with (tmp_path / "out" / RESULTS_CSV).open(newline="") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
    assert spec.measured_properties == ["a", "b", "c"]
    header = reader.fieldnames
    assert header[header.index("a"):header.index("status")] == ["a", "sd", "unit", "b", "c"]
    measured = _measured(ledger_of)
    assert [(float(r["a"]), float(r["b"]), float(r["c"])) for r in rows] == [
        (m["a"], m["b"], m["c"]) for _, m in measured]


def test_front_data_marks_the_front_and_the_constraint_breakers(ledger_of, campaign):
    _, spec = campaign
    data = front_data(ledger_of, CID, spec)
    measured = _measured(ledger_of)
    expected = _expected_front(measured)
    assert len(data.points) == len(measured)
    assert {(p.candidate_id, p.values["a"], p.values["b"]) for p in data.points if p.is_on_front} == expected
    assert [p.meets_constraints for p in data.points] == [m["c"] >= 1.0 for _, m in measured]
    assert not any(p.is_on_front and not p.meets_constraints for p in data.points)
    assert data.front.hypervolume == data.front.hypervolume_by_experiment[-1] > 0


def test_the_front_steps_join_the_front_through_corners_it_dominates(ledger_of, campaign):
    _, spec = campaign
    data = front_data(ledger_of, CID, spec)
    steps = front_steps(data, spec)
    front = sorted((p.values["a"], p.values["b"]) for p in data.front.points)
    assert len(front) >= 2
    assert steps[0::2] == front  # the front's points, worst a (best b) first
    for (a0, _), corner, (_, b1) in zip(steps[0::2], steps[1::2], steps[2::2], strict=False):
        assert corner == (a0, b1)  # worse than both neighbours on both objectives
    assert len(steps) == 2 * len(front) - 1


def test_a_one_objective_report_has_no_front_section(tmp_path):
    spec = front_spec(_pool(tmp_path), n_objectives=1)
    db = tmp_path / "one.db"
    with Campaign.start(spec.with_overrides(lab_budget=4), db=db, campaign_id="one") as run:
        run.run()
    ledger = Ledger.open(db)
    try:
        index = write_report(ledger, "one", tmp_path / "out")
    finally:
        ledger.close()
    text = index.read_text()
    assert "Pareto front" not in text and 'class="front"' not in text
    assert not any((tmp_path / "out" / name).exists() for name in FRONT_FIGURES.values())
    with (tmp_path / "out" / RESULTS_CSV).open(newline="") as handle:
        header = next(csv.reader(handle))
    assert header == ["n", "iteration", "arm", "x", "y", "a", "sd", "unit", "status", "hit", "reason", "provenance",
                      "lab_hours"]


def test_pareto_plots_draw_for_two_and_three_objectives_and_without_data(tmp_path):
    values = [[1.0, 5.0, 0.1], [2.0, 3.0, 0.4], [3.0, 4.0, 0.2]]
    two = plot_pareto([v[:2] for v in values], tmp_path / "two.png", axis_labels=["a", "b"],
                      on_front=[True, True, False], meets_constraints=[True, True, False],
                      steps=[(1.0, 5.0), (1.0, 3.0), (2.0, 3.0)])
    three = plot_pareto(values, tmp_path / "three.png", axis_labels=["a", "b", "c"],
                        on_front=[True, True, True], meets_constraints=[True, True, True])
    empty = plot_pareto([], tmp_path / "empty.png", axis_labels=["a", "b"], on_front=[], meets_constraints=[])
    curve = plot_hypervolume([0.0, 1.5, 1.5, 4.0], tmp_path / "hv.png", unit="% x nm", n_imported=1)
    for path in (two, three, empty, curve):
        _assert_png(path)
    from PIL import Image

    assert Image.open(three).size[0] > Image.open(two).size[0]  # one panel per pair: three side by side
