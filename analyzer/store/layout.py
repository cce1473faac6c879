"""Where things are: the store folder and the names inside it."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

DEFAULT_STORE_DIRNAME = "rankscope_store"
STORE_ENV_VAR = "RANKSCOPE_STORE"
CATALOG_FILE = "catalog.duckdb"
FACTS_DIR = "facts"
# an aggregate's run-level file (``analyzer.ingest.compact``): facts/<table>/run=<slug>/<RUN_FILE_PREFIX><uuid>.parquet,
# beside the rank=<r>/ folders of the per-collection files, holding every collection of the run
RUN_FILE_PREFIX = "run-"
LOCK_FILE = ".ingest.lock"
# the readers' temporary files (spilled rows, the parts of a trace read by several processes): in the store,
# not the system's temporary folder, so that what a killed ingest left is removed by the next holder of
# the ingest lock (Store.ingest_lock)
SCRATCH_DIR = ".scratch"


def scratch_folder(store_path: str | os.PathLike[str]) -> Path:
    """A fresh temporary folder of an ingest's reader in the store's scratch folder (``SCRATCH_DIR``);
    the reader removes it when done, the ingest lock's next holder whatever a kill left."""
    import tempfile

    root = Path(store_path) / SCRATCH_DIR
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=root))


def resolve_store_path(path: str | os.PathLike[str] | None = None) -> Path:
    """--store PATH, else $RANKSCOPE_STORE, else ./rankscope_store."""
    if path:
        return Path(path).expanduser().resolve()
    env = os.environ.get(STORE_ENV_VAR)
    if env:
        return Path(env).expanduser().resolve()
    return (Path.cwd() / DEFAULT_STORE_DIRNAME).resolve()


def slug(text: str) -> str:
    """A file-system-safe rendering of a run name for partition folders: at most 100 characters (a
    longer one is cut and ends with a hash of the whole name), whatever the name holds."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "run"
    if len(s) > 100:
        s = f"{s[:87]}-{hashlib.sha1(text.encode('utf-8', 'surrogateescape')).hexdigest()[:12]}"
    return s


def is_run_file(path: str) -> bool:
    """Whether a fact file is an aggregate's run-level file (in its run's folder, not a rank's):
    it holds the rows of every collection of the run, each listed by its own ``fact_files`` row."""
    return os.path.basename(os.path.dirname(path)).startswith("run=")
