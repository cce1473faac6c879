"""The one place a reader keeps rows it can only finish at the end of a file (self time, steps,
names or a time base defined later in the file), so memory stays bounded while a big trace streams by.

Rows are appended by name as Arrow tables. They are held in memory up to ``HOLD_BYTES`` in all;
beyond that every name goes to a scratch Arrow IPC file in the reader's scratch folder (no encoding
or compression: written and read back at memory speed). ``close()`` hands back one ``Staged`` per
name, to read batch by batch, as a few columns, or as a whole table (a file is memory-mapped).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa


class Staged:
    """The rows of one name: in memory, or in scratch Arrow IPC files (several when the rows of
    one name were staged by several readers, one after the other: see ``joined``)."""

    def __init__(self, tables: list[pa.Table] | None = None, path: str | None = None, paths: list[str] | None = None):
        self.tables = tables or []
        self.paths = list(paths or ([] if path is None else [path]))

    @classmethod
    def joined(cls, parts: list[Staged]) -> Staged:
        """The rows of ``parts``, in that order (each part's files, or its tables)."""
        if all(not p.paths for p in parts):
            return cls(tables=[t for p in parts for t in p.tables])
        if any(p.tables for p in parts):
            raise ValueError("staged rows in memory and in files cannot be joined")
        return cls(paths=[f for p in parts for f in p.paths])

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The rows, batch by batch (a file is read one batch at a time, not memory-mapped)."""
        if not self.paths:
            for t in self.tables:
                yield from t.to_batches()
            return
        for path in self.paths:
            with pa.OSFile(path) as f:
                r = pa.ipc.open_file(f)
                for i in range(r.num_record_batches):
                    yield r.get_batch(i)

    def table(self) -> pa.Table:
        """All rows (from files: memory-mapped, so only the columns used are read)."""
        if not self.paths:
            return pa.concat_tables(self.tables) if len(self.tables) != 1 else self.tables[0]
        parts = [pa.ipc.open_file(pa.memory_map(p)).read_all() for p in self.paths]
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts)

    def columns(self, names: list[str]) -> pa.Table:
        """Some columns of all rows, each in one chunk."""
        return self.table().select(names).combine_chunks()


class SpillStage:
    """Rows finished at the end, by name; spilled to ``folder`` beyond ``HOLD_BYTES`` held."""

    HOLD_BYTES = 64 << 20

    def __init__(self, folder: Path, hold_bytes: int | None = None):
        self.folder = folder
        # 0: every row to a file (rows another process finishes)
        self.hold_bytes = self.HOLD_BYTES if hold_bytes is None else hold_bytes
        self.held: dict[str, list[pa.Table]] = {}
        self.held_bytes = 0
        self.writers: dict[str, pa.ipc.RecordBatchFileWriter] = {}
        self.schemas: dict[str, pa.Schema] = {}

    def write(self, name: str, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        sch = self.schemas.setdefault(name, table.schema)
        if table.schema != sch:
            table = table.cast(sch)
        w = self.writers.get(name)
        if w is not None:
            w.write_table(table)
            return
        self.held.setdefault(name, []).append(table)
        self.held_bytes += table.nbytes
        if self.held_bytes > self.hold_bytes:
            self._spill()

    def _spill(self) -> None:
        for name, tables in self.held.items():
            w = self.writers.get(name)
            if w is None:
                w = self.writers[name] = pa.ipc.new_file(str(self.folder / f"{name}.arrow"), self.schemas[name])
            for t in tables:
                w.write_table(t)
        self.held.clear()
        self.held_bytes = 0

    def close(self) -> dict[str, Staged]:
        out: dict[str, Staged] = {}
        for name, w in self.writers.items():
            for t in self.held.pop(name, []):
                w.write_table(t)
            w.close()
            out[name] = Staged(path=str(self.folder / f"{name}.arrow"))
        for name, tables in self.held.items():
            out[name] = Staged(tables=tables)
        self.writers = {}
        self.held = {}
        return out
