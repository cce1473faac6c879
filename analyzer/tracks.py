"""The timeline's counter tracks as the store defines them: which samples make a track (rank, label,
unit), shared by the ingest (the ``agg_counter_curve`` aggregate, ``ingest.aggregate``) and the web
app (``webapp.counter_tracks``), so the stored curves and the exact samples are the same tracks."""

from __future__ import annotations

# one row per sample of a track (rank, label, unit) over ``{source}`` (the rows of ``memory_samples``
# / ``counters``): the allocators' allocated memory, not the driver modules' (per module, reserved
# only: the Memory page's), and every counter
DRIVER_SOURCES = ("npu_module_mem", "NPU_MODULE_MEM")
MEMORY_TRACK_ROWS = f"""
SELECT rank, true AS allocator, false AS memory,
       component || CASE WHEN coalesce(device, '') = '' THEN '' ELSE ' (' || device || ')' END AS label,
       'bytes' AS unit, ts_ns, allocated_bytes::DOUBLE AS value
FROM {{source}}
WHERE ts_ns IS NOT NULL AND allocated_bytes IS NOT NULL AND coalesce(source, '') NOT IN {DRIVER_SOURCES}
"""
COUNTER_TRACK_ROWS = """
SELECT rank, false AS allocator, coalesce(process, '') ILIKE '%mem%' AS memory,
       CASE WHEN coalesce(process, '') = '' OR name LIKE process || '%' THEN name ELSE process || ' · ' || name END
         AS label,
       coalesce(series, '') AS unit, ts_ns, value
FROM {source}
WHERE ts_ns IS NOT NULL AND value IS NOT NULL
"""
TRACK_SOURCES = ((MEMORY_TRACK_ROWS, "memory_samples"), (COUNTER_TRACK_ROWS, "counters"))
