"""``closedloop dashboard``: a live web view of a ledger's campaigns, with the approval buttons (``closedloop[dashboard]``).

FastAPI renders the pages on the server (Jinja2 templates); server-sent events tell the page when the ledger changed
and htmx (vendored in ``static/``, nothing is fetched from a CDN) swaps in the new panels. Plots are the report's own
(matplotlib). The ledger is only read, so a campaign another process runs shows up as it runs; approvals and
lab-failure decisions go through ``orchestrator.interfaces.background``, the code ``closedloop mcp`` answers with.
"""

from orchestrator.interfaces.dashboard.app import PANELS, create_app
from orchestrator.interfaces.dashboard.auth import TOKEN_ENV
from orchestrator.interfaces.dashboard.plots import PLOT_NAMES, PlotCache, draw_plot
from orchestrator.interfaces.dashboard.server import serve

__all__ = ["PANELS", "PLOT_NAMES", "TOKEN_ENV", "PlotCache", "create_app", "draw_plot", "serve"]
