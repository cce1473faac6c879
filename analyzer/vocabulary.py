"""The words readers and analyses share: communication op types, lane groups, what counts as computing.

Readers write these words into the store (``comm_ops.op_type``, ``comm_ops.is_p2p``,
``lanes.lane_group``, ``kernels.is_communication``) and analyses read them back, so both import
them from here, never from each other.

- **op types**: every producer's collective name ('gloo:all_reduce', 'hcom_allReduce__586_0_1',
  'ncclDevKernel_AllGather_RING_LL', 'AllReduce') normalised to one of ``OP_TYPES``; the
  point-to-point ones are ``P2P_TYPES``;
- **lane groups**: the kind of timeline lane a thread or stream is (``LANE_GROUPS``);
- **the compute rule**: a device task computes unless it is communication (``is_comm_task``: an HCCL /
  communication task type, or an ``hcom_*`` op; readers store it as ``kernels.is_communication``) or a
  memory copy / set (``*memcpy*`` / ``*memset*`` core types, which the activity analysis sets apart).
"""

from __future__ import annotations

import re

OP_TYPES = (
    "allreduce",
    "allgather",
    "reduce_scatter",
    "broadcast",
    "alltoall",
    "send",
    "recv",
    "batch_send_recv",
    "barrier",
    "reduce",
    "gather",
    "scatter",
    "other",
)
P2P_TYPES = {"send", "recv", "batch_send_recv"}

_ALIASES = {
    "allreduce": "allreduce",
    "allreducecoalesced": "allreduce",
    "allgather": "allgather",
    "allgatherbase": "allgather",
    "allgatherintotensor": "allgather",
    "allgatherintotensorcoalesced": "allgather",
    "allgathercoalesced": "allgather",
    "allgatherv": "allgather",
    "reducescatter": "reduce_scatter",
    "reducescatterbase": "reduce_scatter",
    "reducescattertensor": "reduce_scatter",
    "reducescattertensorcoalesced": "reduce_scatter",
    "reducescatterv": "reduce_scatter",
    "broadcast": "broadcast",
    "broadcastcoalesced": "broadcast",
    "alltoall": "alltoall",
    "alltoallbase": "alltoall",
    "alltoallsingle": "alltoall",
    "alltoallv": "alltoall",
    "alltoallvc": "alltoall",
    "send": "send",
    "isend": "send",
    "recv": "recv",
    "receive": "recv",
    "irecv": "recv",
    "recvanysource": "recv",
    "batchsendrecv": "batch_send_recv",
    "batchisendirecv": "batch_send_recv",
    "barrier": "barrier",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
}

_PREFIX = re.compile(r"^(?:nccl|gloo|hccl|ucc|mpi|xccl|c10d)(?::|::)", re.I)


def normalize_op_type(name: str | None) -> str:
    """'gloo:all_reduce', 'nccl:_all_gather_base', 'hcom_allReduce__586_0_1', 'AllReduce',
    'ncclDevKernel_AllGather_RING_LL' -> 'allreduce', 'allgather', ..."""
    if not name:
        return "other"
    s = _PREFIX.sub("", name.strip())
    low = s.lower()
    if low.startswith("hcom_"):
        s = s[5:].split("__")[0]
    elif low.startswith(("nccldevkernel_", "ncclkernel_")):
        s = s.split("_", 1)[1].split("_")[0] if "_" in s else s
    key = re.sub(r"[^a-z]", "", s.lower().split("(")[0])
    if key in _ALIASES:
        return _ALIASES[key]
    for alias, canon in sorted(_ALIASES.items(), key=lambda kv: -len(kv[0])):
        if key.startswith(alias):
            return canon
    return "other"


def is_comm_annotation(name: str) -> bool:
    """True for record_function ranges that wrap a collective: nccl:*, gloo:*, hccl:*..."""
    return bool(_PREFIX.match(name)) and not name.startswith("c10d")


LANE_GROUPS = ("host", "device", "communication", "overlap", "other")

# task types (kernel_details.csv 'Accelerator Core' / 'Task Type', msprof task_time 'kernel_type',
# trace args 'Task Type') that mark a device task as communication
COMM_TASK_TYPES = frozenset({"HCCL", "COMMUNICATION"})
COMM_OP_PREFIX = "hcom_"  # HCCL operators: hcom_allReduce__586_0_1, ...


# the compute rule's memory half: core / category names of memory copies and sets (GPU gpu_memcpy,
# gpu_memset, old Kineto Memcpy / Memset), as a case-insensitive regular expression
MEMORY_TASK_PATTERN = "memcpy|memset"


def computes_sql(is_comm: str = "is_communication", core_type: str = "core_type") -> str:
    """The compute rule as a DuckDB boolean over a ``kernels`` row: not communication, not a memory
    copy / set."""
    return (
        f"(NOT coalesce({is_comm}, false) "
        f"AND NOT regexp_matches(lower(coalesce({core_type}, '')), '{MEMORY_TASK_PATTERN}'))"
    )


# host-side calls that wrap a collective (c10d::*, record_param_comms, gloo:* / nccl:* ranges), as SQL
COMM_CALL_SQL = "(name LIKE 'c10d::%' OR name = 'record_param_comms' OR name LIKE 'gloo:%' OR name LIKE 'nccl:%')"


# HCCL op names carry their group: 'hcom_allReduce__586_0_1' is an all-reduce of the group whose hash
# ends in 586 (communication.json keys it 'hcom_allReduce__586_0_1@17522688603477080586'); the hash
# changes from one run of a job to the next, so two runs name the same op differently
_HCOM_GROUP = re.compile(r"^(hcom_[A-Za-z0-9]+__)\d+(?=_\d)")


def comparable_name(name: str) -> str:
    """An op or kernel name as two runs can match it: the group part of an HCCL op's name replaced by
    ``*`` ('hcom_allReduce__586_0_1' -> 'hcom_allReduce__*_0_1'); other names unchanged."""
    return _HCOM_GROUP.sub(r"\1*", name) if name.startswith(COMM_OP_PREFIX) else name


def is_comm_task(task_type: str | None, *names: str | None) -> bool:
    """The compute rule's communication half: a device task of an HCCL / communication task type,
    or one whose name (or op type) is an ``hcom_*`` operator."""
    if (task_type or "").upper() in COMM_TASK_TYPES:
        return True
    return any((n or "").startswith(COMM_OP_PREFIX) for n in names)
