"""The one schema of the rankscope store.

Every table and every column is declared here, once, with its type and a comment. The catalog
tables live in the DuckDB file (``catalog.duckdb``); the fact tables are Parquet files, one file per
(table, run, rank, collection), listed in the catalog's ``fact_files`` table.

Conventions (converted once, at ingest):
- times are integer nanoseconds (``*_ns``), absolute timestamps on the producer's host clock
  (Unix epoch), durations as differences;
- memory in bytes (``*_bytes``), bandwidth in bytes per second (``*_bytes_per_s``);
- every fact row carries ``run``, ``rank`` and ``collection_id`` so any subset can be read alone.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # DuckDB type
    doc: str
    # a column added after stores were written: how a view computes it from the other columns of a
    # file written before (``store.sql.fact_select_sql``); an ingest reads such a collection again.
    # A column added without it reads NULL from such files (every column may be absent from a file).
    derive: str | None = None


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple[Column, ...]

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"{self.name} has no column {name}")


def _c(name: str, type_: str, doc: str, derive: str | None = None) -> Column:
    return Column(name, type_, doc, derive)


# the link id of a slice in its JSON args, as the readers wrote them before ``slices.link`` existed
# (factwriter.slice_links computes the same at ingest)
LINK_KEYS = ("connection_id", "correlation")
LINK_FROM_ARGS_SQL = (
    "CASE WHEN "
    + " OR ".join(f"args LIKE '%{k}%'" for k in LINK_KEYS)
    + " THEN coalesce("
    + ", ".join(f"TRY_CAST(json_extract_string(args, '$.{k}') AS BIGINT)" for k in LINK_KEYS)
    + ") END"
)


# Every *_ns column of a fact table (an instant or a duration) lies in [0, MAX_TIME_NS): no profile is
# timed after 2100-01-01T00:00:00Z, and nothing it holds lasts longer (units.time_problems keeps
# other values out at ingest; the analyses' views leave out rows of older stores that hold them)
MAX_TIME_NS = 4_102_444_800 * 1_000_000_000

# Columns every fact row starts with.
FACT_KEY = (
    _c("run", "VARCHAR", "Run name (one ingested profile root)."),
    _c("rank", "INTEGER", "Global rank of the process that produced the data."),
    _c("collection_id", "VARCHAR", "Collection (one rank's output of one profiling window) the row comes from."),
)

# ---------------------------------------------------------------------------------------------
# Catalog tables (DuckDB)
# ---------------------------------------------------------------------------------------------

SCHEMA_VERSION = 1

CATALOG_TABLES: tuple[Table, ...] = (
    Table(
        "store_info",
        "Key/value facts about the store itself (schema_version, created_at).",
        (
            _c("key", "VARCHAR", "Setting name."),
            _c("value", "VARCHAR", "Setting value."),
        ),
    ),
    Table(
        "runs",
        "One row per run: an ingested profile root. Several runs live side by side in one store.",
        (
            _c("run", "VARCHAR", "Run name, unique in the store (the folder name unless --run NAME)."),
            _c("root_path", "VARCHAR", "Absolute path of the ingested profile root."),
            _c("created_at", "TIMESTAMP", "When the run was first ingested (UTC)."),
            _c("updated_at", "TIMESTAMP", "When the run was last (re-)ingested (UTC)."),
        ),
    ),
    Table(
        "collections",
        "One row per collection: one rank's output of one profiler window (a repeat cycle or a "
        "dynamic-profiling window gives several collections for the same rank; they are kept apart).",
        (
            _c("collection_id", "VARCHAR", "Stable id: hash of run and the collection's relative root path."),
            _c("run", "VARCHAR", "Run the collection belongs to."),
            _c(
                "rank",
                "INTEGER",
                "Global rank (from sidecar, rank_{id} folder, producer metadata; see docs/formats.md §7.5).",
            ),
            _c(
                "rank_source",
                "VARCHAR",
                "Where the rank was found (sidecar, rank_dir, profiler_info, db_name, distributedInfo, ...).",
            ),
            _c("producer", "VARCHAR", "Format reader: kineto, torch_npu_text, torch_npu_db, ..."),
            _c("producer_version", "VARCHAR", "Producer version string when known (torch_npu, CANN, Kineto schema)."),
            _c("root_path", "VARCHAR", "Collection root relative to the run root (a file for Kineto traces)."),
            _c("world_size", "INTEGER", "Number of ranks in the job when known."),
            _c("hostname", "VARCHAR", "Host that produced the data when known."),
            _c("device_id", "INTEGER", "Accelerator device id when known (not the rank)."),
            _c("level", "VARCHAR", "Profiler level (Level0/Level1/Level2) when known."),
            _c("start_ns", "BIGINT", "Earliest event timestamp in the collection (ns, host clock)."),
            _c("end_ns", "BIGINT", "Latest event end in the collection (ns, host clock)."),
            _c("steps", "INTEGER[]", "Step ids found in the collection."),
            _c(
                "status",
                "VARCHAR",
                "complete | partial (some files bad, or the job died mid-window) | unparsed (raw only) | error.",
            ),
            _c(
                "capabilities",
                "VARCHAR[]",
                "What the data supports: operators, kernels, communication, comm_matrix, memory, stacks, shapes, "
                "steps, scalars.",
            ),
            _c(
                "missing",
                "VARCHAR[]",
                "Plain sentences explaining what is missing and why (e.g. 'Level0: no communication matrix').",
            ),
            _c("config", "JSON", "Profiler configuration as recorded by the producer."),
            _c("meta", "JSON", "Other producer metadata (distributedInfo, sidecar, env variables...)."),
            _c("n_rows", "BIGINT", "Total fact rows written for the collection."),
            _c("ingested_at", "TIMESTAMP", "When the collection was last read (UTC)."),
        ),
    ),
    Table(
        "source_files",
        "Every file seen under a run root: what read it, whether it was fine, and why not.",
        (
            _c("run", "VARCHAR", "Run the file belongs to."),
            _c("path", "VARCHAR", "Path relative to the run root."),
            _c("collection_id", "VARCHAR", "Collection the file belongs to (NULL for files outside any collection)."),
            _c("size_bytes", "BIGINT", "File size when read."),
            _c("mtime_ns", "BIGINT", "Modification time when read (ns)."),
            _c("sha256", "VARCHAR", "SHA-256 of the content when read."),
            _c("reader", "VARCHAR", "Reader that handled the file (e.g. kineto, kernel_details.csv), or 'ignored'."),
            _c("status", "VARCHAR", "ok | warning (read, with a problem) | error (not read) | ignored."),
            _c("error", "VARCHAR", "What was wrong, naming the problem (NULL when ok)."),
            _c("rows", "BIGINT", "Fact rows produced from the file."),
            _c("ingested_at", "TIMESTAMP", "When the file was last read (UTC)."),
        ),
    ),
    Table(
        "run_tags",
        "Names users give runs: baselines (`analyze baseline tag NAME RUN`: a name for one run, moved by "
        "tagging another run with it) and tags (`analyze tag add TAG RUN...`: a label any number of runs carry). "
        "A run's names leave with it (`analyze drop`).",
        (
            _c("kind", "VARCHAR", "baseline (the name points at exactly one run) | tag (a label on several runs)."),
            _c("name", "VARCHAR", "The baseline or tag name (`analyze check --against baseline:NAME`)."),
            _c("run", "VARCHAR", "Run the name is on."),
            _c("tagged_at", "TIMESTAMP", "When the name was put on the run (UTC)."),
        ),
    ),
    Table(
        "fact_files",
        "The Parquet files that hold the facts: one per (table, collection); an aggregate of a run of several "
        "collections, one per (table, run), listed by each of its collections (analyzer.ingest.compact). Only files "
        "listed here are part of the store.",
        (
            _c("run", "VARCHAR", "Run."),
            _c("collection_id", "VARCHAR", "Collection."),
            _c("rank", "INTEGER", "Rank."),
            _c("table_name", "VARCHAR", "Fact table the file belongs to."),
            _c("path", "VARCHAR", "Path relative to the store folder."),
            _c("rows", "BIGINT", "Row count (of a run file: the collection's rows in it)."),
            _c("size_bytes", "BIGINT", "File size (of a run file: the collection's share, by its rows)."),
        ),
    ),
    Table(
        "run_results",
        "Analyses of a whole run stored when it was ingested (``analyzer.ingest.run_results``): those that match "
        "every collective across the ranks or read every step of every rank, which a page would otherwise compute "
        "on its first view. One Parquet file per (run, analysis), holding the rows the analysis returns; valid while "
        "the run's content is the one it was computed from (``run_key``): an ingest that changes the run drops "
        "them and computes them again; and served only while the analysis' code is the version that computed it "
        "(``analyzer.versions``, in the file's metadata).",
        (
            _c("run", "VARCHAR", "Run."),
            _c("analysis", "VARCHAR", "The analysis (its function: module.name)."),
            _c("run_key", "VARCHAR", "The content of the run it was computed from (analyzer.store.run_key)."),
            _c("path", "VARCHAR", "Path of its Parquet file relative to the store folder."),
            _c("rows", "BIGINT", "Row count."),
            _c("seconds", "DOUBLE", "Time the analysis took at ingest."),
            _c("computed_at", "TIMESTAMP", "When it was computed (UTC)."),
        ),
    ),
)

# ---------------------------------------------------------------------------------------------
# Fact tables (Parquet)
# ---------------------------------------------------------------------------------------------

FACT_TABLES: tuple[Table, ...] = (
    Table(
        "steps",
        "Training steps (iterations) per rank: ProfilerStep#N ranges, DB STEP_TIME rows, collector steps.",
        FACT_KEY
        + (
            _c("step", "INTEGER", "Step id as numbered by the producer (ProfilerStep#N, Step Id)."),
            _c("start_ns", "BIGINT", "Step start (ns)."),
            _c("end_ns", "BIGINT", "Step end (ns)."),
            _c("dur_ns", "BIGINT", "Step duration (ns)."),
            _c("source", "VARCHAR", "Where the step came from (ProfilerStep, STEP_TIME, collector)."),
        ),
    ),
    Table(
        "lanes",
        "Timeline lanes: one row per (pid, tid) seen in a trace, with process and thread names and "
        "the lane group it is drawn in.",
        FACT_KEY
        + (
            _c("pid", "VARCHAR", "Producer process id as written (may be a string such as 'Spans')."),
            _c("tid", "VARCHAR", "Producer thread / stream id as written."),
            _c(
                "process", "VARCHAR", "Process name (M process_name): Python, CANN, Ascend Hardware, HCCL, python3, ..."
            ),
            _c("lane", "VARCHAR", "Lane name (M thread_name, or 'Thread N' / 'Stream N')."),
            _c(
                "lane_group",
                "VARCHAR",
                "host | device | communication | overlap | other: which group the lane is drawn in.",
            ),
            _c("sort_index", "BIGINT", "Producer's sort index for the lane, when given."),
            _c("n_slices", "BIGINT", "Number of slices on the lane."),
        ),
    ),
    Table(
        "slices",
        "Timeline slices: every complete (X) or instant (i) event of a trace on a host thread, device "
        "stream or communication lane. Join lanes on (run, rank, collection_id, pid, tid) for names.",
        FACT_KEY
        + (
            _c("pid", "VARCHAR", "Producer process id as written."),
            _c("tid", "VARCHAR", "Producer thread / stream id as written."),
            _c("name", "VARCHAR", "Event name as written by the program (shown as text, never HTML)."),
            _c("category", "VARCHAR", "Event category (cpu_op, user_annotation, kernel, python_function, ...)."),
            _c("ts_ns", "BIGINT", "Start (ns)."),
            _c("dur_ns", "BIGINT", "Duration (ns); 0 for instant events."),
            _c("event_id", "BIGINT", "Position of the event in its source (stable within a collection)."),
            _c("args", "JSON", "Event arguments as written (shapes, call stack, ids...)."),
            _c(
                "link",
                "BIGINT",
                "Link id a host call shares with the device task it launched: torch_npu's connection_id (a CANN "
                "API call and its Ascend Hardware task), Kineto's correlation (cudaLaunchKernel and its kernel); "
                "from the args at ingest, NULL when they name none.",
                derive=LINK_FROM_ARGS_SQL,
            ),
        ),
    ),
    Table(
        "operators",
        "Framework (host) operators: aten ops, c10d ops, annotations, with self time from nesting.",
        FACT_KEY
        + (
            _c("step", "INTEGER", "Step the op starts in, when known."),
            _c("name", "VARCHAR", "Operator name (aten::addmm, c10d::allreduce_, ...)."),
            _c("category", "VARCHAR", "Event category (cpu_op, user_annotation)."),
            _c("tid", "VARCHAR", "Thread id."),
            _c("ts_ns", "BIGINT", "Start (ns)."),
            _c("dur_ns", "BIGINT", "Total (inclusive) duration (ns)."),
            _c("self_ns", "BIGINT", "Self (exclusive) duration: total minus direct children on the same thread (ns)."),
            _c("depth", "INTEGER", "Nesting depth on its thread (0 = top level)."),
            _c("input_shapes", "VARCHAR", "Input shapes as written (record_shapes)."),
            _c("input_types", "VARCHAR", "Input dtypes as written (record_shapes)."),
            _c("call_stack", "VARCHAR", "Python call stack, frames separated by newlines (with_stack)."),
            _c("sequence_number", "BIGINT", "Autograd sequence number (links forward and backward)."),
            _c("event_id", "BIGINT", "Position of the event in its source (matches slices.event_id)."),
            _c(
                "peer",
                "INTEGER",
                "The other rank of a point-to-point call (c10d::send: dst, c10d::recv_: src) as the call names it: "
                "its rank in the call's process group (torch's Concrete Inputs, with record_shapes); NULL when "
                "not recorded.",
            ),
            _c(
                "device_self_ns",
                "BIGINT",
                "Device time of the tasks the op launched itself (torch_npu operator_details.csv; db: tasks linked "
                "to the op), NULL when unknown.",
            ),
            _c(
                "device_total_ns",
                "BIGINT",
                "Device time of the tasks launched by the op and the ops nested in it, NULL when unknown.",
            ),
        ),
    ),
    Table(
        "kernels",
        "Device tasks: compute kernels, memory copies and communication kernels (one row per task).",
        FACT_KEY
        + (
            _c("kernel_id", "BIGINT", "Row number within the collection (joins kernel_metrics)."),
            _c("step", "INTEGER", "Step id when known."),
            _c("name", "VARCHAR", "Kernel / task name."),
            _c("op_type", "VARCHAR", "Operator type (Type / OP Type), NULL when not reported (Level0: N/A)."),
            _c(
                "core_type",
                "VARCHAR",
                "Accelerator core / task type (AI_CORE, AI_VECTOR_CORE, MIX_AIC, HCCL, kernel, gpu_memcpy...).",
            ),
            _c("is_communication", "BOOLEAN", "True for communication tasks (HCCL / NCCL kernels)."),
            _c("device_id", "INTEGER", "Device id when known."),
            _c("stream_id", "BIGINT", "Stream id when known."),
            _c("task_id", "BIGINT", "Task id when known."),
            _c("ts_ns", "BIGINT", "Start (ns)."),
            _c("dur_ns", "BIGINT", "Duration (ns)."),
            _c("wait_ns", "BIGINT", "Gap since the previous task on the stream (ns), when reported."),
            _c("block_dim", "BIGINT", "Cores used (Block Dim / Block Num), when reported."),
            _c("mix_block_dim", "BIGINT", "Mix block dim, when reported."),
            _c("op_state", "VARCHAR", "dynamic / static when reported."),
            _c("input_shapes", "VARCHAR", "Input shapes as written."),
            _c("input_dtypes", "VARCHAR", "Input data types as written."),
            _c("input_formats", "VARCHAR", "Input formats as written."),
            _c("output_shapes", "VARCHAR", "Output shapes as written."),
            _c("output_dtypes", "VARCHAR", "Output data types as written."),
            _c("output_formats", "VARCHAR", "Output formats as written."),
        ),
    ),
    Table(
        "kernel_metrics",
        "Per-kernel hardware metrics in long form (AI Core PMU columns, L2 cache hit rates, ...).",
        FACT_KEY
        + (
            _c("kernel_id", "BIGINT", "Kernel row (kernels.kernel_id)."),
            _c("metric", "VARCHAR", "Metric name as written by the producer (aic_mac_ratio, l2_hit_rate, ...)."),
            _c("value", "DOUBLE", "Value in the unit named by the metric."),
        ),
    ),
    Table(
        "comm_ops",
        "Communication operations per rank (collectives and point-to-point), with wait/transit split when the "
        "producer gives it.",
        FACT_KEY
        + (
            _c("step", "INTEGER", "Step id when known."),
            _c(
                "name",
                "VARCHAR",
                "Operation name as written (hcom_allReduce__586_0_1, gloo:all_reduce, ncclDevKernel_...).",
            ),
            _c(
                "op_type",
                "VARCHAR",
                "Normalised type: allreduce, allgather, reduce_scatter, broadcast, alltoall, send, recv, barrier, "
                "reduce, gather, scatter, other.",
            ),
            _c("group_name", "VARCHAR", "Communication group key (HCCL group hash or process group name)."),
            _c("group_ranks", "INTEGER[]", "Global ranks of the group when known."),
            _c("is_p2p", "BOOLEAN", "True for point-to-point operations."),
            _c("ts_ns", "BIGINT", "Start (ns)."),
            _c("dur_ns", "BIGINT", "Elapsed time (ns)."),
            _c("transit_ns", "BIGINT", "Time spent moving data (ns), when known."),
            _c("wait_ns", "BIGINT", "Time spent waiting for peers (ns), when known."),
            _c("sync_ns", "BIGINT", "Synchronisation time (ns), when known."),
            _c("idle_ns", "BIGINT", "Idle time = elapsed - transit - wait (ns), when known."),
            _c("bytes", "BIGINT", "Message size in bytes when known."),
            _c("dtype", "VARCHAR", "Data type when known."),
            _c("count", "BIGINT", "Element count when known."),
            _c("alg_type", "VARCHAR", "Algorithm (e.g. MESH-RING) when known."),
            _c("source", "VARCHAR", "Where the row came from (communication.json, COMMUNICATION_OP, kineto)."),
        ),
    ),
    Table(
        "comm_bandwidth",
        "Per communication op and transport: bytes moved, transit time, bandwidth, packet sizes.",
        FACT_KEY
        + (
            _c("step", "INTEGER", "Step id when known."),
            _c(
                "op_name",
                "VARCHAR",
                "Operation name (per-step totals such as 'Total Op Info' are not stored: sum the rows).",
            ),
            _c("group_name", "VARCHAR", "Communication group key."),
            _c("transport", "VARCHAR", "RDMA, HCCS, PCIE, SDMA, SIO, ..."),
            _c("bytes", "BIGINT", "Bytes moved (source MB x 10^6: Ascend communication files use decimal MB)."),
            _c("transit_ns", "BIGINT", "Transit time (ns)."),
            _c("bandwidth_bytes_per_s", "DOUBLE", "Bandwidth (bytes/s) as reported."),
            _c("large_packet_ratio", "DOUBLE", "Share of large packets (0..1)."),
            _c(
                "packet_size_bytes",
                "BIGINT",
                "Packet size of this size-distribution bucket (NULL for the transport summary row).",
            ),
            _c("packet_count", "BIGINT", "Packets of this size (NULL for the transport summary row)."),
            _c("packet_transit_ns", "BIGINT", "Transit time of the packets of this size (NULL for the summary row)."),
        ),
    ),
    Table(
        "comm_links",
        "Communication matrix entries: bytes, time and bandwidth per (src, dst) link.",
        FACT_KEY
        + (
            _c("step", "INTEGER", "Step id when known."),
            _c("op_key", "VARCHAR", "Matrix key as written (e.g. allreduce-top1, allreduce-total)."),
            _c("op_name", "VARCHAR", "Real op name of the chosen instance (NULL for totals)."),
            _c("group_name", "VARCHAR", "Communication group key."),
            _c("is_p2p", "BOOLEAN", "True for the p2p part of the matrix."),
            _c("src_local", "INTEGER", "Source rank local to the group (as written)."),
            _c("dst_local", "INTEGER", "Destination rank local to the group (as written)."),
            _c("src_rank", "INTEGER", "Source global rank (NULL if the group's layout is unknown)."),
            _c("dst_rank", "INTEGER", "Destination global rank (NULL if unknown)."),
            _c("transport", "VARCHAR", "Transport type (LOCAL, HCCS, RDMA, SDMA, PCIE, ...)."),
            _c("bytes", "BIGINT", "Bytes moved."),
            _c("transit_ns", "BIGINT", "Transit time (ns)."),
            _c("bandwidth_bytes_per_s", "DOUBLE", "Bandwidth (bytes/s)."),
        ),
    ),
    Table(
        "comm_groups",
        "Communication groups seen by a rank: key, name, global ranks and the rank's place in it.",
        FACT_KEY
        + (
            _c("group_name", "VARCHAR", "Group key as used in comm_ops.group_name (HCCL hash or process group name)."),
            _c("group_id", "VARCHAR", "HCCL group id or process group description when known."),
            _c("pg_name", "VARCHAR", "Parallel role when known (tp, dp, pp, cp, ep, default_pg, ...)."),
            _c("global_ranks", "INTEGER[]", "Global ranks in group order (index = local rank)."),
            _c("local_rank", "INTEGER", "This rank's index in the group when known."),
            _c("backend", "VARCHAR", "Backend (hccl, nccl, gloo) when known."),
            _c(
                "source",
                "VARCHAR",
                "Where the group came from (parallel_group_info, pg_config, record_param_comms...).",
            ),
        ),
    ),
    Table(
        "declared_groups",
        "Communication groups the job declares for all its ranks in a cluster-level file (msprof-analyze's "
        "communication_group.json in the run folder): members, role and traffic kind. Read once per run, "
        "with the run's first collection (its rank and collection_id).",
        FACT_KEY
        + (
            _c(
                "group_name",
                "VARCHAR",
                "Group key (the HCCL group hash, as in comm_ops.group_name; collective{i} / p2p{i} in the old format).",
            ),
            _c("group_id", "VARCHAR", "HCCL group id when declared."),
            _c("pg_name", "VARCHAR", "Parallel role as declared (tp, dp, pp, dp_cp, ...) when known."),
            _c("global_ranks", "INTEGER[]", "Global ranks of the group, ascending."),
            _c("traffic", "VARCHAR", "What the group carries: collective or p2p."),
            _c("source", "VARCHAR", "File the group came from (communication_group.json)."),
        ),
    ),
    Table(
        "memory_samples",
        "Memory counters over time: allocator totals (PTA/GE/APP, Kineto [memory] events) and driver modules.",
        FACT_KEY
        + (
            _c("ts_ns", "BIGINT", "Sample time (ns)."),
            _c(
                "component",
                "VARCHAR",
                "APP, PTA, GE, PTA+GE, WORKSPACE, a driver module (npu_module_mem), or 'allocator' (Kineto).",
            ),
            _c("device", "VARCHAR", "Device as written (NPU:0, CPU, cuda:0)."),
            _c("allocated_bytes", "BIGINT", "Total allocated (bytes), when reported."),
            _c("reserved_bytes", "BIGINT", "Total reserved (bytes), when reported."),
            _c("active_bytes", "BIGINT", "Total active (bytes), when reported."),
            _c("stream_ptr", "BIGINT", "Stream pointer when reported."),
            _c("source", "VARCHAR", "memory_record, npu_module_mem, MEMORY_RECORD, NPU_MODULE_MEM, kineto."),
        ),
    ),
    Table(
        "operator_memory",
        "Memory blocks attributed to operators: size, allocation and release times, allocator totals at both ends.",
        FACT_KEY
        + (
            _c(
                "name",
                "VARCHAR",
                "Operator that allocated the block (aten::empty_strided, cann::Graph_70, ...) or NULL if unknown.",
            ),
            _c("size_bytes", "BIGINT", "Block size (bytes); negative when only the free was captured."),
            _c("alloc_ns", "BIGINT", "Allocation time (ns)."),
            _c("release_ns", "BIGINT", "Release time (ns), NULL if released after the window."),
            _c("active_release_ns", "BIGINT", "Active release time (ns) when reported."),
            _c("duration_ns", "BIGINT", "Lifetime (ns) when known."),
            _c("active_duration_ns", "BIGINT", "Active lifetime (ns) when reported."),
            _c("alloc_allocated_bytes", "BIGINT", "Allocator total allocated at allocation."),
            _c("alloc_reserved_bytes", "BIGINT", "Allocator total reserved at allocation."),
            _c("alloc_active_bytes", "BIGINT", "Allocator total active at allocation."),
            _c("release_allocated_bytes", "BIGINT", "Allocator total allocated at release."),
            _c("release_reserved_bytes", "BIGINT", "Allocator total reserved at release."),
            _c("release_active_bytes", "BIGINT", "Allocator total active at release."),
            _c("stream_ptr", "BIGINT", "Stream pointer when reported."),
            _c("device", "VARCHAR", "Device as written."),
        ),
    ),
    Table(
        "step_trace",
        "The producer's own per-step time breakdown (step_trace_time.csv / StepTraceTime), kept to cross-check ours.",
        FACT_KEY
        + (
            _c("step", "INTEGER", "Step id (NULL when the producer had no step)."),
            _c("computing_ns", "BIGINT", "Computing."),
            _c("comm_not_overlapped_ns", "BIGINT", "Communication(Not Overlapped)."),
            _c("overlapped_ns", "BIGINT", "Overlapped."),
            _c("communication_ns", "BIGINT", "Communication."),
            _c("free_ns", "BIGINT", "Free."),
            _c("stage_ns", "BIGINT", "Stage."),
            _c("bubble_ns", "BIGINT", "Bubble."),
            _c("comm_not_overlapped_excl_receive_ns", "BIGINT", "Communication(Not Overlapped and Exclude Receive)."),
            _c("preparing_ns", "BIGINT", "Preparing (NULL in older producers)."),
        ),
    ),
    Table(
        "statistics",
        "Aggregates written by the producer (op_statistic.csv, api_statistic.csv); for the torch_npu db export, "
        "which has no such files, computed at ingest from its kernels and CANN API rows with the same definitions.",
        FACT_KEY
        + (
            _c(
                "kind",
                "VARCHAR",
                "op_statistic | api_statistic | communication_statistic (msprof) | cpu_op_type / cpu_op_detail "
                "(MindSpore host CPU ops) | op_detail (legacy MindSpore per-op average).",
            ),
            _c("level", "VARCHAR", "API level (acl, runtime, node, hccl) for api_statistic."),
            _c("name", "VARCHAR", "OP Type or API Name."),
            _c("core_type", "VARCHAR", "Core type for op_statistic."),
            _c("count", "BIGINT", "Calls."),
            _c("total_ns", "BIGINT", "Total time."),
            _c("min_ns", "BIGINT", "Minimum."),
            _c("avg_ns", "BIGINT", "Average."),
            _c("max_ns", "BIGINT", "Maximum."),
            _c("ratio_pct", "DOUBLE", "Share of total (%) for op_statistic."),
            _c("variance_ns2", "DOUBLE", "Variance (ns^2) for api_statistic."),
        ),
    ),
    Table(
        "counters",
        "Counter tracks (C events): AI Core frequency, NPU memory, HBM/LLC bandwidth, ...",
        FACT_KEY
        + (
            _c("process", "VARCHAR", "Process (track group) name."),
            _c("name", "VARCHAR", "Counter name."),
            _c("series", "VARCHAR", "Series within the counter (the args key, e.g. MHz, KB)."),
            _c("ts_ns", "BIGINT", "Sample time (ns)."),
            _c("value", "DOUBLE", "Value in the unit named by series."),
        ),
    ),
    Table(
        "scalars",
        "Per-step training scalars written by the collector (step wall time, loss, ...), every step, not only "
        "profiled ones.",
        FACT_KEY
        + (
            _c("step", "INTEGER", "Step number as counted by the collector."),
            _c("ts_ns", "BIGINT", "End of the step (ns, host clock)."),
            _c("name", "VARCHAR", "Scalar name (step_time_ns for the wall time, else as passed to prof.step())."),
            _c("value", "DOUBLE", "Value."),
        ),
    ),
)

# ---------------------------------------------------------------------------------------------
# Aggregate tables (Parquet): built at ingest, in the worker that read the collection, from the
# collection's facts (``analyzer.ingest.aggregate``); one file per (table, collection), listed in
# fact_files like the facts, so a re-read collection gets its aggregates anew with its facts; the
# driver then merges a run's into one file per table (``analyzer.ingest.compact``) before its commit.
# ---------------------------------------------------------------------------------------------

# zoom levels of the occupancy pyramid (``agg_lane_occupancy``): a bucket of level z is 2^z ns
# (262 us, 4.2 ms, 67 ms); any coarser level is a sum of buckets of the finest level below it
TILE_LEVELS = (18, 22, 26)
# a slice kept in ``agg_lane_slices`` spans at least this many buckets of the finest level (the
# timeline draws a slice with its name from 3 buckets on: the slices a zoomed-out view draws)
LONG_SLICE_BUCKETS = 3
# memory curves: at most this many buckets per (component, device) of a collection
MEMORY_BUCKETS = 2048
# zoom levels of the timeline's counter tracks (``agg_counter_curve``): a bucket of level z is 2^z ns
# (16 us, 131 us, 1 ms, 8.4 ms, 67 ms); a view reads the coarsest level whose buckets are at most a
# pixel (so at most 8 buckets per pixel), its exact samples when its pixels are finer than 16 us
COUNTER_LEVELS = (14, 17, 20, 23, 26)
# levels of the collector's scalars over steps (``agg_scalar_curve``): a bucket of level z is 2^z steps;
# a chart of fewer steps than 8 buckets' worth reads the scalars themselves
SCALAR_LEVELS = tuple(range(3, 21))


def _histogram_columns(what: str) -> tuple[Column, ...]:
    """The duration histogram of a statistics row (``analyzer.histogram``)."""
    return (
        _c(
            "hist_buckets",
            "INTEGER[]",
            f"Duration histogram: the buckets holding a {what}, ascending (k: durations in (γ^(k-1), γ^k] ns, "
            "γ = 1.01 / 0.99; -1: zero-length), from which quantiles come within 1 % (analyzer.histogram).",
        ),
        _c("hist_counts", "BIGINT[]", f"Duration histogram: the {what}s in each of hist_buckets."),
    )


AGGREGATE_TABLES: tuple[Table, ...] = (
    Table(
        "agg_step_breakdown",
        "The step time breakdown per (rank, step) of each collection (analyses.step_breakdown's columns and "
        "definitions), computed at ingest from the collection's facts. A rank with one collection has exactly the "
        "rows the analysis gives; a rank with several is recomputed from the facts (its intervals may span them).",
        FACT_KEY
        + (
            _c("step", "INTEGER", "Step id (NULL: a rank without steps, the whole collection)."),
            _c("step_ns", "BIGINT", "Host step duration, else the device busy span."),
            _c("computing_ns", "BIGINT", "Computing: union of compute intervals."),
            _c("comm_not_overlapped_ns", "BIGINT", "Communication(Not Overlapped)."),
            _c("overlapped_ns", "BIGINT", "Overlapped: computing and communicating at once."),
            _c("communication_ns", "BIGINT", "Communication: union of communication intervals."),
            _c("free_ns", "BIGINT", "Free: idle gaps inside the busy span."),
            _c("preparing_ns", "BIGINT", "Preparing: host step start to first busy instant."),
            _c("stage_ns", "BIGINT", "Stage: busy span minus bubble."),
            _c("bubble_ns", "BIGINT", "Bubble: union of receive intervals."),
            _c("comm_not_overlapped_excl_receive_ns", "BIGINT", "Communication(Not Overlapped) minus bubble."),
            _c("memory_not_overlapped_ns", "BIGINT", "Memory copies outside computing and communication."),
            _c("device_start_ns", "BIGINT", "First busy instant of the step."),
            _c("device_end_ns", "BIGINT", "Last busy instant of the step."),
            _c("host_start_ns", "BIGINT", "Host step start."),
            _c("host_end_ns", "BIGINT", "Host step end."),
            _c("mode", "VARCHAR", "device | host | producer | no tasks (analyses.step_breakdown)."),
            _c("communication_definition", "VARCHAR", "How Communication was measured (analyses.step_breakdown)."),
            _c("communication_tasks_ns", "BIGINT", "Union of the communication tasks, when the export has them."),
            _c("producer_communication_ns", "BIGINT", "The producer's own Communication, when it wrote one."),
        ),
    ),
    Table(
        "agg_steps",
        "The profiled steps per (rank, step, source) of each collection: their rows of ``steps`` summed, so that "
        "a page listing the steps of many ranks (the timeline's step windows, the Overview's steps) reads one "
        "file of the run instead of every rank's.",
        FACT_KEY
        + (
            _c("step", "INTEGER", "Step id (steps.step; NULL: the rows without one)."),
            _c("source", "VARCHAR", "steps.source (ProfilerStep, STEP_TIME, collector)."),
            _c("n", "BIGINT", "Rows of steps."),
            _c("start_ns", "BIGINT", "Earliest start."),
            _c("end_ns", "BIGINT", "Latest end."),
            _c("n_measured", "BIGINT", "Rows with a duration (not NULL)."),
            _c("dur_sum_ns", "BIGINT", "Sum of their durations."),
            _c("dur_max_ns", "BIGINT", "Longest duration."),
        ),
    ),
    Table(
        "agg_lane_list",
        "The timeline lanes of each collection, as ``lanes`` lists them (its rows copied): the timeline lays out "
        "the lanes of any set of ranks from one file of the run instead of every rank's.",
        FACT_KEY
        + (
            _c("pid", "VARCHAR", "As lanes.pid."),
            _c("tid", "VARCHAR", "As lanes.tid."),
            _c("process", "VARCHAR", "As lanes.process."),
            _c("lane", "VARCHAR", "As lanes.lane."),
            _c("lane_group", "VARCHAR", "As lanes.lane_group."),
            _c("sort_index", "BIGINT", "As lanes.sort_index."),
            _c("n_slices", "BIGINT", "As lanes.n_slices."),
        ),
    ),
    Table(
        "agg_operator_stats",
        "Framework operators per (rank, name, category, input shapes) of each collection: calls, total, self, min, "
        "max, when the slowest started and a histogram of the durations (ProfilerStep ranges and Python call-stack "
        "frames left out, as the Operators page).",
        FACT_KEY
        + (
            _c("name", "VARCHAR", "Operator name."),
            _c("category", "VARCHAR", "Event category (cpu_op, user_annotation, ...)."),
            _c("input_shapes", "VARCHAR", "Input shapes as written (NULL when not recorded)."),
            _c("count", "BIGINT", "Calls."),
            _c("total_ns", "BIGINT", "Sum of inclusive durations."),
            _c("self_ns", "BIGINT", "Sum of self durations."),
            _c("min_ns", "BIGINT", "Shortest call."),
            _c("max_ns", "BIGINT", "Longest call."),
            _c("slowest_ts_ns", "BIGINT", "Start of the longest call."),
        )
        + _histogram_columns("call"),
    ),
    Table(
        "agg_kernel_stats",
        "Device tasks per (rank, name, op type, core type, input shapes) of each collection: calls, total, min, "
        "max, when the slowest started and a histogram of the durations.",
        FACT_KEY
        + (
            _c("name", "VARCHAR", "Kernel / task name."),
            _c("op_type", "VARCHAR", "Operator type when reported."),
            _c("core_type", "VARCHAR", "Core / task type."),
            _c("input_shapes", "VARCHAR", "Input shapes as written."),
            _c("is_communication", "BOOLEAN", "Communication tasks."),
            _c("count", "BIGINT", "Tasks."),
            _c("total_ns", "BIGINT", "Sum of durations."),
            _c("min_ns", "BIGINT", "Shortest task."),
            _c("max_ns", "BIGINT", "Longest task."),
            _c("slowest_ts_ns", "BIGINT", "Start of the longest task."),
        )
        + _histogram_columns("task"),
    ),
    Table(
        "agg_comm",
        "Communication per (rank, group, collective type) of each collection: operations, elapsed, wait, "
        "transit and bytes (sums over comm_ops; NULL parts stay out of the sums).",
        FACT_KEY
        + (
            _c("group_name", "VARCHAR", "Communication group key."),
            _c("op_type", "VARCHAR", "Normalised operation type (allreduce, send, ...)."),
            _c("is_p2p", "BOOLEAN", "Point-to-point operations."),
            _c("count", "BIGINT", "Operations."),
            _c("dur_ns", "BIGINT", "Sum of elapsed times."),
            _c("max_ns", "BIGINT", "Longest operation."),
            _c("wait_ns", "BIGINT", "Sum of wait times (when known)."),
            _c("transit_ns", "BIGINT", "Sum of transit times (when known)."),
            _c("bytes", "BIGINT", "Sum of message sizes (when known)."),
        ),
    ),
    Table(
        "agg_memory_curve",
        "Memory counters per (rank, component, device) of each collection, downsampled to at most "
        "MEMORY_BUCKETS equal buckets over the collection's samples; each bucket keeps the maximum of each "
        "series with its time (every peak survives, at its own time), its minimum allocated and its last sample "
        "(the values held until the next one). The Memory page draws its zoomed-out views from it.",
        FACT_KEY
        + (
            _c("component", "VARCHAR", "As memory_samples.component."),
            _c("device", "VARCHAR", "As memory_samples.device."),
            _c("bucket_ns", "BIGINT", "Bucket width (ns)."),
            _c("start_ns", "BIGINT", "Bucket start (ns)."),
            _c("peak_ts_ns", "BIGINT", "Time of the bucket's largest allocated sample."),
            _c("allocated_bytes", "BIGINT", "Largest allocated in the bucket."),
            _c("min_allocated_bytes", "BIGINT", "Smallest allocated in the bucket."),
            _c("reserved_bytes", "BIGINT", "Largest reserved in the bucket."),
            _c("active_bytes", "BIGINT", "Largest active in the bucket."),
            _c("last_ts_ns", "BIGINT", "Time of the bucket's last sample."),
            _c("last_allocated_bytes", "BIGINT", "Allocated at the bucket's last sample (held until the next)."),
            _c("samples", "BIGINT", "Samples in the bucket."),
            _c("reserved_peak_ts_ns", "BIGINT", "Time of the bucket's largest reserved sample."),
            _c("active_peak_ts_ns", "BIGINT", "Time of the bucket's largest active sample."),
            _c("last_reserved_bytes", "BIGINT", "Reserved at the bucket's last sample reporting it."),
            _c("last_active_bytes", "BIGINT", "Active at the bucket's last sample reporting it."),
        ),
    ),
    Table(
        "agg_counter_curve",
        "The timeline's counter tracks per (rank, label, unit) of each collection (the allocators' allocated memory "
        "per (component, device), the driver modules left out, and every counter of ``counters``, as "
        "webapp.counter_tracks lists them), at each zoom level of COUNTER_LEVELS: per bucket [bucket * 2^level, "
        "(bucket + 1) * 2^level) ns of the rank's clock holding samples, their count, minimum, maximum with its "
        "time (every peak survives, at its own time), first and last sample.",
        FACT_KEY
        + (
            _c("label", "VARCHAR", "Track label: 'component (device)' of memory, 'process · name' of a counter."),
            _c("unit", "VARCHAR", "'bytes' for memory, else counters.series."),
            _c("allocator", "BOOLEAN", "The allocators' memory (memory_samples): listed first, largest peak first."),
            _c("memory", "BOOLEAN", "A counter of a memory process: listed before the other counters."),
            _c("level", "INTEGER", "Zoom level: the bucket is 2^level ns."),
            _c("bucket", "BIGINT", "Bucket number: its start is bucket * 2^level ns."),
            _c("samples", "BIGINT", "Samples in the bucket."),
            _c("min_value", "DOUBLE", "Smallest value in the bucket."),
            _c("max_value", "DOUBLE", "Largest value in the bucket."),
            _c("peak_ts_ns", "BIGINT", "Time of the bucket's largest value."),
            _c("first_ts_ns", "BIGINT", "Time of the bucket's first sample."),
            _c("last_ts_ns", "BIGINT", "Time of the bucket's last sample."),
            _c(
                "last_value",
                "DOUBLE",
                "Value of the bucket's last sample (held until the next; of equal times the largest).",
            ),
        ),
    ),
    Table(
        "agg_scalar_curve",
        "The collector's per-step scalars of each collection over steps, per (rank, name) at each level of "
        "SCALAR_LEVELS: per bucket [bucket * 2^level, (bucket + 1) * 2^level) of steps holding records, the record "
        "of the lowest and the one of the highest value with their steps (the first step on a tie: a one-step "
        "spike is the extreme of its bucket at every level), the sum and count of the values (the mean over ranks "
        "of the Training page's band). What the Training page and the Overview draw the curves from.",
        FACT_KEY
        + (
            _c("name", "VARCHAR", "Scalar name (scalars.name)."),
            _c("level", "INTEGER", "Level: the bucket is 2^level steps."),
            _c("bucket", "BIGINT", "Bucket number: its steps are bucket * 2^level .. (bucket + 1) * 2^level - 1."),
            _c("first_step", "INTEGER", "First step with a record in the bucket."),
            _c("n", "BIGINT", "Records with a value (not NULL) in the bucket."),
            _c("sum_value", "DOUBLE", "Sum of the bucket's values."),
            _c("lo_step", "INTEGER", "Step of the bucket's lowest value (the first on a tie)."),
            _c("lo", "DOUBLE", "Lowest value in the bucket."),
            _c("hi_step", "INTEGER", "Step of the bucket's highest value (the first on a tie)."),
            _c("hi", "DOUBLE", "Highest value in the bucket."),
        ),
    ),
    Table(
        "agg_lanes",
        "Per timeline lane (pid, tid) of each collection: its slices, first start, last end and deepest nesting "
        "(what the timeline lays out before it draws any tile).",
        FACT_KEY
        + (
            _c("pid", "VARCHAR", "Lane process id as written."),
            _c("tid", "VARCHAR", "Lane thread / stream id as written."),
            _c("n_slices", "BIGINT", "Slices with a start time on the lane."),
            _c("first_ns", "BIGINT", "Earliest start."),
            _c("last_ns", "BIGINT", "Latest end."),
            _c("max_depth", "INTEGER", "Deepest nesting level (0 = no slice inside another)."),
        ),
    ),
    Table(
        "agg_lane_occupancy",
        "Occupancy pyramid of the timeline: per lane (pid, tid) of each collection and zoom level of TILE_LEVELS, "
        "the length covered by the lane's slices (interval union) in each bucket [bucket * 2^level, (bucket + 1) * "
        "2^level) ns of the rank's clock that holds any, and its instant events.",
        FACT_KEY
        + (
            _c("pid", "VARCHAR", "Lane process id as written."),
            _c("tid", "VARCHAR", "Lane thread / stream id as written."),
            _c("level", "INTEGER", "Zoom level: the bucket is 2^level ns."),
            _c("bucket", "BIGINT", "Bucket number: its start is bucket * 2^level ns."),
            _c("busy_ns", "BIGINT", "Length covered by the lane's slices in the bucket."),
            _c("instants", "BIGINT", "Instant events (duration 0) in the bucket."),
        ),
    ),
    Table(
        "agg_lane_slices",
        "The slices a zoomed-out timeline draws: per lane of each collection, every slice lasting at least "
        "LONG_SLICE_BUCKETS buckets of the finest TILE_LEVELS level, and every instant event, with its nesting depth "
        "on the lane (computed over all its slices).",
        FACT_KEY
        + (
            _c("pid", "VARCHAR", "Lane process id."),
            _c("tid", "VARCHAR", "Lane thread / stream id."),
            _c("name", "VARCHAR", "Slice name as written."),
            _c("ts_ns", "BIGINT", "Start (ns)."),
            _c("dur_ns", "BIGINT", "Duration (ns)."),
            _c("depth", "INTEGER", "Nesting depth on the lane (slices still open at its start)."),
            _c("event_id", "BIGINT", "slices.event_id of the slice."),
        ),
    ),
)

FACT_TABLES = FACT_TABLES + AGGREGATE_TABLES
AGGREGATES: dict[str, Table] = {t.name: t for t in AGGREGATE_TABLES}

ALL_TABLES: tuple[Table, ...] = CATALOG_TABLES + FACT_TABLES
TABLES: dict[str, Table] = {t.name: t for t in ALL_TABLES}
FACTS: dict[str, Table] = {t.name: t for t in FACT_TABLES}
CATALOG: dict[str, Table] = {t.name: t for t in CATALOG_TABLES}


def arrow_type(duck_type: str) -> pa.DataType:
    import pyarrow as pa  # imported when a schema is first needed as Arrow (`analyze --help` needs none)

    return {
        "VARCHAR": pa.string,
        "JSON": pa.string,
        "BIGINT": pa.int64,
        "INTEGER": pa.int32,
        "DOUBLE": pa.float64,
        "BOOLEAN": pa.bool_,
        "TIMESTAMP": lambda: pa.timestamp("us"),
        "INTEGER[]": lambda: pa.list_(pa.int32()),
        "BIGINT[]": lambda: pa.list_(pa.int64()),
        "VARCHAR[]": lambda: pa.list_(pa.string()),
    }[duck_type]()


@functools.cache
def arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of a table, in declaration order."""
    import pyarrow as pa

    t = TABLES[table]
    return pa.schema([pa.field(c.name, arrow_type(c.type)) for c in t.columns])


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def create_table_sql(table: str) -> list[str]:
    """CREATE TABLE plus COMMENT ON statements for a catalog table."""
    t = TABLES[table]
    cols = ",\n  ".join(f'"{c.name}" {c.type}' for c in t.columns)
    out = [f'CREATE TABLE IF NOT EXISTS "{t.name}" (\n  {cols}\n)']
    out.append(f'COMMENT ON TABLE "{t.name}" IS {_sql_str(t.doc)}')
    for c in t.columns:
        out.append(f'COMMENT ON COLUMN "{t.name}"."{c.name}" IS {_sql_str(c.doc)}')
    return out


def empty_select_sql(table: str) -> str:
    """A typed zero-row SELECT with the table's columns (used when no Parquet file exists yet)."""
    t = TABLES[table]
    cols = ", ".join(f'CAST(NULL AS {c.type}) AS "{c.name}"' for c in t.columns)
    return f"SELECT {cols} WHERE false"


def describe() -> str:
    """The schema as Markdown (used by `analyze schema` and the README)."""
    lines: list[str] = []
    for t in ALL_TABLES:
        kind = "catalog" if t.name in CATALOG else "fact (Parquet)"
        if t.name in AGGREGATES:
            kind = "aggregate (Parquet, built at ingest)"
        lines.append(f"### `{t.name}` — {kind}\n\n{t.doc}\n")
        lines.append("| column | type | meaning |\n|---|---|---|")
        for c in t.columns:
            lines.append(f"| `{c.name}` | {c.type} | {c.doc} |")
        lines.append("")
    return "\n".join(lines)
