"""Which rank this process is: torch.distributed or mindspore.communication when initialised, else env variables.

Never imports a framework: ``torch.distributed`` and ``mindspore.communication`` are consulted only
if the training script already imported them (msrun also exports ``RANK_ID`` and ``RANK_SIZE``).
Environment variables, in order: ``RANK`` (torchrun), ``RANK_ID`` (Ascend/HCCL launchers, msrun),
``LOCAL_RANK``; world size from ``WORLD_SIZE`` or ``RANK_SIZE``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

RANK_VARS = ("RANK", "RANK_ID", "LOCAL_RANK")
WORLD_VARS = ("WORLD_SIZE", "RANK_SIZE")


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world_size: int | None
    local_rank: int | None
    source: str  # torch.distributed | mindspore.communication | env:RANK | env:RANK_ID | env:LOCAL_RANK | default

    @property
    def certain(self) -> bool:
        """True once the rank came from somewhere (not the single-process default)."""
        return self.source != "default"


def _env_int(env: dict[str, str] | os._Environ[str], name: str) -> int | None:
    v = env.get(name, "").strip()
    try:
        return int(v) if v else None
    except ValueError:
        return None


def detect_rank(environ: dict[str, str] | None = None) -> RankInfo:
    env = os.environ if environ is None else environ
    local = _env_int(env, "LOCAL_RANK")
    dist = sys.modules.get("torch.distributed")
    if dist is not None:
        try:
            if dist.is_available() and dist.is_initialized():
                return RankInfo(int(dist.get_rank()), int(dist.get_world_size()), local, "torch.distributed")
        except Exception:  # noqa: BLE001 - a half-initialised backend must not break training
            pass
    comm = sys.modules.get("mindspore.communication")
    if comm is not None:
        try:
            from mindspore.communication.management import GlobalComm  # (already imported with comm)

            if GlobalComm.INITED:
                return RankInfo(int(comm.get_rank()), int(comm.get_group_size()), local, "mindspore.communication")
        except Exception:  # noqa: BLE001
            pass
    world = next((w for w in (_env_int(env, n) for n in WORLD_VARS) if w is not None), None)
    for name in RANK_VARS:
        r = _env_int(env, name)
        if r is not None and r >= 0:
            return RankInfo(r, world, local, f"env:{name}")
    return RankInfo(0, world if world is not None else 1, local, "default")  # nothing says otherwise: one process
