"""Communication operation names from every producer, normalised to one vocabulary."""

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
    elif low.startswith("nccldevkernel_") or low.startswith("ncclkernel_"):
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


DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "int": 4,
    "int32": 4,
    "uint32": 4,
    "unsigned int": 4,
    "double": 8,
    "float64": 8,
    "long": 8,
    "int64": 8,
    "long int": 8,
    "uint64": 8,
    "complex64": 8,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "short": 2,
    "int16": 2,
    "uint16": 2,
    "c10::half": 2,
    "c10::bfloat16": 2,
    "char": 1,
    "byte": 1,
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "signed char": 1,
    "unsigned char": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "complex128": 16,
}


def dtype_size(dtype: str | None) -> int | None:
    if not dtype:
        return None
    return DTYPE_BYTES.get(dtype.strip().lower())
