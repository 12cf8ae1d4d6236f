"""Event lines of results that measured several properties (issue 48): every measured value is listed."""

from __future__ import annotations

import pytest

from orchestrator.interfaces.event_text import describe_event, measured_units
from orchestrator.ledger import Ledger
from orchestrator.loop.campaign import Campaign
from orchestrator.replay.candidates import candidate_labels
from orchestrator.spec import CampaignSpec
from vocabulary.events import Observed
from vocabulary.numbers import plus_minus, rounded

CID = "events"


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """A short two-objective campaign with a constraint on the simulated lab: (ledger path, spec)."""
    tmp = tmp_path_factory.mktemp("events")
    pool = tmp / "pool.csv"
    pool.write_text("\n".join(["x,y,a,b,c"] + [f"{x},{y},{x + y / 7},{(x - y) * 13.37 + 100},{(3 * x + y) % 4 / 3}"
                                              for x in range(3) for y in range(3)]) + "\n")
    spec = CampaignSpec.model_validate({
        "campaign": {"name": "events", "kind": "conditions", "seed": 2},
        "objective": [{"property": "a", "direction": "maximize", "column": "a", "unit": "%"},
                      {"property": "b", "direction": "minimize", "column": "b", "unit": "nm"}],
        "constraint": [{"property": "c", "lower": 0.2, "column": "c"}],
        "space": {"pool": str(pool), "columns": ["x", "y"]},
        "lab": {"driver": "simlab", "oracle_column": "a", "noise_sd": 0.05},
        "budget": {"lab_experiments": 4},
        "planner": {"main": "random", "control": None, "control_share": 0, "batch_size": 2, "n_initial": 2},
        "stop": {"on_target": False},
    })
    db = tmp / "ledger.db"
    with Campaign.start(spec, db=db, campaign_id=CID) as run:
        run.run()
    return db, spec


def test_an_observed_line_lists_every_measured_value_with_its_unit(campaign):
    db, spec = campaign
    ledger = Ledger.open(db)
    try:
        events = ledger.events(CID, types=[Observed.type])
        labels = candidate_labels(ledger, CID)
    finally:
        ledger.close()
    assert len(events) == 4
    units = measured_units(spec)
    assert units == {"a": "%", "b": "nm", "c": ""}
    for event in events:
        p = event.payload
        assert set(p["values"]) == {"b", "c"}
        line = describe_event(Observed.type, p, labels, units=units)
        label = labels[p["candidate_id"]]
        assert line.startswith(f"it{p['iteration']} {label}: a ")
        assert "cond-" not in line  # named by its conditions
        assert f"b {rounded(p['values']['b'])} nm" in line and f"c {rounded(p['values']['c'])}" in line
        assert f": a {plus_minus(p['value'], p['uncertainty'], unit='%')}, b " in line
        assert line.endswith(f"(ok) at {p['sim_time_s'] / 3600:.1f} h")
        # without the spec's units: the first objective as ever, then every other property by name
        bare = describe_event(Observed.type, p, labels)
        assert bare.startswith(f"it{p['iteration']} {label} = ")
        assert f", b {rounded(p['values']['b'])}, c {rounded(p['values']['c'])} (ok)" in bare


def test_a_one_objective_line_is_unchanged_even_with_units():
    p = {"iteration": 2, "job_key": "c1/mol-7", "candidate_id": "mol-7", "value": -5.0912, "uncertainty": 0.1,
         "status": "ok", "sim_time_s": 7200.0, "values": {}, "infeasible": False}
    expected = "it2 CCO = -5.09 ± 0.10 (ok) at 2.0 h"
    assert describe_event("Observed", p, {"mol-7": "CCO"}) == expected
    assert describe_event("Observed", p, {"mol-7": "CCO"}, units={"affinity": "kcal/mol"}) == expected


def test_an_infeasible_failure_and_an_entered_result_say_so():
    failed = {"iteration": 1, "candidate_id": "f-1", "value": None, "uncertainty": None, "status": "failed",
              "sim_time_s": 3600.0, "reason": "no product", "values": {}, "infeasible": True}
    assert describe_event("Observed", failed) == "it1 f-1 = — (failed, infeasible) at 1.0 h"
    entered = {"job_key": "c1/f-1", "candidate_id": "f-1", "value": 0.5, "uncertainty": None, "status": "ok",
               "sim_time_s": 7200.0, "by": "human:ada", "values": {"b": 180.26}}
    assert (describe_event("ResultEntered", entered, {"f-1": "x=1; y=2"}, units={"a": "%", "b": "nm"})
            == "human:ada entered x=1; y=2: a 0.5 %, b 180.3 nm (ok) at 2.0 h")


def test_show_names_every_value_with_its_unit_from_the_spec_in_the_ledger(campaign, monkeypatch):
    from typer.testing import CliRunner

    from orchestrator.interfaces import cli_common
    from orchestrator.interfaces.cli import app
    from orchestrator.interfaces.event_text import campaign_units

    db, spec = campaign
    ledger = Ledger.open(db)
    assert campaign_units(ledger, CID) == measured_units(spec) == {"a": "%", "b": "nm", "c": ""}
    assert campaign_units(ledger, "no-such-campaign") is None
    monkeypatch.setattr(cli_common.out, "width", 400)  # one line per event, whatever the terminal
    result = CliRunner().invoke(app, ["show", CID, "--db", str(db)])
    assert result.exit_code == 0, result.output
    observed = [line for line in result.output.splitlines() if " Observed " in line]
    assert observed and all(": a " in line and " nm" in line and ", c " in line for line in observed)
