"""Who may talk to the console: this machine's browser holding the token, and nobody else.

An ASGI middleware in front of every route:

* the ``Host`` header must name the address the console listens on
  (``127.0.0.1:PORT`` or ``localhost:PORT``): a page on another site cannot
  reach it through a DNS name rebound to 127.0.0.1;
* every request carries the token (``X-Nerve-Token`` header, or ``?token=``
  for the page itself and the event stream, which a browser opens without
  custom headers); without it: 403;
* a ``POST`` carries the token in the header only (a cross-site form or
  ``fetch`` cannot set it without a CORS preflight, which is never granted),
  an ``Origin`` (when the browser sends one, as it always does for a POST)
  of the console itself, no cross-site ``Sec-Fetch-Site``, and a JSON
  body (``Content-Type: application/json``, else 415);
* every response says: no caching, no framing, no referrer (the token is in
  the page's URL), and a content security policy that allows the page's
  own script only.
"""

from __future__ import annotations

import secrets
from urllib.parse import parse_qs

TOKEN_HEADER = "x-nerve-token"


def new_token() -> str:
    return secrets.token_urlsafe(32)


class Guard:
    def __init__(self, app, *, token: str, port: int, script_hash: str):
        self.app = app
        self.token = token.encode()
        self.hosts = {f"127.0.0.1:{port}".encode(), f"localhost:{port}".encode()}
        self.origins = {b"http://" + h for h in self.hosts}
        self.headers = [
            (b"cache-control", b"no-store"),
            (b"x-content-type-options", b"nosniff"),
            (b"x-frame-options", b"DENY"),
            (b"referrer-policy", b"no-referrer"),
            (b"cross-origin-resource-policy", b"same-origin"),
            (b"content-security-policy",
             f"default-src 'none'; script-src '{script_hash}'; style-src 'unsafe-inline'; connect-src 'self'; "
             "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'".encode()),
        ]

    def _ok(self, value: bytes | None) -> bool:
        return value is not None and secrets.compare_digest(value, self.token)

    def refusal(self, scope) -> tuple[int, str] | None:
        """(status, reason) when the request must be refused; None when it may pass."""
        headers: dict[bytes, bytes] = {}
        for k, v in scope.get("headers", []):
            headers.setdefault(k.lower(), v)
        if headers.get(b"host") not in self.hosts:
            return 403, "forbidden: this console answers only to 127.0.0.1 (unexpected Host header)"
        header_token = headers.get(TOKEN_HEADER.encode())
        method = scope.get("method", "GET")
        if method == "POST":
            if not self._ok(header_token):
                return 403, "forbidden: a POST needs the console's token in the X-Nerve-Token header"
            origin = headers.get(b"origin")
            if origin is not None and origin not in self.origins:
                return 403, "forbidden: cross-site request (Origin is not this console)"
            site = headers.get(b"sec-fetch-site")
            if site is not None and site not in (b"same-origin", b"none"):
                return 403, "forbidden: cross-site request (Sec-Fetch-Site)"
            ctype = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
            if ctype != b"application/json":
                return 415, "unsupported media type: send application/json"
            return None
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        url_token = (query.get("token") or [None])[0]
        if not (self._ok(header_token) or self._ok(url_token.encode() if url_token else None)):
            return 403, "forbidden: open the URL `git nerve console` printed (it carries the token)"
        return None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return  # no websockets

        async def send_with_headers(message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *self.headers]}
            await send(message)

        refused = self.refusal(scope)
        if refused is not None:
            status, reason = refused
            body = (reason + "\n").encode()
            await send_with_headers({"type": "http.response.start", "status": status,
                                     "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                                 (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send_with_headers)


__all__ = ["Guard", "TOKEN_HEADER", "new_token"]
