"""Who may use the dashboard: anyone on this machine without a token, only holders of the token with one.

- **Without a token** the server binds loopback only (``closedloop dashboard`` refuses another ``--host``, with the
  lab server's own check), and requests must name a loopback host, so a web page that points its own domain at
  127.0.0.1 (DNS rebinding) is refused.
- **With a token** every request needs it: ``Authorization: Bearer <token>``, or the cookie set when a browser opens
  any page once with ``?token=<token>`` (it is then redirected to the same page without it, so the token leaves the
  address bar and the history). That redirect only ever goes to a path of this server (``local_path``): a request
  for ``//evil.example/?token=...`` lands on ``/``, never on another site.
- **Every POST** (approve, reject, decide) must come from the dashboard's own pages: a browser's ``Origin`` header,
  when sent, must name this server, so another site cannot submit a form to it (the cookie is ``SameSite=Strict`` too).

Example:
    >>> is_allowed_host("127.0.0.1:8765"), is_allowed_host("localhost"), is_allowed_host("evil.example:8765")
    (True, True, False)
"""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from instruments.server import is_loopback

__all__ = ["COOKIE", "TOKEN_ENV", "is_allowed_host", "local_path", "token_of"]

TOKEN_ENV = "CLOSEDLOOP_DASHBOARD_TOKEN"
"""The environment variable ``closedloop dashboard`` reads its token from when ``--token`` is not given."""
COOKIE = "closedloop_dashboard_token"


def is_allowed_host(host_header: str) -> bool:
    """Whether a ``Host`` header names this machine (any port)."""
    hostname = urlsplit(f"//{host_header}").hostname or ""
    return is_loopback(hostname)


def token_of(authorization: str | None, cookie: str | None, query: str | None) -> str | None:
    """The token a request carries: bearer header first, then the query parameter, then the cookie."""
    if authorization and authorization.lower().startswith("bearer "):
        return authorization[7:].strip()
    return query or cookie


def matches(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def is_same_origin(origin: str | None, host_header: str | None) -> bool:
    """Whether a POST's ``Origin`` (absent: not a cross-site browser request) names the server it was sent to."""
    if origin is None:
        return True
    return urlsplit(origin).netloc == (host_header or "")


def local_path(path: str) -> str:
    r"""``path`` when a browser reads it as a path of this server, else ``"/"``: a redirect target must start with one
    ``/`` and not ``//`` or ``/\`` (both read as another host), hold no backslash, whitespace or control character
    (browsers drop or fold them, so ``/<TAB>/evil.example`` becomes ``//evil.example``), and name no scheme or host.

    Example:
        >>> local_path("/campaigns/Pd%2FC%20screen"), local_path("//evil.example/"), local_path("/\\evil.example")
        ('/campaigns/Pd%2FC%20screen', '/', '/')
    """
    if not path.startswith("/") or path.startswith(("//", "/\\")):
        return "/"
    if any(char == "\\" or char.isspace() or not char.isprintable() for char in path):
        return "/"
    parts = urlsplit(path)
    return path if not parts.scheme and not parts.netloc else "/"
