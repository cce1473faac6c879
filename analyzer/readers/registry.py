"""What discovery asks the families and producers, in order (as perfetto's importer registry sniffs a
trace's type): each answers for the folders and files it recognises, by name or by content; the first
answer wins. The naming rules themselves live with their family or producer, once.

- ``folder_kind(name)``: a producer folder (CANN family: ``*_ascend_pt``, ``*_ascend_ms``, ``PROF_*``,
  ``mindstudio_profiler_output``), or None for an ordinary folder to walk into;
- ``file_kind(path)``: a single file's kind ('collector_sidecar', 'collector_scalars', 'msprof_db',
  'trace_view', 'kineto'), 'ignore:<reason>', or the problem that stops a trace-like file from being read;
- ``flat_groups(names)``: files of one folder that form collections together (MindSpore <= 2.2's
  ``*_{rank}`` files), by rank;
- ``run_file(rel)``: a file that belongs to the whole run ('communication_group': read with the run's
  first collection, ``read_run_file``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..messages import problem
from . import collector, kineto
from .ascend import names as ascend_names
from .ascend.cluster import is_communication_group, read_communication_group
from .base import ReadContext
from .mindspore.legacy import legacy_extras, legacy_groups

FOLDER_DETECTORS: tuple[Callable[[str], str | None], ...] = (ascend_names.folder_kind,)
FILE_DETECTORS: tuple[Callable[[Path], str | None], ...] = (collector.detect, ascend_names.file_kind, kineto.detect)


def folder_kind(name: str) -> str | None:
    for detect in FOLDER_DETECTORS:
        kind = detect(name)
        if kind is not None:
            return kind
    return None


def file_kind(path: Path) -> str:
    for detect in FILE_DETECTORS:
        kind = detect(path)
        if kind is not None:
            return kind
    return "ignore:" + problem("ignored.unknown")


def flat_groups(filenames: list[str]) -> tuple[dict[int, list[str]], dict[str, str]]:
    """({rank: file names} of the files of one folder that form a collection per rank, {name: why not
    ingested} of the files that only come with them)."""
    groups = legacy_groups(filenames)
    return groups, (legacy_extras(filenames) if groups else {})


def run_file(rel: Path) -> str | None:
    """The kind of a file that belongs to the whole run (``rel``: relative to the run root), or None."""
    return "communication_group" if is_communication_group(rel) else None


RUN_FILE_READERS: dict[str, Callable[[ReadContext, Path], None]] = {"communication_group": read_communication_group}


def read_run_file(ctx: ReadContext, kind: str, path: Path) -> None:
    RUN_FILE_READERS[kind](ctx, path)
