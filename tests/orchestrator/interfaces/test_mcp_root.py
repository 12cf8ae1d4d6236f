"""What ``closedloop mcp`` tools may write: only under the root the server was started with, never replacing a file;
and an error about a spec's pool never quotes a file that is not a CSV. The tools are called in process
(``MCPServer.call_tool``); ``test_mcp.py`` drives the server over stdio."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.ledger import Ledger
from orchestrator.loop.campaign import Campaign
from tests.conftest import FREESOLV_SPEC, ROOT, small_spec

pytest.importorskip("mcp", reason='the mcp extra is not installed: pip install "closedloop[mcp]"')

from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402

from orchestrator.interfaces.mcp_server import build_server  # noqa: E402


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A root directory holding a ledger with one campaign, waiting at its first approval."""
    root = tmp_path_factory.mktemp("root")
    spec = small_spec(lab_experiments=4, approval__policy="interrupt", planner__control_share=0.0)
    with Campaign.start(spec, db=root / "mcp.db", campaign_id="c1") as campaign:
        campaign.run()
    return root


def call(server, tool: str, **arguments):
    return asyncio.run(server.call_tool(tool, arguments))


def report(server, out_dir: str):
    return call(server, "campaign_report", campaign_id="c1", out_dir=out_dir)


def structured(result) -> dict:
    return result.structured_content if hasattr(result, "structured_content") else result[1]


@pytest.fixture
def server(served):
    ledger = Ledger.open(served / "mcp.db")
    yield build_server(ledger)  # the default root: the ledger file's directory
    ledger.close()


def test_a_report_is_written_under_the_root_and_never_replaces_one(server, served):
    written = Path(structured(report(server, "reports/first"))["report_html"])
    assert written == (served / "reports" / "first" / "index.html").resolve() and written.is_file()
    before = {p.name: p.read_bytes() for p in written.parent.iterdir()}
    with pytest.raises(ToolError, match=r"already holds \['best_so_far.png', .*'index.html'.*never replaces"):
        report(server, "reports/first")
    assert {p.name: p.read_bytes() for p in written.parent.iterdir()} == before
    # someone's own index.html in the directory: refused, and nothing else is written next to it
    mine = served / "mine"
    mine.mkdir()
    (mine / "index.html").write_text("my notes")
    with pytest.raises(ToolError, match=r"already holds \['index.html'\]"):
        report(server, str(mine))
    assert [p.name for p in mine.iterdir()] == ["index.html"] and (mine / "index.html").read_text() == "my notes"


def test_a_report_outside_the_root_is_refused_dotdot_absolute_or_symlink(server, served, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (served / "escape").symlink_to(elsewhere, target_is_directory=True)
    for out_dir in ("../outside", str(elsewhere), "escape", "escape/deeper", "reports/../../outside2", "~"):
        with pytest.raises(ToolError, match="outside this server's root"):
            report(server, out_dir)
    assert not list(elsewhere.iterdir())
    assert not (served.parent / "outside").exists() and not (served.parent / "outside2").exists()


def test_the_root_can_be_given_and_a_link_inside_it_stays_allowed(served, tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "inside").symlink_to(tmp_path / "real", target_is_directory=True)
    ledger = Ledger.open(served / "mcp.db")
    try:
        server = build_server(ledger, root=tmp_path)
        written = Path(structured(report(server, "inside/r"))["report_html"])
        assert written == (tmp_path / "real" / "r" / "index.html").resolve() and written.is_file()
        with pytest.raises(ToolError, match="outside this server's root"):
            report(server, str(served / "reports" / "again"))  # the ledger's directory is not under this root
    finally:
        ledger.close()


def test_mcp_root_option_refuses_a_missing_directory(tmp_path):
    result = subprocess.run([sys.executable, "-m", "orchestrator.interfaces.cli_main", "mcp", "--db",
                             str(tmp_path / "x.db"), "--root", str(tmp_path / "nope")], capture_output=True,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120,
                            stdin=subprocess.DEVNULL, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "error: --root" in result.stderr and "is not a directory" in result.stderr


SECRET = "API_KEY=sk-live-SECRET123"


@pytest.mark.parametrize("content", [f"{SECRET}\nsecond line\n", f"root:{SECRET}:20228:0:99999:7:::\n",
                                     f"{SECRET}\n", "\x89PNG\r\n\x1a\n" + SECRET])
@pytest.mark.parametrize("name", ["credentials", "shadow.txt", "id_rsa"])
def test_a_pool_that_is_not_a_csv_is_refused_without_quoting_it(tmp_path, name, content, served):
    secret = tmp_path / name
    secret.write_bytes(content.encode("utf-8", "surrogateescape") if isinstance(content, str) else content)
    text = FREESOLV_SPEC.read_text().replace('pool = "data/FreeSolv_gauche.csv"', f'pool = "{secret}"')
    spec = tmp_path / "leaky.toml"
    spec.write_text(text.replace('"data/', f'"{FREESOLV_SPEC.parent}/data/'))
    ledger = Ledger.open(tmp_path / "leak.db")
    try:
        with pytest.raises(ToolError) as raised:
            call(build_server(ledger, root=tmp_path), "start_campaign", spec=str(spec))
    finally:
        ledger.close()
    message = str(raised.value)
    assert "SECRET123" not in message and "second line" not in message and "99999" not in message, message
    assert secret.name in message  # the message still says which file


def test_a_csv_pools_header_is_still_named_when_a_column_is_missing(tmp_path):
    pool = tmp_path / "pool.csv"
    pool.write_text("SMILES,expt\nCCO,1.0\nCCC,2.0\n")
    text = FREESOLV_SPEC.read_text().replace('pool = "data/FreeSolv_gauche.csv"', f'pool = "{pool}"')
    spec = tmp_path / "typo.toml"
    spec.write_text(text.replace('"data/', f'"{FREESOLV_SPEC.parent}/data/'))
    ledger = Ledger.open(tmp_path / "typo.db")
    try:
        with pytest.raises(ToolError, match=r"its columns are \['SMILES', 'expt'\]"):
            call(build_server(ledger, root=tmp_path), "start_campaign", spec=str(spec))
    finally:
        ledger.close()
