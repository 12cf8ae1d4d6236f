"""Generator mode end to end: an open space grows by validated, deduplicated candidates, recorded so a resumed
campaign rebuilds the same pool, and the llm arm's new SMILES go through the validator and its repair rounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.ledger import verify
from orchestrator.loop.campaign import Campaign
from orchestrator.policy.generation import constraint_error
from orchestrator.policy.planners import register_planner
from orchestrator.policy.planners.llm import LLMPlanner
from orchestrator.spec import load_spec, validate_spec
from tests.orchestrator.policy.planners.test_llm import ScriptedChatModel, answer
from vocabulary.domain import Molecule

OPEN_SPEC = Path(__file__).parents[4] / "campaigns" / "open_logp" / "campaign.toml"


def open_spec(**overrides):
    data = load_spec(OPEN_SPEC).model_dump()
    data["planner"].update(main="bo", control="random")
    data["budget"]["lab_experiments"] = 8
    for dotted, value in overrides.items():
        section, field = dotted.split("__")
        data[section][field] = value
    return validate_spec(data)


def _comparable(ledger, campaign_id):
    return [(e.seq, e.type, e.payload, e.idempotency_key) for e in ledger.events(campaign_id)]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    spec = open_spec()
    with Campaign.start(spec, db=tmp_path_factory.mktemp("open") / "open.db", campaign_id="open") as campaign:
        summary = campaign.run()
        return spec, summary, campaign.ledger.events("open"), verify(campaign.ledger, "open")


def test_the_space_grows_by_valid_new_candidates(finished):
    spec, summary, events, report = finished
    assert summary["status"] == "stopped" and summary["n_lab"] == 8 and report.is_identical
    grown = [e.payload for e in events if e.type == "PoolExtended"]
    assert grown and {g["source"] for g in grown} == {"mutation"}
    ids = [c["id"] for g in grown for c in g["candidates"]]
    seeds = {Molecule.parse(s).id for s in spec.space.inline}
    assert len(ids) == len(set(ids)) and not set(ids) & seeds, "deduplicated by canonical id, against the seeds too"
    for g in grown:
        assert len(g["novelty"]) == len(g["candidates"]) and all(0.0 <= x <= 1.0 for x in g["novelty"])
        for c in g["candidates"]:
            assert constraint_error(spec.space, Molecule.parse(c["smiles"])) is None


def test_proposals_record_novelty_and_new_candidates_reach_the_lab(finished):
    spec, summary, events, _ = finished
    proposed = [e.payload for e in events if e.type == "Proposed"]
    assert all(p["novelty"] is not None and 0.0 <= p["novelty"] <= 1.0 for p in proposed)
    generated = {p["candidate_id"] for p in proposed if p["is_generated"]}
    dispatched = {e.payload["candidate_id"] for e in events if e.type == "Dispatched"}
    assert generated & dispatched, "molecules that were not in the seed library were measured"
    seed_best = max(Molecule.parse(s).to_rdkit().GetNumHeavyAtoms() for s in spec.space.inline)
    assert seed_best > 0
    observed = [e.payload["value"] for e in events if e.type == "Observed" and e.payload["status"] == "ok"]
    from rdkit.Chem import Crippen

    best_seed_logp = max(Crippen.MolLogP(Molecule.parse(s).to_rdkit()) for s in spec.space.inline)
    assert max(observed) > best_seed_logp, "the open space let the campaign beat every seed"


def test_a_resumed_open_campaign_rebuilds_the_same_pool(finished, tmp_path):
    spec, _, events, _ = finished
    expected = [(e.seq, e.type, e.payload, e.idempotency_key) for e in events]
    db = tmp_path / "resumed.db"
    with Campaign.start(spec, db=db, campaign_id="open") as campaign:
        campaign.run(max_steps=12)
    with Campaign.resume("open", db=db) as campaign:
        campaign.run(max_steps=9)
    with Campaign.resume("open", db=db) as campaign:
        campaign.run()
        assert _comparable(campaign.ledger, "open") == expected


def test_open_space_spec_errors_say_what_to_set():
    with pytest.raises(Exception, match="oracle_simulator"):
        open_spec(lab__oracle_simulator=None, lab__oracle_property=None)
    data = load_spec(OPEN_SPEC).model_dump()
    data["ladder"].append({"name": "calc", "simulator": "table", "column": "calc"})
    with pytest.raises(Exception, match="read pool columns"):
        validate_spec(data)


def test_the_llm_arm_writes_new_smiles_and_repairs_the_rest(tmp_path):
    model = ScriptedChatModel(responses=[
        answer("ClC1=CC=CC=C1", "C(", "CCCCCCCCCCCCCCCCCC", expected=2.5),
        answer("FC(F)(F)C1=CC=CC=C1", "ClC1=CC=CC=C1", expected=3.0),
        "this is not JSON",
    ])

    def scripted(spec):
        # the model chooses all three proposals of the slot (no bo anchor): the test is about what it writes
        return LLMPlanner(chat_model=model, max_repair_rounds=2, seed=spec.campaign.seed, anchors=False)

    register_planner("llm-scripted-open", scripted)
    spec = open_spec(planner__main="llm-scripted-open", planner__control="bo", planner__batch_size=2,
                     planner__control_share=0.5, budget__lab_experiments=2)
    with Campaign.start(spec, db=tmp_path / "llm.db", campaign_id="gen") as campaign:
        campaign.run()
        events = campaign.ledger.events("gen")
    proposed = [e.payload for e in events if e.type == "Proposed" and e.payload["arm"] == "llm-scripted-open"]
    own = [p for p in proposed if not p["is_fallback"]]
    assert {p["candidate"]["smiles"] for p in own} == {"Clc1ccccc1", "FC(F)(F)c1ccccc1"}
    assert all(p["is_generated"] and p["novelty"] > 0.3 for p in own)
    assert sum(p["is_fallback"] for p in proposed) == 1, "the third slot came from the bo arm after the last round"
    from_model = [e.payload for e in events if e.type == "PoolExtended" and e.payload["source"] == "llm-scripted-open"]
    assert {c["smiles"] for g in from_model for c in g["candidates"]} == {"Clc1ccccc1", "FC(F)(F)c1ccccc1"}
    repair_prompt = model.prompts[1][-1].content
    assert "18 heavy atoms (at most 12 allowed)" in repair_prompt and "C(" in repair_prompt
    calls = [e.payload for e in events if e.type == "LLMCall"]
    assert len(calls) == 3 and not model.responses


def test_an_open_materials_space_grows_by_charge_balanced_compositions(tmp_path):
    spec = validate_spec({
        "campaign": {"name": "open-ionic", "kind": "material", "seed": 1},
        "objective": {"property": "electronegativity_spread", "direction": "maximize"},
        "space": {"inline": ["NaCl", "MgO", "LiF", "KBr", "CaO"], "generate": True, "max_atoms": 6,
                  "neighbours_per_iteration": 24},
        "ladder": [{"name": "composition", "simulator": "composition", "proxy": "max_ionic_character"}],
        "lab": {"driver": "simlab", "oracle_simulator": "composition", "oracle_property": "electronegativity_spread"},
        "budget": {"lab_experiments": 6},
        "planner": {"main": "bo", "control": "random", "batch_size": 3, "n_initial": 3},
    })
    with Campaign.start(spec, db=tmp_path / "materials.db", campaign_id="ionic") as campaign:
        summary = campaign.run()
        events = campaign.ledger.events("ionic")
        assert verify(campaign.ledger, "ionic").is_identical
    assert summary["n_lab"] == 6
    from vocabulary.domain import Material

    grown = [c["formula"] for e in events if e.type == "PoolExtended" for c in e.payload["candidates"]]
    assert grown and all(Material.parse(f).to_composition().oxi_state_guesses(max_sites=-1) for f in grown)
    assert all(Material.parse(f).n_atoms <= 6 for f in grown)
    generated = {e.payload["candidate_id"] for e in events if e.type == "Proposed" and e.payload["is_generated"]}
    assert generated & {e.payload["candidate_id"] for e in events if e.type == "Dispatched"}
