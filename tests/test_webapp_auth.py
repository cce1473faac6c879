"""Access control of `analyze serve`, over HTTP against the real server process: with a token every
route answers 401 until the request shows it (the printed address once, then an HttpOnly SameSite
cookie; or a Bearer header); a non-loopback address is refused without a token unless --insecure."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from webapp_helpers import ANALYZE, KINETO, stop_server

from webapp import auth

TOKEN = "s3cret-token-for-the-test"


def serve(store: Path, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    """`analyze serve --store STORE --port 0 ARGS`: the process and the address it printed."""
    full_env = {k: v for k, v in os.environ.items() if k != auth.TOKEN_ENV_VAR}
    proc = subprocess.Popen(
        [*ANALYZE, "serve", "--store", str(store), "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**full_env, **(env or {})},
    )
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        m = re.search(r"(http://\S+)", line)
        if m:
            return proc, m.group(1)
    proc.kill()
    raise AssertionError("no address printed:\n" + "".join(seen))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, ingested: Any) -> Path:
    return ingested(tmp_path_factory.mktemp("auth") / "store", (KINETO, "gloo"))


@pytest.fixture(scope="module")
def server(store: Path) -> Iterator[dict[str, Any]]:
    proc, url = serve(store, "--token", TOKEN)
    base = re.match(r"(http://[^/]+)", url).group(1)  # type: ignore[union-attr]
    yield {"url": url, "base": base}
    stop_server(proc)


def routes(base: str, session: requests.Session) -> list[tuple[str, str, dict[str, Any]]]:
    """(method, URL, requests kwargs) of every kind of route the app serves: pages, Dash's own
    routes, a script, an asset, the timeline's endpoints (found with a session that may pass)."""
    html = session.get(base + "/").text
    script = re.findall(r'<script src="([^"]+)"', html)[0]
    css = re.findall(r'<link rel="stylesheet" href="([^"]+)"', html)[0]
    deps = session.get(base + "/_dash-dependencies").json()
    d = next(d for d in deps if d["output"].lstrip(".").startswith("_pages_content.children"))
    values = {"_pages_location.pathname": "/", "_pages_location.search": "?run=gloo"}
    outs = [{"id": o.split(".")[0], "property": o.split(".")[1]} for o in d["output"].strip(".").split("...")]
    body = {  # the router's call, as the browser makes it
        "output": d["output"],
        "outputs": outs if len(outs) > 1 else outs[0],
        "inputs": [{**i, "value": values.get(f"{i['id']}.{i['property']}")} for i in d["inputs"]],
        "state": [{**i, "value": None} for i in d["state"]],
        "changedPropIds": [],
    }
    return [
        ("GET", base + "/", {}),
        ("GET", base + "/timeline?run=gloo", {}),
        ("GET", base + "/operators", {}),
        ("GET", base + "/_dash-layout", {}),
        ("GET", base + "/_dash-dependencies", {}),
        ("POST", base + "/_dash-update-component", {"json": body}),
        ("GET", base + script, {}),
        ("GET", base + css, {}),
        ("GET", base + "/_favicon.ico", {}),
        ("GET", base + "/_timeline/meta?run=gloo", {}),
        ("POST", base + "/_timeline/tiles", {"json": {"run": "gloo", "fp": "x", "tiles": []}}),
        ("POST", base + "/_timeline/search", {"json": {"run": "gloo", "fp": "x", "text": "mm"}}),
        ("GET", base + "/no/such/page", {}),
    ]


def test_every_route_needs_the_token(server: dict[str, Any]) -> None:
    base = server["base"]
    assert server["url"] == f"{base}/?token={TOKEN}"  # the printed address carries it, once
    bearer = requests.Session()
    bearer.headers["Authorization"] = f"Bearer {TOKEN}"
    every = routes(base, bearer)
    for method, url, kw in every:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Cookie": f"{auth.cookie_name(TOKEN)}=wrong"}):
            r = requests.request(method, url, headers=headers, allow_redirects=False, timeout=60, **kw)
            assert r.status_code == 401, (method, url, headers, r.status_code)
            assert "Set-Cookie" not in r.headers
            assert TOKEN not in r.text
        wrong = requests.request(method, url + ("&" if "?" in url else "?") + "token=nope", timeout=60, **kw)
        assert wrong.status_code == 401 and "Set-Cookie" not in wrong.headers
        # a program with the header passes (the tile request with a made-up view answers 409, not 401)
        r = bearer.request(method, url, timeout=120, **kw)
        assert r.status_code != 401, (method, url)
        assert r.status_code in (200, 204, 404, 409), (method, url, r.status_code, r.text[:300])


def test_the_printed_address_becomes_a_cookie_and_leaves_the_address(server: dict[str, Any]) -> None:
    base = server["base"]
    browser = requests.Session()
    first = browser.get(server["url"], allow_redirects=False, timeout=60)
    assert first.status_code == 303 and first.headers["Location"] == "/"
    cookie = first.headers["Set-Cookie"]
    assert cookie.startswith(auth.cookie_name(TOKEN) + "=" + auth.cookie_value(TOKEN))
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Path=/" in cookie and TOKEN not in cookie
    # with the cookie, every route answers
    for method, url, kw in routes(base, browser):
        r = browser.request(method, url, timeout=120, **kw)
        assert r.status_code in (200, 204, 404, 409), (method, url, r.status_code)
    page = browser.get(base + "/_dash-layout", timeout=60)
    assert page.status_code == 200 and page.json()
    # a link with the token and other parameters keeps the others
    r = requests.get(f"{base}/timeline?run=gloo&token={TOKEN}&ranks=0", allow_redirects=False, timeout=60)
    assert r.status_code == 303 and r.headers["Location"] == "/timeline?run=gloo&ranks=0"


def test_a_non_loopback_address_needs_a_token(store: Path) -> None:
    proc = subprocess.run(
        [*ANALYZE, "serve", "--store", str(store), "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != auth.TOKEN_ENV_VAR},
    )
    assert proc.returncode == 1 and "refusing to listen on 0.0.0.0 without a token" in proc.stderr, proc.stderr
    # with $RANKSCOPE_TOKEN it serves, and asks for it
    p, url = serve(store, "--host", "0.0.0.0", env={auth.TOKEN_ENV_VAR: TOKEN})
    try:
        base = re.match(r"(http://[^/]+)", url).group(1)  # type: ignore[union-attr]
        assert url.endswith(f"?token={TOKEN}")
        assert requests.get(base + "/_dash-layout", timeout=60).status_code == 401
        assert requests.get(url, timeout=60).status_code == 200
    finally:
        stop_server(p)
    # --insecure: served without one, with a warning
    p, url = serve(store, "--host", "0.0.0.0", "--insecure")
    try:
        assert requests.get(url + "_dash-layout", timeout=60).status_code == 200
    finally:
        stop_server(p)
        assert p.stdout is not None
        assert "WARNING: no token" in p.stdout.read()


def test_loopback_without_a_token_stays_open(store: Path) -> None:
    p, url = serve(store)
    try:
        assert "token" not in url
        assert requests.get(url + "_dash-layout", timeout=60).status_code == 200
    finally:
        stop_server(p)


def test_is_loopback() -> None:
    assert auth.is_loopback("127.0.0.1") and auth.is_loopback("::1") and auth.is_loopback("localhost")
    assert auth.is_loopback("127.0.0.2")
    assert not auth.is_loopback("0.0.0.0") and not auth.is_loopback("::") and not auth.is_loopback("10.1.2.3")


def _children(pid: int) -> set[int]:
    try:
        return {int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}
    except FileNotFoundError:
        return set()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads worker processes from /proc (Linux)")
def test_several_worker_processes_keep_the_token(store: Path) -> None:
    """`analyze serve --workers 2`: gunicorn forks two worker processes that serve the one port, and
    the token holds on every route whichever process answers; stopping the server stops them."""
    proc, url = serve(store, "--workers", "2", "--token", TOKEN)
    try:
        base = re.match(r"(http://[^/]+)", url).group(1)  # type: ignore[union-attr]
        deadline = time.monotonic() + 120
        while len(_children(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        workers = _children(proc.pid)
        assert len(workers) == 2, workers
        bearer = requests.Session()
        bearer.headers["Authorization"] = f"Bearer {TOKEN}"
        for method, route, kw in routes(base, bearer) * 2:
            r = requests.request(method, route, allow_redirects=False, timeout=60, **kw)
            assert r.status_code == 401 and "Set-Cookie" not in r.headers, (method, route, r.status_code)
            r = bearer.request(method, route, timeout=120, **kw)
            assert r.status_code in (200, 204, 404, 409), (method, route, r.status_code, r.text[:300])
            assert r.headers.get("Server", "").startswith("gunicorn")
        first = requests.get(url, allow_redirects=False, timeout=60)
        assert first.status_code == 303 and first.headers["Set-Cookie"].startswith(auth.cookie_name(TOKEN) + "=")
    finally:
        stop_server(proc)
    deadline = time.monotonic() + 60
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(w) for w in workers)
