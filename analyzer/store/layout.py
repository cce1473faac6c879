"""Where things are: the store folder and the names inside it."""

from __future__ import annotations

import os
import re
from pathlib import Path

DEFAULT_STORE_DIRNAME = "rankscope_store"
STORE_ENV_VAR = "RANKSCOPE_STORE"
CATALOG_FILE = "catalog.duckdb"
FACTS_DIR = "facts"
LOCK_FILE = ".ingest.lock"


def resolve_store_path(path: str | os.PathLike[str] | None = None) -> Path:
    """--store PATH, else $RANKSCOPE_STORE, else ./rankscope_store."""
    if path:
        return Path(path).expanduser().resolve()
    env = os.environ.get(STORE_ENV_VAR)
    if env:
        return Path(env).expanduser().resolve()
    return (Path.cwd() / DEFAULT_STORE_DIRNAME).resolve()


def slug(text: str) -> str:
    """A file-system-safe rendering of a run name for partition folders."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")
    return s or "run"
