"""Campaign names and ids a hostile spec or export could hold, through ``closedloop run``, ``ls`` and ``show``: escape
sequences, carriage returns, newlines, bidi overrides and rich markup print as visible text and act on nothing; a
command line the CLI suggests runs, when pasted into a shell, exactly the command it names (no ``$(...)``), with the
id as one argument; ``--json`` keeps every string exact."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app, resume_command
from orchestrator.ledger import Ledger
from orchestrator.loop.campaign import Campaign
from orchestrator.loop.lease import CampaignBusy, CampaignLease
from tests.conftest import FREESOLV_SPEC, small_spec
from vocabulary.domain import SetupError

runner = CliRunner()
FORGED = "ledger verify: hash chain ok"
HOSTILE_NAME = f"demo\x1b[2J\x1b]0;title\x07\r{FORGED}\n{FORGED}\u202eboom\x9b31m [red]red[/red] [link=https://x]y"
SHELL_IDS = ["screen$(touch PWNED)", "`touch PWNED`", "a'b\"c; touch PWNED", "Pd/C screen", "-x --db /tmp/other",
             "naïve ☃ $HOME *"]


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    """Tables as wide as their text, so an escaped name is not folded across lines."""
    from orchestrator.interfaces import cli_common

    monkeypatch.setattr(cli_common.out, "width", 1000)
    monkeypatch.setattr(cli_common.console, "width", 1000)


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def gated_spec(tmp_path, name: str):
    """The FreeSolv spec under ``name``, with a human approval gate: a run stops at its first lab batch."""
    text = FREESOLV_SPEC.read_text().replace('policy = "auto"', 'policy = "interrupt"')
    text = text.replace('pool = "data/', f'pool = "{FREESOLV_SPEC.parent}/data/')
    text += "\n[screening]\nsurvey_share = 0.0\n"  # no xtb survey: the gate comes in seconds
    start = text.index("name = ")
    end = text.index("\n", start)
    spec = tmp_path / "hostile.toml"
    spec.write_text(text[:start] + f"name = {json.dumps(name)}" + text[end:])  # a JSON string is a TOML basic string
    return spec


def assert_inert(text: str) -> None:
    """Nothing in ``text`` acts on a terminal, and no line of it is a forged one."""
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text and "\x9b" not in text
    assert "\u202e" not in text
    # a line of a table starts with its border, a message's continuation line is indented: only the command's own
    # lines start at the margin
    assert not any(line.startswith(FORGED) for line in text.splitlines()), text


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("hostile")
    db = tmp_path / "hostile.db"
    result = invoke("run", gated_spec(tmp_path, HOSTILE_NAME), "--db", db, "--lab-budget", 4, "--planner", "bo",
                    "--control-share", 0)
    assert result.exit_code == 3, result.output  # waiting for approval
    [row] = json.loads(invoke("ls", "--db", db, "--json").stdout)
    return db, row["campaign_id"], result


def test_run_prints_a_hostile_name_as_visible_text(hostile):
    _, _, result = hostile
    assert_inert(result.output)
    assert "\\x1b[2J" in result.output and "\\r" + FORGED in result.output and "\\u202e" in result.output
    assert "[red]red[/red]" in result.output  # rich markup in a name prints as written


def test_ls_and_show_print_a_hostile_name_as_visible_text_and_json_exact(hostile):
    db, campaign_id, _ = hostile
    assert campaign_id.startswith(HOSTILE_NAME)
    for args in (("ls", "--db", db), ("show", campaign_id, "--db", db)):
        result = invoke(*args)
        assert result.exit_code == 0, result.output
        assert_inert(result.output)
        assert "\\x1b]0;title\\x07" in result.output
    [row] = json.loads(invoke("ls", "--db", db, "--json").stdout)
    assert row["name"] == HOSTILE_NAME  # --json is exact
    events = json.loads(invoke("show", campaign_id, "--db", db, "--json").stdout)
    assert events[0]["payload"]["name"] == HOSTILE_NAME


def test_an_error_line_about_a_hostile_id_or_path_is_inert(hostile, tmp_path):
    db, campaign_id, _ = hostile
    result = invoke("run", "--resume", campaign_id + "\x1b[2J\n" + FORGED, "--db", db)
    assert result.exit_code == 2
    assert_inert(result.output)
    # a spec path is named as it is written, on a line of its own message
    result = invoke("run", tmp_path / f"spec\x1b[2J\r{FORGED}\n{FORGED}.toml", "--db", db)
    assert result.exit_code == 2 and "error: invalid campaign spec" in result.output
    assert_inert(result.output)
    assert "\\x1b[2J\\r" in result.output


def run_pasted(line: str, tmp_path) -> list[str]:
    """Paste ``line`` into bash in ``tmp_path``, with ``closedloop`` a function that records its arguments."""
    script = 'closedloop() { printf "%s\\0" "$@" > "$ARGS_FILE"; }\n' + line + "\n"
    subprocess.run(["bash", "-c", script], cwd=tmp_path, env={"ARGS_FILE": str(tmp_path / "args"), "PATH": "/usr/bin:/bin"},
                   check=True, timeout=30)
    assert not (tmp_path / "PWNED").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["args"]
    return (tmp_path / "args").read_text().split("\0")[:-1]


@pytest.mark.parametrize("campaign_id", ["screen$(touch PWNED)", "a'b\"c; touch PWNED"])
def test_the_approval_hint_of_run_pastes_as_the_command_it_names(tmp_path, campaign_id):
    db = tmp_path / "my ledger $(touch PWNED).db"
    result = invoke("run", gated_spec(tmp_path, "demo"), "--db", db, "--lab-budget", 4, "--planner", "bo",
                    "--control-share", 0, "--campaign-id", campaign_id)
    assert result.exit_code == 3, result.output  # waiting for approval
    [hint] = [line.split("lab job(s): ", 1)[1] for line in result.stdout.splitlines() if "lab job(s): " in line]
    expected = ["run", "--resume", campaign_id, "--db", str(db)]  # which asks: no blanket --approve all
    assert shlex.split(hint) == ["closedloop", *expected]
    paste = tmp_path / "paste"
    paste.mkdir()
    assert run_pasted(hint, paste) == expected


@pytest.mark.parametrize("campaign_id", SHELL_IDS + ["new\nline", "tab\there"])
def test_resume_command_quotes_every_argument(tmp_path, campaign_id):
    line = resume_command(campaign_id, "/tmp/a b.db", "--approve", "all")
    assert shlex.split(line) == ["closedloop", "run", "--resume", campaign_id, "--db", "/tmp/a b.db", "--approve", "all"]
    assert run_pasted(line, tmp_path) == ["run", "--resume", campaign_id, "--db", "/tmp/a b.db", "--approve", "all"]


def test_the_hints_of_a_taken_id_and_a_busy_campaign_paste_safely(tmp_path):
    campaign_id = "screen$(touch PWNED)"
    db = tmp_path / "c.db"
    spec = small_spec(lab_experiments=4, approval__policy="interrupt", planner__control_share=0.0)
    with Campaign.start(spec, db=db, campaign_id=campaign_id) as campaign:
        campaign.run()
    with pytest.raises(SetupError) as taken:
        Campaign.start(spec, db=db, campaign_id=campaign_id)
    suggested = str(taken.value).split("resume it with ", 1)[1]
    assert shlex.split(suggested) == ["--resume", campaign_id]
    ledger = Ledger.open(db)
    holder = CampaignLease(ledger, campaign_id)
    holder.acquire()
    try:
        with pytest.raises(CampaignBusy) as busy:
            CampaignLease(ledger, campaign_id).acquire()
    finally:
        holder.release()
        ledger.close()
    line = str(busy.value).rsplit("`", 2)[-2]
    paste = tmp_path / "paste"
    paste.mkdir()
    assert run_pasted(line, paste) == ["run", "--resume", campaign_id]


def test_a_log_line_of_the_cli_is_inert():
    import logging

    from orchestrator.interfaces.cli import _RedactingFilter

    record = logging.LogRecord("closedloop", logging.WARNING, __file__, 1, "campaign %s skipped 2 rows",
                               (HOSTILE_NAME,), None)
    assert _RedactingFilter().filter(record)
    assert_inert(record.getMessage())
    assert "\\x1b[2J" in record.getMessage()


def test_ledger_commands_print_a_hostile_name_as_visible_text(hostile, tmp_path):
    """``ledger verify``, ``ledger export``, ``ledger import`` and ``replay`` print the campaign id a spec or an
    imported export gave: as visible text, never as a forged "hash chain ok" line."""
    db, campaign_id, _ = hostile
    export = tmp_path / "hostile.jsonl"
    outputs = [invoke("ledger", "verify", "--db", db, campaign_id), invoke("replay", campaign_id, "--db", db),
               invoke("ledger", "export", campaign_id, "--db", db, "--out", export),
               invoke("ledger", "import", export, "--db", tmp_path / "imported.db")]
    for result in outputs:
        assert result.exit_code == 0, result.output
        assert_inert(result.output)
    assert "\\x1b[2J" in outputs[0].output and "[red]red[/red]" in outputs[0].output
