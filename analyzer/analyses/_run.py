"""Which run an analysis works on."""

from __future__ import annotations

from ..store import Store
from ..summary import resolve_run


def resolve(store: Store, run: str | None) -> str:
    """The named run (checked), or the most recently ingested one."""
    store.require()
    return resolve_run(store, run)
