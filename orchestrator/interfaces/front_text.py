"""The measured Pareto front as a rich table, for ``closedloop run``'s printed summary."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from orchestrator.interfaces.cli_common import fmt
from orchestrator.interfaces.terminal_text import rich_safe

__all__ = ["front_table"]


def front_table(front: dict[str, Any]) -> Table:
    """The measured Pareto front (``summary.front``): one row per non-dominated result, its hypervolume in the title."""
    from orchestrator.loop.front import hypervolume_unit
    from vocabulary.numbers import rounded

    reference = "inferred" if front["reference_inferred"] else "given"
    unit = hypervolume_unit(front.get("units", []))
    table = Table(title=f"Pareto front: {len(front['points'])} of {front['n_results']} results, hypervolume "
                        f"{rounded(front['hypervolume'])}{' ' + unit if unit else ''} (reference {reference} "
                        f"{', '.join(fmt(v) for v in front['reference_point'])})")
    table.add_column("candidate")
    for prop, direction in zip(front["properties"], front["directions"]):
        table.add_column(rich_safe(f"{prop} ({direction})"))
    for point in front["points"]:
        table.add_row(rich_safe(point["label"]), *(fmt(point["values"].get(p)) for p in front["properties"]))
    return table
