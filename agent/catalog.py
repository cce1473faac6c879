"""What the server offers besides tools: the resources (the schema with its column docs, the
analyses of the registry, the definitions of their metrics) and the prompts of common
investigations. All generated from the code that defines them (``analyzer.schema``,
``analyzer.analyses.ANALYSES`` and the analyses' docstrings): a new table, column or analysis
shows here without a change.
"""

from __future__ import annotations

import inspect
import json

from analyzer import schema
from analyzer.analyses import ANALYSES
from analyzer.analyses.views import SCHEMA


def schema_text() -> str:
    """The store's tables and columns with their docs (`analyze schema --markdown`), and the
    ``analysis.*`` tables a query may name."""
    lines = [
        "# rankscope store schema",
        "",
        "Times are integer nanoseconds (`*_ns`, each rank's own clock), sizes bytes, bandwidth bytes/s.",
        "Every fact row carries `run`, `rank`, `collection_id`. The `sql` tool reads these tables.",
        "",
        schema.describe(),
        f"### `{SCHEMA}.*` — analyses (computed when a query names them; a `run` column first)",
        "",
        "| table | one row is |",
        "|---|---|",
        *(f"| `{SCHEMA}.{name}` | {a.doc} |" for name, a in ANALYSES.items()),
        "",
    ]
    return "\n".join(lines)


def analyses_json() -> str:
    """The registry: name, what a row is, and the function's own description."""
    return json.dumps(
        [
            {
                "name": name,
                "row": a.doc,
                "table": f"{SCHEMA}.{name}",
                "description": inspect.getdoc(a.compute) or "",
            }
            for name, a in ANALYSES.items()
        ],
        indent=2,
    )


def metrics_text() -> str:
    """How each analysis defines its metrics (msprof-analyze / HTA names), from the docstrings of the
    modules and functions that compute them, each module once."""
    lines = ["# rankscope metric definitions", ""]
    seen: set[str] = set()
    for name, a in ANALYSES.items():
        lines += [f"## {name}", "", a.doc, ""]
        fn_doc = inspect.getdoc(a.compute)
        if fn_doc:
            lines += [fn_doc, ""]
        mod = inspect.getmodule(a.compute)
        if mod is not None and mod.__name__ not in seen and mod.__doc__:
            seen.add(mod.__name__)
            lines += [f"### How `{mod.__name__}` computes it", "", inspect.cleandoc(mod.__doc__), ""]
    return "\n".join(lines)


FIND_STRAGGLER = """Find the straggler of run {run} in the rankscope store and its cause, with evidence.

1. `stragglers` (run={run}): the verdict from the arrival order at the collectives: the named rank(s),
   the cause (idle, compute, dataloader, device_sync, communication, untraced) with the operators behind
   it, the median lateness per step against its threshold, the what-if gain, msprof-analyze's vote; the
   late collectives as evidence (who arrived last, by how much, the excess per cause over the peers, every
   member's arrival, the chain of ranks waited for) and each step's critical rank.
2. `timeline_window` on the straggler and on a member that came on time, over a late collective's
   `interval`: where the straggler's time went (the slice names, busy vs idle time) before it arrived.
3. `analysis` step_breakdown for the ranks involved: which category (Computing, Communication(Not
   Overlapped), Free, ...) differs on the straggler.
4. `advice` for the advisor's findings on it.
Answer with the rank, the cause, the numbers, and the links of the answers (when present), so a
person can check each claim in the web app. Say what the evidence does not show."""

EXPLAIN_REGRESSION = """Explain why run {run} is slower than run {baseline} (both in the rankscope store).

1. `list_runs`: check both exist and what they recorded (ranks, steps, formats, problems).
   Then `diff` (base={baseline}, new={run}): the verdict, the step breakdown per rank with the noise
   test, the operators that changed most, communication, memory, slow ranks; the steps below go deeper.
2. `analysis` step_breakdown of each run: compare the mean step time and each category per rank.
3. `top_operators` of each (source operators, then kernels): the names whose total grew most,
   and whether the growth is on all ranks or some (spread_pct, max_rank).
4. `communication` of each: groups or collectives whose time grew; `stragglers` if some ranks lag.
5. `memory_peaks` of each when the step grew with memory.
Use `sql` (read-only, over the `analysis.*` tables and the facts) for any comparison the tools do not
make. Report the regression as numbers (baseline -> run), its likely cause, and the links."""


def find_straggler(run: str = "the most recent run") -> str:
    """A scripted investigation: which rank holds the others up, and why."""
    return FIND_STRAGGLER.format(run=run)


def explain_regression(run: str, baseline: str) -> str:
    """A scripted comparison of a run against a baseline run."""
    return EXPLAIN_REGRESSION.format(run=run, baseline=baseline)
