"""Graph nodes. Each reads the ledger, does one thing, appends events and returns a partial state."""

from .approve import approve
from .decide import decide
from .dispatch import dispatch
from .learn import learn
from .observe import observe
from .plan import plan
from .recover import recover
from .reward import reward
from .screen import screen
from .survey import survey
from .validate import validate

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
