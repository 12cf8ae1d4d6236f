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
        assert "ERROR" not in answered and "RbF: 2.4" in answered  # measured: (0.82 + 3.98) / 2
    finally:
        toolset.env.close()


# ------------------------------------------------------------------------------------------------ tools on new structures
def _laddered(spec: CampaignSpec, rung: dict, compute_seconds: float | None = None) -> CampaignSpec:
    data = spec.model_dump()
    data["ladder"] = [rung]
    data["budget"]["compute_seconds"] = compute_seconds
    return CampaignSpec.model_validate(data)


MOLECULES_LADDER = _laddered(MOLECULES, {"name": "descriptors", "simulator": "rdkit_descriptors", "proxy": "mr"})
MATERIALS_LADDER = _laddered(MATERIALS, {"name": "composition", "simulator": "composition",
                                         "proxy": "electronegativity_spread"})


def test_run_rung_on_a_new_smiles_is_computed_charged_and_recorded_without_growing_the_pool():
    env = CampaignEnvironment(MOLECULES_LADDER, n_offer=4)
    try:
        obs = env.reset(seed=0)
        assert "run_rung(rung, structure)" in obs.render()
        chlorobenzene = Molecule.parse("Clc1ccccc1")
        assert chlorobenzene.id not in env.campaign.ctx.pool.index
        result = env.step({"type": "run_rung", "rung": "descriptors", "structure": "Clc1ccccc1"})
        tool = result.observation.tool_result
        assert result.observation.error is None and result.reward == 0.0
        assert tool["candidate_id"] == chlorobenzene.id and tool["text"] == "Clc1ccccc1" and not tool["is_in_pool"]
        assert tool["properties"]["logp"] == pytest.approx(_crippen_logp("Clc1ccccc1"))
        [rung_result] = result.observation.rung_results
        assert rung_result.candidate_id == chlorobenzene.id and rung_result.text == "Clc1ccccc1"
        # paid from the compute budget like any rung read: its cost model's seconds
        cost = env.campaign.ctx.rungs[0].simulator.cost_model(chlorobenzene)
        assert result.observation.budget.compute_s_used == pytest.approx(cost) and cost > 0
        ledger, cid = env.ledger, env.state.campaign_id
        [simulated] = [e.payload for e in ledger.events(cid, types=["Simulated"])]
        assert simulated["candidate_id"] == chlorobenzene.id and simulated["rung"] == "descriptors"
        assert ledger.events(cid, types=[EnvironmentStep.type])[-1].payload["action"]["structure"] == "Clc1ccccc1"
        assert chlorobenzene.id not in env.campaign.ctx.pool.index  # a tool call does not grow the pool
        _assert_the_ledger_rebuilds_the_pool(env)

        refusals = [("C1CC", "not a valid SMILES"), ("C" * 14, "at most 10"), ("CCS", "allowed elements"),
                    ("c1ccc(Cl)cc1", "already ran on"),  # chlorobenzene again, spelt another way
                    (None, "exactly one candidate")]
        for structure, reason in refusals:
            action = {"type": "run_rung", "rung": "descriptors",
                      **({"structure": structure} if structure else {"candidate_id": "o00", "structure": "CCC"})}
            refused = env.step(action)
            assert reason in refused.observation.error, refused.observation.error
            assert refused.reward == pytest.approx(-env.invalid_penalty) and not refused.terminated
        assert len(env.observation.rung_results) == 1 and env.observation.budget.compute_s_used == pytest.approx(cost)
        # the episode goes on: the structure the rung looked at can then be proposed and measured
        measured = env.step({"type": "propose", "structures": ["Clc1ccccc1"], "hypothesis": "the rung liked it"})
        assert measured.observation.error is None
        assert chlorobenzene.id in {r.candidate_id for r in measured.observation.lab_results}
        _assert_the_ledger_rebuilds_the_pool(env)
    finally:
        env.close()


def test_a_rung_on_a_new_structure_is_refused_when_the_compute_budget_cannot_pay_for_it():
    env = CampaignEnvironment(_laddered(MOLECULES, MOLECULES_LADDER.ladder[0].model_dump(), compute_seconds=1e-6),
                              n_offer=4)
    try:
        env.reset(seed=0)
        result = env.step({"type": "run_rung", "rung": "descriptors", "structure": "Clc1ccccc1"})
        assert "s of compute" in result.observation.error and "are left" in result.observation.error
        assert result.observation.rung_results == () and result.observation.budget.compute_s_used == 0.0
    finally:
        env.close()


def test_query_surrogate_predicts_a_new_smiles_from_its_features_as_the_pool_is_featurised():
    from orchestrator.policy.planners.bo import campaign_utility_model
    from vocabulary.domain import featurise

    env = CampaignEnvironment(MOLECULES, n_offer=4)
    try:
        obs = env.reset(seed=4)
        early = env.step({"type": "query_surrogate", "structures": ["CCCl"]})
        assert early.observation.error is None and early.observation.tool_result["predictions"] == []
        for _ in range(2):  # two lab results: the surrogate is fitted
            obs = env.step({"type": "propose", "candidate_ids": [obs.offer[0].label]}).observation
        new = ["FC(F)(F)c1ccccc1", "ClCCCl"]
        assert not any(Molecule.parse(s).id in env.campaign.ctx.pool.index for s in new)
        result = env.step({"type": "query_surrogate", "candidate_ids": [obs.offer[0].label], "structures": new})
        assert result.observation.error is None and result.reward == 0.0
        rows = result.observation.tool_result["predictions"]
        assert [r["candidate_id"] for r in rows] == [obs.offer[0].candidate_id, *(Molecule.parse(s).id for s in new)]
        assert rows[0]["mean"] == pytest.approx(obs.offer[0].mean) and rows[0]["sd"] == pytest.approx(obs.offer[0].sd)
        mean, sd = campaign_utility_model(env.campaign.ctx.planners["env"].context).predict(
            featurise([Molecule.parse(s) for s in new]))
        for row, m, s in zip(rows[1:], mean, sd, strict=True):
            assert row["mean"] == pytest.approx(m) and row["sd"] == pytest.approx(s) and s > 0
        for structures, reason in [(["C1CC"], "not a valid SMILES"), (["C" * 14], "at most 10"),
                                   (["ClCCCl", "C(Cl)CCl"], "names a candidate twice")]:
            refused = env.step({"type": "query_surrogate", "structures": structures})
            assert reason in refused.observation.error and not refused.terminated
            assert refused.reward == pytest.approx(-env.invalid_penalty)
    finally:
        env.close()


def test_rung_and_surrogate_tools_on_formulas_refuse_an_impossible_one():
    env = CampaignEnvironment(MATERIALS_LADDER, n_offer=4)
    try:
        env.reset(seed=0)
        good = env.step({"type": "run_rung", "rung": "composition", "structure": "KCl"})
        assert good.observation.error is None
        assert good.observation.tool_result["properties"]["mean_electronegativity"] == pytest.approx((0.82 + 3.16) / 2)
        for action, reason in [({"type": "run_rung", "rung": "composition", "structure": "Xx2O"}, "not a valid formula"),
                               ({"type": "run_rung", "rung": "composition", "structure": "Li3PO4"}, "at most 6"),
                               ({"type": "query_surrogate", "structures": ["NaXx"]}, "not a valid formula")]:
            refused = env.step(action)
            assert reason in refused.observation.error and not refused.terminated
        assert len(env.observation.rung_results) == 1
    finally:
        env.close()


def test_a_fixed_pool_refuses_structures_in_tool_calls():
    spec = CampaignSpec.model_validate({
        "campaign": {"name": "closed-tools", "kind": "molecule"}, "objective": {"direction": "maximize"},
        "space": {"inline": ["C", "CC", "CCC", "CCCC"]},
        "ladder": [{"name": "descriptors", "simulator": "rdkit_descriptors", "proxy": "mr"}],
        "lab": {"oracle": {"C": 1, "CC": 2, "CCC": 3, "CCCC": 4}}, "budget": {"lab_experiments": 2},
        "stop": {"threshold": 4.0}})
    env = CampaignEnvironment(spec, n_offer=4)
    try:
        env.reset(seed=0, batch_size=1)
        for action in [{"type": "run_rung", "rung": "descriptors", "structure": "CCCCC"},
                       {"type": "query_surrogate", "structures": ["CCCCC"]}]:
            assert "fixed pool" in env.step(action).observation.error
        assert env.observation.rung_results == ()
    finally:
        env.close()


def test_the_openenv_action_and_verifiers_tools_carry_structures_to_rungs_and_the_surrogate():
    pytest.importorskip("openenv")
    pytest.importorskip("verifiers.v1")
    import asyncio

    import verifiers.v1 as vf

    from orchestrator.environment.openenv_env import CampaignAction, CampaignOpenEnv
    from orchestrator.environment.verifiers_taskset import (
        CampaignTaskData,
        CampaignToolset,
    )

    properties = CampaignAction.model_json_schema()["properties"]
    assert "structure" in properties and "structures" in properties
    env = CampaignOpenEnv(MATERIALS_LADDER, n_offer=4)
    try:
        env.reset(seed=1)
        ran = env.step(CampaignAction(type="run_rung", rung="composition", structure="RbF"))
        assert ran.error is None and ran.observation["tool_result"]["text"] == "RbF"
        assert ran.observation["tool_result"]["properties"]["mean_electronegativity"] == pytest.approx(2.4)
        bad = env.step(CampaignAction(type="query_surrogate", structures=["Qq"]))
        assert "not a valid formula" in bad.error and not bad.done
    finally:
        env.close()

    toolset = CampaignToolset(vf.ToolsetConfig())
    data = CampaignTaskData(spec=MATERIALS_LADDER.model_dump(mode="json"), seed=0, campaign_id="vf-open-tools",
                            n_offer=4, prompt="", system_prompt="")
    asyncio.run(toolset.setup_task(data))
    try:
        ran = toolset.run_rung(rung="composition", structure="CsF")
        assert "ERROR" not in ran and "CsF" in ran and "is_in_pool" in ran
        refused = toolset.query_surrogate(structures=["NaXx"])
        assert "ERROR" in refused and "not a valid formula" in refused
    finally:
        toolset.env.close()
