"""``closedloop rewards recompute|redteam`` and ``closedloop export``: the rewards commands of the CLI.

Registered at the end of ``orchestrator.interfaces.cli``; heavy imports stay inside the commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from orchestrator.interfaces.cli_common import (
    DbOption,
    emit_json,
    fail,
    ledger_with,
    out,
)
from orchestrator.interfaces.terminal_text import rich_safe
from vocabulary.domain import ClosedLoopError

__all__ = ["export_command", "rewards_app"]

rewards_app = typer.Typer(help="Recompute, red-team and inspect process rewards.", no_args_is_help=True)

RubricOption = Annotated[str, typer.Option("--rubric", help="rubric TOML file or built-in name (default, judged)")]


def _load_rubric(ref: str):
    from rewards import RewardError, load_rubric

    try:
        return load_rubric(ref)
    except RewardError as exc:
        fail(str(exc))


@rewards_app.command("recompute")
def recompute(
    campaign_id: Annotated[str, typer.Argument(help="campaign whose rewards to recompute")],
    rubric: RubricOption = "default",
    db: DbOption = "closedloop.db",
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object instead of a table")] = False,
    record: Annotated[bool, typer.Option("--record", help="append the recomputed scores and rewards to the ledger, "
                                                           "each superseding the record it replaces")] = False,
) -> None:
    """Recompute every trajectory's reward from the ledger and a rubric version, beside the stored reward.

    Each trajectory is recomputed as it stood when it became final (or at the last scored iteration while it is
    provisional), so the campaign's own rubric reproduces the stored rewards exactly. With ``--record`` the new
    scores and rewards are appended as records that supersede the old ones (nothing is changed in place), so
    ``closedloop export`` then exports them.
    """
    from orchestrator.loop.nodes.reward import (
        recompute_rewards,
        stored_rewards,
        superseding_records,
    )
    from orchestrator.spec import validate_spec

    loaded = _load_rubric(rubric)
    ledger = ledger_with(db, campaign_id, read_only=not record)  # --record appends; without it, only reads
    events = ledger.events(campaign_id)
    spec = validate_spec(next(e for e in events if e.type == "CampaignStarted").payload["spec"],
                         source=f"{campaign_id} (from the ledger)")
    try:
        recomputed = recompute_rewards(events, spec, loaded)
    except ClosedLoopError as exc:
        fail(str(exc))
    stored = stored_rewards(events)
    rows = []
    for tid, r in recomputed.items():
        old = stored.get(tid)
        rows.append({"trajectory_id": tid, "arm": r.arm, "status": r.status, "reward": r.reward,
                     "stored_reward": old.payload["reward"] if old else None,
                     "stored_rubric": f"{old.payload['rubric_id']}@{old.payload['rubric_version']}" if old else None,
                     "components": r.components})
    n_changed = sum(row["stored_reward"] is None or abs(row["reward"] - row["stored_reward"]) > 1e-12 for row in rows)
    n_recorded = 0
    if record:
        items = superseding_records(events, recomputed, loaded)
        ledger.append_many(campaign_id, items, actor=f"recompute:rubric:{loaded.id}@{loaded.version}")
        n_recorded = len(items)
    if as_json:
        emit_json({"campaign_id": campaign_id, "rubric": {"id": loaded.id, "version": loaded.version,
                                                           "hash": loaded.content_hash},
                    "n_trajectories": len(rows), "n_changed": n_changed, "n_recorded": n_recorded,
                    "trajectories": rows})
        return
    table = Table(title=rich_safe(f"{campaign_id}: rewards under {loaded.id}@{loaded.version} ({loaded.content_hash[:12]})"))
    for column in ("trajectory", "arm", "status", "stored", "recomputed"):
        table.add_column(column, justify="right" if column in ("stored", "recomputed") else "left")
    for row in rows:
        stored_text = "–" if row["stored_reward"] is None else f"{row['stored_reward']:+.4f}"
        table.add_row(rich_safe(row["trajectory_id"]), rich_safe(row["arm"]), rich_safe(row["status"]), stored_text, f"{row['reward']:+.4f}")
    out.print(table)
    out.print(f"{len(rows)} trajectories, {n_changed} differ from the stored rewards"
              + (f"; {n_recorded} superseding records appended" if record else ""))


@rewards_app.command("redteam")
def redteam(
    rubric: RubricOption = "default",
    as_json: Annotated[bool, typer.Option("--json", help="print {policies: [{name, margin, interval, beats_honest}]}")]
    = False,
    seeds: Annotated[int, typer.Option("--seeds", min=2, help="seeds: each draws its own sample, proxy noise and lab "
                                                              "noise; margins get a 95% t interval over them")] = 5,
    lab_budget: Annotated[int, typer.Option("--lab-budget", min=1, help="lab experiments per policy campaign")] = 16,
    seed: Annotated[int, typer.Option(help="the first seed")] = 0,
    workdir: Annotated[Path | None, typer.Option("--workdir", help="keep the campaigns' ledger here")] = None,
) -> None:
    """Run adversarial planner policies against a rubric next to an honest one over several seeds; exit 1 if any
    policy's margin over honest has a 95% interval reaching 0 (it may tie or beat honest)."""
    from orchestrator.bench.redteam import run_redteam
    from rewards.redteam import INTERVAL

    _load_rubric(rubric)
    try:
        report = run_redteam(rubric, lab_experiments=lab_budget, n_seeds=seeds, seed=seed, workdir=workdir)
    except ClosedLoopError as exc:
        fail(str(exc))
    if as_json:
        emit_json(report.as_json())
    else:
        table = Table(title=f"red team against {report.rubric_id}@{report.rubric_version}, seeds "
                            f"{report.seeds[0]}..{report.seeds[-1]}, {report.lab_experiments} lab experiments each")
        for column in ("policy", "reward", "margin", "95% interval", "verdict"):
            table.add_column(column, justify="left" if column in ("policy", "verdict") else "right",
                             no_wrap=column != "verdict")
        for p in report.policies:
            verdict = "baseline" if p.name == "honest" else "[red]MAY TIE/BEAT HONEST[/]" if p.beats_honest else "below"
            table.add_row(p.name, f"{p.mean_reward:+.3f}", f"{p.margin:+.3f}",
                          f"[{p.interval[0]:+.3f}, {p.interval[1]:+.3f}]", verdict)
        out.print(table)
        out.print(f"intervals: {INTERVAL}")
        out.print(f"flagged: {', '.join(report.flagged)}" if report.flagged else "no adversarial policy ties or "
                  "beats the honest one")
    if report.flagged:
        raise typer.Exit(1)


def export_command(
    campaign_id: Annotated[str, typer.Argument(help="campaign to export")],
    db: DbOption = "closedloop.db",
    fmt: Annotated[str, typer.Option("--format", help="native, trl-grpo, trl-stepwise, verifiers or hf")] = "native",
    out_dir: Annotated[Path, typer.Option("--out", help="directory for the exported files")] = Path("export"),
    force: Annotated[bool, typer.Option("--force", help="overwrite the files of an earlier export there (regular "
                                                        "files only; links, FIFOs and devices are refused)")] = False,
) -> None:
    """Export rewarded trajectories for training: native JSONL, TRL GRPO or stepwise, verifiers, or HF datasets."""
    from orchestrator.exports import FORMATS, export_campaign

    if fmt not in FORMATS:
        fail(f"--format {fmt!r} is unknown; use one of {', '.join(sorted(FORMATS))}")
    try:
        paths = export_campaign(ledger_with(db, campaign_id), campaign_id, fmt, out_dir, force=force)
    except ClosedLoopError as exc:
        fail(str(exc))
    out.print(rich_safe(f"{campaign_id}: {fmt} export written to " + ", ".join(str(p) for p in paths)))
