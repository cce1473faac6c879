"""The language of a request: English or Simplified Chinese.

Chosen in the URL (``?lang=zh`` / ``?lang=en``, kept in every link the app writes), else by the
browser's ``Accept-Language`` (``zh``, ``zh-CN``, ``zh-SG``, ``zh-Hans`` → Chinese; a traditional
script tag, ``zh-TW`` / ``zh-HK`` / ``zh-Hant``, is passed over: there is no traditional text), else
English. Dash callbacks are POSTs to ``/_dash-update-component``: the page address they come from is
their ``Referer`` (the app asks browsers for it on same-origin requests, ``Referrer-Policy:
same-origin``), so a callback sees the ``lang`` of the address bar the page keeps in step. Outside a
request (unit tests calling a page's pure functions) the language is English unless :func:`use`
says otherwise. The texts themselves are in ``webapp.labels``.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

from flask import Flask, Response, g, has_request_context, request

LANGS = ("en", "zh")
DEFAULT = "en"
HTML_LANG = {"en": "en", "zh": "zh-CN"}  # the page's <html lang> (BCP 47)
PARAM = "lang"  # the URL parameter
_TRADITIONAL = ("zh-tw", "zh-hk", "zh-mo", "zh-hant")
_SAME_IN_EVERY_LANGUAGE = ("/_dash-component-suites/", "/assets/", "/_timeline/", "/_favicon.ico")

_forced: contextvars.ContextVar[str | None] = contextvars.ContextVar("rankscope_lang", default=None)


def normalize(tag: str | None) -> str | None:
    """``zh``, ``zh-CN``, ``zh_Hans_CN`` → ``zh``; ``en``, ``en-US`` → ``en``; anything else
    (traditional Chinese, other languages, garbage) → None."""
    if not tag:
        return None
    t = str(tag).strip().lower().replace("_", "-")
    if t == "zh" or (t.startswith("zh-") and not t.startswith(_TRADITIONAL)):
        return "zh"
    if t == "en" or t.startswith("en-"):
        return "en"
    return None


def from_accept_language(header: str | None) -> str | None:
    """The first language of an ``Accept-Language`` header (by quality, then order) we have texts
    for; None when none is."""
    if not header:
        return None
    prefs: list[tuple[float, int, str]] = []
    for i, part in enumerate(header.split(",")):
        tag, _, params = part.strip().partition(";")
        q = 1.0
        for p in params.split(";"):
            k, _, v = p.strip().partition("=")
            if k.strip() == "q":
                try:
                    q = float(v)
                except ValueError:
                    q = 0.0
        if q > 0:
            prefs.append((-q, i, tag.strip()))
    for _, _, tag in sorted(prefs):
        lang = normalize(tag)
        if lang is not None:
            return lang
    return None


def _from_url() -> str | None:
    """``lang`` of the request's own query, else of the page it comes from (a callback's Referer)."""
    lang = normalize(request.args.get(PARAM))
    if lang is not None:
        return lang
    ref = request.headers.get("Referer")
    if ref:
        try:
            values = parse_qs(urlsplit(ref).query).get(PARAM)
        except ValueError:
            return None
        if values:
            return normalize(values[-1])
    return None


def chosen() -> str | None:
    """The language the URL names (kept in the links the app writes); None when it names none."""
    forced = _forced.get()
    if forced is not None:
        return forced
    if not has_request_context():
        return None
    if "rankscope_url_lang" not in g:
        g.rankscope_url_lang = _from_url()
    return g.rankscope_url_lang


def current() -> str:
    """The language of what the current request renders."""
    lang = chosen()
    if lang is not None:
        return lang
    if not has_request_context():
        return DEFAULT
    if "rankscope_lang" not in g:
        g.rankscope_lang = from_accept_language(request.headers.get("Accept-Language")) or DEFAULT
    return g.rankscope_lang


@contextlib.contextmanager
def use(lang: str) -> Iterator[None]:
    """Render in ``lang`` (and keep it in links) inside the block, whatever the request says."""
    if lang not in LANGS:
        raise ValueError(f"language {lang!r}: must be one of {', '.join(LANGS)}")
    token = _forced.set(lang)
    try:
        yield
    finally:
        _forced.reset(token)


def install(server: Flask) -> None:
    """Ask browsers for the page address on the app's own requests (the callbacks' language), and
    say which headers the answer depends on (a cache must not serve one language's page for another)."""

    @server.after_request
    def _headers(resp: Response) -> Response:
        resp.headers.setdefault("Referrer-Policy", "same-origin")
        if not request.path.startswith(_SAME_IN_EVERY_LANGUAGE):  # scripts, styles, tiles: cached as they are
            resp.vary.add("Accept-Language")
            resp.vary.add("Referer")
        return resp
