"""Which run an analysis works on."""

from __future__ import annotations

from ..errors import QueryError
from ..store import Store


def resolve(store: Store, run: str | None) -> str:
    """The named run (checked), or the most recently ingested one (reads only the ``runs`` table)."""
    store.require()
    runs = store.load_catalog(["runs"])["runs"].to_pandas()
    if runs.empty:
        raise QueryError("the store has no runs yet: run `analyze ingest <folder>` first")
    if run is None:
        return str(runs.sort_values(["updated_at", "run"], ascending=[False, True]).iloc[0]["run"])
    if run not in set(runs["run"]):
        raise QueryError(f"no run named {run!r}; runs in the store: {', '.join(sorted(map(str, runs['run'])))}")
    return run
