"""Access control of the web app: a token, checked in the app itself for every request.

A server that other hosts can reach needs a token (``analyze serve --token`` or ``$RANKSCOPE_TOKEN``):
:func:`check_bind` refuses a non-loopback address without one unless the user says ``--insecure``.
With a token, :func:`protect` makes every route of the Flask server answer 401 until the request
proves it knows the token, whichever route it is (pages, Dash's layout, dependencies and
``_dash-update-component``, scripts and assets, the timeline's endpoints):

- ``?token=...`` in the address (the URL ``analyze serve`` prints, once): the answer sets an
  HttpOnly, SameSite=Lax cookie and redirects to the same address without the token, so it leaves
  the address bar, the history and any link copied from the page;
- that cookie on every later request of the browser;
- ``Authorization: Bearer <token>`` for programs.

Comparisons are constant-time (``hmac.compare_digest``). The check is a Flask ``before_request``, so
it holds under any WSGI server, not only under ``analyze serve``'s.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import socket
from urllib.parse import urlencode

from flask import Flask, Response, redirect, request

from .errors import WebappError
from .labels import t

TOKEN_ENV_VAR = "RANKSCOPE_TOKEN"
QUERY_PARAM = "token"


class InsecureBind(WebappError):
    """A non-loopback address without a token (and without --insecure)."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) only ever means this machine."""
    if host in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0].split("%")[0]).is_loopback for i in infos)


def check_bind(host: str, token: str | None, insecure: bool) -> None:
    """Refuse to serve on an address other hosts can reach without a token, unless ``insecure``."""
    if token or insecure or is_loopback(host):
        return
    raise InsecureBind(
        f"refusing to listen on {host} without a token: anyone who can reach this machine could read "
        f"every profile in the store. Give one with --token or ${TOKEN_ENV_VAR} (e.g. "
        f"`export {TOKEN_ENV_VAR}=$(openssl rand -hex 16)`), use an SSH tunnel to 127.0.0.1, "
        "or pass --insecure if the network is yours alone"
    )


def cookie_name(token: str) -> str:
    """A cookie name of this token's own: two servers on one host (other ports) keep theirs apart."""
    return "rankscope_" + hashlib.sha256(b"rankscope-name:" + token.encode()).hexdigest()[:12]


def cookie_value(token: str) -> str:
    """What the cookie holds: derived from the token, not the token itself."""
    return hmac.new(token.encode(), b"rankscope-session", hashlib.sha256).hexdigest()


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode())


def _denied(**headers: str) -> Response:
    """401 in the request's language (``auth.denied`` of ``webapp.labels``)."""
    return Response(t("auth.denied") + "\n", status=401, mimetype="text/plain", headers=headers)


def protect(server: Flask, token: str) -> None:
    """Require ``token`` on every request of ``server`` (see the module doc)."""
    if not token:
        raise ValueError("an empty token protects nothing")
    name, value = cookie_name(token), cookie_value(token)

    @server.before_request
    def _require_token() -> Response | None:
        given = request.args.get(QUERY_PARAM)
        if given is not None:
            if not _same(given, token):
                return _denied()
            rest = [(k, v) for k, v in request.args.items(multi=True) if k != QUERY_PARAM]
            target = (request.script_root + request.path) + ("?" + urlencode(rest) if rest else "")
            resp = redirect(target, code=303)
            resp.set_cookie(name, value, httponly=True, samesite="Lax", secure=request.is_secure, path="/")
            resp.headers["Cache-Control"] = "no-store"
            resp.headers["Referrer-Policy"] = "no-referrer"
            return resp
        cookie = request.cookies.get(name)
        if cookie is not None and _same(cookie, value):
            return None
        auth = request.headers.get("Authorization", "")
        if auth[:7].lower() == "bearer " and _same(auth[7:].strip(), token):
            return None
        return _denied(**{"WWW-Authenticate": "Bearer"})
