"""The names of the CANN family's folders and files, in one place (docs/formats.md §0, §1, §2, §3).

torch_npu, MindSpore and msprof all write these: a producer folder (``*_ascend_pt``, ``*_ascend_ms``,
``PROF_*``), its parsed output (``ASCEND_PROFILER_OUTPUT/`` or ``mindstudio_profiler_output/``), the
raw CANN data (``PROF_*/device_*``, ``host/``), the profiler dbs and the metadata files. Discovery
and the readers match names through these patterns only.
"""

from __future__ import annotations

import re
from pathlib import Path

from ...messages import english
from ..chrome.stream import sniff

# -- producer folders --------------------------------------------------------------------------------
TORCH_NPU_DIR_SUFFIX = "_ascend_pt"  # {worker}_{timestamp}_ascend_pt
TORCH_NPU_OP_ARGS_SUFFIX = "_ascend_pt_op_args"  # record_op_args dump for AOE: not profiling data
MINDSPORE_DIR_SUFFIX = "_ascend_ms"  # {worker}_{timestamp}_ascend_ms
PROF_DIR_RE = re.compile(r"^PROF_\d+_\d+_[0-9a-zA-Z]+$")  # msprof / CANN raw data: PROF_{n}_{ts}_{rand}
DEVICE_DIR_RE = re.compile(r"^device_(-?\d+)$")  # PROF_*/device_{d}/

# -- parsed output folders -----------------------------------------------------------------------------
OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"  # torch_npu and MindSpore
EXPORT_DIR = "mindstudio_profiler_output"  # msprof --export=on

# -- files of ASCEND_PROFILER_OUTPUT -------------------------------------------------------------------
# the files that make an output folder a text export (the others only add to it)
TRACE_VIEW = "trace_view.json"
TEXT_MARKERS = ("trace_view.json", "kernel_details.csv", "step_trace_time.csv", "operator_details.csv")
# the files the output-folder reader reads
TEXT_FILES = (
    "trace_view.json",
    "kernel_details.csv",
    "l2_cache.csv",
    "operator_details.csv",
    "step_trace_time.csv",
    "op_statistic.csv",
    "api_statistic.csv",
    "communication.json",
    "communication_matrix.json",
    "memory_record.csv",
    "npu_module_mem.csv",
    "operator_memory.csv",
)
TORCH_NPU_DB_RE = re.compile(r"^ascend_pytorch_profiler(?:_(\d+))?\.db$")
MINDSPORE_DB_RE = re.compile(r"^ascend_mindspore_profiler(?:_(\d+))?\.db$")
TORCH_NPU_ANALYSIS_DB = "analysis.db"  # torch_npu's communication analysis (CommAnalyzer* tables)
COMM_ANALYZER_DB = "communication_analyzer.db"  # the same tables, MindSpore and msprof --analyze

# -- metadata next to the output folder ----------------------------------------------------------------
PROFILER_INFO_RE = re.compile(r"^profiler_info(?:_(\d+))?\.json$")
PROFILER_METADATA = "profiler_metadata.json"

# -- msprof export ---------------------------------------------------------------------------------------
# {name}[_slice_{n}]_{YYYYmmddHHMMSS}.csv|json (the timestamp has 14 digits; accept a few more)
EXPORT_NAME_RE = re.compile(r"^(?P<kind>.+?)(?:_slice_(?P<n>\d+))?_(?P<ts>\d{14,17})\.(?P<ext>csv|json)$")
# legacy per-device, per-iteration timelines: device_{d}/timeline/{kind}_{device}_{model}_{iteration}.json
LEGACY_TIMELINE_RE = re.compile(
    r"^(?P<kind>msprof|task_time|hccl|step_trace|ai_core_utilization)_(?P<d>\d+)_(?P<m>\d+)_(?P<i>\d+)\.json$"
)
MSPROF_DB_RE = re.compile(r"^msprof_\d{1,20}\.db$")  # msprof --type=db (CANN >= 8), at the PROF folder's top
MSPROF_ANALYSIS_DB = ("analyze", COMM_ANALYZER_DB)  # msprof --analyze=on with a db export

# -- msprof-analyze's cluster output ---------------------------------------------------------------------
COMMUNICATION_GROUP = "communication_group.json"  # cluster_analysis_output/communication_group.json

# -- what to run when only raw data is there -------------------------------------------------------------
TORCH_NPU_RAW_HINT = english("missing.hint.torch_npu_raw")
MSPROF_EXPORT_HINT = english("missing.hint.msprof_export")


def folder_kind(name: str) -> str | None:
    """The CANN-family folder a directory name is: 'torch_npu_op_args', 'torch_npu', 'mindspore',
    'prof' (a PROF_* folder), 'export' (a mindstudio_profiler_output/ copied without its PROF_*), or None."""
    if name.endswith(TORCH_NPU_OP_ARGS_SUFFIX):
        return "torch_npu_op_args"
    if name.endswith(TORCH_NPU_DIR_SUFFIX):
        return "torch_npu"
    if name.endswith(MINDSPORE_DIR_SUFFIX):
        return "mindspore"
    if PROF_DIR_RE.match(name):
        return "prof"
    if name == EXPORT_DIR:
        return "export"
    return None


def file_kind(path: Path) -> str | None:
    """A CANN-family file found on its own: 'msprof_db' (an ``msprof_{ts}.db`` copied without its
    ``PROF_*`` folder), 'trace_view' (a torch_npu ``trace_view.json`` without its ``*_ascend_pt``
    folder: a Chrome event array), or None."""
    if MSPROF_DB_RE.match(path.name):
        return "msprof_db"
    if path.name == TRACE_VIEW and sniff(path) == "array":
        return "trace_view"
    return None
