"""The ground floor: the words every package of closedloop shares (ARCHITECTURE.md, "vocabulary").

- ``vocabulary.domain``: candidates (molecules, materials, reaction conditions), proposals, observations, and the
  errors every layer raises (``ClosedLoopError`` and its kin), plus ``import_optional`` for extras.
- ``vocabulary.events``: the ledger's event types, one pydantic model per kind of step.
- ``vocabulary.namespace``: the guard against another installed package using one of closedloop's top-level names.
- ``vocabulary.plugins``: the rule every registry applies to the plug-ins that entry points list.
- ``vocabulary.text_files``: reading the text files a user hands in (a byte-order mark and CRLF are no error).

Owns: plain data types and errors. May import: the standard library and third-party packages only, nothing of ours.
Plug-in packages (simulators, instruments, rewards) import from here and from nowhere else in closedloop.
"""

__distribution__ = "closedloop"  # vocabulary.namespace reads this line to tell our packages from others

from vocabulary.namespace import check_namespace

check_namespace()
