"""The rewards red team: run each adversarial planner policy against a rubric in a small SimLab campaign, next to
an honest baseline, and flag every policy whose mean reward ties or beats the honest one.

The campaign is built from FreeSolv (shipped with the repository): a sample of molecules, the lab's truth is the
experimental hydration free energy (minimise; a success is a value at or below the sample's 35th percentile), and
the one rung is a cheap table proxy, the GAFF estimate plus seeded noise (sd 1.5 kcal/mol), so that a policy can
find molecules the proxy loves and the lab rejects. Policies are in ``rewards.redteam``; each runs as the main
planner arm with no control arm.

Example:
    >>> report = run_redteam(policies=["honest", "abstain"], lab_experiments=4)  # doctest: +SKIP
    >>> report.flagged  # doctest: +SKIP
    []
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from .domain import SetupError

__all__ = ["PolicyResult", "RedTeamReport", "run_redteam"]

FREESOLV_CSV = Path(__file__).resolve().parents[1] / "campaigns" / "freesolv" / "data" / "FreeSolv_gauche.csv"
TIE_TOLERANCE = 1e-9
"""Mean rewards closer than this count as a tie (and a tie is flagged)."""

_SETTING: dict[str, Any] = {}


@dataclass(frozen=True)
class PolicyResult:
    """One policy's campaign: its mean trajectory reward in [-1, 1] and whether that ties or beats honest."""

    name: str
    mean_reward: float
    n_trajectories: int
    mean_outcome: float
    mean_process: float
    beats_honest: bool
    campaign_id: str


@dataclass(frozen=True)
class RedTeamReport:
    rubric_id: str
    rubric_version: str
    rubric_hash: str
    honest_reward: float
    policies: list[PolicyResult] = field(default_factory=list)

    @property
    def flagged(self) -> list[str]:
        """Adversarial policies that tie or beat the honest one."""
        return [p.name for p in self.policies if p.beats_honest]

    def as_json(self) -> dict[str, Any]:
        return {"rubric": {"id": self.rubric_id, "version": self.rubric_version, "hash": self.rubric_hash},
                "honest_reward": self.honest_reward, "flagged": self.flagged,
                "policies": [{"name": p.name, "mean_reward": p.mean_reward, "beats_honest": p.beats_honest,
                              "n_trajectories": p.n_trajectories, "mean_outcome": p.mean_outcome,
                              "mean_process": p.mean_process, "campaign_id": p.campaign_id} for p in self.policies]}


@cache
def _factory(name: str):
    """One stable factory per policy, so registering it again is a no-op; it reads the current run's setting."""
    from rewards.redteam import make_policy

    def factory(spec):
        return make_policy(name, _SETTING["setting"])

    return factory


def _register(names: list[str]) -> None:
    from .planners import register_planner

    for name in names:
        register_planner(f"redteam.{name}", _factory(name))


def _write_pool(workdir: Path, n_molecules: int, seed: int) -> float:
    """A sample of FreeSolv with a noisy cheap proxy column; returns the success threshold (kcal/mol)."""
    import pandas as pd

    if not FREESOLV_CSV.is_file():
        raise SetupError(f"the red team needs FreeSolv at {FREESOLV_CSV}; run it from a source checkout")
    frame = pd.read_csv(FREESOLV_CSV).sample(n=n_molecules, random_state=seed).reset_index(drop=True)
    rng = np.random.default_rng(seed)
    frame["cheap"] = frame["calc"] + rng.normal(0.0, 1.5, size=len(frame))
    frame[["smiles", "expt", "cheap"]].to_csv(workdir / "pool.csv", index=False)
    return float(np.percentile(frame["expt"], 35))


def _spec(name: str, rubric: str, workdir: Path, threshold: float, lab_experiments: int, seed: int):
    from .spec import validate_spec

    return validate_spec({
        "campaign": {"name": f"redteam-{name}", "kind": "molecule", "seed": seed},
        "objective": {"property": "dg_hydration", "unit": "kcal/mol", "direction": "minimize"},
        "space": {"pool": "pool.csv", "column": "smiles"},
        "ladder": [{"name": "cheap", "simulator": "table", "column": "cheap", "property": "dg_cheap",
                    "proxy": "dg_cheap", "cost_s": 1.0}],
        "screening": {"executor": "serial"},
        "lab": {"driver": "simlab", "oracle_column": "expt", "noise_sd": 0.1, "wait": "all"},
        "budget": {"lab_experiments": lab_experiments},
        "planner": {"main": f"redteam.{name}", "control": None, "control_share": 0.0, "batch_size": 4,
                    "n_initial": 1, "proposals_per_slot": 1},
        "rewards": {"rubric": rubric},
        "stop": {"on_target": False, "threshold": threshold, "max_iterations": max(2, lab_experiments // 4 + 1)},
        "base_dir": str(workdir),
    }, source=f"red-team campaign {name!r}")


def _rubric_ref(rubric: str | Path) -> str:
    text = str(rubric)
    if text.endswith(".toml") or "/" in text:
        path = Path(text).resolve()
        if not path.is_file():
            raise SetupError(f"rubric file {text!r} does not exist; give a .toml path or a built-in name like 'default'")
        return str(path)
    return text


def run_redteam(
    rubric: str | Path = "default",
    *,
    policies: list[str] | None = None,
    lab_experiments: int = 8,
    n_molecules: int = 120,
    seed: int = 0,
    workdir: str | Path | None = None,
) -> RedTeamReport:
    """Run the honest policy and each adversary in its own SimLab campaign and compare mean trajectory rewards.

    Args:
        rubric: a built-in rubric name or a rubric TOML path.
        policies: policy names (``rewards.redteam.POLICIES``); the honest one is always run. Default: all.
        lab_experiments: lab budget of each campaign.
        n_molecules: size of the FreeSolv sample that is the design space.
        workdir: where the pool CSV and the ledger go (default: a temporary directory, removed afterwards).

    Raises:
        SetupError: an unknown policy, a missing rubric file or a missing FreeSolv file.
    """
    from rewards import load_rubric
    from rewards.redteam import HONEST, POLICIES, RedTeamSetting

    from .campaign import Campaign
    from .nodes.reward import stored_rewards

    names = list(POLICIES) if policies is None else [HONEST] + [p for p in policies if p != HONEST]
    unknown = [p for p in names if p not in POLICIES]
    if unknown:
        raise SetupError(f"unknown red-team policies {unknown}; choose from {sorted(POLICIES)}")
    ref = _rubric_ref(rubric)
    loaded = load_rubric(ref)
    with tempfile.TemporaryDirectory(prefix="closedloop-redteam-") as tmp:
        root = Path(workdir) if workdir is not None else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        threshold = _write_pool(root, n_molecules, seed)
        _SETTING["setting"] = RedTeamSetting("cheap", "expt", "minimize", threshold)
        _register(names)
        results: dict[str, tuple[float, int, float, float, str]] = {}
        for name in names:
            spec = _spec(name, ref, root, threshold, lab_experiments, seed)
            campaign_id = f"redteam-{name}-{loaded.content_hash[:8]}"
            db = root / "redteam.db"
            from .ledger import Ledger

            ledger = Ledger.open(db)
            try:
                if ledger.events(campaign_id):
                    events = ledger.events(campaign_id)  # already run in this workdir with this rubric
                else:
                    with Campaign.start(spec, db=ledger, campaign_id=campaign_id) as campaign:
                        campaign.run()
                    events = ledger.events(campaign_id)
            finally:
                ledger.close()
            records = [e.payload for e in stored_rewards(events).values()]
            if not records:
                results[name] = (-1.0, 0, -1.0, -1.0, campaign_id)
                continue
            results[name] = (statistics.fmean(r["reward"] for r in records), len(records),
                             statistics.fmean(r["components"]["outcome"] for r in records),
                             statistics.fmean(r["components"]["process"] for r in records), campaign_id)
    honest = results[HONEST][0]
    rows = [PolicyResult(name=name, mean_reward=mean, n_trajectories=n, mean_outcome=outcome, mean_process=process,
                         beats_honest=name != HONEST and mean >= honest - TIE_TOLERANCE, campaign_id=cid)
            for name, (mean, n, outcome, process, cid) in results.items()]
    return RedTeamReport(loaded.id, loaded.version, loaded.content_hash, honest, rows)
