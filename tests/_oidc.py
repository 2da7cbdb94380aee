"""An OpenID Connect identity provider on loopback (plain HTTP) for the tests of the kubeconfig's
`auth-provider: oidc`: it serves its discovery document and answers every refresh-token grant with
a fresh id-token, recording the grants it was sent."""

from __future__ import annotations

import base64
import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator
from urllib.parse import parse_qs

#: An id-token that expires in 2100, and one that expired in 2000.
FRESH_EXP, EXPIRED_EXP = 4102444800, 946684800


def jwt(claims: dict) -> str:
    """An unsigned JWT (the client reads the expiry from its claims; it does not verify it)."""
    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")
    return f"{part({'alg': 'none'})}.{part(claims)}.c2ln"


@contextmanager
def identity_provider(fresh: str) -> Iterator[tuple[str, list[dict]]]:
    """(issuer URL, the grants received): each grant answered with ``fresh`` as the id-token."""
    grants: list[dict] = []

    class IdentityProvider(BaseHTTPRequestHandler):
        def _answer(self, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server's spelling)
            self._answer({"issuer": issuer, "token_endpoint": f"{issuer}/token"})

        def do_POST(self) -> None:  # noqa: N802
            grants.append(parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode()))
            self._answer({"access_token": "unused", "token_type": "Bearer", "expires_in": 3600,
                          "id_token": fresh, "refresh_token": "refresh-2"})

        def log_message(self, *args) -> None:
            pass

    idp = ThreadingHTTPServer(("127.0.0.1", 0), IdentityProvider)
    issuer = f"http://127.0.0.1:{idp.server_address[1]}"
    threading.Thread(target=idp.serve_forever, daemon=True).start()
    try:
        yield issuer, grants
    finally:
        idp.shutdown()
        idp.server_close()


def oidc_user(issuer: str) -> dict:
    """A kubeconfig user whose id-token has expired, with a refresh token to renew it."""
    return {"auth-provider": {"name": "oidc", "config": {
        "client-id": "kvdtype", "client-secret": "secret", "idp-issuer-url": issuer,
        "id-token": jwt({"iss": "test", "exp": EXPIRED_EXP}), "refresh-token": "refresh-1"}}}
