"""What `analyze runs` and `analyze summary` show: the runs in the store and a per-rank digest."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from .store import PROBLEMS_SQL, RUNS_SQL, Store, resolve_run
from .vocabulary import computes_sql


def runs(store: Store) -> list[dict[str, Any]]:
    """Runs in the store with ranks, steps, formats, status and the number of file problems, most
    recently ingested first (the catalog alone: no fact file is opened)."""
    return store.catalog_rows(RUNS_SQL)


def problems(store: Store, run: str | None = None) -> list[dict[str, Any]]:
    """The files with a warning or an error, of one run or of every run."""
    where = "AND f.run = ?" if run else ""
    return store.catalog_rows(PROBLEMS_SQL.format(where=where), [run] if run else None)


def runs_and_problems(store: Store) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(runs, file problems) as `analyze runs` shows them: from the catalog's digest while it is the
    catalog's (no DuckDB to open), else from the catalog."""
    from .store import digest

    d = digest.read(store.path) if store.exists() else None
    if d is not None:
        return digest.runs_rows(d), d["problems"]
    return runs(store), problems(store)


def runs_json(rows: list[dict[str, Any]], probs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`analyze runs --json`: every run as plain JSON data with its file problems."""
    from .format import json_ready

    out = [{k: json_ready(v) for k, v in r.items()} for r in rows]
    for r in out:
        r["problems"] = [
            {k: json_ready(p[k]) for k in ("path", "status", "reader", "error")} for p in probs if p["run"] == r["run"]
        ]
    return out


RANK_SQL = f"""
WITH c AS (
  SELECT rank, string_agg(DISTINCT producer, ',' ORDER BY producer) AS formats,
         CASE WHEN bool_and(status = 'complete') THEN 'complete' ELSE
              CASE WHEN bool_or(status IN ('complete', 'partial')) THEN 'partial' ELSE min(status) END END AS status
  FROM collections WHERE run = $run GROUP BY rank),
st AS (
  SELECT rank, count(DISTINCT step) AS steps, avg(dur_ns) AS step_avg_ns, max(dur_ns) AS step_max_ns
  FROM steps WHERE run = $run GROUP BY rank),
k AS (  -- compute as the analyses count it (activity.py): not communication, not memcpy / memset
  SELECT rank, sum(dur_ns) FILTER (WHERE compute) AS compute_kernel_ns,
         count(*) FILTER (WHERE compute) AS compute_kernels
  FROM (SELECT rank, dur_ns, {computes_sql()} AS compute
        FROM kernels WHERE run = $run)
  GROUP BY rank),
cm AS (
  SELECT rank, count(*) AS comm_ops, sum(dur_ns) AS comm_ns, sum(wait_ns) AS comm_wait_ns,
         sum(transit_ns) AS comm_transit_ns, sum(bytes) AS comm_bytes
  FROM comm_ops WHERE run = $run GROUP BY rank),
mem AS (
  SELECT rank, max(allocated_bytes) AS peak_allocated_bytes,
         max(reserved_bytes) FILTER (WHERE component <> 'APP') AS peak_reserved_bytes
  FROM memory_samples WHERE run = $run AND source NOT IN ('npu_module_mem', 'NPU_MODULE_MEM') GROUP BY rank)
SELECT c.rank, c.formats, c.status, st.steps, st.step_avg_ns, st.step_max_ns,
       k.compute_kernels, k.compute_kernel_ns, cm.comm_ops, cm.comm_ns, cm.comm_wait_ns, cm.comm_transit_ns,
       cm.comm_bytes, mem.peak_allocated_bytes, mem.peak_reserved_bytes
FROM c LEFT JOIN st USING (rank) LEFT JOIN k USING (rank) LEFT JOIN cm USING (rank) LEFT JOIN mem USING (rank)
ORDER BY c.rank
"""

TOP_OPS_SQL = """
SELECT rank, name, count(*) AS calls, sum(self_ns) AS self_ns, sum(dur_ns) AS total_ns
FROM operators WHERE run = $run AND name NOT LIKE 'ProfilerStep#%' AND category <> 'python_function'
GROUP BY rank, name
QUALIFY row_number() OVER (PARTITION BY rank ORDER BY sum(self_ns) DESC NULLS LAST, name) <= $top
ORDER BY rank, self_ns DESC NULLS LAST, name
"""

TOP_KERNELS_SQL = """
SELECT rank, name, count(*) AS calls, sum(dur_ns) AS total_ns
FROM kernels WHERE run = $run AND NOT coalesce(is_communication, false)
GROUP BY rank, name
QUALIFY row_number() OVER (PARTITION BY rank ORDER BY sum(dur_ns) DESC, name) <= $top
ORDER BY rank, total_ns DESC, name
"""


def rank_summary(store: Store, run: str | None = None, top: int = 3) -> dict[str, Any]:
    """Per rank: steps and step time, compute, communication, memory peak, top operators/kernels."""
    run = resolve_run(store, run)
    with store.read_connection(run=run, tables=("steps", "kernels", "comm_ops", "memory_samples", "operators")) as con:
        ranks = _records(con.execute(RANK_SQL, {"run": run}))
        ops = _records(con.execute(TOP_OPS_SQL, {"run": run, "top": top}))
        kernels = _records(con.execute(TOP_KERNELS_SQL, {"run": run, "top": top}))
    out_ranks = []
    for rec in ranks:
        r = rec["rank"]
        rec["top_operators"] = [{k: v for k, v in x.items() if k != "rank"} for x in ops if x["rank"] == r]
        rec["top_kernels"] = [{k: v for k, v in x.items() if k != "rank"} for x in kernels if x["rank"] == r]
        out_ranks.append(rec)
    return {"run": run, "ranks": out_ranks}


def _records(cur: Any) -> list[dict[str, Any]]:
    names = [d[0] for d in cur.description]
    return [{k: _plain(v) for k, v in zip(names, row)} for row in cur.fetchall()]


def _plain(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, float) and v != v:  # NaN
        return None
    if isinstance(v, Decimal):
        v = int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**62:
        return int(v)
    return v
