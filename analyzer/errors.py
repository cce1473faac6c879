"""Errors raised by the analyzer. One base class; low-level errors are translated at the boundary."""

from __future__ import annotations

from typing import Any, TypeVar

_E = TypeVar("_E", bound="AnalyzerError")


class AnalyzerError(Exception):
    """Base class of every error the analyzer raises on purpose. One made by :meth:`said` also
    carries its text as a message of ``analyzer.messages`` (``.message``: key and values), which
    the web app shows in the reader's language; ``str()`` is the English."""

    message: dict[str, Any] | None = None

    @classmethod
    def said(cls: type[_E], key: str, **params: Any) -> _E:
        from .messages import message, render

        msg = message(key, **params)
        exc = cls(render(msg))
        exc.message = msg
        return exc


class StoreError(AnalyzerError):
    """The store is missing, locked for too long, or from an incompatible schema version."""


class QueryError(AnalyzerError):
    """A user query failed (bad SQL, unknown table, or an attempt to write)."""


class QueryLimitError(QueryError):
    """A user query ran past a limit of the lock-down (time, memory) and was stopped."""


class NoRunsError(QueryError):
    """The store has no run yet."""


class UnknownRunError(QueryError):
    """A run named by the user is not in the store."""


class InputError(AnalyzerError):
    """A profiler file could not be read; the message names the file and the problem."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class RunConflictError(AnalyzerError):
    """`analyze ingest` was asked to put a folder into a run that holds another folder."""


class RunNameError(AnalyzerError):
    """A run name the store cannot hold (empty, too long, control characters)."""


class NothingIngestedError(AnalyzerError):
    """`analyze ingest` found nothing it could ingest under the given folder."""


class ClusterError(AnalyzerError):
    """An ingest on a Dask cluster could not run: no scheduler, no workers, no shared filesystem,
    or a collection that failed on the cluster (nothing is committed then)."""


class UnknownBaselineError(QueryError):
    """A baseline named by the user does not exist."""


class InvalidNameError(AnalyzerError):
    """A baseline or tag name that cannot be used (empty, too long, control characters)."""


class SeparateJobsError(AnalyzerError):
    """`analyze ingest` was given a folder holding the outputs of unrelated jobs."""
