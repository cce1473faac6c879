"""Build tests/data/mindspore_npu_constructed/: a MindSpore ≥ 2.5 Ascend output CONSTRUCTED by hand.

No public sample of a MindSpore ``*_ascend_ms`` folder from an Ascend run exists (formats.md §8
"Gaps"); the real MindSpore 2.10 samples are CPU-only. This one follows formats.md §2.1 and the
torch_npu layout it refers to (§1.5, §1.6, §1.8): ``profiler_info_{rank}.json`` in MindSpore's schema
(rank only in the file name), a bare-array ``trace_view.json`` whose framework ops live in the
``MindSpore`` process without a ``cpu_op`` category (pynative ``ProfilerStep#N``), ``Scope Layer``,
``CANN``, ``Ascend Hardware`` and ``HCCL`` processes; ``kernel_details.csv`` with ``Step ID``
(capital D) and no ``Device_id``; ``step_trace_time.csv`` without ``Device_id``. µs timestamps are
3-decimal strings, CSV timestamps end with a TAB, CRLF line ends. Values are made up but consistent.

Run: python tests/data/make_mindspore_npu_constructed.py   (rewrites the folder)
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

OUT = Path(__file__).resolve().parent / "mindspore_npu_constructed"
BASE_US = 1767225700000000


def us(off: str) -> str:
    whole, _, frac = off.partition(".")
    return f"{BASE_US + int(whole)}.{(frac + '000')[:3]}"


def write_csv(path: Path, header: str, rows: list[str]) -> None:
    path.write_bytes(("\r\n".join([header, *rows]) + "\r\n").encode())


def one_rank(rank: int) -> None:
    root = OUT / f"node-a_{4000 + rank}_20260101000140{rank}00_ascend_ms"
    out = root / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (root / f"profiler_info_{rank}.json").write_text(
        json.dumps(
            {
                "profiler_parameters": {
                    "output_path": "./prof",
                    "profiler_level": "Level1",
                    "activities": ["CPU", "NPU"],
                    "aic_metrics": "AiCoreNone",
                    "with_stack": False,
                    "profile_memory": False,
                    "data_process": False,
                    "parallel_strategy": False,
                    "l2_cache": False,
                    "record_shapes": False,
                    "export_type": ["text"],
                    "mstx": False,
                },
                "ms_profiler_info": {"device_id": str(rank), "rank_id": str(rank)},
                "cann_profiler_info": {},
                "analysis_cost_time": {},
                "ms_version": "2.7.0",
                "cann_version": "8.0.RC3",
                "jit_level": "O0",
            }
        )
    )
    (root / "profiler_metadata.json").write_text(json.dumps({"model": "tiny"}))
    ms, scope, cann, hw, hccl = 2, 3, 1000100, 1000200, 1000300
    ev = [
        {"ph": "M", "name": "process_name", "pid": ms, "tid": 0, "args": {"name": "MindSpore"}},
        {"ph": "M", "name": "process_labels", "pid": ms, "tid": 0, "args": {"labels": "CPU"}},
        {"ph": "M", "name": "thread_name", "pid": ms, "tid": 7, "args": {"name": "Thread 7"}},
        {
            "ph": "X",
            "name": "ProfilerStep#3",
            "pid": ms,
            "tid": 7,
            "ts": us("0"),
            "dur": "1000.000",
            "cat": "",
            "args": {},
        },
        {"ph": "X", "name": "Dense", "pid": ms, "tid": 7, "ts": us("10.000"), "dur": "300.500", "cat": "", "args": {}},
        {"ph": "X", "name": "MatMul", "pid": ms, "tid": 7, "ts": us("20.000"), "dur": "100.250", "cat": "", "args": {}},
        {
            "ph": "X",
            "name": "AllReduce",
            "pid": ms,
            "tid": 7,
            "ts": us("400.000"),
            "dur": "50.000",
            "cat": "",
            "args": {},
        },
        {"ph": "M", "name": "process_name", "pid": scope, "tid": 0, "args": {"name": "Scope Layer"}},
        {
            "ph": "X",
            "name": "network-WithLossCell",
            "pid": scope,
            "tid": 0,
            "ts": us("5.000"),
            "dur": "600.000",
            "cat": "",
            "args": {},
        },
        {"ph": "M", "name": "process_name", "pid": cann, "tid": 0, "args": {"name": "CANN"}},
        {
            "ph": "X",
            "name": "AscendCL@aclnnMatmul",
            "pid": cann,
            "tid": 7,
            "ts": us("30.000"),
            "dur": 20.0,
            "args": {"Mode": "ACL_OP", "level": "acl"},
        },
        {"ph": "M", "name": "process_name", "pid": hw, "tid": 0, "args": {"name": "Ascend Hardware"}},
        {"ph": "M", "name": "thread_name", "pid": hw, "tid": 5, "args": {"name": "Stream 5"}},
        {
            "ph": "X",
            "name": "MatMul_kernel",
            "pid": hw,
            "tid": 5,
            "ts": us("60.000"),
            "dur": 80.5,
            "args": {"Task Type": "AI_CORE", "Physic Stream Id": 5, "Task Id": 11},
        },
        {"ph": "M", "name": "process_name", "pid": hccl, "tid": 0, "args": {"name": "HCCL"}},
        {"ph": "M", "name": "thread_name", "pid": hccl, "tid": 0, "args": {"name": "Group 0 Communication"}},
        {
            "ph": "X",
            "name": "hcom_allReduce__101_0_1",
            "pid": hccl,
            "tid": 0,
            "ts": us("410.000"),
            "dur": 35.25,
            "args": {"data_type": "FP16", "count": 512, "alg_type": "MESH"},
        },
    ]
    (out / "trace_view.json").write_text(json.dumps(ev))
    write_csv(
        out / "kernel_details.csv",
        "Step ID,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),Wait "
        "Time(us),Block Dim",
        [
            f"3,4294967295,11,5,MatMul_kernel,MatMul,dynamic,AI_CORE,{us('60.000')}\t,80.500,0,8",
            f"3,4294967295,N/A,N/A,hcom_allReduce__101_0_1,hcom_allReduce_,N/A,HCCL,{us('410.000')}\t,35.250,269.500,0",
        ],
    )
    write_csv(
        out / "step_trace_time.csv",
        "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
        "Communication(Not Overlapped and Exclude Receive),Preparing",
        ["3,80.500,35.250,0,35.250,884.250,1000.000,0,35.250,60.000"],
    )
    (root / "FRAMEWORK").mkdir()
    (root / "FRAMEWORK" / "op_range_0").write_bytes(b"\x01\x02binary")  # raw framework data, not read
    (root / "logs").mkdir()
    (root / "logs" / "profiler_20260101000140.log").write_text("[INFO] analyse done\n")


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    for r in (0, 1):
        one_rank(r)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
