"""Format readers, filed by file family, with a thin door per producer.

- ``common/``: what every family needs (tolerant CSV, small JSON files, the spill stage, cells, steps);
- ``chrome/``: Chrome-trace JSON (the streaming decoder, Arrow columns, the one event router, lanes,
  nesting of host operators);
- ``ascend/``: the CANN family that torch_npu, MindSpore and msprof all write (names, output folder,
  shared files, trace_view, profiler db, msprof export, PROF folders, HCCL groups, metadata);
- producer doors, each registering its readers (``base.READERS``) and answering discovery's questions:
  ``kineto``, ``torch_npu``, ``msprof``, ``mindspore`` (its host files and the <= 2.2 legacy files),
  ``collector``.

``registry`` lists what discovery asks, in order.
"""

from . import collector, kineto, mindspore, msprof, torch_npu  # noqa: F401 - importing a door registers its readers
