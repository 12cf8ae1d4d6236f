"""Credentials in a lab URL or a model's base URL reach the lab, never the ledger, the exports, the logs or the
terminal (issue 18)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app
from tests.conftest import FREESOLV_SPEC, small_spec
from vocabulary.domain import redact, redact_url, redact_urls_in

ROOT = Path(__file__).resolve().parents[3]
LAB_PASSWORD = "lab-pa55word-41"
MODEL_PASSWORD = "model-pa55word-73"
API_KEY = "query-api-key-29"


@pytest.fixture
def credentialed_lab():
    """The example campaign's simulated lab behind the HTTP server; it records the basic auth it is sent."""
    from instruments import TableOracle
    from instruments.server import ServerThread, create_app
    from instruments.simlab import SimLabDriver
    from orchestrator.space.pool import load_pool

    spec = small_spec()
    pool = load_pool(spec)
    driver = SimLabDriver(oracle=TableOracle(pool.column(spec.lab.oracle_column), property=spec.objective.property),
                          noise_sd=spec.lab.noise_sd, seed=spec.campaign.seed)
    app = create_app(driver, seconds_per_sim_hour=0.05)
    seen: list[str] = []

    @app.middleware("http")
    async def remember_auth(request, call_next):
        seen.append(request.headers.get("authorization", ""))
        return await call_next(request)

    with ServerThread(app) as server:
        yield server.url.replace("http://", f"http://closedloop:{LAB_PASSWORD}@"), seen


def test_redact_url_hides_passwords_and_secret_query_values():
    assert redact_url(f"http://me:{LAB_PASSWORD}@lab:8000/v1?token=t0k&api_key={API_KEY}&n=2&sig=s") == \
        "http://me:***@lab:8000/v1?token=***&api_key=***&n=2&sig=***"
    assert redact_url("https://ghp_abcdef@github.com/x") == "https://***@github.com/x"
    assert redact_url("http://127.0.0.1:8000/jobs?key_count=3") == "http://127.0.0.1:8000/jobs?key_count=3"
    assert redact_urls_in(f"openai:gpt-4o-mini@http://u:{MODEL_PASSWORD}@llm/v1") == "openai:gpt-4o-mini@http://u:***@llm/v1"
    assert redact({"a": [f"see http://u:{LAB_PASSWORD}@h/"], "n": 1}) == {"a": ["see http://u:***@h/"], "n": 1}


@pytest.mark.slow
def test_a_campaign_keeps_url_credentials_out_of_every_record(credentialed_lab, tmp_path):
    import base64

    lab_url, seen_auth = credentialed_lab
    db = tmp_path / "secret.db"
    model = f"openai:gpt-4o-mini@http://llm-user:{MODEL_PASSWORD}@127.0.0.1:9/v1?api_key={API_KEY}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    env.pop("CLOSEDLOOP_LAB_TOKEN", None)
    run = subprocess.run(
        [sys.executable, "-m", "orchestrator.interfaces.cli", "--verbose", "run", str(FREESOLV_SPEC), "--db", str(db),
         "--lab-url", lab_url, "--model", model, "--planner", "bo", "--lab-budget", "4", "--seed", "1",
         "--campaign-id", "secret"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "HTTP Request: POST http://closedloop:***@127.0.0.1" in run.stderr  # httpx's log line, redacted

    # the real credential was used for the connection
    expected = "Basic " + base64.b64encode(f"closedloop:{LAB_PASSWORD}".encode()).decode()
    assert seen_auth and set(seen_auth) == {expected}

    runner = CliRunner()
    outputs = [run.stdout, run.stderr]
    for args in (["show", "secret", "--json"], ["ledger", "export", "secret", "--out", tmp_path / "events.jsonl"],
                 ["export", "secret", "--out", tmp_path / "native"], ["report", "secret", "--out", tmp_path / "report"]):
        result = runner.invoke(app, [*map(str, args), "--db", str(db)], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    recorded = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert db in recorded and Path(f"{db}.checkpoints.sqlite") in recorded and len(recorded) > 4
    for secret in (LAB_PASSWORD, MODEL_PASSWORD, API_KEY):
        for text in outputs:
            assert secret not in text
        for path in recorded:
            assert secret.encode() not in path.read_bytes(), path

    from orchestrator.ledger import Ledger

    ledger = Ledger.open(db)
    spec = ledger.events("secret", types=["CampaignStarted"])[0].payload["spec"]
    ledger.close()
    assert spec["lab"]["parameters"]["base_url"] == lab_url.replace(LAB_PASSWORD, "***")
    assert spec["planner"]["model"] == "openai:gpt-4o-mini@http://llm-user:***@127.0.0.1:9/v1?api_key=***"


def test_lab_errors_and_health_name_the_lab_without_its_password():
    import asyncio

    from instruments.http_driver import HttpDriver
    from vocabulary.domain import InstrumentFault

    lab = HttpDriver(f"http://u:{LAB_PASSWORD}@127.0.0.1:9", retries=0, timeout_s=1)
    health = asyncio.run(lab.health())
    assert health["is_ok"] is False and health["remote_url"] == "http://u:***@127.0.0.1:9"
    assert LAB_PASSWORD not in str(health) and LAB_PASSWORD not in repr(lab)
    with pytest.raises(InstrumentFault) as fault:
        asyncio.run(lab.capabilities())
    assert "http://u:***@127.0.0.1:9" in str(fault.value) and LAB_PASSWORD not in str(fault.value)


def test_an_error_line_never_prints_a_password(capsys):
    from orchestrator.interfaces.cli_main import print_error

    print_error(f"cannot reach http://u:{LAB_PASSWORD}@lab:1/v1")
    assert capsys.readouterr().err.strip() == "error: cannot reach http://u:***@lab:1/v1"
