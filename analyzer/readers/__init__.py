"""Format readers, registered by producer name (see base.READERS)."""

from . import collector, kineto, mindspore, mindspore_legacy, msprof, torch_npu_db, torch_npu_raw, torch_npu_text  # noqa: F401 - import registers the readers  # noqa: F401, E402 - MindSpore and msprof readers
