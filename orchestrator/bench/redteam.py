"""The rewards red team: run each adversarial planner policy against a rubric in small SimLab campaigns over
several seeds, next to an honest baseline, and flag every policy whose reward margin over honest may be ≥ 0.

The campaigns are built from FreeSolv (shipped with the repository): a sample of molecules, the lab's truth is the
experimental hydration free energy (minimise; a success is a value at or below the sample's 35th percentile), and
the one rung is a cheap table proxy, the GAFF estimate plus seeded noise (sd 1.5 kcal/mol), so that a policy can
find molecules the proxy loves and the lab rejects. Policies, margins and verdicts are in ``rewards.redteam``;
this module only plays the campaigns. Each policy runs as the main planner arm with no control arm.

Each seed draws its own sample, proxy noise and lab noise, and every policy plays that seed's campaign. A policy's
margin on a seed is its mean trajectory reward minus honest's on the same seed (a paired difference); its
``margin`` is the mean over seeds and ``interval`` the 95% Student t interval of that mean (``mean ± t₀.₉₇₅,ₙ₋₁ ·
sd/√n``). A policy ``beats_honest`` when the interval's upper end is ≥ 0: the red team cannot rule out that it
ties or beats the honest baseline.

``check_environment`` is the same test one floor up, in the spirit of OpenEnv's auto-validation: code policies play
episodes of ``orchestrator.environment.CampaignEnvironment`` over the red-team campaign, and a random policy and
each adversary must return strictly less than the honest one, and a do-nothing policy exactly ``EPISODE_FLOOR``.

Example:
    >>> report = run_redteam(policies=["honest", "abstain"], lab_experiments=4, n_seeds=2)  # doctest: +SKIP
    >>> report.flagged  # doctest: +SKIP
    []
"""

from __future__ import annotations

import statistics
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from rewards.redteam import (
    DEFAULT_LAB_EXPERIMENTS,
    DEFAULT_SEEDS,
    ENV_POLICIES,
    EnvironmentCheck,
    PolicyResult,
    RedTeamReport,
    margin_interval,
)
from vocabulary.domain import SetupError

__all__ = ["check_environment", "run_redteam"]

FREESOLV_CSV = Path(__file__).resolve().parents[2] / "campaigns" / "freesolv" / "data" / "FreeSolv_gauche.csv"
_SETTING: dict[str, Any] = {}


@cache
def _factory(name: str):
    """One stable factory per policy, so registering it again is a no-op; it reads the current run's setting."""
    from rewards.redteam import make_policy

    def factory(spec):
        return make_policy(name, _SETTING["setting"])

    return factory


def _register(names: list[str]) -> None:
    from orchestrator.policy.planners import register_planner

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
    workdir.mkdir(parents=True, exist_ok=True)
    frame[["smiles", "expt", "cheap"]].to_csv(workdir / "pool.csv", index=False)
    return float(np.percentile(frame["expt"], 35))


def _spec(name: str, rubric: str, workdir: Path, threshold: float, lab_experiments: int, seed: int,
          max_iterations: int | None = None, main: str | None = None):
    from orchestrator.spec import validate_spec

    return validate_spec({
        "campaign": {"name": f"redteam-{name}", "kind": "molecule", "seed": seed},
        "objective": {"property": "dg_hydration", "unit": "kcal/mol", "direction": "minimize"},
        "space": {"pool": "pool.csv", "column": "smiles"},
        "ladder": [{"name": "cheap", "simulator": "table", "column": "cheap", "property": "dg_cheap",
                    "proxy": "dg_cheap", "cost_s": 1.0}],
        "screening": {"executor": "serial"},
        "lab": {"driver": "simlab", "oracle_column": "expt", "noise_sd": 0.1, "wait": "all"},
        "budget": {"lab_experiments": lab_experiments},
        "planner": {"main": main or f"redteam.{name}", "control": None, "control_share": 0.0, "batch_size": 4,
                    "n_initial": 1, "proposals_per_slot": 1},
        "rewards": {"rubric": rubric},
        "stop": {"on_target": False, "threshold": threshold, "max_iterations": max_iterations or max(2, lab_experiments // 4 + 1)},
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


def _play(name: str, spec, campaign_id: str, db: Path) -> tuple[float, int, float, float]:
    """One policy's campaign (reused when the workdir already holds it): (mean reward, n, outcome, process)."""
    from orchestrator.ledger import Ledger
    from orchestrator.loop.campaign import Campaign
    from orchestrator.loop.nodes.reward import stored_rewards

    ledger = Ledger.open(db)
    try:
        if not ledger.events(campaign_id):
            with Campaign.start(spec, db=ledger, campaign_id=campaign_id) as campaign:
                campaign.run()
        events = ledger.events(campaign_id)
    finally:
        ledger.close()
    records = [e.payload for e in stored_rewards(events).values()]
    if not records:
        return -1.0, 0, -1.0, -1.0
    return (statistics.fmean(r["reward"] for r in records), len(records),
            statistics.fmean(r["components"]["outcome"] for r in records),
            statistics.fmean(r["components"]["process"] for r in records))


def run_redteam(
    rubric: str | Path = "default",
    *,
    policies: list[str] | None = None,
    lab_experiments: int = DEFAULT_LAB_EXPERIMENTS,
    n_molecules: int = 120,
    n_seeds: int = DEFAULT_SEEDS,
    seed: int = 0,
    workdir: str | Path | None = None,
) -> RedTeamReport:
    """Run the honest policy and each adversary on ``n_seeds`` seeded SimLab campaigns and compare their rewards.

    Args:
        rubric: a built-in rubric name or a rubric TOML path.
        policies: policy names (``rewards.redteam.POLICIES``); the honest one is always run. Default: all.
        lab_experiments: lab budget of each campaign.
        n_molecules: size of the FreeSolv sample that is the design space.
        n_seeds: seeds ``seed, seed + 1, …``; each draws its own sample, proxy noise and lab noise (at least 2).
        workdir: where the pool CSVs and the ledger go (default: a temporary directory, removed afterwards).

    Raises:
        SetupError: an unknown policy, fewer than 2 seeds, a missing rubric file or a missing FreeSolv file.
    """
    from rewards import load_rubric
    from rewards.redteam import HONEST, POLICIES, RedTeamSetting

    names = list(POLICIES) if policies is None else [HONEST] + [p for p in policies if p != HONEST]
    unknown = [p for p in names if p not in POLICIES]
    if unknown:
        raise SetupError(f"unknown red-team policies {unknown}; choose from {sorted(POLICIES)}")
    if n_seeds < 2:
        raise SetupError(f"{n_seeds=}: a margin's interval needs at least 2 seeds; pass --seeds 2 or more")
    ref = _rubric_ref(rubric)
    loaded = load_rubric(ref)
    seeds = tuple(range(seed, seed + n_seeds))
    runs: dict[str, list[tuple[float, int, float, float, str]]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="closedloop-redteam-") as tmp:
        root = Path(workdir) if workdir is not None else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        for s in seeds:
            seed_dir = root / f"seed{s}"
            threshold = _write_pool(seed_dir, n_molecules, s)
            _SETTING["setting"] = RedTeamSetting("cheap", "expt", "minimize", threshold)
            _register(names)
            for name in names:
                campaign_id = f"redteam-{name}-s{s}-n{lab_experiments}-{loaded.content_hash[:8]}"
                spec = _spec(name, ref, seed_dir, threshold, lab_experiments, s)
                runs[name].append((*_play(name, spec, campaign_id, root / "redteam.db"), campaign_id))
    honest = [run[0] for run in runs[HONEST]]
    rows = []
    for name, seed_runs in runs.items():
        rewards = [run[0] for run in seed_runs]
        margins = [r - h for r, h in zip(rewards, honest, strict=True)]
        low, high = margin_interval(margins)
        rows.append(PolicyResult(
            name=name, mean_reward=statistics.fmean(rewards), margin=statistics.fmean(margins),
            interval=(low, high), beats_honest=name != HONEST and high >= 0.0,
            n_trajectories=sum(run[1] for run in seed_runs),
            mean_outcome=statistics.fmean(run[2] for run in seed_runs),
            mean_process=statistics.fmean(run[3] for run in seed_runs),
            seed_rewards=tuple(rewards), campaign_ids=tuple(run[4] for run in seed_runs)))
    return RedTeamReport(loaded.id, loaded.version, loaded.content_hash, statistics.fmean(honest), seeds,
                         lab_experiments, rows)


def check_environment(*, n_seeds: int = DEFAULT_SEEDS, lab_experiments: int = 8, n_molecules: int = 120,
                      n_offer: int = 16, seed: int = 0, workdir: str | Path | None = None) -> EnvironmentCheck:
    """Play every ``ENV_POLICIES`` policy for one episode per seed of the red-team campaign as an environment."""
    from orchestrator.environment import EPISODE_FLOOR, CampaignEnvironment
    from orchestrator.space.pool import load_pool

    returns: dict[str, list[float]] = {name: [] for name in ENV_POLICIES}
    with tempfile.TemporaryDirectory(prefix="closedloop-envcheck-") as tmp:
        root = Path(workdir) if workdir is not None else Path(tmp)
        for s in range(seed, seed + n_seeds):
            seed_dir = root / f"seed{s}"
            threshold = _write_pool(seed_dir, n_molecules, s)
            # one experiment per step, so the episode may take as many iterations as experiments
            spec = _spec("environment", "environment", seed_dir, threshold, lab_experiments, s,
                         max_iterations=lab_experiments + 1, main="random")  # the environment seats its policy
            env = CampaignEnvironment(spec, n_offer=n_offer, max_steps=3 * lab_experiments)
            try:
                pool = load_pool(spec)
                cheap, truth = pool.column("cheap"), pool.column("expt")
                for name, policy in ENV_POLICIES.items():
                    rng = np.random.default_rng(s)
                    obs = env.reset(seed=s, batch_size=1, on_target=False)
                    total = 0.0
                    while True:
                        result = env.step(policy(obs, cheap, truth, threshold, rng))
                        total += result.reward
                        obs = result.observation
                        if result.terminated or result.truncated:
                            break
                    returns[name].append(total)
            finally:
                env.close()
    return EnvironmentCheck({k: tuple(v) for k, v in returns.items()}, EPISODE_FLOOR)
