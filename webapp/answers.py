"""Callback answers kept whole, so that a request another user already made is a look-up.

A warm callback of a many-rank page still costs its interpreter time on every request: the
Communication page at 256 ranks spends ~0.3 s of CPU building its collectives grid's rows (a link
each) and having Dash serialise ~1 900 components through Plotly's JSON encoder, though every
component came from a cache. Fifty users asking for ten such answers a second need more than two
cores. Here the **serialised answer** of ``/_dash-update-component`` is kept, gzip-compressed,
keyed on

- the state of the catalog (``digest.catalog_stamp``: any commit changes it), read before and after
  the callback ran: an answer computed while a commit wrote is not kept;
- the request body as the browser sent it (the callback, its inputs, its state, what changed);
- the language the answer is written in and the one its links keep (``lang.current`` / ``lang.chosen``).

A request asking for an answer another request is computing waits for it (at most ``WAIT_S``)
instead of computing it too: many users opening the same page at once cost one computation.

Only answers of callbacks that say so are kept (:func:`keep`, called by the callback or by
``page.layout``): those whose answer is a function of the store's content, their inputs and the
language alone (not the Profiling page's, which reads a training job's files). An answer that shows
an error (``ui.error_content``: a file dropped under the reader, say) calls :func:`spoil` and is not
kept. The kept bytes are bounded in total (``BUDGET_BYTES`` per server process, least recently used
out first) and sent as they are to a client that accepts gzip (every browser), decompressed for
one that does not.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from flask import Flask, Response, g, has_request_context, request

from analyzer.store import digest

from . import lang

WAIT_S = 60.0  # how long a request waits for the same answer another request is computing
BUDGET_BYTES = 32 * 2**20  # compressed bytes per server process (a 256-rank Communication answer: ~0.1 MiB)
_KEEP = "rankscope_keep_answer"
_SPOILED = "rankscope_answer_spoiled"


class AnswerCache:
    """Compressed answers by key, at most ``budget`` bytes, least recently used out first; thread-safe."""

    def __init__(self, budget: int = BUDGET_BYTES):
        self.budget = budget
        self.lock = threading.Lock()
        self._items: OrderedDict[Hashable, tuple[bytes, str]] = OrderedDict()
        self._bytes = 0
        self._inflight: dict[Hashable, threading.Event] = {}

    def __len__(self) -> int:
        return len(self._items)

    @property
    def nbytes(self) -> int:
        return self._bytes

    def get(self, key: Hashable) -> tuple[bytes, str] | None:
        with self.lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
            return hit

    def claim(self, key: Hashable, wait: float = WAIT_S) -> tuple[bytes, str] | threading.Event | None:
        """The answer of ``key`` if kept; else, when another request is computing it, wait for that
        one (at most ``wait`` s) and return its answer if it was kept; else a claim (an Event) the
        caller must pass to :meth:`release` once it has computed (and perhaps :meth:`put`) it.
        None: the wait ended without a kept answer (the caller computes without a claim)."""
        with self.lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                return hit
            busy = self._inflight.get(key)
            if busy is None:
                mine = self._inflight[key] = threading.Event()
                return mine
        busy.wait(wait)
        return self.get(key)

    def release(self, key: Hashable, claim: threading.Event) -> None:
        with self.lock:
            if self._inflight.get(key) is claim:
                del self._inflight[key]
        claim.set()

    def put(self, key: Hashable, body: bytes, mimetype: str) -> None:
        if len(body) > self.budget:
            return
        with self.lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= len(old[0])
            self._items[key] = (body, mimetype)
            self._bytes += len(body)
            while self._bytes > self.budget:
                _, (gone, _) = self._items.popitem(last=False)
                self._bytes -= len(gone)

    def clear(self) -> None:
        with self.lock:
            self._items.clear()
            self._bytes = 0


ANSWERS = AnswerCache()


def keep() -> None:
    """Say that the answer of the callback running now may be kept (see the module doc)."""
    if has_request_context():
        setattr(g, _KEEP, True)


def kept(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a callback whose answer depends on the store's content, its inputs and the
    language alone: its answers are kept (:func:`keep`)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        keep()
        return fn(*args, **kwargs)

    return wrapper


def spoil() -> None:
    """Say that the answer of the callback running now must not be kept (it shows an error)."""
    if has_request_context():
        setattr(g, _SPOILED, True)


def _key(path: Path, stamp: list[Any]) -> Hashable:
    body = hashlib.sha256(request.get_data(cache=True)).digest()
    state = tuple(None if f is None else tuple(f) for f in stamp)
    return (str(path), state, lang.current(), lang.chosen(), body)


def _send(body: bytes, mimetype: str) -> Response:
    if "gzip" in (request.headers.get("Accept-Encoding") or ""):
        resp = Response(body, mimetype=mimetype)
        resp.headers["Content-Encoding"] = "gzip"
    else:
        resp = Response(gzip.decompress(body), mimetype=mimetype)
    resp.vary.add("Accept-Encoding")
    return resp


def install(server: Flask, endpoint: str, store_path: Callable[[], Path]) -> None:
    """Keep the answers of the view function ``endpoint`` (Dash's ``_dash-update-component``) of
    the store at ``store_path()``."""
    view: Callable[..., Any] = server.view_functions[endpoint]

    def dispatch() -> Any:
        path = store_path()
        before = digest.catalog_stamp(path)
        key = _key(path, before)
        got = ANSWERS.claim(key)
        if isinstance(got, tuple):
            return _send(*got)
        try:
            resp = server.make_response(view())
            if (
                getattr(g, _KEEP, False)
                and not getattr(g, _SPOILED, False)
                and resp.status_code == 200
                and not resp.direct_passthrough
                and "Set-Cookie" not in resp.headers
                and digest.catalog_stamp(path) == before
            ):
                ANSWERS.put(key, gzip.compress(resp.get_data(), compresslevel=5), resp.mimetype or "application/json")
        finally:
            if got is not None:
                ANSWERS.release(key, got)
        return resp

    server.view_functions[endpoint] = dispatch


__all__ = ["ANSWERS", "BUDGET_BYTES", "AnswerCache", "install", "keep", "kept", "spoil"]
