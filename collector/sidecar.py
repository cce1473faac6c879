"""The window sidecar ``rankscope_window.json``: written when a window starts, updated as it goes.

``analyze ingest`` reads it to know the rank, world size, host and framework of the window and
whether the window ended normally (``status``: ``running`` while profiling, then ``complete`` or
``aborted``; ``captured_steps`` lists the steps whose data is on disk; ``reason`` says why a
window was aborted). Every write replaces the file atomically (write + rename), so a crash never
leaves half a sidecar.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

SIDECAR_NAME = "rankscope_window.json"
SCHEMA = "rankscope.window/1"


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, default=str)
        f.write("\n")
    os.replace(tmp, path)


class WindowSidecar:
    """The sidecar of one window folder."""

    def __init__(self, folder: Path, fields: dict[str, Any]):
        self.folder = folder
        self.path = folder / SIDECAR_NAME
        self.data: dict[str, Any] = {"schema": SCHEMA, **fields}
        self.data.setdefault("status", "running")
        self.data.setdefault("captured_steps", [])
        self.data.setdefault("files", [])  # output files on disk so far, relative to the folder
        self.data.setdefault("reason", None)
        self.data.setdefault("started_at", utc_now())
        self.data.setdefault("stopped_at", None)
        self.write()

    def write(self) -> None:
        write_json_atomic(self.path, self.data)

    def captured(self, step: int) -> None:
        """A step's data is on disk."""
        self.data["captured_steps"].append(step)
        self.write()

    def update(self, **fields: Any) -> None:
        self.data.update(fields)
        self.write()

    def finish(self, status: str, reason: str | None = None, **fields: Any) -> None:
        self.data.update(status=status, reason=reason, stopped_at=utc_now(), **fields)
        self.write()
