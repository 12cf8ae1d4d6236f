"""The report's plots: each function takes plain data, draws one PNG with matplotlib's Agg canvas and returns its path
(or writes it into a binary file object, as the dashboard does, and returns that).

No pyplot: figures are built on ``matplotlib.figure.Figure`` with an explicit Agg canvas, so drawing a report never
changes the backend of a notebook or another caller, and works without a display. Times are in hours.

Example:
    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "funnel.png"
    >>> plot_funnel([("proposed", {"bo": 4, "random": 1}), ("lab", {"bo": 2, "random": 1})], out).read_bytes()[:4]
    b'\\x89PNG'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from vocabulary.domain import import_optional

__all__ = ["PlotTarget", "arm_colours", "plot_best_so_far", "plot_funnel", "plot_gantt", "plot_hypervolume",
           "plot_pareto", "plot_rewards"]

_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_DPI = 110

PlotTarget = str | Path | IO[bytes]
"""Where a plot goes: a file path, or a binary file object (``io.BytesIO``) for a caller that serves the bytes."""

BestCurve = Sequence[tuple[int, float, float | None]]
"""(n-th lab experiment of the arm, lab time in hours, best objective value so far or None before any success)."""


def arm_colours(arms: Sequence[str]) -> dict[str, str]:
    """A stable colour per arm, in the order given (main arm first)."""
    return {arm: _PALETTE[index % len(_PALETTE)] for index, arm in enumerate(arms)}


def _figure(width: float, height: float, n_columns: int = 1, n_rows: int = 1):
    """A figure on an Agg canvas, with its axes (row by row)."""
    FigureCanvasAgg = import_optional("matplotlib.backends.backend_agg", "plots", "reports").FigureCanvasAgg
    Figure = import_optional("matplotlib.figure", "plots", "reports").Figure
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(n_rows, n_columns, squeeze=False)
    return figure, list(axes.ravel())


def _save(figure, path: PlotTarget):
    target = path if hasattr(path, "write") else Path(path)
    figure.savefig(target, dpi=_DPI, format="png")
    return target


def _no_data(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def plot_best_so_far(
    curves: Mapping[str, BestCurve],
    path: PlotTarget,
    *,
    arms: Sequence[str],
    value_label: str,
    reference_lines: Mapping[str, float] | None = None,
    band: tuple[float, float] | None = None,
) -> Path | IO[bytes]:
    """Best value so far per arm, against the arm's lab experiments (left) and against lab time (right).

    Args:
        curves: arm -> points, see ``BestCurve``.
        arms: the arms in legend order, main arm first; an arm with no points is left out.
        value_label: y-axis label, e.g. ``"best yield (%)"``.
        reference_lines: horizontal lines to draw, label -> value (a target, a hit threshold).
        band: (low, high) of a shaded range, e.g. the target's tolerance window.
    """
    figure, (by_count, by_time) = _figure(10.0, 4.0, n_columns=2)
    colours = arm_colours(arms)
    drawn = False
    for arm in arms:
        points = [p for p in curves.get(arm, ()) if p[2] is not None]
        if not points:
            continue
        drawn = True
        label = f"{arm} (main)" if arm == arms[0] else f"{arm} (control)" if len(arms) > 1 else arm
        counts, hours, best = zip(*points, strict=True)
        by_count.step(counts, best, where="post", marker="o", ms=4, color=colours[arm], label=label)
        by_time.step(hours, best, where="post", marker="o", ms=4, color=colours[arm], label=label)
    if not drawn:
        for ax in (by_count, by_time):
            _no_data(ax, "no successful lab result yet")
        return _save(figure, path)
    if band is not None:
        for ax in (by_count, by_time):
            ax.axhspan(band[0], band[1], color="0.85", alpha=0.6, lw=0)
    for label, value in (reference_lines or {}).items():
        for ax in (by_count, by_time):
            ax.axhline(value, ls="--", lw=1, color="0.5")
        by_time.annotate(label, (1.0, value), xycoords=("axes fraction", "data"), ha="right", va="bottom",
                         fontsize=8, color="0.35")
    by_count.set(xlabel="lab experiments of the arm", ylabel=value_label, title="best so far per experiment")
    by_time.set(xlabel="simulated lab time (h)", title="best so far against lab time")
    by_count.xaxis.get_major_locator().set_params(integer=True)
    by_count.legend(loc="best", fontsize=8)
    for ax in (by_count, by_time):
        ax.grid(alpha=0.3)
    return _save(figure, path)


def plot_funnel(stages: Sequence[tuple[str, Mapping[str, int]]], path: PlotTarget) -> Path | IO[bytes]:
    """Candidates that reached each stage (proposed, each rung, lab), stacked by arm, first stage on top."""
    figure, (ax,) = _figure(7.0, 0.6 * max(len(stages), 2) + 1.2)
    if not stages:
        _no_data(ax, "no candidates proposed yet")
        return _save(figure, path)
    arms = list(dict.fromkeys(arm for _, counts in stages for arm in counts))
    colours = arm_colours(arms)
    names = [name for name, _ in stages]
    positions = list(range(len(stages)))[::-1]
    left = [0] * len(stages)
    for arm in arms:
        widths = [counts.get(arm, 0) for _, counts in stages]
        ax.barh(positions, widths, left=left, color=colours[arm], label=arm, height=0.6)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    for y, total in zip(positions, left, strict=True):
        ax.annotate(str(total), (total, y), xytext=(4, 0), textcoords="offset points", va="center", fontsize=9)
    ax.set_yticks(positions, names)
    ax.set(xlabel="candidates", title="ladder funnel: candidates reaching each stage")
    ax.set_xlim(0, max(left) * 1.12 + 1)
    if arms:  # stages without any candidate have no arm to name
        ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return _save(figure, path)


def _lanes(rows: Sequence[tuple[str, str, float, float]]) -> tuple[list[tuple[int, Any]], dict[str, tuple[int, int]]]:
    """Give each bar a lane so that bars of one station never overlap; returns (lane, row) and station spans."""
    stations = list(dict.fromkeys(row[1] for row in rows))
    placed: list[tuple[int, Any]] = []
    spans: dict[str, tuple[int, int]] = {}
    offset = 0
    for station in stations:
        lane_ends: list[float] = []
        for row in sorted((r for r in rows if r[1] == station), key=lambda r: (r[2], r[3])):
            lane = next((i for i, end in enumerate(lane_ends) if end <= row[2]), len(lane_ends))
            if lane == len(lane_ends):
                lane_ends.append(row[3])
            else:
                lane_ends[lane] = row[3]
            placed.append((offset + lane, row))
        spans[station] = (offset, max(len(lane_ends), 1))
        offset += max(len(lane_ends), 1) + 1
    return placed, spans


def plot_gantt(
    rows: Sequence[tuple[str, str, float, float]],
    job_arms: Mapping[str, str],
    path: PlotTarget,
    *,
    arms: Sequence[str],
    title: str = "lab stations",
) -> Path | IO[bytes]:
    """Busy intervals per station, one lane per concurrently busy slot, coloured by the arm that owns the job.

    Args:
        rows: (job key, station, start hour, end hour).
        job_arms: job key -> arm.
        arms: arms in legend order (main first).
    """
    placed, spans = _lanes(rows)
    n_lanes = sum(span[1] + 1 for span in spans.values())
    figure, (ax,) = _figure(10.0, min(1.5 + 0.22 * n_lanes, 14.0))
    if not rows:
        _no_data(ax, "no lab jobs yet")
        return _save(figure, path)
    colours = arm_colours(list(arms) + sorted(set(job_arms.values()) - set(arms)))
    for lane, (job_key, _, start, end) in placed:
        colour = colours.get(job_arms.get(job_key, ""), "0.6")
        ax.broken_barh([(start, max(end - start, 1e-3))], (lane + 0.1, 0.8), facecolors=colour, edgecolor="white",
                       linewidth=0.4)
    ax.set_yticks([first + count / 2 for first, count in spans.values()], list(spans))
    ax.set_ylim(n_lanes, -0.5)
    ax.set(xlabel="simulated lab time (h)", title=title)
    handles = [ax.bar(0, 0, color=colours[arm], label=arm) for arm in arms if arm in set(job_arms.values())]
    if handles:
        ax.legend(loc="upper right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return _save(figure, path)


def plot_rewards(series: Mapping[str, Sequence[tuple[int, float]]], path: PlotTarget) -> Path | IO[bytes]:
    """Mean weighted reward per subject over the iterations, one line per stage.

    Args:
        series: stage -> (iteration, mean reward) points.
    """
    figure, (ax,) = _figure(7.0, 4.0)
    if not any(series.values()):
        _no_data(ax, "no scores yet")
        return _save(figure, path)
    for index, (stage, points) in enumerate(series.items()):
        if points:
            steps, values = zip(*points, strict=True)
            ax.plot(steps, values, marker="o", ms=4, color=_PALETTE[index % len(_PALETTE)], label=stage)
    ax.axhline(0.0, color="0.6", lw=0.8)
    ax.set(xlabel="iteration", ylabel="mean weighted score per subject", title="rewards over steps, by stage")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(loc="best", fontsize=8)
    ax.grid(alpha=0.3)
    return _save(figure, path)


_FRONT_COLOUR = "#d62728"
_PANELS_PER_ROW = 3


def plot_pareto(
    values: Sequence[Sequence[float]],
    path: PlotTarget,
    *,
    axis_labels: Sequence[str],
    on_front: Sequence[bool],
    meets_constraints: Sequence[bool],
    steps: Sequence[tuple[float, float]] | None = None,
) -> Path | IO[bytes]:
    """Every measured result for each pair of objectives: one panel per pair, the non-dominated results highlighted,
    the ones that break an outcome constraint drawn as an x.

    Args:
        values: one row per result, one value per objective (objective units), in ``axis_labels`` order.
        axis_labels: one per objective, e.g. ``"particle_diameter (nm), lower is better"``.
        on_front: per result, whether it is non-dominated.
        meets_constraints: per result, whether it meets every outcome constraint.
        steps: for two objectives, the front's staircase (x, y) from one end to the other, drawn as a line.
    """
    from itertools import combinations

    pairs = list(combinations(range(len(axis_labels)), 2))
    n_columns = min(max(len(pairs), 1), _PANELS_PER_ROW)
    n_rows = -(-max(len(pairs), 1) // n_columns)
    figure, axes = _figure(4.6 * n_columns, 4.0 * n_rows, n_columns=n_columns, n_rows=n_rows)
    for ax in axes[len(pairs):]:
        ax.set_axis_off()
    if not values or not pairs:
        _no_data(axes[0], "no result with every objective measured yet")
        return _save(figure, path)
    kinds = [
        ("dominated", [not f and m for f, m in zip(on_front, meets_constraints, strict=True)],
         {"marker": "o", "s": 22, "color": "0.6", "alpha": 0.7}),
        ("breaks a constraint", [not m for m in meets_constraints], {"marker": "x", "s": 30, "color": "0.35"}),
        ("non-dominated", list(on_front),
         {"marker": "o", "s": 46, "color": _FRONT_COLOUR, "edgecolors": "black", "linewidths": 0.6, "zorder": 3}),
    ]
    for ax, (i, j) in zip(axes, pairs, strict=False):
        if steps and len(axis_labels) == 2:
            xs, ys = zip(*steps, strict=True)
            ax.plot(xs, ys, color=_FRONT_COLOUR, lw=1.2, alpha=0.8, zorder=2)
        for label, mask, style in kinds:
            shown = [row for row, keep in zip(values, mask, strict=True) if keep]
            if shown:
                ax.scatter([row[i] for row in shown], [row[j] for row in shown], label=label, **style)
        ax.set(xlabel=axis_labels[i], ylabel=axis_labels[j])
        ax.grid(alpha=0.3)
    axes[0].legend(loc="best", fontsize=8)
    figure.suptitle("measured results and the Pareto front")
    return _save(figure, path)


def plot_hypervolume(
    curve: Sequence[float], path: PlotTarget, *, unit: str = "", n_imported: int = 0
) -> Path | IO[bytes]:
    """Hypervolume of the measured front after each lab result (the ``n_imported`` imported past results first,
    shaded).

    Args:
        curve: the hypervolume after each result, in recording order (the product of the objectives' units).
        unit: the hypervolume's unit (``loop.front.hypervolume_unit``).
    """
    figure, (ax,) = _figure(7.0, 4.0)
    if not curve:
        _no_data(ax, "no lab result yet")
        return _save(figure, path)
    counts = list(range(1, len(curve) + 1))
    if n_imported:
        ax.axvspan(0.5, n_imported + 0.5, color="0.9", lw=0, label="imported past results")
    ax.step(counts, curve, where="post", marker="o", ms=4, color=_PALETTE[0], label="hypervolume")
    ax.set(xlabel="lab results, in the order recorded", ylabel=f"hypervolume{f' ({unit})' if unit else ''}",
           title="hypervolume of the measured front")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylim(bottom=0)
    if n_imported:
        ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    return _save(figure, path)
