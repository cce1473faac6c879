"""Chrome-trace JSON, whoever wrote it (Kineto, torch_npu / MindSpore trace_view.json, msprof timelines):
the streaming decoder (``stream``), Arrow columns of a block of events (``columns``), lanes and their
classifier (``lanes``), the one event router (``router``) and the nesting of host operators (``nesting``)."""
