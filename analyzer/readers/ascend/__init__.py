"""The CANN family, whoever wrote it (torch_npu, MindSpore and msprof all write these files;
docs/formats.md §1, §2, §3, §4):
names and folder detection (``names``), the ASCEND_PROFILER_OUTPUT folder (``output``), the shared files
(``kernels``, ``summaries``, ``memory``, ``communication``), ``trace_view`` and msprof timelines, the
profiler db (``db``), msprof's export (``msprof_export``), PROF folders (``prof``), HCCL groups
(``groups``), metadata (``metadata``) and msprof-analyze's cluster files (``cluster``)."""
