"""Profiler backends. Each module imports its framework lazily, when a window first needs it."""

from __future__ import annotations

from ..errors import BackendError
from .base import Backend, BackendInfo, Session, Unsupported

__all__ = ["Backend", "BackendInfo", "Session", "Unsupported", "select_backend", "mappings", "mapping_table"]


def select_backend(name: str = "auto") -> Backend:
    """``auto``: torch_npu.profiler when the script imported torch_npu and an NPU is visible, else
    mindspore.profiler when the script imported MindSpore, else torch.profiler."""
    from .mindspore import mindspore_imported
    from .torch_npu import npu_available

    if name == "mindspore" or (name == "auto" and not npu_available() and mindspore_imported()):
        try:
            from .mindspore import MindSporeBackend

            return MindSporeBackend()
        except ImportError as exc:
            raise BackendError(f"mindspore.profiler is not available: {exc}") from exc
    if name == "torch_npu" or (name == "auto" and npu_available()):
        try:
            from .torch_npu import TorchNpuBackend

            return TorchNpuBackend()
        except ImportError as exc:
            raise BackendError(f"torch_npu.profiler is not available: {exc}") from exc
    if name in ("torch", "auto"):
        try:
            from .torch_profiler import TorchBackend

            return TorchBackend()
        except ImportError as exc:
            raise BackendError(f"torch.profiler is not available: {exc}") from exc
    raise BackendError(f"unknown backend {name!r}")


def mappings() -> dict[str, dict[str, str]]:
    """Option -> real argument, per backend (used by docs/collector.md and its test)."""
    from .mindspore import MAPPING as MS
    from .torch_npu import MAPPING as NPU
    from .torch_profiler import MAPPING as TORCH

    return {"torch.profiler": TORCH, "torch_npu.profiler": NPU, "mindspore.profiler": MS}


def mapping_table() -> str:
    """The option -> backend argument table of docs/collector.md (a test keeps the two identical)."""
    import dataclasses
    import json

    from ..config import OPTION_HELP, ProfileOptions

    maps = mappings()
    defaults = ProfileOptions()
    rows = [
        "| option | default | what | torch.profiler | torch_npu.profiler | mindspore.profiler |",
        "|---|---|---|---|---|---|",
    ]
    for f in dataclasses.fields(ProfileOptions):
        d = getattr(defaults, f.name)
        shown = json.dumps(d)
        cells = [
            f"`{f.name}`",
            f"`{shown}`",
            OPTION_HELP[f.name],
            maps["torch.profiler"][f.name],
            maps["torch_npu.profiler"][f.name],
            maps["mindspore.profiler"][f.name],
        ]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows) + "\n"
