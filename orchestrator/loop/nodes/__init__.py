"""Graph nodes. Each reads the ledger, does one thing, appends events and returns a partial state."""

from orchestrator.loop.nodes.approve import approve
from orchestrator.loop.nodes.decide import decide
from orchestrator.loop.nodes.dispatch import dispatch
from orchestrator.loop.nodes.learn import learn
from orchestrator.loop.nodes.observe import observe
from orchestrator.loop.nodes.plan import plan
from orchestrator.loop.nodes.recover import recover
from orchestrator.loop.nodes.reward import reward
from orchestrator.loop.nodes.screen import screen
from orchestrator.loop.nodes.survey import survey
from orchestrator.loop.nodes.validate import validate

__all__ = ["NODES", "approve", "decide", "dispatch", "learn", "observe", "plan", "recover", "reward", "screen", "survey", "validate"]

#: The loop, in order. ``graph.py`` wires them; ``survey`` runs once at the start; ``decide`` loops back to ``plan``, to ``observe``, or ends.
NODES = (
    ("survey", survey),
    ("plan", plan),
    ("validate", validate),
    ("screen", screen),
    ("approve", approve),
    ("dispatch", dispatch),
    ("observe", observe),
    ("recover", recover),
    ("reward", reward),
    ("learn", learn),
    ("decide", decide),
)
