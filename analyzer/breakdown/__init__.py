"""The step time breakdown's computing core, without pandas: interval sets (``intervals``), what
each rank was busy with per step (``activity``) and the breakdown rows (``rows``). The ingest
stores the rows of each collection with it (``ingest.aggregate``, in the reader's process, which
then needs none of the analyses); ``analyses.step_breakdown`` and ``analyses.activity`` read them
per run."""
