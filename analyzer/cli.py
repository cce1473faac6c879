"""`analyze`: the command line, a thin shell over the analyzer library."""

from __future__ import annotations

import contextlib
import functools
import gc
import io
import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import click

from . import terminal
from .errors import AnalyzerError, ClusterError
from .format import cell_text, fmt_bytes, fmt_ns, json_records
from .store import STORE_ENV_VAR, resolve_store_path
from .terminal import lit, visible

# Only click is imported up front: `analyze --help` and `analyze runs` start in a few tens of ms.
# rich, the store (DuckDB), pyarrow and pandas are imported by the commands that use them.
if TYPE_CHECKING:
    import pandas as pd
    from rich.console import Console

    from .store import Store


_PROGRAM = False  # set by run(): this process is the `analyze` program, which ends with its command


class _NoPandas:
    """An import finder that says pandas is not installed (see ``_pyarrow_without_pandas``)."""

    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"{name} left out of `analyze ingest`", name=name)


def _pyarrow_without_pandas() -> None:
    """pyarrow imports pandas (0.3-0.5 s of CPU) the first time it converts a Python list, only to
    ask whether the list is a pandas object; the ingest never hands it one. In the `analyze`
    program that ends with its command, pyarrow's first conversion is made while pandas cannot be
    imported: pyarrow then takes pandas as absent for list conversions (a later ``to_pandas()``
    imports it as usual). The readers' forked workers inherit this."""
    if "pandas" in sys.modules:  # already imported: nothing to save
        return
    import pyarrow as pa

    sys.meta_path.insert(0, _NoPandas)  # type: ignore[arg-type]
    try:
        pa.array([0])
    finally:
        sys.meta_path.remove(_NoPandas)  # type: ignore[arg-type]


def _arrow_system_allocator() -> None:
    """In the `analyze ingest` program, Arrow allocates from the C library's malloc instead of its
    bundled mimalloc, which keeps the pages of buffers freed by the reader's threads (the read-ahead,
    the Parquet encoder) per thread: the process tree's peak PSS counted them. Arrow's C++ side picks
    its default allocator once, from ``ARROW_DEFAULT_MEMORY_POOL``, at its first allocation
    (``pa.set_memory_pool`` reaches the calls pyarrow hands a pool, not the Parquet writer's
    buffers): set before pyarrow is imported, and inherited by the readers' forked workers (peak RSS
    of a worker, 4 x 23 MB set: 221-228 -> 193-199 MB). A pool the user chose is kept."""
    if "pyarrow" not in sys.modules:
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")


def _single_threaded_blas() -> None:
    """In the `analyze ingest` program, numpy's OpenBLAS starts no threads of its own: the ingest
    makes no BLAS call, and the thread OpenBLAS starts per core when numpy is imported spins for a
    while (30-50 ms of CPU in every ingest). Set before numpy is imported (its library reads it
    once); a value the user set is kept."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


@contextlib.contextmanager
def _imports_settled() -> Iterator[None]:
    """The imports of the `analyze ingest` program (pyarrow, numpy, DuckDB, the readers: ~85 000
    objects, none of them garbage) made with the cyclic garbage collector off: its passes over them
    while they were made cost 60-120 ms of CPU per ingest (~110 young, 10 middle and 1 full pass),
    and no pass after them finds garbage among them. They are then frozen (``gc.freeze``: never
    scanned again, also not by the readers' forked workers, which would copy the pages they scan)
    and the collector is back on for the work itself. Only in the program that ends with its
    command (``_PROGRAM``): frozen objects are never freed."""
    if not _PROGRAM:
        yield
        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


@functools.cache
def _consoles() -> tuple[Console, Console]:
    # every name from outside reaches these through terminal.lit (markup escaped, control characters shown)
    return terminal.console(), terminal.console(stderr=True)


class _Lazy:
    """A console made on first use (importing rich costs more than `analyze --help` itself)."""

    def __init__(self, which: int):
        self.which = which

    def __getattr__(self, name: str) -> Any:
        return getattr(_consoles()[self.which], name)


console: Console = _Lazy(0)  # type: ignore[assignment]
err_console: Console = _Lazy(1)  # type: ignore[assignment]


def _table(*headers: str, **kwargs: Any) -> Any:
    from rich.table import Table

    return Table(*headers, **kwargs)


def store_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--store PATH (default $RANKSCOPE_STORE, else ./rankscope_store)."""

    @click.option(
        "--store",
        "store_path",
        type=click.Path(file_okay=False),
        default=None,
        help=f"Store folder (default: ${STORE_ENV_VAR}, else ./rankscope_store).",
    )
    @functools.wraps(fn)
    def wrapper(*args: Any, store_path: str | None, **kwargs: Any) -> Any:
        from .store import Store

        return fn(*args, store=Store(resolve_store_path(store_path)), **kwargs)

    return wrapper


def run_option(help: str = "Run (default: the most recently ingested).") -> Callable[[Callable[..., Any]], Any]:
    """--run NAME, passed as ``run_name``."""
    return click.option("--run", "run_name", default=None, help=help)


def json_option(help: str = "Print JSON.") -> Callable[[Callable[..., Any]], Any]:
    """--json, passed as ``as_json``."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn analyzer errors into a one-line message and exit code 1 (never a traceback)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AnalyzerError as exc:
            err_console.print("error: " + lit(exc, lines=True), style="bold red")
            sys.exit(1)

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="rankscope")
def main() -> None:
    """rankscope analyzer: ingest profiler output of every rank into one store, then ask it questions."""


@main.command()
@click.argument("folders", nargs=-1, required=True, type=click.Path(exists=True))
@run_option("Run name (default: the folder name; one folder only).")
@click.option("--workers", type=int, default=None, help="Parallel readers (default: one per CPU core).")
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    envvar="DASK_SCHEDULER_ADDRESS",
    default=None,
    help="Read the collections on the workers of this Dask scheduler (e.g. tcp://host:8786; default: "
    "$DASK_SCHEDULER_ADDRESS, else the local processes). The store and the traces must be on a "
    "filesystem every worker shares.",
)
@click.option(
    "--scheduler-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="The Dask scheduler named by the file `dask scheduler --scheduler-file` wrote.",
)
@json_option("Print the ingest report(s) as JSON.")
@store_option
@handle_errors
def ingest(
    folders: tuple[str, ...],
    run_name: str | None,
    workers: int | None,
    scheduler: str | None,
    scheduler_file: str | None,
    as_json: bool,
    store: Store,
) -> None:
    """Read every profiler output found below FOLDER (all ranks, all formats) into the store.

    Each FOLDER becomes one run. Unchanged files are skipped; changed ones are re-read. Each bad
    file is reported with the reason and the rest is ingested; the exit code is non-zero only when
    nothing could be ingested. With --scheduler (or --scheduler-file) the collections are read on a
    Dask cluster's workers, and this process alone commits the catalog.
    """
    if run_name and len(folders) > 1:
        raise AnalyzerError("--run names one run: give a single folder with it")
    if scheduler_file:  # the file names the scheduler: $DASK_SCHEDULER_ADDRESS does not compete with it
        scheduler = None
    if (scheduler or scheduler_file) and workers is not None:
        raise AnalyzerError("--workers sizes the local pool: the cluster's workers are started by `dask worker`")
    # a folder where nothing changed since its last ingest is answered from the catalog's digest,
    # before anything heavy is imported; the others are ingested
    answered = {folder: _unchanged(store, folder, run_name) for folder in folders}
    if all(answered.values()):
        for folder, rep in answered.items():
            if not as_json:
                console.print(f"ingesting [bold]{lit(folder)}[/] into {lit(store.path)}")
                _print_problems(rep)
                _print_done(rep)
        if as_json:
            out = [_report_json(r) for r in answered.values()]
            click.echo(json.dumps(out[0] if len(folders) == 1 else out, indent=2, default=str))
        return
    with _imports_settled():
        if _PROGRAM:
            _arrow_system_allocator()
            _single_threaded_blas()
            _pyarrow_without_pandas()
        from .ingest import ingest as do_ingest
        from .ingest.aggregate import preload
        from .ingest.cluster import executor_for

        executor = executor_for(scheduler, scheduler_file)
        if _PROGRAM:
            preload()  # DuckDB and the aggregates' code: the catalog and the readers need them here anyway
            if not as_json:
                _consoles()

    def progress(kind: str, obj: Any) -> None:
        if as_json:
            return
        if kind == "done":
            p = obj.plan
            colour = {"complete": "green", "partial": "yellow", "error": "red"}.get(obj.status, "cyan")
            console.print(
                f"  rank {p.rank:<4} {p.producer:<17} [{colour}]{obj.status:<9}[/] "
                f"{obj.collection_row['n_rows']:>10,} rows  {obj.seconds:6.2f} s  {lit(p.rel_root)}"
                + (f"  [dim]on {lit(obj.read_by['host'])}[/]" if obj.read_by else "")
            )
            if obj.status in ("unparsed", "error"):  # say why (e.g. how to export / parse it offline)
                for sentence in obj.collection_row.get("missing") or []:
                    console.print(f"           {lit(sentence)}", style="dim")

    reports = []
    failed = []
    for folder in folders:
        if not as_json:
            console.print(f"ingesting [bold]{lit(folder)}[/] into {lit(store.path)}")
        try:
            report = answered[folder] or do_ingest(
                folder, store, run=run_name, workers=workers, on_progress=progress, executor=executor
            )
        except ClusterError:  # the cluster, not this folder: no use trying the next
            raise
        except AnalyzerError as exc:  # this folder refused (nothing to ingest, a run name taken): go on
            rep = getattr(exc, "report", None)
            if rep is not None and not as_json:
                _print_problems(rep)
            if len(folders) == 1:
                raise
            err_console.print(f"error: {lit(folder)}: " + lit(exc, lines=True), style="bold red")
            failed.append((folder, str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
            continue
        reports.append(report)
        if not as_json:
            _print_problems(report)
            _print_done(report)
    if as_json:
        out = [_report_json(r) for r in reports]
        click.echo(json.dumps(out[0] if len(folders) == 1 else out, indent=2, default=str))
    if failed:
        # every folder was tried: say which were ingested and which not, and fail the command
        done = ", ".join(lit(r.root) for r in reports) or "none"
        err_console.print(
            f"{len(reports)} of {len(folders)} folder(s) ingested ({done}); not ingested: "
            + "; ".join(f"{lit(f)} ({lit(why)})" for f, why in failed),
            style="bold red",
        )
        sys.exit(1)


@dataclass
class _Unchanged:
    """A re-ingest of a folder where nothing changed since its last ingest, answered from the
    catalog's digest (``store.digest``) without reading anything: the fields the printers use."""

    run: str
    root: str
    store: str
    unchanged: list[Any]
    ignored: list[tuple[str, str]]
    problems: list[dict[str, Any]]
    seconds: float
    read: tuple[()] = ()
    gone: tuple[()] = ()
    kept_previous: tuple[()] = ()


def _unchanged(store: Store, folder: str, run_name: str | None) -> _Unchanged | None:
    """The report of ingesting ``folder`` when nothing below it changed since its last ingest into
    this store (every folder and file as then, same size and mtime, same analyzer code), else None."""
    import time
    from pathlib import Path

    from .store import digest

    t0 = time.perf_counter()
    root = Path(folder).expanduser().resolve()
    run = run_name or (root.name if root.is_dir() else root.stem.split(".")[0])
    rec = digest.unchanged_ingest(store.path, run, root)
    if rec is None:
        return None
    d = digest.read(store.path) or {}
    problems = [p for p in d.get("problems", []) if p["run"] == run]
    return _Unchanged(
        run,
        rec["given"],
        str(store.path),
        [SimpleNamespace(rel_root=u["path"], rank=u["rank"]) for u in rec["unchanged"]],
        [(p, r) for p, r in rec["ignored"]],
        problems,
        time.perf_counter() - t0,
    )


def _print_done(report: Any) -> None:
    ranks = {r.plan.rank for r in report.read} | {p.rank for p in report.unchanged}
    console.print(
        f"run [bold]{lit(report.run)}[/]: read {len(report.read)} collection(s), "
        f"{len(report.unchanged)} unchanged, "
        f"{len(ranks)} rank(s), {len(report.problems)} file problem(s), {len(report.ignored)} file(s) ignored "
        f"in {report.seconds:.2f} s"
    )
    stored = getattr(report, "stored_analyses", 0)  # a new or changed run's, or those another version stored
    if stored:
        console.print(f"  {stored} analyses of the whole run stored with it ({report.stored_seconds:.1f} s of that)")


def _print_problems(report: Any) -> None:
    probs = report.problems
    if probs:
        console.print(f"[bold yellow]{len(probs)} file problem(s):[/]")
        for f in probs:
            colour = "red" if f["status"] == "error" else "yellow"
            console.print(f"  [{colour}]{f['status']}[/] {lit(f['path'])}: {lit(f['error'])}")
    for c in report.gone:
        console.print(f"  [yellow]removed[/] rank {c['rank']} {lit(c['root_path'])}: no longer below the folder")
    for cid in report.kept_previous:
        console.print(f"  kept the previously ingested data of collection {lit(cid)}")
    if report.ignored:
        console.print(f"[dim]{len(report.ignored)} file(s) ignored:[/]")
        for path, reason in report.ignored[:10]:
            console.print(f"  [dim]ignored[/] {lit(path)}: {lit(reason)}")
        if len(report.ignored) > 10:
            more = "analyze query \"SELECT * FROM source_files WHERE status = 'ignored'\""
            console.print(f"  [dim]... and {len(report.ignored) - 10} more (see `{lit(more)}`)[/]")


def _report_json(report: Any) -> dict[str, Any]:
    return {
        "run": report.run,
        "root": report.root,
        "store": report.store,
        "seconds": round(report.seconds, 3),
        "collections": [
            {
                "collection_id": r.plan.collection_id,
                "rank": r.plan.rank,
                "producer": r.plan.producer,
                "path": r.plan.rel_root,
                "status": r.status,
                "rows": r.collection_row["n_rows"],
                "seconds": round(r.seconds, 3),
                **({"read_by": r.read_by} if r.read_by else {}),
            }
            for r in report.read
        ],
        "unchanged": [p.rel_root for p in report.unchanged],
        "kept_previous": report.kept_previous,
        "removed": [
            {"collection_id": c["collection_id"], "rank": c["rank"], "root_path": c["root_path"]} for c in report.gone
        ],
        "problems": [{k: f[k] for k in ("path", "status", "reader", "error")} for f in report.problems],
        "ignored": [{"path": p, "reason": r} for p, r in report.ignored],
        "stored_analyses": getattr(report, "stored_analyses", 0),
    }


@main.command()
@json_option()
@click.option("--problems/--no-problems", default=True, help="List file problems under the table.")
@store_option
@handle_errors
def runs(as_json: bool, problems: bool, store: Store) -> None:
    """List the runs in the store with ranks, steps, formats and status."""
    from .summary import runs_and_problems, runs_json

    rows, probs = runs_and_problems(store)  # the catalog's digest while it is the catalog's: no DuckDB to open
    if as_json:
        click.echo(json.dumps(runs_json(rows, probs), indent=2, default=str))
        return
    if not rows:
        console.print("the store is empty: run `analyze ingest <folder>`")
        return
    t = _table("run", "ranks", "collections", "steps", "formats", "status", "problems", "updated (UTC)", "root")
    for r in rows:
        t.add_row(
            lit(r["run"]),
            lit(r["ranks"]),
            lit(r["collections"]),
            lit(r["steps"]),
            lit(", ".join(list(r["formats"]) if r["formats"] is not None else [])),
            lit(r["status"]),
            lit(r["problems"]),
            lit(str(r["updated_at"])[:19]),
            lit(r["root_path"]),
        )
    console.print(t)
    if problems and probs:
        console.print("[bold yellow]file problems:[/]")
        for r in probs:
            console.print(
                f"  {lit(r['run'])}: [{'red' if r['status'] == 'error' else 'yellow'}]{lit(r['status'])}[/] "
                f"{lit(r['path'])}: {lit(r['error'])}"
            )


@main.command()
@run_option()
@click.option("--top", default=3, show_default=True, help="Top operators / kernels per rank.")
@json_option()
@store_option
@handle_errors
def summary(run_name: str | None, top: int, as_json: bool, store: Store) -> None:
    """Per rank: step time, top operators, communication, memory peak."""
    from .summary import rank_summary

    s = rank_summary(store, run_name, top=top)
    if as_json:
        click.echo(json.dumps(s, indent=2, default=str))
        return
    _print_summary(s)


def _print_summary(s: dict[str, Any]) -> None:
    """The per-rank digest as four narrow tables (readable in an 80-column terminal): steps and
    time, what each rank holds, top operators, top kernels; long names wrap, numbers never do."""
    from rich import box
    from rich.table import Table

    def table(title: str, *headers: str) -> Table:
        t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, collapse_padding=True)
        for h in headers:
            text = h in ("format", "name")
            t.add_column(
                h, overflow="fold" if text else "ellipsis", no_wrap=not text, justify="left" if text else "right"
            )
        return t

    console.print(f"run [bold]{lit(str(s['run']))}[/]")
    ranks = s["ranks"]
    t = table("time per rank", "rank", "steps", "step avg", "step max", "compute", "comm", "comm wait")
    for r in ranks:
        t.add_row(
            str(r["rank"]),
            str(r["steps"] or 0),
            fmt_ns(r["step_avg_ns"]),
            fmt_ns(r["step_max_ns"]),
            fmt_ns(r["compute_kernel_ns"]),
            fmt_ns(r["comm_ns"]),
            fmt_ns(r["comm_wait_ns"]),
        )
    console.print(t)
    t = table("data per rank", "rank", "format", "status", "comm ops", "comm bytes", "peak alloc", "peak rsvd")
    for r in ranks:
        t.add_row(
            str(r["rank"]),
            lit((r["formats"] or "-").replace(",", ", ")),
            lit(r["status"] or "-"),
            str(r["comm_ops"] or 0),
            fmt_bytes(r["comm_bytes"]),
            fmt_bytes(r["peak_allocated_bytes"]),
            fmt_bytes(r["peak_reserved_bytes"]),
        )
    console.print(t)
    for key, title, field in (
        ("top_operators", "top operators (self time)", "self_ns"),
        ("top_kernels", "top kernels (time)", "total_ns"),
    ):
        if not any(r[key] for r in ranks):
            continue
        t = table(title, "rank", "name", "time", "calls")
        for r in ranks:
            for x in r[key]:
                t.add_row(str(r["rank"]), lit(str(x["name"])), fmt_ns(x.get(field)), str(x["calls"]))
        console.print(t)


@main.command()
@click.argument("sql")
@run_option("Restrict fact tables to one run (faster on big stores).")
@click.option("--base", default=None, help="The base run of the analysis.diff* tables (or baseline:NAME).")
@click.option("--new", default=None, help="The new run of the analysis.diff* tables (or baseline:NAME).")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
@click.option("--limit", default=200, show_default=True, help="Rows printed in table format (0 = all).")
@click.option(
    "--time-limit",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0.001),
    help="Seconds the query may run before it is stopped.",
)
@click.option(
    "--max-rows",
    default=1_000_000,
    show_default=True,
    type=click.IntRange(min=1),
    help="Rows fetched at most (the output says when the result was cut).",
)
@store_option
@handle_errors
def query(
    sql: str,
    run_name: str | None,
    base: str | None,
    new: str | None,
    fmt: str,
    limit: int,
    time_limit: float,
    max_rows: int,
    store: Store,
) -> None:
    """Run a read-only SQL query over every rank and run (tables: see `analyze schema`).

    The analyses are tables too: `SELECT * FROM analysis.step_breakdown` (computed for --run, or for
    every run, when a query names them; `analyze schema` lists them). The comparisons of two runs
    (`analysis.diff`, `analysis.diff_operators`, ...) compare the runs named by --base and --new. The
    query runs under DuckDB's lock-down: it reads the store's tables only (no file, network, extension,
    setting or write).
    """
    from .analyses.views import query as run_query
    from .store import Limits

    res = run_query(store, sql, run_name, limits=Limits(seconds=time_limit, rows=max_rows), base=base, new=new)
    df = res.frame
    if fmt == "csv":
        out = io.StringIO()
        import csv

        w = csv.writer(out, lineterminator="\n")
        w.writerow([str(c) for c in df.columns])
        w.writerows([cell_text(v) for v in row] for row in df.itertuples(index=False))
        # exact bytes for a pipe or a file; on a terminal, control characters are shown as escapes
        text = out.getvalue()
        click.echo(visible(text, lines=True) if sys.stdout.isatty() else text, nl=False)
    elif fmt == "json":
        click.echo(json.dumps(json_records(df), default=str))
    else:
        _print_df(df, limit)
    if res.truncated:
        err_console.print(f"the result was cut at {max_rows:,} rows (--max-rows)", style="yellow")


def _print_df(df: pd.DataFrame, limit: int) -> None:
    t = _table(*[lit(c) for c in df.columns])
    shown = df if not limit else df.head(limit)
    for row in shown.itertuples(index=False):
        t.add_row(*[lit(cell_text(v, "NULL")) for v in row])
    console.print(t)
    if limit and len(df) > limit:
        console.print(f"({len(df)} rows, first {limit} shown; --limit 0 for all)")
    else:
        console.print(f"({len(df)} rows)")


@main.command()
@click.option("--markdown", is_flag=True, help="Print the full schema as Markdown.")
def schema_cmd(markdown: bool) -> None:
    """Show the tables and columns of the store."""
    from . import schema

    if markdown:
        click.echo(schema.describe())
        return
    for t in schema.ALL_TABLES:
        kind = "catalog" if t.name in schema.CATALOG else "facts"
        click.echo(f"{t.name} ({kind}): {t.doc}")
        for c in t.columns:
            click.echo(f"    {c.name:<36} {c.type:<10} {c.doc}")
    from .analyses import ANALYSES, COMPARISONS
    from .analyses.views import SCHEMA

    click.echo("\nanalysis tables (computed when a query names them; a `run` column first; docs/analyses.md):")
    for name, analysis in ANALYSES.items():
        click.echo(f"  {SCHEMA}.{name:<28} {analysis.doc}")
    click.echo("\ncomparisons of two runs (`analyze query --base A --new B`; `base_run`, `new_run` columns first):")
    for name, comparison in COMPARISONS.items():
        click.echo(f"  {SCHEMA}.{name:<28} {comparison.doc}")


schema_cmd.name = "schema"
main.add_command(schema_cmd, "schema")


@main.command()
@click.argument("run_name")
@store_option
@handle_errors
def drop(run_name: str, store: Store) -> None:
    """Remove a run from the store (after any ingest into the store has finished)."""

    def waiting() -> None:
        err_console.print("waiting for the ingest into this store to finish ...", style="dim")

    if not store.drop_run(run_name, on_wait=waiting):
        raise AnalyzerError(f"no run named {run_name!r}")
    console.print(f"dropped run {lit(run_name)}")


@main.command()
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Interface to listen on (0.0.0.0: every interface)."
)
@click.option(
    "--port", default=8050, show_default=True, type=click.IntRange(0, 65535), help="Port (0: any free port, printed)."
)
@click.option(
    "--threads",
    default=32,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Requests served at once per process (its thread pool); more wait in its queue.",
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Server processes (more than 1: gunicorn, Unix only), each with --threads threads; "
    "many users on a shared machine: one per core.",
)
@click.option(
    "--token",
    envvar="RANKSCOPE_TOKEN",
    default=None,
    help="Access token every request must carry (default: $RANKSCOPE_TOKEN, which `ps` does not show); "
    "required on any address but loopback.",
)
@click.option(
    "--insecure", is_flag=True, help="Serve a non-loopback address without a token (a network of yours alone)."
)
@click.option(
    "--control",
    "control",
    default=None,
    type=click.Path(file_okay=True, dir_okay=True, path_type=Path),
    help="A training job's dynamic profiling folder (the collector's dynamic_param.config_path): the Profiling "
    "page shows its profiler_config.json, log and armed ranks and writes windows into it. Needs a token.",
)
@store_option
@handle_errors
def serve(
    host: str,
    port: int,
    threads: int,
    workers: int,
    token: str | None,
    insecure: bool,
    control: Path | None,
    store: Store,
) -> None:
    """Serve the web app (overview, timeline, operators, memory, communication) over the store.

    The store is opened briefly and read-only per request: `analyze ingest` can run meanwhile
    and a reload shows the new data. The server is waitress, a production WSGI server: --threads
    requests at once, the others queued; with --workers N, gunicorn runs N such processes on the
    port (they share the store and nothing else: Python work of many users on every core). With
    a token, the printed address carries it once; the browser keeps a cookie. --control DIR turns
    on dynamic profiling from the browser (off by default; then a token is required, also on
    127.0.0.1).
    """
    try:
        import waitress  # noqa: F401 - the server

        from webapp.app import serve as serve_app
        from webapp.errors import WebappError
    except ImportError as exc:  # a broken environment: dash, dash-ag-grid, plotly, waitress are dependencies
        raise AnalyzerError(f"the web app cannot start, a dependency is missing: {exc} (reinstall rankscope)") from exc
    try:
        serve_app(
            store,
            host=host,
            port=port,
            echo=lambda s: click.echo(s, nl=True),
            threads=threads,
            token=token or None,
            insecure=insecure,
            control=control,
            workers=workers,
        )
    except WebappError as exc:
        raise AnalyzerError(str(exc)) from exc
    except OSError as exc:
        raise AnalyzerError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc


@main.command()
@click.option(
    "--url",
    default=None,
    envvar="RANKSCOPE_URL",
    help="URL of a running `analyze serve` over the same store: answers carry links into it ($RANKSCOPE_URL).",
)
@click.option(
    "--time-limit",
    default=300.0,
    show_default=True,
    type=click.FloatRange(min=1),
    help="Seconds a tool call may work: past it its worker process is killed and the call answers with an error.",
)
@click.option(
    "--sql-time-limit",
    default=5.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds one query of the sql tool may run (DuckDB interrupts it; the tool's --time-limit holds too).",
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 16),
    help="Worker processes answering tool calls (calls beyond them wait for one).",
)
@click.option(
    "--max-rows", default=1000, show_default=True, type=click.IntRange(min=1), help="Rows an answer carries at most."
)
@click.option("--http", "http", is_flag=True, help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="With --http: the interface to listen on.")
@click.option(
    "--port", default=0, show_default=True, type=click.IntRange(0, 65535), help="With --http: port (0: any, printed)."
)
@click.option(
    "--token",
    default=None,
    envvar="RANKSCOPE_TOKEN",
    help="With --http: every request must carry 'Authorization: Bearer TOKEN' (needed off loopback; $RANKSCOPE_TOKEN).",
)
@store_option
@handle_errors
def mcp(
    url: str | None,
    time_limit: float,
    sql_time_limit: float,
    workers: int,
    max_rows: int,
    http: bool,
    host: str,
    port: int,
    token: str | None,
    store: Store,
) -> None:
    """Serve the store to AI assistants over the Model Context Protocol (stdio, or --http).

    Read-only tools (runs, ranks, analyses, stragglers, operators, communication, memory, advice,
    a timeline window, locked-down SQL), resources (schema, analyses, metric definitions) and
    prompts. Register it with an MCP client as the command `analyze mcp --store PATH`. Needs the
    mcp extra (`pip install 'rankscope[mcp]'`).
    """
    try:
        from agent.server import serve_http, serve_stdio
        from agent.tools import AgentError, Settings
        from analyzer.store import SHARED_LIMITS
    except ImportError as exc:  # the SDK missing
        raise AnalyzerError(f"the MCP server needs the mcp extra: pip install 'rankscope[mcp]' ({exc})") from exc
    settings = Settings(store, url=url, max_rows=max_rows, sql_limits=replace(SHARED_LIMITS, seconds=sql_time_limit))
    if not http:
        serve_stdio(settings, seconds=time_limit, workers=workers)
        return
    try:
        serve_http(settings, host=host, port=port, token=token, seconds=time_limit, workers=workers)
    except AgentError as exc:
        raise AnalyzerError(str(exc)) from exc
    except OSError as exc:
        raise AnalyzerError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc


@main.command()
@run_option()
@json_option("Print every analysis as one JSON document.")
@store_option
@handle_errors
def report(run_name: str | None, as_json: bool, store: Store) -> None:
    """Cluster analyses of a run: step breakdown, communication, slow rank/link, layout, clocks, advice."""
    from .analyses.report import build_report, print_report, report_json, report_sections

    if as_json:
        click.echo(report_json(build_report(store, run_name)))
        return
    with report_sections(store, run_name) as sections:  # computes only the sections it prints
        print_report(sections, _consoles()[0])


# ---------------------------------------------------------------------------------------------
# comparing runs: diff, baselines and tags, the CI gate, trends
# ---------------------------------------------------------------------------------------------


class RanksParam(click.ParamType):
    """``0,1,4-7`` → [0, 1, 4, 5, 6, 7]."""

    name = "ranks"

    def convert(self, value: Any, param: Any, ctx: Any) -> list[int]:
        if isinstance(value, list):
            return value
        out: set[int] = set()
        for part in str(value).split(","):
            part = part.strip()
            if not part:
                continue
            lo, sep, hi = part.partition("-")
            if not lo.isdigit() or (sep and not hi.isdigit()):
                self.fail(f"{value!r}: expected rank numbers like 0,1,4-7", param, ctx)
            a, b = int(lo), int(hi) if sep else int(lo)
            if b < a:
                self.fail(f"{value!r}: bad range {part!r}", param, ctx)
            out.update(range(a, b + 1))
        if not out:
            self.fail(f"{value!r}: no rank given", param, ctx)
        return sorted(out)


def compare_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--base-step N --new-step M --ranks 0,1,4-7 (the steps and ranks two runs are compared on)."""
    fn = click.option("--ranks", type=RanksParam(), default=None, help="Compare only these ranks (e.g. 0,1,4-7).")(fn)
    fn = click.option("--new-step", type=int, default=None, help="Step of NEW to compare (default: as BASE).")(fn)
    fn = click.option(
        "--base-step",
        type=int,
        default=None,
        help="Step of BASE to compare (default: the step numbers both runs have; else every step, per step).",
    )(fn)
    return fn


@main.command()
@click.argument("base")
@click.argument("new")
@compare_options
@click.option("--top", default=10, show_default=True, help="Operators / kernels listed.")
@json_option("Print the whole diff (every table) as one JSON document.")
@store_option
@handle_errors
def diff(
    base: str,
    new: str,
    base_step: int | None,
    new_step: int | None,
    ranks: list[int] | None,
    top: int,
    as_json: bool,
    store: Store,
) -> None:
    """Compare NEW with BASE: a verdict, then per rank the step breakdown, operators and kernels,
    communication, memory peaks and stragglers, per step.

    BASE and NEW are run names, or baseline:NAME. Steps are aligned by number unless --base-step /
    --new-step choose one of each; ranks by number, or by layout coordinate when the world sizes differ.
    """
    from .analyses.compare_report import diff_json, dumps, print_diff
    from .analyses.diff import run_diff
    from .store import resolve_ref

    store.require()
    d = run_diff(
        store, resolve_ref(store, base), resolve_ref(store, new), base_step, new_step, tuple(ranks) if ranks else None
    )
    if as_json:
        click.echo(dumps(diff_json(d)))
        return
    print_diff(d, console, top=top)


@main.group()
def baseline() -> None:
    """Name runs as baselines (`analyze check RUN --against baseline:NAME`)."""


@baseline.command("tag")
@click.argument("name")
@click.argument("run_name", metavar="RUN")
@store_option
@handle_errors
def baseline_tag(name: str, run_name: str, store: Store) -> None:
    """Make NAME the baseline RUN (tagging another run with NAME later moves it there)."""
    from .store import tag_baseline

    before = tag_baseline(store, name, run_name)
    moved = "" if before is None or before == run_name else f" (was {before})"
    console.print(visible(f"baseline {name} → run {run_name}{moved}"), markup=False)


@baseline.command("list")
@json_option()
@store_option
@handle_errors
def baseline_list(as_json: bool, store: Store) -> None:
    """List the baselines and the run each names."""
    from .store import BASELINE, run_tags

    store.require()
    rows = run_tags(store, BASELINE)
    if as_json:
        click.echo(json.dumps([{"name": t.name, "run": t.run, "tagged_at": t.tagged_at} for t in rows], default=str))
        return
    if not rows:
        console.print("no baseline yet: `analyze baseline tag NAME RUN`", markup=False)
    for t in rows:
        console.print(visible(f"{t.name} → {t.run} (since {str(t.tagged_at)[:19]} UTC)"), markup=False)


@baseline.command("rm")
@click.argument("name")
@store_option
@handle_errors
def baseline_rm(name: str, store: Store) -> None:
    """Remove the baseline NAME (the run stays)."""
    from .store import remove_baseline

    run = remove_baseline(store, name)
    if run is None:
        raise AnalyzerError(f"no baseline named {name!r}")
    console.print(visible(f"removed baseline {name} (was run {run})"), markup=False)


@main.group()
def tag() -> None:
    """Label runs (`analyze trend --tag NAME` follows the runs carrying a label)."""


@tag.command("add")
@click.argument("name")
@click.argument("runs", nargs=-1, required=True)
@store_option
@handle_errors
def tag_add(name: str, runs: tuple[str, ...], store: Store) -> None:
    """Put the tag NAME on RUNS."""
    from .store import add_tag

    added = add_tag(store, name, runs)
    console.print(visible(f"tag {name}: added to {', '.join(added) or 'no run (all had it)'}"), markup=False)


@tag.command("rm")
@click.argument("name")
@click.argument("runs", nargs=-1)
@store_option
@handle_errors
def tag_rm(name: str, runs: tuple[str, ...], store: Store) -> None:
    """Take the tag NAME off RUNS (off every run when none is named)."""
    from .store import remove_tag

    gone = remove_tag(store, name, runs or None)
    if not gone:
        raise AnalyzerError(f"no run carries the tag {name!r}" + (f" among {', '.join(runs)}" if runs else ""))
    console.print(visible(f"tag {name}: removed from {', '.join(gone)}"), markup=False)


@tag.command("list")
@json_option()
@store_option
@handle_errors
def tag_list(as_json: bool, store: Store) -> None:
    """List the tags and the runs carrying each."""
    from .store import TAG, run_tags

    store.require()
    by_tag: dict[str, list[str]] = {}
    for t in run_tags(store, TAG):
        by_tag.setdefault(t.name, []).append(t.run)
    if as_json:
        click.echo(json.dumps(by_tag))
        return
    if not by_tag:
        console.print("no tag yet: `analyze tag add NAME RUN...`", markup=False)
    for name, runs in by_tag.items():
        console.print(visible(f"{name}: {', '.join(runs)}"), markup=False)


def _rules(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[Any]:
    from .analyses.rules import RuleError, parse_rule

    try:
        return [parse_rule(v) for v in values]
    except RuleError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


@main.command()
@click.argument("run_name", metavar="RUN")
@click.option("--against", required=True, help="The baseline: baseline:NAME, or a run name.")
@click.option(
    "--fail-if",
    "rules",
    multiple=True,
    required=True,
    callback=_rules,
    help='A rule, e.g. "step_time > +5%", "comm_not_overlapped > +3ms", "peak_memory > +100MB" (repeatable).',
)
@compare_options
@click.option(
    "--no-noise-test",
    is_flag=True,
    help="Count a change that exceeds its threshold even when it is within the step-to-step noise.",
)
@json_option("Print the result as JSON.")
@store_option
def check(
    run_name: str,
    against: str,
    rules: list[Any],
    base_step: int | None,
    new_step: int | None,
    ranks: list[int] | None,
    no_noise_test: bool,
    as_json: bool,
    store: Store,
) -> None:
    """The CI gate: compare RUN with a baseline; exit 1 when a --fail-if rule is broken.

    Exit codes: 0 every rule holds; 1 a rule is broken (explained, and --json); 2 bad usage, or the
    check cannot be made (unknown run or baseline, a metric the runs do not have).
    A change counts only when it is beyond the step-to-step noise of the two runs (Yuen's trimmed t, 99 %)
    unless --no-noise-test. Rules: METRIC COMPARATOR THRESHOLD with metrics step_time, computing,
    comm_not_overlapped, overlapped, communication, free, preparing, stage, bubble, peak_memory,
    peak_reserved, op:NAME, kernel:NAME (max(...), min(...), sum(...) over ranks) and thresholds
    +N% / -N% (relative), +N ms / +N MB (absolute change), N ms / N MB (the run's own value).
    """
    from .analyses.compare_report import check_json, dumps, print_check
    from .analyses.rules import check as run_check

    try:
        c = run_check(store, run_name, against, rules, base_step, new_step, ranks, noise_test=not no_noise_test)
    except AnalyzerError as exc:
        err_console.print("error: " + lit(exc, lines=True), style="bold red")
        sys.exit(2)
    if as_json:
        click.echo(dumps(check_json(c.pairing, c.results, c.verdict)))
    else:
        print_check(c.pairing, c.results, c.verdict, console)
    sys.exit(1 if c.failed else 0)


@main.command()
@click.option("--metric", default="step_time", show_default=True, help="What to follow (the metrics of `check`).")
@click.option("--last", default=20, show_default=True, type=click.IntRange(1), help="The most recent runs shown.")
@click.option("--tag", "tags", multiple=True, help="Only runs carrying this tag (repeatable: any of them).")
@click.option(
    "--by",
    type=click.Choice(["ingest", "collection"]),
    default="ingest",
    show_default=True,
    help="Order runs by when they were first ingested, or by when they were collected.",
)
@json_option()
@store_option
@handle_errors
def trend(metric: str, last: int, tags: tuple[str, ...], by: str, as_json: bool, store: Store) -> None:
    """A metric over the runs of the store, oldest first, with baselines and tags marked."""
    from .analyses.compare_report import dumps, print_trend, trend_json
    from .analyses.run_metrics import parse_metric
    from .analyses.trend import trend as run_trend

    try:
        m = parse_metric(metric)
    except AnalyzerError as exc:
        raise click.BadParameter(str(exc), param_hint="--metric") from None
    df = run_trend(store, m, last, tags, by)
    if as_json:
        click.echo(dumps(trend_json(df, m)))
        return
    print_trend(df, m, console)


def run() -> None:
    """The ``analyze`` program: run the command, flush its output, then leave at once. Skipping the
    interpreter's teardown (freeing every object of pandas, pyarrow, DuckDB) saves ~0.15 s on
    every command; everything the command wrote is closed by then. Tests call ``main`` (a click
    group) with click's CliRunner instead."""
    global _PROGRAM
    _PROGRAM = True
    code: int | str | None = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)


if __name__ == "__main__":
    run()
