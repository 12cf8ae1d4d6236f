"""Environment throughput (issue 19): steps per second and episodes per minute of ``closedloop/Campaign-v0``.

Every step is a real campaign iteration: the policy's proposal resumes the campaign's graph (validate → screen →
approve → dispatch → observe on the simulated lab → reward → learn → decide → plan) and is recorded in the
episode's ledger with the campaign's own events, so the number describes the environment a trainer steps, not a
shortcut. The issue's goal is ≥ 20 steps/s per core with cheap rungs (the speed issue's 50 ms loop as the budget).

Campaigns (cheap rungs only; one lab experiment per step, ``batch_size = 1``; ``on_target = false`` so that every
episode runs its whole lab budget and episodes have one length):

- **freesolv**: ``campaigns/freesolv/campaign.toml`` without its xtb rung (no xtb survey): rdkit descriptors, then
  the GAFF table rung; target −12 ± 0.5 kcal/mol.
- **bandgap**: the experimental band gaps of 494 compositions (``bandgap_expt_vs_pbe``, shared data) with the
  pymatgen composition rung, then the Materials Project PBE gap as a table rung; target 1.4 ± 0.1 eV.

Policies (scripted, over the gymnasium adapter's masked ``Discrete`` action): ``random`` picks a random candidate on
offer, ``greedy`` the surrogate's best on offer (the first offered before the surrogate exists).

Modes: ``single`` steps one ``CampaignGymEnv`` in this process; ``vector`` steps ``gymnasium.vector.AsyncVectorEnv``
over ``--n-envs`` environments, each in its own process with its own in-memory ledger (same-step autoreset, so a
reset is paid inside the step that ends an episode). Each mode first runs one warm-up episode per environment
(imports, the first surrogate fit), timed apart; the measured phase then runs ``--episodes`` more per
environment. Every environment here has an in-memory ledger, so its campaigns save LangGraph's checkpoint only
when ``Campaign.run`` returns (``durability="exit"``, ``CampaignEnvironment.durability``). ``steps/s`` counts the measured phase's steps over its wall time, resets included; per core divides by
the processes stepping (``min(n_envs, cores)``). ``--profile`` adds a cProfile of one warm episode of
``--profile-campaign`` (freesolv by default).

Run from the repository root::

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.env_throughput --json out.json [--quick] [--profile]

Without ``--json`` the results go to ``benchmarks/results/env_throughput[_quick].json``.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: python benchmarks/env_throughput.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse  # noqa: E402
import cProfile  # noqa: E402
import io  # noqa: E402
import os  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks import common  # noqa: E402  (pins the thread variables before numpy loads)
from benchmarks.orchestration import git_commit, load  # noqa: E402

NAME = "env_throughput"
ROOT = common.BENCHMARKS_DIR.parent
FREESOLV_SPEC = ROOT / "campaigns" / "freesolv" / "campaign.toml"
CAMPAIGNS = ("freesolv", "bandgap")
POLICIES = ("random", "greedy")
GOAL_STEPS_PER_S_PER_CORE = 20.0
SETTINGS = {
    "quick": {"lab_budget": 12, "episodes": 2, "n_envs": 2, "n_offer": 16},
    "full": {"lab_budget": 24, "episodes": 4, "n_envs": 2, "n_offer": 16},
}


# ------------------------------------------------------------------------------------------------ campaigns
def campaign_spec(name: str, lab_budget: int):
    """The benchmark's spec for ``name``: cheap rungs only, serial screening, no survey."""
    from orchestrator.spec import load_spec, validate_spec

    if name == "freesolv":
        data = load_spec(FREESOLV_SPEC).model_dump()
        data["ladder"] = [r for r in data["ladder"] if r["simulator"] != "xtb"]
    elif name == "bandgap":
        if not common.BANDGAP_CSV.is_file():
            raise SystemExit(f"{common.BANDGAP_CSV} is missing; set CLOSEDLOOP_SHARED_DATA to the shared data folder")
        data = {
            "campaign": {"name": "bandgap-target", "kind": "material", "seed": 0},
            "objective": {"property": "band_gap", "unit": "eV", "direction": "target", "target": 1.4,
                          "tolerance": 0.1},
            "space": {"pool": str(common.BANDGAP_CSV), "column": "composition", "on_bad_rows": "skip",
                      "replicates": "average"},
            "ladder": [{"name": "composition", "simulator": "composition"},
                       {"name": "pbe", "simulator": "table", "column": "pbe_gap_eV_MP", "property": "pbe_gap",
                        "proxy": "pbe_gap", "cost_s": 3600.0}],
            "lab": {"driver": "simlab", "oracle_column": "expt_gap_eV_median", "noise_sd": 0.05},
            "budget": {"lab_experiments": lab_budget},
            "planner": {"main": "bo", "control": None, "control_share": 0.0},
        }
    else:
        raise SystemExit(f"campaign {name!r} is unknown; use one of {CAMPAIGNS}")
    data["budget"].update(lab_experiments=lab_budget, compute_seconds=None)
    data["screening"] = {**data.get("screening", {}), "survey_share": 0.0, "executor": "serial"}
    data["stop"] = {**data.get("stop", {}), "on_target": False}
    return validate_spec(data, source=f"env_throughput:{name}")


def make_env(name: str, lab_budget: int, n_offer: int):
    """A ``CampaignGymEnv`` over ``name``'s spec with its own in-memory ledger (picklable factory for workers)."""
    from orchestrator.environment.gym_env import CampaignGymEnv

    return CampaignGymEnv(campaign_spec(name, lab_budget), n_offer=n_offer, on_target=False)


class _Factory:
    """``make_env`` with its arguments, as AsyncVectorEnv's workers need a picklable callable."""

    def __init__(self, name: str, lab_budget: int, n_offer: int):
        self.args = (name, lab_budget, n_offer)

    def __call__(self):
        return make_env(*self.args)


# ------------------------------------------------------------------------------------------------ policies
def choose(policy: str, obs: dict[str, np.ndarray], rng: np.random.Generator, direction: str) -> int:
    """The offer slot a scripted policy sends to the lab, for one environment's observation."""
    on_offer = np.flatnonzero(obs["mask"] > 0)
    if policy == "random" or not obs["has_surrogate"][0]:
        return int(rng.choice(on_offer)) if policy == "random" else int(on_offer[0])
    mean = obs["mean"][on_offer]
    # the offer shows a target objective's mean as the distance to the target: smaller is better
    best = np.argmax(mean) if direction == "maximize" else np.argmin(mean)
    return int(on_offer[best])


# ------------------------------------------------------------------------------------------------ measuring
def run_single(name: str, policy: str, settings: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """One environment in this process: a warm-up episode, then ``episodes`` measured ones."""
    from vocabulary.events import EnvironmentStep

    env = make_env(name, settings["lab_budget"], settings["n_offer"])
    direction = env.core.base_spec.objective.direction
    rng = np.random.default_rng(seed)
    step_s: list[float] = []
    reset_s: list[float] = []
    campaign_ids: list[str] = []

    def episode(k: int) -> int:
        start = time.perf_counter()
        obs, _ = env.reset(seed=seed + k)
        reset_s.append(time.perf_counter() - start)
        campaign_ids.append(env.core.state.campaign_id)
        n = 0
        while True:
            start = time.perf_counter()
            obs, _, terminated, truncated, _ = env.step(choose(policy, obs, rng, direction))
            step_s.append(time.perf_counter() - start)
            n += 1
            if terminated or truncated:
                return n

    try:
        with common.Stopwatch.run() as warm:
            n_warm = episode(0)
        step_s.clear(), reset_s.clear()
        with common.Stopwatch.run() as watch:
            n_steps = sum(episode(k) for k in range(1, settings["episodes"] + 1))
        ledger = env.core.ledger
        measured = campaign_ids[1:]
        n_recorded = sum(len(ledger.events(cid, types=[EnvironmentStep.type])) for cid in measured)
        n_events = sum(ledger.n_events(cid) for cid in measured)
    finally:
        env.close()
    if n_recorded != n_steps:  # the point of the benchmark: every step went through the ledger
        raise SystemExit(f"{name}/{policy}: {n_steps} steps but {n_recorded} EnvironmentStep events in the ledger")
    return _summary("single", name, policy, 1, warm, n_warm, watch, n_steps, settings["episodes"],
                    step_ms=[1000 * s for s in step_s], reset_ms=[1000 * s for s in reset_s],
                    events_per_step=n_events / n_steps)


def run_vector(name: str, policy: str, settings: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """``AsyncVectorEnv`` over ``n_envs`` processes: every environment runs a warm-up episode, then ``episodes``
    more each, measured."""
    import gymnasium

    n_envs = settings["n_envs"]
    factory = _Factory(name, settings["lab_budget"], settings["n_offer"])
    envs = gymnasium.vector.AsyncVectorEnv([factory] * n_envs, autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP)
    direction = campaign_spec(name, settings["lab_budget"]).objective.direction
    rngs = [np.random.default_rng(seed + 1000 * i) for i in range(n_envs)]

    def actions(obs: dict[str, np.ndarray]) -> np.ndarray:
        return np.asarray([choose(policy, {k: v[i] for k, v in obs.items()}, rngs[i], direction)
                           for i in range(n_envs)])

    def until(obs, episodes_each: int):
        done = np.zeros(n_envs, dtype=int)
        n = 0
        while (done < episodes_each).any():
            obs, _, terminated, truncated, _ = envs.step(actions(obs))
            n += int(n_envs)  # every environment stepped (same-step autoreset: no step is a bare reset)
            done += terminated | truncated
        return obs, n

    try:
        with common.Stopwatch.run() as warm:
            obs, _ = envs.reset(seed=[seed + i for i in range(n_envs)])
            obs, n_warm = until(obs, 1)
        with common.Stopwatch.run() as watch:
            _, n_steps = until(obs, settings["episodes"])
    finally:
        envs.close()
    return _summary("vector", name, policy, n_envs, warm, n_warm, watch, n_steps, settings["episodes"] * n_envs)


def _summary(mode: str, name: str, policy: str, n_envs: int, warm, n_warm: int, watch, n_steps: int,
             n_episodes: int, **extra: Any) -> dict[str, Any]:
    n_cores = min(n_envs, os.cpu_count() or 1)
    steps_per_s = n_steps / watch.wall_s
    out = {"mode": mode, "campaign": name, "policy": policy, "n_envs": n_envs, "n_cores": n_cores,
           "warmup": {"wall_s": warm.wall_s, "n_steps": n_warm},
           "n_steps": n_steps, "n_episodes": n_episodes, "wall_s": watch.wall_s, "cpu_s_this_process": watch.cpu_s,
           "load_before": watch.load_before, "load_after": watch.load_after,
           "steps_per_s": steps_per_s, "steps_per_s_per_core": steps_per_s / n_cores,
           "episodes_per_min": n_episodes / (watch.wall_s / 60.0),
           "is_goal_met": steps_per_s / n_cores >= GOAL_STEPS_PER_S_PER_CORE}
    for key in ("step_ms", "reset_ms"):
        values = extra.pop(key, None)
        if values:
            out[key] = {"median": statistics.median(values), "p90": float(np.quantile(values, 0.9)),
                        "max": max(values), "n": len(values)}
    out.update(extra)
    return out


def profile_episode(name: str, settings: dict[str, Any], top: int = 10) -> dict[str, Any]:
    """cProfile of one warm episode (a warm-up episode runs first): the top entries by cumulative and own time."""
    env = make_env(name, settings["lab_budget"], settings["n_offer"])
    direction = env.core.base_spec.objective.direction
    rng = np.random.default_rng(0)

    def episode(seed: int) -> int:
        obs, _ = env.reset(seed=seed)
        n = 0
        while True:
            obs, _, terminated, truncated, _ = env.step(choose("greedy", obs, rng, direction))
            n += 1
            if terminated or truncated:
                return n

    try:
        episode(0)
        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.enable()
        n_steps = episode(1)
        profiler.disable()
        wall_s = time.perf_counter() - start
    finally:
        env.close()
    stats = pstats.Stats(profiler, stream=io.StringIO())

    def rows(key: str) -> list[dict[str, Any]]:
        stats.sort_stats(key)
        out = []
        for func in stats.fcn_list[:top]:
            cc, nc, tt, ct, _ = stats.stats[func]
            filename, line, function = func
            where = filename.replace(str(ROOT) + "/", "").split("site-packages/")[-1]
            out.append({"function": f"{where}:{line}({function})", "n_calls": nc, "own_s": tt, "cumulative_s": ct})
        return out

    return {"campaign": name, "policy": "greedy", "n_steps": n_steps, "wall_s_profiled": wall_s,
            "by_cumulative": rows("cumulative"), "by_own_time": rows("tottime"),
            "by_part": parts(stats, n_steps)}


_PARTS = {
    # (file suffix, function): what it is in a step
    ("environment/core.py", "step"): "environment step (all of it)",
    ("loop/campaign.py", "run"): "Campaign.run (the graph)",
    ("langgraph/pregel/main.py", "stream"): "the graph's stream (nodes + checkpoints)",
    ("loop/summary.py", "summarise"): "Campaign.run's summary",
    ("loop/campaign.py", "status"): "Campaign.run's status (the environment's light return)",
    ("loop/campaign.py", "start"): "Campaign.start (resets)",
    ("environment/core.py", "_observe"): "environment: observation",
    ("environment/core.py", "_make_offer"): "environment: offer (GP mean and sd)",
    ("environment/core.py", "_record"): "environment: EnvironmentStep append",
    ("environment/core.py", "_episode_potential"): "environment: potential",
    ("ledger/store.py", "append_many"): "ledger appends",
    ("ledger/store.py", "_read"): "ledger reads",
    ("policy/planners/surrogate.py", "fit"): "GP fits",
    ("policy/planners/surrogate.py", "from_hyperparameters"): "GP rebuilds from hyperparameters",
    ("langgraph/pregel/_loop.py", "_put_checkpoint"): "LangGraph checkpoints (made each step; saved per durability)",
}


def parts(stats: pstats.Stats, n_steps: int) -> list[dict[str, Any]]:
    """Milliseconds per step (cumulative, so parts overlap) of each loop node and of the parts in ``_PARTS``."""
    out = []
    for (filename, _, function), (_, n_calls, _, cumulative, _) in stats.stats.items():
        path = filename.replace("\\", "/")
        if "/orchestrator/loop/nodes/" in path and function == Path(path).stem:
            label = f"node {function}"
        else:
            label = next((what for (suffix, fn), what in _PARTS.items() if fn == function and path.endswith(suffix)),
                         None)
        if label is not None:
            out.append({"part": label, "n_calls": n_calls, "ms_per_step": 1000.0 * cumulative / n_steps})
    return sorted(out, key=lambda row: -row["ms_per_step"])


# ------------------------------------------------------------------------------------------------ output
def print_results(rows: list[dict[str, Any]], header: str) -> None:
    common.print_table(
        f"environment throughput: {header}",
        ["campaign", "policy", "mode", "envs", "steps", "episodes", "wall s", "steps/s", "steps/s per core",
         "episodes/min", "step ms (median)", "goal ≥ 20/s/core"],
        [(r["campaign"], r["policy"], r["mode"], r["n_envs"], r["n_steps"], r["n_episodes"], r["wall_s"],
          r["steps_per_s"], r["steps_per_s_per_core"], r["episodes_per_min"],
          r["step_ms"]["median"] if "step_ms" in r else None, "met" if r["is_goal_met"] else "not met")
         for r in rows])


def markdown(rows: list[dict[str, Any]], header: str, command: str) -> str:
    lines = [f"`{command}`; {header}.", "",
             "| campaign | policy | mode | envs | steps | episodes | steps/s | steps/s per core | episodes/min | "
             "step ms (median, single) | goal ≥ 20 steps/s/core |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        step = f"{r['step_ms']['median']:.0f}" if "step_ms" in r else "—"
        lines.append(f"| {r['campaign']} | {r['policy']} | {r['mode']} | {r['n_envs']} | {r['n_steps']} | "
                     f"{r['n_episodes']} | {r['steps_per_s']:.1f} | {r['steps_per_s_per_core']:.1f} | "
                     f"{r['episodes_per_min']:.1f} | {step} | {'met' if r['is_goal_met'] else 'not met'} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=None,
                        help="results file (default benchmarks/results/env_throughput[_quick].json)")
    parser.add_argument("--quick", action="store_true", help="12-experiment episodes, 2 measured per environment")
    parser.add_argument("--campaigns", nargs="*", default=list(CAMPAIGNS), choices=CAMPAIGNS)
    parser.add_argument("--policies", nargs="*", default=list(POLICIES), choices=POLICIES)
    parser.add_argument("--modes", nargs="*", default=["single", "vector"], choices=["single", "vector"])
    parser.add_argument("--n-envs", type=int, default=None, help="environments (processes) in vector mode")
    parser.add_argument("--episodes", type=int, default=None, help="measured episodes per environment")
    parser.add_argument("--lab-budget", type=int, default=None, help="lab experiments (= steps) per episode")
    parser.add_argument("--profile", action="store_true", help="also profile one warm episode")
    parser.add_argument("--profile-campaign", default="freesolv", choices=CAMPAIGNS,
                        help="the campaign --profile profiles (default freesolv)")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table as Markdown")
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    settings = dict(SETTINGS[mode])
    for key in ("n_envs", "episodes", "lab_budget"):
        if getattr(args, key) is not None:
            settings[key] = getattr(args, key)
    provenance = git_commit()
    load_start = load()
    started = time.perf_counter()
    rows = []
    for name in args.campaigns:
        for policy in args.policies:
            for run in args.modes:
                common.console.print(f"[bold]{name} {policy} {run}[/bold] (load {load()}) …")
                rows.append((run_single if run == "single" else run_vector)(name, policy, settings))
    profile = profile_episode(args.profile_campaign, settings) if args.profile else None
    run_s = time.perf_counter() - started
    load_end = load()
    dirty = " (with uncommitted changes)" if provenance["is_dirty"] else ""
    header = (f"commit {provenance['commit']}{dirty}, {datetime.now(UTC):%Y-%m-%d}, {mode} run of {run_s / 60:.1f} min, "
              f"load {load_start[0]:.1f} → {load_end[0]:.1f} on {os.cpu_count()} shared cores")
    print_results(rows, header)
    if profile:
        common.print_table(f"cProfile of one warm {profile['campaign']} episode ({profile['n_steps']} steps, "
                           f"{profile['wall_s_profiled']:.2f} s under the profiler), by cumulative time",
                           ["function", "calls", "own s", "cumulative s"],
                           [(p["function"], p["n_calls"], p["own_s"], p["cumulative_s"])
                            for p in profile["by_cumulative"]])
        common.print_table("Where a step goes (cumulative ms per step under the profiler; parts overlap)",
                           ["part", "calls", "ms per step"],
                           [(p["part"], p["n_calls"], p["ms_per_step"]) for p in profile["by_part"]])
    command = " ".join(["python -m benchmarks.env_throughput", *(argv if argv is not None else sys.argv[1:])])
    path = args.json or common.RESULTS_DIR / f"{NAME}{'_quick' if args.quick else ''}.json"
    common.write_results(NAME, {"mode": mode, "settings": settings, **provenance, "run_s": run_s,
                                "load_average_start": load_start, "load_average_end": load_end,
                                "goal_steps_per_s_per_core": GOAL_STEPS_PER_S_PER_CORE, "rows": rows,
                                "profile": profile}, path=path)
    if args.markdown is not None:
        args.markdown.write_text(markdown(rows, header, command))
        common.console.print(f"[dim]wrote {args.markdown}[/dim]")


if __name__ == "__main__":
    main()
