"""What an ingest did: per collection read (``CollectionResult``) and for the whole run (``IngestReport``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..readers.base import CollectionPlan


@dataclass
class CollectionResult:
    plan: CollectionPlan
    status: str
    collection_row: dict[str, Any]
    fact_files: list[dict[str, Any]]
    file_rows: list[dict[str, Any]]
    seconds: float
    read_by: dict[str, Any] | None = None  # where a cluster ingest read it: host, pid, Dask worker address


@dataclass
class IngestReport:
    run: str
    root: str
    store: str
    read: list[CollectionResult] = field(default_factory=list)
    unchanged: list[CollectionPlan] = field(default_factory=list)
    kept_previous: list[str] = field(default_factory=list)  # collection ids whose old data was kept
    gone: list[dict[str, Any]] = field(default_factory=list)  # collections no longer below the folder: removed
    ignored: list[tuple[str, str]] = field(default_factory=list)
    unreadable: list[dict[str, Any]] = field(default_factory=list)  # files found but not readable at all
    earlier: list[dict[str, Any]] = field(default_factory=list)  # problems of unchanged files, found before
    seconds: float = 0.0
    stored_analyses: int = 0  # analyses of the whole run stored with it (ingest.run_results)
    stored_seconds: float = 0.0  # the time they took, in the ingest's seconds

    @property
    def problems(self) -> list[dict[str, Any]]:
        out = list(self.unreadable) + list(self.earlier)
        for r in self.read:
            for f in r.file_rows:
                if f["status"] in ("warning", "error"):
                    out.append(f)
        return out

    @property
    def usable(self) -> int:
        return len(self.unchanged) + sum(1 for r in self.read if r.status != "error")
