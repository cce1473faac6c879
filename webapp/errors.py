"""Errors of the web app. One base class; each is shown to the user as an inline message.

Callbacks and page layouts never let an exception reach the browser as a traceback:
:func:`webapp.ui.guard` turns a :class:`WebappError` (and the analyzer's own errors) into a short
message next to the control that caused it, and logs anything unexpected on the server.
"""

from __future__ import annotations

from .labels import t


class WebappError(Exception):
    """Base class of every error the web app raises on purpose (shown inline, as text)."""


class BadParameter(WebappError):
    """A URL parameter or control value that cannot be used (wrong type, out of range)."""

    def __init__(self, name: str, value: object, problem: str):
        super().__init__(t("err.url_param", name=name, value=repr(value), problem=problem))
        self.name = name
        self.value = value
        self.problem = problem


class NotFound(WebappError):
    """A run or rank named in the URL is not in the store."""


class EmptyStore(WebappError):
    """The store has no run yet (or no store exists at the path)."""
