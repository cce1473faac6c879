"""Format readers, registered by producer name (see base.READERS)."""

from . import collector, kineto  # noqa: F401 - import registers the readers
