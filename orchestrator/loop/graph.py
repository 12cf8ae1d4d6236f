"""The loop as a LangGraph ``StateGraph``: the only place that adds nodes and edges."""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from orchestrator.loop.context import CampaignContext
from orchestrator.loop.nodes import NODES
from orchestrator.loop.state import CampaignState

__all__ = ["build_graph"]


def _after_decide(state: CampaignState) -> str:
    return {"plan": "plan", "observe": "observe"}.get(state.get("next_node", "plan"), END)


def _stamped(node, ctx: CampaignContext):
    """``node`` run on a freshly refreshed view of the ledger (``ctx.view``: the one read of the step), whose state
    update also carries the ledger head it leaves behind (``CampaignState.ledger_seq``), so a checkpoint says how much
    of the ledger it has seen (``orchestrator.loop.position``)."""
    def run(state: CampaignState) -> CampaignState:
        ctx.view.refresh()
        update = node(state, ctx=ctx) or {}
        return {**update, "ledger_seq": ctx.ledger.head_seq(ctx.campaign_id)}

    run.__name__ = node.__name__
    return run


def build_graph(ctx: CampaignContext, checkpointer):
    """Compile survey → plan → validate → screen → approve → dispatch → observe → recover → reward → learn → decide, and
    from decide back to plan, to observe (to drain the lab), or to the end."""
    graph = StateGraph(CampaignState)
    for name, node in NODES:
        graph.add_node(name, _stamped(node, ctx))
    graph.add_edge(START, NODES[0][0])
    for (name, _), (following, _) in zip(NODES, NODES[1:]):
        graph.add_edge(name, following)
    graph.add_conditional_edges(NODES[-1][0], _after_decide, {"plan": "plan", "observe": "observe", END: END})
    return graph.compile(checkpointer=checkpointer)
