"""Build tests/data/msprof_constructed/: msprof PROF_* folders CONSTRUCTED by hand (not from a real run).

No public sample has a complete msprof text export with the msprof_*.json timeline, sliced files,
the KB memory CSVs, step_trace and communication_statistic. These files follow formats.md §3.1-§3.3
exactly (headers copied from there; the op_summary header is the real CANN 8 one of
neo-pan-ascend-msprof-skill's sample; µs timestamps as 3-decimal strings with the trailing TAB msprof
writes; CRLF line ends; 0-byte files as msprof leaves them). Values are made up but consistent, so
tests can check what the reader computes against what the files say.

Layout (one job, one host, three processes, msprof left rank_id = -1 everywhere):

    PROF_000001_20260101000000100_BBBBBBBBBBBBBBBB/   device_0: exported, sliced op_summary and msprof json
    PROF_000001_20260101000000200_AAAAAAAAAAAAAAAA/   device_1: exported, one file per kind
    PROF_000001_20260101000000300_CCCCCCCCCCCCCCCC/   device_2: raw data only (never exported) -> unparsed

Run: python tests/data/make_msprof_constructed.py   (rewrites the folder)
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

OUT = Path(__file__).resolve().parent / "msprof_constructed"
TS = "20260101000010"
BASE_US = 1767225610000000  # 2026-01-01 00:00:10 UTC in µs

OP_SUMMARY_HEADER = (
    "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),Task Duration(us),"
    "Task Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,Output "
    "Shapes,"
    "Output Data Types,Output Formats,Context "
    "ID,aicore_time(us),aic_total_cycles,aic_mac_ratio,aiv_time(us),aiv_vec_ratio,"
    "cube_utilization(%)"
)


def us(offset_us: str) -> str:
    """BASE + offset as an exact 3-decimal µs string, e.g. '1767225610000012.345'."""
    whole, _, frac = offset_us.partition(".")
    frac = (frac + "000")[:3]
    return f"{BASE_US + int(whole)}.{frac}"


def write_csv(path: Path, header: str, rows: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(("\r\n".join([header, *rows]) + "\r\n").encode())


def kernel_row(
    dev: int, task: int, stream: int, name: str, typ: str, core: str, start: str, dur: str, wait: str
) -> str:
    comm = core == "COMMUNICATION"
    tid = "N/A" if comm else str(task)
    sid = "N/A" if comm else str(stream)
    shapes = '"""8,1024;1024,1024"""' if not comm else "N/A"
    pmu = "N/A,N/A,N/A,N/A,N/A,N/A" if comm else "10.5,18900,0.81,2.25,0.4,66.6"
    return (
        f"{dev},4294967295,{tid},{sid},{name},{typ},dynamic,{core},{us(start)}\t,{dur},{wait},24,0,NO,{shapes},"
        f'FLOAT16;FLOAT16,ND;ND,"""8,1024""",FLOAT16,ND,N/A,{pmu}'
    )


def prof_meta(prof: Path, dev: int, pid: str) -> None:
    d = prof / f"device_{dev}"
    d.mkdir(parents=True, exist_ok=True)
    info = {
        "jobInfo": "NA",
        "version": "1.0",
        "hostname": "node-a",
        "pid": pid,
        "devices": str(dev),
        "rank_id": -1,
        "DeviceInfo": [{"id": dev, "ai_core_num": 24, "aic_frequency": "1800", "hwts_frequency": "50"}],
    }
    (d / f"info.json.{dev}").write_text(json.dumps(info))
    (d / f"info.json.{dev}.done").write_bytes(b"")
    (d / f"start_info.{dev}").write_text(
        json.dumps(
            {
                "collectionDateBegin": "2026-01-01 00:00:10.000000",
                "collectionTimeBegin": str(BASE_US),
                "clockMonotonicRaw": "5000000000000",
            }
        )
    )
    (d / f"end_info.{dev}").write_text(
        json.dumps(
            {
                "collectionDateEnd": "2026-01-01 00:00:11.000000",
                "collectionTimeEnd": str(BASE_US + 1_000_000),
                "clockMonotonicRaw": "5001000000000",
            }
        )
    )
    (d / "data").mkdir(exist_ok=True)
    (d / "data" / f"ts_track.data.{dev}.slice_0").write_bytes(b"\x00\x01raw-binary")
    h = prof / "host"
    (h / "data").mkdir(parents=True, exist_ok=True)
    (h / "info.json").write_text(json.dumps({"hostname": "node-a", "pid": pid, "rank_id": -1}))
    (h / "host_start.log").write_text("[Host]\nclock_monotonic_raw: 5000000000000\ncntvct: 123456\n")


def timeline_events(dev: int) -> tuple[list[dict], list[dict]]:
    """Two slices of an msprof_*.json timeline (formats.md §3.3): M events first, then events."""
    hw, cann, comm, ovl, freq, mem = 3, 1000001, 4, 5, 6, 7
    meta = [
        {"name": "process_name", "ph": "M", "pid": cann, "tid": 0, "args": {"name": "CANN"}},
        {"name": "process_labels", "ph": "M", "pid": cann, "tid": 0, "args": {"labels": "CPU"}},
        {"name": "thread_name", "ph": "M", "pid": cann, "tid": 4321, "args": {"name": "Thread 4321"}},
        {"name": "process_name", "ph": "M", "pid": hw, "tid": 0, "args": {"name": "Ascend Hardware"}},
        {"name": "process_labels", "ph": "M", "pid": hw, "tid": 0, "args": {"labels": f"NPU {dev}"}},
        {"name": "thread_name", "ph": "M", "pid": hw, "tid": 2, "args": {"name": "Stream 2"}},
        {"name": "thread_sort_index", "ph": "M", "pid": hw, "tid": 2, "args": {"sort_index": 2}},
        {"name": "process_name", "ph": "M", "pid": comm, "tid": 0, "args": {"name": "Communication"}},
        {
            "name": "thread_name",
            "ph": "M",
            "pid": comm,
            "tid": 0,
            "args": {"name": "Group 17522688603477080586 Communication"},
        },
        {"name": "thread_name", "ph": "M", "pid": comm, "tid": 1, "args": {"name": "Plane 0"}},
        {"name": "process_name", "ph": "M", "pid": ovl, "tid": 0, "args": {"name": "Overlap Analysis"}},
        {"name": "thread_name", "ph": "M", "pid": ovl, "tid": 0, "args": {"name": "Computing"}},
        {"name": "thread_name", "ph": "M", "pid": ovl, "tid": 1, "args": {"name": "Communication"}},
        {"name": "process_name", "ph": "M", "pid": freq, "tid": 0, "args": {"name": "AI Core Freq"}},
        {"name": "process_name", "ph": "M", "pid": mem, "tid": 0, "args": {"name": "NPU MEM"}},
    ]

    def x(pid: int, tid: int, name: str, start: str, dur: float, args: dict | None = None) -> dict:
        e = {"name": name, "ph": "X", "pid": pid, "tid": tid, "ts": us(start), "dur": dur}
        if args is not None:
            e["args"] = args
        return e

    first = meta + [
        x(
            cann,
            4321,
            "AscendCL@aclnnMatmul",
            "100.000",
            12.5,
            {
                "Mode": "ACL_OP",
                "Thread Id": 4321,
                "connection_id": 7,
                "level": "acl",
                "id": "aclnnMatmul",
                "item_id": "0",
            },
        ),
        {
            "name": "HostToDevice7",
            "ph": "s",
            "cat": "HostToDevice",
            "id": "7",
            "pid": cann,
            "tid": 4321,
            "ts": us("105.000"),
        },
        x(
            hw,
            2,
            "aclnnMatmul_MatMulCommon_MatMulV2",
            "120.000",
            40.25,
            {
                "Model Id": 4294967295,
                "Task Type": "AI_CORE",
                "Physic Stream Id": 2,
                "Task Id": 1,
                "Batch Id": 0,
                "Subtask Id": 4294967295,
                "connection_id": 7,
            },
        ),
        {
            "name": "HostToDevice7",
            "ph": "f",
            "bp": "e",
            "cat": "HostToDevice",
            "id": "7",
            "pid": hw,
            "tid": 2,
            "ts": us("120.000"),
        },
        x(ovl, 0, "Computing", "120.000", 40.25),
        {"name": "AI Core Freq", "ph": "C", "pid": freq, "tid": 0, "ts": us("100.000"), "args": {"MHz": 1800}},
        {"name": "APP/HBM", "ph": "C", "pid": mem, "tid": 0, "ts": us("100.000"), "args": {"KB": 2048}},
    ]
    second = [
        x(
            hw,
            2,
            "aclnnAdd_AddAiCore_Add",
            "200.500",
            3.125,
            {
                "Model Id": 4294967295,
                "Task Type": "AI_VECTOR_CORE",
                "Physic Stream Id": 2,
                "Task Id": 2,
                "Batch Id": 0,
                "Subtask Id": 4294967295,
                "connection_id": 8,
            },
        ),
        x(
            comm,
            0,
            "hcom_allReduce__586_0_1",
            "300.000",
            55.5,
            {"connection_id": 9, "model id": 4294967295, "data_type": "FP32", "alg_type": "MESH-RING", "count": 1024},
        ),
        x(
            comm,
            1,
            "Notify_Wait",
            "300.000",
            20.0,
            {
                "notify_id": 1,
                "duration estimated(us)": 0.02,
                "task type": "Notify_Wait",
                "src rank": 0,
                "dst rank": 4294967295,
                "transport type": "LOCAL",
                "size(Byte)": 0,
            },
        ),
        x(ovl, 1, "Communication", "300.000", 55.5),
        {"name": "AI Core Freq", "ph": "C", "pid": freq, "tid": 0, "ts": us("300.000"), "args": {"MHz": 1650}},
        {"name": "APP/HBM", "ph": "C", "pid": mem, "tid": 0, "ts": us("300.000"), "args": {"KB": 4096}},
    ]
    return first, second


def exported(prof: Path, dev: int, sliced: bool) -> None:
    out = prof / "mindstudio_profiler_output"
    rows = [
        kernel_row(dev, 1, 2, "aclnnMatmul_MatMulCommon_MatMulV2", "MatMulV2", "AI_CORE", "120.000", "40.250", "0"),
        kernel_row(dev, 2, 2, "aclnnAdd_AddAiCore_Add", "Add", "AI_VECTOR_CORE", "200.500", "3.125", "40.250"),
        kernel_row(dev, 0, 0, "hcom_allReduce__586_0_1", "hcom_allReduce_", "COMMUNICATION", "300.000", "55.500", "0"),
        kernel_row(
            dev, 3, 2, "aclnnMatmul_MatMulCommon_MatMulV2", "MatMulV2", "AI_CORE", "1200.001", "41.999", "840.875"
        ),
    ]
    if sliced:  # msprof slices at 1e6 rows; here two slices of two rows, each with its own header
        write_csv(out / f"op_summary_slice_0_{TS}.csv", OP_SUMMARY_HEADER, rows[:2])
        write_csv(out / f"op_summary_slice_1_{TS[:-1]}9.csv", OP_SUMMARY_HEADER, rows[2:])
    else:
        write_csv(out / f"op_summary_{TS}.csv", OP_SUMMARY_HEADER, rows)
    write_csv(
        out / f"op_statistic_{TS}.csv",
        "Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)",
        [
            f"{dev},MatMulV2,AI_CORE,2,82.249,40.25,41.1245,41.999,96.33",
            f"{dev},Add,AI_VECTOR_CORE,1,3.125,3.125,3.125,3.125,3.67",
        ],
    )
    write_csv(
        out / f"task_time_{TS}.csv",
        "Device_id,kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(us),task_stop(us)",
        [
            f"{dev},aclnnMatmul_MatMulCommon_MatMulV2,AI_CORE,2,1,40.250,{us('120.000')}\t,{us('160.250')}\t",
            f"{dev},N/A,EVENT_RECORD,2,5,0.000,{us('170.000')}\t,{us('170.000')}\t",
        ],
    )
    write_csv(
        out / f"step_trace_{TS}.csv",
        "Device_id,Iteration ID,FP Start(us),BP End(us),Iteration End(us),Iteration Time(us),FP to BP Time(us),"
        "Iteration Refresh(us),Data Aug Bound(us),Model ID,Reduce Start(us),Reduce Duration(us)",
        [
            f"{dev},1,{us('110.000')}\t,{us('250.000')}\t,{us('1000.000')}\t,910.000,140.000,750.000,N/A,1,{us('300.000')}\t,55.500",
            f"{dev},2,{us('1010.000')}\t,{us('1150.000')}\t,{us('1900.500')}\t,900.500,140.000,750.500,10.000,1,N/A,N/A",
        ],
    )
    write_csv(
        out / f"communication_statistic_{TS}.csv",
        "Device_id,OP Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)",
        [f"{dev},hcom_allReduce_,1,55.500,55.500,55.500,55.500,100.0"],
    )
    write_csv(
        out / f"npu_mem_{TS}.csv",
        "Device_id,event,ddr(KB),hbm(KB),memory(KB),timestamp(us)",
        [
            f"{dev},app,0,2048,2048,{us('100.000')}\t",
            f"{dev},device,0,65536,65536,{us('100.000')}\t",
            f"{dev},app,0,4096,4096,{us('300.000')}\t",
        ],
    )
    write_csv(
        out / f"npu_module_mem_{TS}.csv",
        "Device_id,Component,Timestamp(us),Total Reserved(KB),Device",
        [f"{dev},HCCL,{us('100.000')}\t,1024.5,NPU:{dev}", f"{dev},RUNTIME,{us('100.000')}\t,-1,NPU:{dev}"],
    )
    write_csv(
        out / f"memory_record_{TS}.csv",
        "Device_id,Component,Timestamp(us),Total Allocated(KB),Total Reserved(KB),Device",
        [f"{dev},GE,{us('120.000')}\t,512,2048,NPU:{dev}", f"{dev},GE,{us('200.500')}\t,768.25,2048,NPU:{dev}"],
    )
    write_csv(
        out / f"operator_memory_{TS}.csv",
        "Device_id,Name,Size(KB),Allocation Time(us),Duration(us),Allocation Total Allocated(KB),Allocation Total "
        "Reserved(KB),"
        "Release Total Allocated(KB),Release Total Reserved(KB),Device",
        [f"{dev},cann::Graph_1,256.5,{us('120.000')}\t,80.250,768.5,2048,512,2048,NPU:{dev}"],
    )
    (out / f"msprof_tx_{TS}.csv").write_bytes(b"")  # msprof leaves 0-byte files for empty kinds
    first, second = timeline_events(dev)
    if sliced:
        (out / f"msprof_slice_0_{TS}.json").write_text(json.dumps(first))
        (out / f"msprof_slice_1_{TS[:-1]}9.json").write_text(json.dumps(second))
    else:
        (out / f"msprof_{TS}.json").write_text(json.dumps(first + second))
    (out / "README.txt").write_text("msprof export (constructed for tests)\n")
    log = prof / "mindstudio_profiler_log"
    log.mkdir(exist_ok=True)
    (log / "msprof_export.log").write_text("export done\n")


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    b = OUT / "PROF_000001_20260101000000100_BBBBBBBBBBBBBBBB"
    prof_meta(b, 0, "1001")
    exported(b, 0, sliced=True)
    a = OUT / "PROF_000001_20260101000000200_AAAAAAAAAAAAAAAA"
    prof_meta(a, 1, "1002")
    exported(a, 1, sliced=False)
    c = OUT / "PROF_000001_20260101000000300_CCCCCCCCCCCCCCCC"
    prof_meta(c, 2, "1003")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
