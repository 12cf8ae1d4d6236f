"""What the lab server checks in a request before its driver sees it: the body's size and the candidate's chemistry.

A job arrives as JSON from anyone holding the token, so its candidate is not trusted to be what the orchestrator
would have built: a molecule's SMILES is parsed again with the project's own parser (``Molecule.parse``, rdkit) and
its ``id`` must be the InChIKey of that SMILES; a material's formula likewise (pymatgen's reduced formula). A
conditions candidate's id depends on the campaign's design space, which the lab does not know, so only its values
are checked (finite numbers or text).

Example:
    >>> from vocabulary.domain import Molecule
    >>> candidate_problem(Molecule.parse("CCO")) is None
    True
    >>> candidate_problem(Molecule(smiles="CCO", id="not-the-key"))  # doctest: +ELLIPSIS
    "candidate id 'not-the-key' is not the id of its SMILES 'CCO' (LFQSCWFLJHTTHZ-UHFFFAOYSA-N); ..."
"""

from __future__ import annotations

import json
import math
from typing import Any

from vocabulary.domain import Conditions, InvalidCandidate, Material, Molecule

__all__ = ["DEFAULT_MAX_BODY_BYTES", "BodySizeLimit", "candidate_problem"]

DEFAULT_MAX_BODY_BYTES = 1_000_000
"""The largest request body the lab server reads, bytes (a job is a few kB)."""


def candidate_problem(candidate: Molecule | Material | Conditions) -> str | None:
    """Why ``candidate`` is not a well-formed candidate of its kind, or None when it is."""
    if isinstance(candidate, Conditions):
        bad = {k: v for k, v in candidate.values.items() if isinstance(v, float) and not math.isfinite(v)}
        return f"conditions {bad} are not finite numbers; give finite values" if bad else None
    raw, what = (candidate.smiles, "SMILES") if isinstance(candidate, Molecule) else (candidate.formula, "formula")
    try:
        parsed = type(candidate).parse(raw)
    except InvalidCandidate as exc:
        return str(exc)
    if parsed.id != candidate.id:
        return (f"candidate id {candidate.id!r} is not the id of its {what} {raw!r} ({parsed.id}); send the candidate "
                f"as {type(candidate).__name__}.parse builds it")
    return None


class BodySizeLimit:
    """ASGI middleware: a request whose body is larger than ``max_bytes`` gets 413 and never reaches the app.

    The body is read here (at most ``max_bytes`` + 1 bytes, whatever ``Content-Length`` claims) and handed on whole.
    """

    def __init__(self, app: Any, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app, self.max_bytes = app, int(max_bytes)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send, int(declared))
            return
        chunks, n_bytes, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            n_bytes += len(chunks[-1])
            more = message.get("more_body", False)
            if n_bytes > self.max_bytes:
                await self._refuse(send, n_bytes)
                return
        body, is_replayed = b"".join(chunks), False

        async def replay() -> dict[str, Any]:
            nonlocal is_replayed
            if is_replayed:
                return await receive()  # waits for the disconnect, as the server would
            is_replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, send: Any, n_bytes: int) -> None:
        message = (f"the request body has more than {self.max_bytes} bytes ({n_bytes} read or declared); a lab job is "
                   "a few kB: send one job per request, or start the server with a larger max_body_bytes")
        payload = json.dumps({"error": "payload_too_large", "message": message, "violations": []}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})
