"""Scratch Parquet files for rows a reader can only finish at the end (self time, steps, names
defined later in the file), so memory stays bounded by the block size while a big trace streams by."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


class ScratchStage:
    """Append Arrow tables by name to ``<folder>/<name>.parquet``; ``close()`` returns the paths."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.writers: dict[str, pq.ParquetWriter] = {}
        self.rows: dict[str, int] = {}

    def write(self, name: str, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        w = self.writers.get(name)
        if w is None:
            w = pq.ParquetWriter(str(self.folder / f"{name}.parquet"), table.schema, compression="lz4")
            self.writers[name] = w
        elif table.schema != w.schema:
            table = table.cast(w.schema)
        w.write_table(table)
        self.rows[name] = self.rows.get(name, 0) + table.num_rows

    def close(self) -> dict[str, str]:
        for w in self.writers.values():
            w.close()
        out = {name: str(self.folder / f"{name}.parquet") for name in self.writers}
        self.writers = {}
        return out
