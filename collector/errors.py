"""Errors raised by the collector. One base class; nothing here ever stops a training job by surprise.

The collector raises only where the user asked for something impossible up front (a bad config
given to ``Profiler(...)``); problems found while training runs (a bad dynamic config edit, a
backend that cannot export) are logged and training goes on.
"""

from __future__ import annotations


class CollectorError(Exception):
    """Base class of every error the collector raises on purpose."""


class ConfigError(CollectorError):
    """The profiling configuration is invalid; ``problems`` lists every problem found, by key."""

    def __init__(self, problems: list[str], source: str | None = None):
        self.problems = list(problems)
        self.source = source
        where = f" in {source}" if source else ""
        super().__init__(f"invalid profiling config{where}: " + "; ".join(self.problems))


class BackendError(CollectorError):
    """The chosen profiler backend is not available here (e.g. torch_npu without an NPU)."""
