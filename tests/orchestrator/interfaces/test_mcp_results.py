"""Ask/tell over MCP: ``suggest``, ``add_results`` and ``export_results`` on a manual-lab campaign, and answers that
name molecules by SMILES. The tools are called in process (``MCPServer.call_tool``); ``test_mcp.py`` drives the
server over stdio."""

from __future__ import annotations

import asyncio

import pytest

from orchestrator.ledger import Ledger
from orchestrator.loop.campaign import Campaign
from tests.orchestrator.loop.test_manual_campaign import SMILES, manual_spec, truth

pytest.importorskip("mcp", reason='the mcp extra is not installed: pip install "closedloop[mcp]"')

from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402

from orchestrator.interfaces.mcp_server import build_server  # noqa: E402


def call(server, tool: str, **arguments) -> dict:
    result = asyncio.run(server.call_tool(tool, arguments))
    return result.structured_content if hasattr(result, "structured_content") else result[1]


@pytest.fixture
def served(tmp_path):
    db = tmp_path / "mcp.db"
    with Campaign.start(manual_spec(budget=4), db=db, campaign_id="bench") as campaign:
        campaign.run()
    ledger = Ledger.open(db)
    yield db, ledger, build_server(ledger)
    ledger.close()


def test_suggest_add_results_and_export_over_mcp(served):
    db, ledger, server = served
    status = call(server, "campaign_status", campaign_id="bench")
    assert status["status"] == "waiting_for_results"
    suggested = call(server, "suggest", campaign_id="bench")
    assert suggested["property"] == "yield" and suggested["unit"] == "%" and len(suggested["jobs"]) == 2
    assert all(job["candidate"] == job["smiles"] and job["candidate"] in SMILES for job in suggested["jobs"])
    rows = [{"job": job["job"], "yield": truth(job["smiles"])} for job in suggested["jobs"]]
    entered = call(server, "add_results", campaign_id="bench", rows=rows, by="grace")
    assert [r["outcome"] for r in entered["rows"]] == ["recorded", "recorded"] and entered["n_written"] == 2
    assert call(server, "add_results", campaign_id="bench", rows=rows)["rows"][0]["outcome"] == "duplicate"
    with Campaign.resume("bench", db=db) as campaign:
        assert campaign.run()["n_lab"] == 2
    status = call(server, "campaign_status", campaign_id="bench")
    best = max(suggested["jobs"], key=lambda job: truth(job["smiles"]))["smiles"]
    assert status["status"] == "waiting_for_results" and status["best_candidate"] == best
    listed = call(server, "list_campaigns")["campaigns"][0]
    assert listed["best_candidate"] == best and listed["status"] == "waiting_for_results"
    exported = call(server, "export_results", campaign_id="bench")
    assert exported["n_results"] == 2 and {r["by"] for r in exported["results"]} == {"human:grace"}
    assert sorted(r["smiles"] for r in exported["results"]) == sorted(j["smiles"] for j in suggested["jobs"])
    report = call(server, "campaign_report", campaign_id="bench")
    assert report["measured_candidates"][:2] == [j["smiles"] for j in suggested["jobs"]]


def test_a_bad_row_is_a_tool_error_naming_it_and_nothing_is_written(served):
    _, ledger, server = served
    job = call(server, "suggest", campaign_id="bench")["jobs"][0]["job"]
    head = ledger.head_seq("bench")
    with pytest.raises(ToolError, match=r"row 2, column yield: 'high' is not a number"):
        call(server, "add_results", campaign_id="bench", rows=[{"job": job, "yield": 3}, {"job": job, "yield": "high"}])
    with pytest.raises(ToolError, match="no job 'elsewhere'"):
        call(server, "add_results", campaign_id="bench", rows=[{"job": "elsewhere", "yield": 3}])
    assert ledger.head_seq("bench") == head
