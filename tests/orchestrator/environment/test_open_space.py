"""Open action spaces: a proposal writes new SMILES or formulas, which the campaign validates, screens and measures.

Real campaigns throughout: an open molecule space whose simulated lab computes Crippen logP (rdkit), an open
materials space whose lab computes the mean electronegativity (pymatgen), and a fixed pool that refuses new
structures with the reason.
"""

from __future__ import annotations

import json

import pytest

from orchestrator.environment import CampaignEnvironment
from orchestrator.loop.context import build_context
from orchestrator.spec import CampaignSpec
from vocabulary.domain import Material, Molecule
from vocabulary.events import EnvironmentStep, Observed, PoolExtended, Proposed


def _open_spec(kind: str, seeds: list[str], prop: str, simulator: str, limits: dict, *, lab: int = 4) -> CampaignSpec:
    return CampaignSpec.model_validate({
        "campaign": {"name": f"open-{kind}", "kind": kind, "seed": 0},
        "objective": {"property": prop, "direction": "maximize"},
        "space": {"inline": seeds, "generate": True, "neighbours_per_iteration": 8, **limits},
        "lab": {"driver": "simlab", "oracle_simulator": simulator, "oracle_property": prop, "noise_sd": 0.0},
        "budget": {"lab_experiments": lab}, "planner": {"batch_size": 1, "n_initial": 2},
        "stop": {"threshold": 100.0}})


MOLECULES = _open_spec("molecule", ["CCO", "CC(=O)O", "c1ccccc1O", "CCN", "OCCO", "CC(C)O"], "logp",
                       "rdkit_descriptors", {"max_heavy_atoms": 10, "elements": ["C", "N", "O", "F", "Cl"]})
MATERIALS = _open_spec("material", ["NaCl", "KBr", "MgO", "LiF", "CaO", "NaF"], "mean_electronegativity",
                       "composition", {"max_atoms": 6})


@pytest.fixture(scope="module")
def molecule_env():
    env = CampaignEnvironment(MOLECULES, n_offer=4)
    yield env
    env.close()


def _crippen_logp(smiles: str) -> float:
    from rdkit import Chem
    from rdkit.Chem import Crippen

    return Crippen.MolLogP(Chem.MolFromSmiles(smiles))


def _assert_the_ledger_rebuilds_the_pool(env: CampaignEnvironment) -> None:
    """Every candidate the episode proposed or measured is in the pool the ledger's ``PoolExtended`` events rebuild
    (what a resume or an export sees), and that pool is the start of the one in memory."""
    ctx = env.campaign.ctx
    rebuilt = build_context(ctx.spec, ctx.ledger, ctx.campaign_id).pool
    assert ctx.pool.ids[: len(rebuilt)] == rebuilt.ids
    named = {e.payload["candidate_id"] for e in ctx.ledger.events(ctx.campaign_id, types=[Proposed.type, Observed.type])}
    assert named <= set(rebuilt.index)


def test_a_new_smiles_is_validated_screened_and_measured_by_the_labs_own_ground_truth(molecule_env):
    obs = molecule_env.reset(seed=0)
    assert obs.new_structures.is_open and obs.new_structures.syntax == "smiles"
    assert obs.new_structures.max_heavy_atoms == 10 and "SMILES" in obs.render() and '"structures"' in obs.render()
    # the ground truth of what is on offer is nowhere in the observation
    dumped, text = json.dumps(obs.model_dump(mode="json")), obs.render()
    for c in obs.offer:
        assert f"{_crippen_logp(c.text):.4g}" not in text and repr(_crippen_logp(c.text)) not in dumped

    result = molecule_env.step({"type": "propose", "structures": ["Clc1ccccc1"], "hypothesis": "an aryl chloride"})
    assert result.observation.error is None and result.info["is_valid"]
    chlorobenzene = Molecule.parse("Clc1ccccc1")
    measured = {r.candidate_id: r.value for r in result.observation.lab_results}
    assert measured[chlorobenzene.id] == pytest.approx(_crippen_logp("Clc1ccccc1"))  # noise_sd = 0
    ledger, cid = molecule_env.ledger, molecule_env.state.campaign_id
    proposed = [e.payload for e in ledger.events(cid, types=[Proposed.type])]
    assert proposed[-1]["candidate_id"] == chlorobenzene.id and proposed[-1]["is_generated"]
    assert proposed[-1]["hypothesis"] == "an aryl chloride" and proposed[-1]["arm"] == "env"
    extended = [e.payload for e in ledger.events(cid, types=[PoolExtended.type]) if e.payload["source"] == "env"]
    assert [c["id"] for p in extended for c in p["candidates"]] == [chlorobenzene.id]
    _assert_the_ledger_rebuilds_the_pool(molecule_env)


def test_an_invalid_or_out_of_space_smiles_is_refused_with_the_reason_and_the_episode_goes_on(molecule_env):
    molecule_env.reset(seed=1)
    refusals = {"C1CC": "not a valid SMILES", "C" * 14: "at most 10", "CCS": "allowed elements",
                "CCO": "already sent to the lab or rejected"}
    first = molecule_env.step({"type": "propose", "structures": ["CCO"]})  # a seed: in the pool, untested
    assert first.observation.error is None
    for structure, reason in refusals.items():
        result = molecule_env.step({"type": "propose", "structures": [structure]})
        assert reason in result.observation.error and not result.info["is_valid"]
        assert result.reward == pytest.approx(-molecule_env.invalid_penalty)
        assert not result.terminated and result.observation.n_to_propose > 0
    both = molecule_env.step({"type": "propose", "structures": ["OCC"], "candidate_ids": []})
    assert "already sent" in both.observation.error  # 'OCC' is ethanol again: canonical, so a duplicate
    steps = [e.payload for e in molecule_env.ledger.events(molecule_env.state.campaign_id, types=[EnvironmentStep.type])]
    assert [s["is_valid"] for s in steps] == [True, False, False, False, False, False]
    assert steps[1]["action"]["structures"] == ["C1CC"] and "not a valid SMILES" in steps[1]["error"]
    again = molecule_env.step({"type": "propose", "structures": ["CCCl"], "hypothesis": "after the refusals"})
    assert again.observation.error is None
    assert Molecule.parse("CCCl").id in {r.candidate_id for r in again.observation.lab_results}
    _assert_the_ledger_rebuilds_the_pool(molecule_env)


def test_an_episode_of_offers_and_new_structures_keeps_the_pool_the_ledger_rebuilds(molecule_env):
    """The plan node grows an open space before it asks the policy, and again when the answer resumes it: the pool
    in memory must stay the one the ledger records, whatever the policy proposes."""
    obs = molecule_env.reset(seed=2)
    for k in range(4):
        action = ({"type": "propose", "candidate_ids": [obs.offer[0].label]} if k % 2 == 0
                  else {"type": "propose", "structures": [["CCCCl", "FC(F)c1ccccc1"][k // 2]]})
        result = molecule_env.step(action)
        assert result.observation.error is None, result.observation.error
        obs = result.observation
        _assert_the_ledger_rebuilds_the_pool(molecule_env)
    assert obs.is_done and len(obs.lab_results) == 4


def test_a_new_formula_is_measured_and_an_impossible_one_refused():
    env = CampaignEnvironment(MATERIALS, n_offer=4)
    try:
        obs = env.reset(seed=0)
        assert obs.new_structures.is_open and obs.new_structures.syntax == "formula" and "formulas" in obs.render()
        bad = env.step({"type": "propose", "structures": ["Xx2O"]})
        assert "not a valid formula" in bad.observation.error and not bad.terminated
        too_big = env.step({"type": "propose", "structures": ["Li3PO4"]})
        assert "at most 6" in too_big.observation.error
        good = env.step({"type": "propose", "structures": ["KCl"], "hypothesis": "a wider electronegativity gap"})
        assert good.observation.error is None
        measured = {r.candidate_id: r.value for r in good.observation.lab_results}
        assert measured[Material.parse("KCl").id] == pytest.approx((0.82 + 3.16) / 2)  # Pauling, K and Cl
        _assert_the_ledger_rebuilds_the_pool(env)
    finally:
        env.close()


def test_a_fixed_pool_refuses_new_structures_and_says_why():
    spec = CampaignSpec.model_validate({
        "campaign": {"name": "closed", "kind": "molecule"}, "objective": {"direction": "maximize"},
        "space": {"inline": ["C", "CC", "CCC", "CCCC"]},
        "lab": {"oracle": {"C": 1, "CC": 2, "CCC": 3, "CCCC": 4}}, "budget": {"lab_experiments": 2},
        "stop": {"threshold": 4.0}})
    env = CampaignEnvironment(spec, n_offer=4)
    try:
        obs = env.reset(seed=0, batch_size=1)
        assert not obs.new_structures.is_open and "fixed pool" in obs.new_structures.reason
        assert '"structures"' not in obs.render()
        result = env.step({"type": "propose", "structures": ["CCCCC"]})
        assert "fixed pool" in result.observation.error and "lab measures only its members" in result.observation.error
        assert result.observation.budget.lab_experiments_left == 2
        assert Molecule.parse("CCCCC").id not in env.campaign.ctx.pool.index
    finally:
        env.close()


def test_the_openenv_action_carries_structures_to_the_core():
    pytest.importorskip("openenv")
    from orchestrator.environment.openenv_env import CampaignAction, CampaignOpenEnv

    assert "structures" in CampaignAction.model_json_schema()["properties"]
    env = CampaignOpenEnv(MOLECULES, n_offer=4)
    try:
        env.reset(seed=3)
        bad = env.step(CampaignAction(type="propose", structures=["c1cc"]))
        assert "not a valid SMILES" in bad.error and bad.reward < 0 and not bad.done
        good = env.step(CampaignAction(type="propose", structures=["CCOCC"], hypothesis="an ether"))
        assert good.error is None
        assert Molecule.parse("CCOCC").id in {r["candidate_id"] for r in good.observation["lab_results"]}
        assert good.observation["new_structures"]["is_open"]
    finally:
        env.close()


def test_the_verifiers_propose_tool_takes_structures():
    pytest.importorskip("verifiers.v1")
    import asyncio

    import verifiers.v1 as vf

    from orchestrator.environment.verifiers_taskset import (
        CampaignTaskData,
        CampaignToolset,
    )

    toolset = CampaignToolset(vf.ToolsetConfig())
    data = CampaignTaskData(spec=MATERIALS.model_dump(mode="json"), seed=0, campaign_id="vf-open-materials",
                            n_offer=4, prompt="", system_prompt="")
    asyncio.run(toolset.setup_task(data))
    try:
        refused = toolset.propose(structures=["NaXx"], hypothesis="not an element")
        assert "ERROR" in refused and "not a valid formula" in refused
        answered = toolset.propose(structures=["RbF"], hypothesis="the widest gap")
        assert "ERROR" not in answered and "Rb1F1: 2.4" in answered  # measured: (0.82 + 3.98) / 2
    finally:
        toolset.env.close()
