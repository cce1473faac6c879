"""`analyze ingest`, split by role: ``discover`` (what is below the folder, producer and rank of each
collection), ``changes`` (what is unchanged since the last ingest; the ``source_files`` rows),
``read`` (one collection, in a worker), ``pool`` (the executor seam: where collections are read),
``cluster`` (the same on a Dask cluster's workers), ``run`` (``ingest()``: the steps in order, one commit)."""

from .changes import file_sha256
from .cluster import DaskCluster
from .pool import Executor, LocalPool
from .read import read_collection
from .report import CollectionResult, IngestReport
from .run import ingest

__all__ = [
    "CollectionResult",
    "DaskCluster",
    "Executor",
    "IngestReport",
    "LocalPool",
    "file_sha256",
    "ingest",
    "read_collection",
]
