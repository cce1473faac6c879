"""Drive the collector's torch_npu backend in a process that dies, against the RECORDED torch_npu API.

    python npu_standin_train.py CONFIG_JSON exception|sigterm|exit K CALLS_FILE

No NPU and no torch_npu here: the stand-in ``torch_npu.profiler`` of tests/test_collector_npu.py
(built from the signatures recorded from the torch_npu 2.13.0 wheel, with the wheel's own schedule
rule) takes the backend's calls; the ones that move data (start, step, stop, the trace handler) are
appended to CALLS_FILE as they happen, so the test sees what had reached "disk" when the process died.
Each step is a no-op "training step"; step K dies as asked.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/ (the stand-in lives there)

from test_collector_npu import SIG, StandIn

import collector.backends.torch_npu as backend
from collector import Profiler


def main() -> None:
    config, mode, k, calls_file = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    log = open(calls_file, "a", encoding="utf-8")  # noqa: SIM115 - open for the life of the process

    class LoggedCalls(list):
        def append(self, item: tuple[str, dict]) -> None:
            super().append(item)
            name, kw = item
            if name in ("start", "step", "stop", "parse"):
                log.write(json.dumps({"call": name, **kw}) + "\n")
                log.flush()

    stand = StandIn()
    stand.calls = LoggedCalls()
    pkg = types.ModuleType("torch_npu")
    pkg.__version__ = SIG["torch_npu_version"]
    prof_mod = types.ModuleType("torch_npu.profiler")
    prof_mod.__dict__.update({n: v for n, v in vars(stand).items() if n != "calls"})
    inner = types.ModuleType("torch_npu.profiler.profiler")
    inner.analyse = stand.analyse
    sys.modules.update({"torch_npu": pkg, "torch_npu.profiler": prof_mod, "torch_npu.profiler.profiler": inner})
    torch_stub = types.SimpleNamespace(__version__="2.13.0", npu=types.SimpleNamespace(is_available=lambda: True))
    backend._modules = lambda: (torch_stub, prof_mod)

    prof = Profiler(config)
    prof.start()
    for step in range(10):
        if step == k:
            if mode == "exception":
                raise RuntimeError(f"boom at step {step}")
            if mode == "sigterm":
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
            if mode == "exit":
                os._exit(3)
        prof.step()
    prof.stop()


if __name__ == "__main__":
    main()
