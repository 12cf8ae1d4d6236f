"""The dashboard's plots: the report's figures (``report_plots``, fed by ``report``'s ledger -> data functions), drawn
into memory as PNG and cached per campaign until its ledger grows.

A plot is redrawn only when the campaign has new events (its last seq is the cache's version), so many browsers
watching one campaign cost one drawing per change. The Gantt replays the simulated lab (``report.station_gantt``),
the dearest of the four; it too runs once per change. A campaign with several objectives adds the Pareto front's two
(``report_front``: every result in objective space, the hypervolume after each).

Example:
    >>> from vocabulary.events import CampaignStarted
    >>> from orchestrator.ledger import Ledger
    >>> from orchestrator.spec import CampaignSpec
    >>> spec = CampaignSpec.model_validate({
    ...     "campaign": {"name": "demo", "kind": "molecule", "seed": 1}, "objective": {"direction": "maximize"},
    ...     "space": {"inline": ["C", "CC"]}, "lab": {"oracle": {"C": 1, "CC": 2}},
    ...     "budget": {"lab_experiments": 2}, "planner": {"main": "random", "control": None, "control_share": 0},
    ... })
    >>> ledger = Ledger.open(":memory:")
    >>> _ = ledger.append("c1", CampaignStarted(name="demo", seed=0, spec=spec.model_dump(mode="json")), key="s")
    >>> PlotCache().png(ledger, "c1", "funnel", spec=spec)[:4]
    b'\\x89PNG'
"""

from __future__ import annotations

import io
import threading
from typing import TYPE_CHECKING, Literal, get_args

from orchestrator.interfaces.dashboard.views import funnel_stages
from orchestrator.replay import report_plots
from orchestrator.replay.report import best_so_far, rewards_by_step, station_gantt

if TYPE_CHECKING:
    from orchestrator.ledger import Ledger
    from orchestrator.spec import CampaignSpec

__all__ = ["FRONT_PLOT_NAMES", "PLOT_NAMES", "PlotCache", "PlotName", "draw_plot", "plot_names"]

PlotName = Literal["funnel", "best_so_far", "gantt", "rewards", "pareto", "hypervolume"]
FRONT_PLOT_NAMES: tuple[str, ...] = ("pareto", "hypervolume")
"""The Pareto front's figures (``report_front``), drawn for a campaign with several objectives only."""
PLOT_NAMES: tuple[str, ...] = tuple(name for name in get_args(PlotName) if name not in FRONT_PLOT_NAMES)
"""The figures of every campaign."""


def plot_names(spec: CampaignSpec) -> tuple[str, ...]:
    """The figures a campaign's page shows: ``PLOT_NAMES``, then ``FRONT_PLOT_NAMES`` for several objectives."""
    return PLOT_NAMES + (FRONT_PLOT_NAMES if spec.is_multi_objective else ())


def draw_plot(ledger: Ledger, campaign_id: str, name: PlotName, spec: CampaignSpec) -> bytes:
    """One figure of a campaign as PNG bytes, drawn from its ledger now."""
    out = io.BytesIO()
    arms = [spec.planner.main] + ([spec.planner.control] if spec.planner.control and spec.planner.control_share
                                  else [])
    if name == "funnel":
        report_plots.plot_funnel(funnel_stages(ledger, campaign_id, [rung.name for rung in spec.ladder]), out)
    elif name == "best_so_far":
        objective = spec.objective
        unit = f" ({objective.unit})" if objective.unit else ""
        lines, band = {}, None
        if objective.direction == "target":
            lines = {f"target ± {objective.tolerance:g}": objective.target}
            band = (objective.target - objective.tolerance, objective.target + objective.tolerance)
        elif spec.stop.threshold is not None:
            lines = {"hit threshold": spec.stop.threshold}
        report_plots.plot_best_so_far(best_so_far(ledger, campaign_id, spec), out, arms=arms,
                                      value_label=f"best {objective.property}{unit}", reference_lines=lines, band=band)
    elif name == "gantt":
        gantt = station_gantt(ledger, campaign_id, spec)
        report_plots.plot_gantt(gantt.rows, gantt.job_arms, out, arms=arms,
                                title="lab stations" if gantt.source == "simlab" else "lab jobs")
    elif name == "rewards":
        report_plots.plot_rewards(rewards_by_step(ledger, campaign_id), out)
    elif name in FRONT_PLOT_NAMES and spec.is_multi_objective:
        from orchestrator.replay.report_front import draw_front_figures, front_data

        data = front_data(ledger, campaign_id, spec)
        if data is None:  # no result has every objective yet
            report_plots.plot_hypervolume([], out)
        else:
            draw_front_figures(data, spec, {name: out})
    else:
        raise ValueError(f"unknown plot {name!r}; one of {plot_names(spec)}")
    return out.getvalue()


class PlotCache:
    """PNG bytes per (campaign, plot), redrawn when the campaign's last seq moves past the cached one."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], tuple[int, bytes]] = {}
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._guard = threading.Lock()

    def png(self, ledger: Ledger, campaign_id: str, name: PlotName, *, spec: CampaignSpec) -> bytes:
        key = (campaign_id, name)
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:  # two browsers asking at once draw once
            version = ledger.n_events(campaign_id)
            cached = self._cache.get(key)
            if cached is not None and cached[0] == version:
                return cached[1]
            data = draw_plot(ledger, campaign_id, name, spec)
            self._cache[key] = (version, data)
            return data
