"""What every reader gets: the collection plan, a fact writer and a place to report each file.

A reader is a function ``read(ctx: ReadContext) -> None`` registered under its producer name.
It reads the collection's files, writes facts through ``ctx.write(table, data)``, fills
``ctx.meta`` and reports every file it touched with ``ctx.reading(path, reader)``:

    with ctx.reading(path, "kernel_details.csv") as f:
        rows = parse(path)
        f.rows += ctx.write("kernels", rows)

An exception inside ``reading`` is recorded against that file (``InputError`` messages as they
are, anything else with its type) and the reader goes on with the next file.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..errors import InputError
from ..factwriter import FactWriter, Origin
from ..messages import problem
from ..store import scratch_folder

# the collector's description of one profiling window, in the window's folder: it covers every
# collection below that folder (CollectionPlan.sidecar), whoever wrote them
SIDECAR_NAME = "rankscope_window.json"


@dataclass
class CollectionPlan:
    """One unit of ingest, found by discovery: one rank's output of one profiling window."""

    collection_id: str
    run: str
    producer: str
    root: Path  # absolute: a directory, or the file itself for single-file collections
    rel_root: str  # relative to the run root
    files: list[Path]  # absolute paths of every file that belongs to the collection
    rank: int | None = None
    rank_source: str | None = None
    sidecar: dict[str, Any] | None = None  # collector sidecar that covers this collection
    hints: dict[str, Any] = field(default_factory=dict)
    # files of the whole run read with this collection, after its producer's reader (kind, path; see
    # readers.registry.run_file); not in ``files``, which are the producer's
    run_files: list[tuple[str, Path]] = field(default_factory=list)

    @property
    def all_files(self) -> list[Path]:
        """``files`` and the run files: everything the collection depends on."""
        return self.files + [p for _kind, p in self.run_files]


@dataclass
class FileOutcome:
    path: Path
    reader: str
    status: str = "ok"  # ok | warning | error | ignored
    error: str | None = None
    rows: int = 0
    sha256: str | None = None  # set by a reader that hashed the whole file while reading it

    def warn(self, message: str) -> None:
        if self.status == "ok":
            self.status = "warning"
        if self.error and message in self.error.split("; "):  # said once (a problem of every batch)
            return
        self.error = message if not self.error else f"{self.error}; {message}"

    def warn_all(self, messages: list[str]) -> None:
        for m in messages:
            self.warn(m)


@dataclass
class CollectionMeta:
    producer_version: str | None = None
    world_size: int | None = None
    hostname: str | None = None
    device_id: int | None = None
    level: str | None = None
    status: str | None = None  # reader's verdict; None = derive from file outcomes
    capabilities: set[str] = field(default_factory=set)
    missing: list[str] = field(default_factory=list)
    config: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# what a collection holds, named by the fact table that holds it (the overview's "what each rank recorded")
TABLE_CAPABILITIES = (
    ("operators", "operators"),
    ("kernels", "kernels"),
    ("kernel_metrics", "kernel_metrics"),
    ("comm_ops", "communication"),
    ("comm_links", "comm_matrix"),
    ("memory_samples", "memory"),
    ("operator_memory", "operator_memory"),
    ("steps", "steps"),
    ("step_trace", "step_trace"),
    ("statistics", "statistics"),
    ("counters", "counters"),
    ("slices", "timeline"),
)


class ReadContext:
    def __init__(self, plan: CollectionPlan, writer: FactWriter, cores: int = 1):
        self.plan = plan
        self.writer = writer
        self.cores = cores  # cores this reader may use (a spare one reads ahead and encodes Parquet in threads)
        self.meta = CollectionMeta()
        self.outcomes: dict[Path, FileOutcome] = {}
        self._reading: list[FileOutcome] = []  # the files being read (``reading`` blocks), innermost last
        self._scratch: Path | None = None

    @property
    def rank(self) -> int:
        return self.writer.rank

    def write(self, table: str, data: Any, origin: Origin | None = None, files: list[Path] | None = None) -> int:
        """Rows to a fact table; values that could not be stored as given (``FactWriter.write``:
        times out of range, numbers beyond 64 bits) are named on the file being read (``note``),
        or, for rows written after their files were read (staged rows), on each row's own file:
        ``origin`` gives per row its index in ``files`` and its number there."""
        n = self.writer.write(table, data, origin)
        for f, said in self.writer.take_problems():
            outcome = self.outcomes.get(files[f]) if f is not None and files is not None and f < len(files) else None
            if outcome is not None:
                outcome.warn(said)
            else:
                self.note(said)
        return n

    def note(self, problem: str) -> None:
        """A warning on the file being read (inside ``reading``), else on the file read last: the
        rows a reader writes after its files were read (staged rows) come from them."""
        if self._reading:
            self._reading[-1].warn(problem)
            return
        for outcome in reversed(self.outcomes.values()):
            if outcome.status != "ignored":
                outcome.warn(problem)
                return
        self.meta.missing.append(problem)

    @contextlib.contextmanager
    def reading(self, path: Path, reader: str) -> Iterator[FileOutcome]:
        outcome = self.outcomes.get(path)
        if outcome is None or outcome.status == "ignored":
            outcome = FileOutcome(path, reader)
            self.outcomes[path] = outcome
        self._reading.append(outcome)
        numbering, self.writer.numbering = self.writer.numbering, path  # row numbers in problems: per file
        try:
            yield outcome
        except InputError as exc:
            outcome.status = "error"
            outcome.error = exc.problem
        except OSError as exc:  # permissions, a file that vanished or is a folder
            outcome.status = "error"
            outcome.error = problem("cannot_read", detail=exc.strerror or exc)
        except Exception as exc:  # noqa: BLE001 - any failure is recorded against the file
            outcome.status = "error"
            outcome.error = f"{type(exc).__name__}: {exc}"
        finally:
            self._reading.pop()
            self.writer.numbering = numbering

    def add_table_capabilities(self) -> None:
        """A capability for every fact table this collection wrote (TABLE_CAPABILITIES)."""
        for table, cap in TABLE_CAPABILITIES:
            if self.writer.has(table):
                self.meta.capabilities.add(cap)

    def ignore(self, path: Path, reason: str) -> None:
        if path not in self.outcomes:
            self.outcomes[path] = FileOutcome(path, "ignored", status="ignored", error=reason)

    def scratch_dir(self) -> Path:
        """A private temporary folder in the store (``store.scratch_folder``), removed when the
        collection is done (a killed ingest's: by the next ingest)."""
        if self._scratch is None:
            self._scratch = scratch_folder(self.writer.store_path)
        return self._scratch

    def cleanup(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None


Reader = Callable[[ReadContext], None]
READERS: dict[str, Reader] = {}


def register(producer: str) -> Callable[[Reader], Reader]:
    def deco(fn: Reader) -> Reader:
        READERS[producer] = fn
        return fn

    return deco


class PartReader(Protocol):
    """A producer whose collection can be read by several processes at once (one big file cut in
    ranges): ``split`` gives the parts (picklable specs) or None (read whole); ``read`` reads one
    part into its own fact files and returns what ``finish`` needs (picklable); ``finish`` merges
    the parts' states in a context of its own and writes the rest. ``finish`` raises when the parts
    cannot be joined (the collection is then read whole)."""

    def split(self, plan: CollectionPlan, parts: int, store_path: str) -> list[dict[str, Any]] | None: ...

    def read(self, ctx: ReadContext, spec: dict[str, Any]) -> Any: ...

    def finish(self, ctx: ReadContext, states: list[Any]) -> None: ...


PART_READERS: dict[str, PartReader] = {}
