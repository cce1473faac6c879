"""The Dash app: ``create_app(store)`` and ``serve(...)`` (what ``analyze serve`` runs).

Nothing happens at import. ``create_app`` builds a Dash Pages app whose pages live in
``webapp/pages/`` (one file per page, each with ``layout(**query)`` and its callbacks beside it);
the navigation lists the pages as they register themselves (``dash.page_registry``).
The app keeps only the store's path: every request opens the store briefly, read-only, so an
``analyze ingest`` can commit while the server runs, and a reload shows the new run.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dash
from dash import Dash, Input, Output, dcc, html
from flask import Flask, has_request_context, request

from analyzer.store import Store, resolve_store_path

from . import answers, auth, lang, warmup
from .errors import WebappError
from .labels import LANGUAGE_NAMES, t
from .params import query_string
from .ui import CONTROL_KEY, PAGE_KEYS, STORE_KEY

HERE = Path(__file__).resolve().parent


def nav_pages() -> list[dict[str, Any]]:
    """The pages as each declares itself (``dash.register_page``: name, path, order), in Dash's
    order (``page_registry`` is sorted by ``order``)."""
    return list(dash.page_registry.values())


def _nav_id(page: dict[str, Any]) -> str:
    return f"nav-{page['name'].lower()}"


def _nav_label(page: dict[str, Any]) -> str:
    key = f"nav.{page['name'].lower()}"
    return t(key)


def lang_href(url: str, code: str) -> str:
    """``url`` (path and query) with ``lang=code``."""
    path, _, query = url.partition("?")
    keep = [p for p in query.split("&") if p and p.split("=", 1)[0] != lang.PARAM]
    return path + "?" + "&".join([*keep, f"{lang.PARAM}={code}"])


def _page_address() -> str:
    """The path and query of the page the shell is built for (its request's Referer)."""
    if not has_request_context() or not request.referrer:
        return "/"
    ref = urlsplit(request.referrer)
    return (ref.path or "/") + (f"?{ref.query}" if ref.query else "")


def _language_switch() -> html.Div:
    """A link per language to the same view in it (a full load: the navigation is rendered again)."""
    here, now = _page_address(), lang.current()
    return html.Div(
        [
            html.A(
                LANGUAGE_NAMES[code],
                href=lang_href(here, code),
                id=f"lang-{code}",
                lang=code,
                className="lang-link" + (" current" if code == now else ""),
            )
            for code in lang.LANGS
        ],
        className="lang-switch",
        title=t("nav.language"),
    )


def _shell() -> html.Div:
    return html.Div(
        [
            html.Header(
                [
                    dcc.Link("rankscope", href="/" + query_string({}), className="brand", id="nav-brand"),
                    html.Nav(
                        [
                            dcc.Link(
                                _nav_label(p),
                                href=p["relative_path"] + query_string({}),
                                id=_nav_id(p),
                                className="nav-link",
                            )
                            for p in nav_pages()
                        ],
                        className="nav",
                    ),
                    _language_switch(),
                ],
                className="topbar",
            ),
            # the current view as "path?query": pages write it, the address bar and the nav follow
            dcc.Store(id="view-url"),
            # pages navigate by setting this href (Dash Pages routes it without a reload)
            dcc.Location(id="navigate", refresh="callback-nav"),
            html.Div(id="view-url-sink", hidden=True),
            html.Main(dash.page_container, className="main"),
        ]
    )


# Keeps the address bar in step with the page's controls without reloading the page (so any
# view is a link), and carries run / ranks over to the other pages' links.
_SYNC_URL_JS = """
function(url) {
    if (!url) { return window.dash_clientside.no_update; }
    var target = url;
    var here = window.location.pathname + window.location.search;
    if (target !== here) { window.history.replaceState(window.history.state, '', target); }
    var q = new URLSearchParams(target.split('?')[1] || '');
    var keep = new URLSearchParams();
    %s.forEach(function(k) { if (q.get(k)) { keep.set(k, q.get(k)); } });
    var qs = keep.toString();
    var paths = %s;
    return paths.map(function(p) { return qs ? p + '?' + qs : p; });
}
"""

# The language switch's links: the view on screen (what a page last wrote, or the address after a
# navigation) with lang=en / lang=zh.
_SWITCH_JS = """
function(url, href) {
    var ctx = window.dash_clientside.callback_context;
    var fromView = url && ctx.triggered.some(function(t) { return t.prop_id === 'view-url.data'; });
    var target = fromView ? url : window.location.pathname + window.location.search;
    var path = target.split('?')[0];
    return %s.map(function(code) {
        var q = new URLSearchParams(target.split('?')[1] || '');
        q.set('lang', code);
        return path + '?' + q.toString();
    });
}
"""


class _App(Dash):
    """Dash with the page's ``<html lang>`` in the request's language (screen readers, fonts, the
    browser's translate offer); the language switch reloads the page, so it is set per request."""

    def interpolate_index(self, **kwargs: Any) -> str:
        page = super().interpolate_index(**kwargs)
        return page.replace("<html>", f'<html lang="{lang.HTML_LANG[lang.current()]}">', 1)


def set_up_one_request_at_a_time(server: Flask) -> None:
    """Dash's hooks before each request (the ``before_request`` functions it registered on
    ``server``) run one request at a time until one request has run them all. Dash sets itself up
    in them on the first request: ``_setup_server`` (scripts, assets, callbacks) and the pages'
    router (registers the router's callback), each behind a flag it sets *before* doing the work.
    A second request arriving meanwhile passed the flag at once and was served from an app half
    set up: it registered the router's callback while the first iterated the callbacks
    (``RuntimeError: dictionary changed size during iteration``, an HTTP 500 of `analyze serve`
    on 1 of 48 concurrent first requests, seen under load), or could be answered before the
    scripts or the router existed. Once set up, the hooks return at once and run without the lock."""
    hooks = list(server.before_request_funcs.get(None, ()))
    lock = threading.Lock()
    done = False

    def run_hooks() -> Any:
        for hook in hooks:
            rv = hook()
            if rv is not None:
                return rv
        return None

    def dash_hooks() -> Any:
        nonlocal done
        if done:
            return run_hooks()
        with lock:
            rv = run_hooks()
            done = True
            return rv

    server.before_request_funcs[None] = [dash_hooks]


def use_system_allocator_for_arrow() -> None:
    """Arrow's buffers from the C library's allocator, unless the user named a pool
    (``ARROW_DEFAULT_MEMORY_POOL``). pyarrow's default pool (mimalloc) keeps the pages of freed
    buffers for its next allocations, so the largest a view of many ranks ever allocated stayed
    resident: the server grew by ~145-155 MiB over the visits of bench_server_memory.py at 256
    ranks and ~80-90 MiB at 64, against ~85-90 and ~35-40 MiB with this (same CPU per request);
    glibc hands large blocks back when they are freed. Process-wide, as the pool is."""
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())


def create_app(
    store: Store | str | os.PathLike[str] | None = None,
    token: str | None = None,
    control: str | os.PathLike[str] | None = None,
) -> Dash:
    """A Dash app serving ``store`` (a Store, a path, or None for $RANKSCOPE_STORE / ./rankscope_store).
    With ``token``, every request must prove it knows it (``webapp.auth``). ``control``: the folder
    (or file) of a training job's watched ``profiler_config.json``: the Profiling page then writes
    windows into it; it needs a ``token``."""
    if control is not None and not token:
        raise WebappError(
            "--control lets the browser start profiling windows in a running training job: it needs a token "
            f"(--token or ${auth.TOKEN_ENV_VAR}, e.g. `export {auth.TOKEN_ENV_VAR}=$(openssl rand -hex 16)`)"
        )
    if not isinstance(store, Store):
        store = Store(resolve_store_path(store))
    warmup.preload()
    use_system_allocator_for_arrow()
    app = _App(
        "webapp",
        use_pages=True,
        pages_folder=str(HERE / "pages"),
        assets_folder=str(HERE / "assets"),
        suppress_callback_exceptions=True,
        title="rankscope",
        update_title=None,
        serve_locally=True,
    )
    set_up_one_request_at_a_time(app.server)  # Dash's hooks only: this app's own are added below
    app.server.config[STORE_KEY] = store
    app.server.config[CONTROL_KEY] = None if control is None else os.fspath(control)
    lang.install(app.server)
    warmup.install(app.server)  # the warm-up gives way to the requests being served
    if token:
        auth.protect(app.server, token)
    app.layout = _shell
    answers.install(
        app.server,
        app.config.routes_pathname_prefix + "_dash-update-component",
        lambda: app.server.config[STORE_KEY].path,
    )
    pages = nav_pages()
    app.clientside_callback(
        _SYNC_URL_JS % (list(PAGE_KEYS), [p["relative_path"] for p in pages]),
        [Output(_nav_id(p), "href") for p in pages],
        Input("view-url", "data"),
        prevent_initial_call=True,
    )
    app.clientside_callback(
        _SWITCH_JS % list(lang.LANGS),
        [Output(f"lang-{code}", "href") for code in lang.LANGS],
        Input("view-url", "data"),
        Input("_pages_location", "href"),
        prevent_initial_call=True,
    )
    for page in pages:
        module = sys.modules.get(page["module"])
        register: Callable[[Dash], None] | None = getattr(module, "register_callbacks", None)
        if register is not None:
            register(app)
    return app


def serve(
    store: Store | str | os.PathLike[str] | None,
    host: str = "127.0.0.1",
    port: int = 8050,
    echo: Callable[[str], None] = print,
    quiet: bool = True,
    threads: int = 32,
    token: str | None = None,
    insecure: bool = False,
    control: str | os.PathLike[str] | None = None,
    workers: int = 1,
) -> None:
    """Serve the app until interrupted on a production WSGI server; port 0 picks a free port.
    One process (``workers`` 1): waitress, a pool of ``threads`` request threads, requests
    buffered before they reach the app, connections queued rather than a thread per connection.
    Several (``workers`` > 1, not on Windows): gunicorn, that many worker processes of ``threads``
    threads each, forked from this one after the app is built, taking turns on one listening
    socket; they share nothing but the store (each keeps its own caches), so Python work of
    concurrent users runs on every core instead of under one interpreter lock.

    Prints the URL once listening (with the token, when there is one: the browser trades it for a
    cookie). A non-loopback ``host`` needs a ``token`` unless ``insecure`` (``auth.check_bind``); so
    does ``control`` (the Profiling page writing a job's ``profiler_config.json``), whatever the address."""
    auth.check_bind(host, token, insecure)
    app = create_app(store, token=token, control=control)
    warmup.settle()  # the process' long-lived objects out of the collector's full passes
    if workers > 1:
        if sys.platform == "win32":
            raise WebappError("several server processes (--workers) need a Unix system; use --workers 1")
        from . import multiprocess

        sock = multiprocess.listen(host, port)
        server_run: Callable[[], None] = lambda: multiprocess.run(app.server, sock, workers, threads, quiet)  # noqa: E731
        listening, close = sock.getsockname()[1], sock.detach  # gunicorn closes it
        how = f"{workers} worker processes of {threads} request threads"
    else:
        from waitress import create_server

        if quiet:
            logging.getLogger("waitress").setLevel(logging.WARNING)
        server = create_server(app.server, host=host, port=port, threads=threads)
        listening = getattr(server, "effective_port", None)
        if listening is None:  # a host name with several addresses: one socket each
            listening = server.effective_listen[0][1]
        server_run, close = server.run, server.close
        how = f"{threads} request threads"
    shown_host = host if host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    if ":" in shown_host:
        shown_host = f"[{shown_host}]"
    url = f"http://{shown_host}:{listening}/"
    st: Store = app.server.config[STORE_KEY]
    shown = url + (f"?{auth.QUERY_PARAM}={token}" if token else "")
    echo(f"rankscope web app: serving {st.path} at {shown} ({how})")
    if token:
        echo("(open that address once: the browser keeps a cookie and the token leaves the address bar)")
    if control is not None:
        echo(f"dynamic profiling from the browser: the Profiling page writes into {os.fspath(control)}")
    if not st.exists():
        echo(f"(no store at {st.path} yet: the page tells how to fill it with `analyze ingest`)")
    if host in ("0.0.0.0", "::"):
        echo(f"(listening on all interfaces, port {listening})")
    if not token and not auth.is_loopback(host):
        echo("WARNING: no token (--insecure): anyone who can reach this address can read the store")
    echo("press Ctrl+C to stop")
    try:
        server_run()
    except KeyboardInterrupt:
        pass
    finally:
        close()


__all__ = ["create_app", "serve"]
