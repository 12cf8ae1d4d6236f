"""The OpenEnv adapter, run with OpenEnv itself: `closedloop env serve` on 127.0.0.1, driven over WebSocket by
OpenEnv's EnvClient and over HTTP, and checked by `openenv validate` on the folder and against the running server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("openenv")

import httpx  # noqa: E402

from tests.conftest import BUCHWALD_SPEC, ROOT  # noqa: E402

OPENENV_DIR = ROOT / "closedloop" / "openenv"
OPEN_LOGP_SPEC = ROOT / "campaigns" / "open_logp" / "campaign.toml"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _openenv_cli() -> str:
    script = Path(sys.executable).with_name("openenv")
    if not script.exists():
        pytest.skip(f"no openenv console script beside {sys.executable}; pip install 'closedloop[openenv]'")
    return str(script)


def _serve(spec: Path, *extra: str):
    """`closedloop env serve SPEC` (through the CLI module) on a free port; yields its base URL."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.interfaces.cli", "env", "serve", str(spec),
                             "--port", str(port), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the server exited {proc.returncode}: {proc.stderr.read()[-3000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("the server did not answer /health within 120 s")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def server():
    yield from _serve(BUCHWALD_SPEC, "--n-offer", "6")


@pytest.fixture(scope="module")
def open_server():
    """campaigns/open_logp (an open molecule space: new SMILES allowed), served the same way. Its lab's ground truth
    is computed (an oracle simulator), so it has no known range to fix a success bar from: the server takes one
    (``--success-bar``, logP 4), as a user serving it would."""
    yield from _serve(OPEN_LOGP_SPEC, "--n-offer", "4", "--success-bar", "4.0")


def test_an_open_space_without_a_success_bar_is_refused_before_serving():
    from typer.testing import CliRunner

    from orchestrator.interfaces.cli import app

    result = CliRunner().invoke(app, ["env", "serve", str(OPEN_LOGP_SPEC), "--port", str(_free_port())])
    assert result.exit_code != 0 and "success" in result.output.lower(), result.output


def test_an_episode_over_the_websocket_session_with_openenvs_client(server):
    from closedloop.openenv.client import CampaignEnvClient
    from orchestrator.environment.openenv_env import CampaignAction

    with CampaignEnvClient(base_url=server).sync() as env:
        result = env.reset(seed=0, lab_budget=2, batch_size=1, success_bar=101.0)
        obs = result.observation
        assert not result.done and obs.error is None and "Candidates on offer" in obs.text
        offer = obs.observation["offer"]
        assert len(offer) == 6 and obs.observation["budget"]["lab_experiments_left"] == 2
        campaign_id = env.state().episode_id
        assert campaign_id == obs.observation["campaign_id"]

        refused = env.step(CampaignAction(type="propose", candidate_ids=["o99"]))
        assert refused.observation.error and "o99" in refused.observation.error and refused.reward < 0
        ledger = env.step(CampaignAction(type="query_ledger", what="summary"))
        assert ledger.reward == 0.0 and ledger.observation.observation["tool_result"]["n_proposed"] == 0

        rewards = []
        while not result.done:
            label = result.observation.observation["offer"][0]["label"]
            result = env.step(CampaignAction(type="propose", candidate_ids=[label], hypothesis="first on offer"))
            rewards.append(result.reward)
        assert len(rewards) == 2 and all(isinstance(r, float) for r in rewards)
        assert "outcome_reward" in result.observation.info  # the terminal reward is in the last step
        assert len(result.observation.observation["lab_results"]) == 2
        state = env.state()
        assert state.episode_id == campaign_id and state.is_done and state.step_count == 4
        assert state.episode_return == pytest.approx(sum(rewards) + refused.reward + ledger.reward)


def test_an_open_space_episode_over_the_websocket_client_proposes_a_new_smiles(open_server):
    """Over OpenEnv's client: a new SMILES runs on a rung and is predicted, then proposed and measured by the
    simulated lab's own ground truth (Crippen logP, noise sd 0.05); a bad one is refused and the episode goes on."""
    from rdkit import Chem
    from rdkit.Chem import Crippen

    from closedloop.openenv.client import CampaignEnvClient
    from orchestrator.environment.openenv_env import CampaignAction
    from vocabulary.domain import Molecule

    smiles = "Clc1ccc(Cl)cc1"
    new_id = Molecule.parse(smiles).id
    with CampaignEnvClient(base_url=open_server).sync() as env:
        result = env.reset(seed=0, lab_budget=3, batch_size=1)
        obs = result.observation
        assert obs.observation["new_structures"]["is_open"] and '"structures"' in obs.text
        assert new_id not in {c["candidate_id"] for c in obs.observation["offer"]}

        rung = env.step(CampaignAction(type="run_rung", rung="descriptors", structure=smiles))
        assert rung.observation.error is None and rung.reward == 0.0
        assert rung.observation.observation["tool_result"]["candidate_id"] == new_id
        assert rung.observation.observation["tool_result"]["properties"]["n_heavy_atoms"] == 8.0
        bad = env.step(CampaignAction(type="propose", structures=["C1CC"], hypothesis="an open ring"))
        assert "not a valid SMILES" in bad.observation.error and bad.reward < 0 and not bad.done

        result = env.step(CampaignAction(type="propose", structures=[smiles], hypothesis="two chlorines, flat"))
        assert result.observation.error is None and result.observation.info["is_valid"]
        lab = {r["candidate_id"]: r for r in result.observation.observation["lab_results"]}
        assert lab[new_id]["status"] == "ok" and lab[new_id]["text"] == smiles
        assert lab[new_id]["value"] == pytest.approx(Crippen.MolLogP(Chem.MolFromSmiles(smiles)), abs=0.3)
        while not result.done:
            label = result.observation.observation["offer"][0]["label"]
            result = env.step(CampaignAction(type="propose", candidate_ids=[label], hypothesis="first on offer"))
        assert len(result.observation.observation["lab_results"]) == 3
        assert env.state().is_done and env.state().step_count == 5


def test_the_http_endpoints(server):
    assert httpx.get(f"{server}/health").json()["status"] == "healthy"
    schema = httpx.get(f"{server}/schema").json()
    assert schema["action"]["properties"]["type"]["enum"] == ["propose", "run_rung", "query_surrogate", "query_ledger"]
    assert "text" in schema["observation"]["properties"] and "step_count" in schema["state"]["properties"]
    assert httpx.get(f"{server}/metadata").json()["name"] == "closedloop"
    reset = httpx.post(f"{server}/reset", json={"seed": 1, "lab_budget": 1}, timeout=60).json()
    assert reset["done"] is False and reset["observation"]["observation"]["offer"]
    # HTTP is stateless in OpenEnv: a /step starts from a fresh environment and says so, it does not crash
    step = httpx.post(f"{server}/step", json={"action": {"type": "query_ledger"}}, timeout=60)
    assert step.status_code == 200 and "reset" in step.json()["observation"]["error"]
    bad = httpx.post(f"{server}/step", json={"action": {"type": "dance"}}, timeout=60)
    assert bad.status_code == 422
    assert httpx.get(f"{server}/state").json()["step_count"] == 0


def test_openenv_validate_the_running_server(server):
    result = subprocess.run([_openenv_cli(), "validate", "--url", server], capture_output=True, text=True,
                            timeout=120)
    report = json.loads(result.stdout)
    assert result.returncode == 0 and report["passed"], report
    assert report["mode"] == "simulation"


def test_openenv_validate_the_folder():
    result = subprocess.run([_openenv_cli(), "validate", str(OPENENV_DIR), "--json"], capture_output=True,
                            text=True, timeout=120)
    report = json.loads(result.stdout)
    assert result.returncode == 0 and report["passed"], report["issues"]
    plain = subprocess.run([_openenv_cli(), "validate", str(OPENENV_DIR)], capture_output=True, text=True,
                           timeout=120)
    assert plain.returncode == 0 and "[OK]" in plain.stdout


def test_a_bad_spec_fails_before_binding(tmp_path):
    result = subprocess.run([sys.executable, "-m", "orchestrator.interfaces.cli", "env", "serve", str(tmp_path / "nope.toml"),
                             "--port", str(_free_port())], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 2 and result.stderr.strip().startswith("error:") and "Traceback" not in result.stderr
