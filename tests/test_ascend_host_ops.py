"""The CANN family's host-op finishing (readers.ascend.host_ops and the text export's device-time
match), checked against plain Python statements of the same rules."""

from __future__ import annotations

import random

import pyarrow as pa

from analyzer.readers.ascend.host_ops import nest_order, step_of_starts, time_order
from analyzer.readers.ascend.output import _device_times


def _ops(rows: list[tuple]) -> pa.Table:
    pid, tid, name, ts, dur, eid = zip(*rows)
    return pa.table(
        {
            "_pid": pa.array(pid, pa.string()),
            "tid": pa.array(tid, pa.string()),
            "name": pa.array(name, pa.string()),
            "ts_ns": pa.array(ts, pa.int64()),
            "dur_ns": pa.array(dur, pa.int64()),
            "event_id": pa.array(eid, pa.int64()),
        }
    )


def _random_rows(rng: random.Random, n: int) -> list[tuple]:
    def maybe(v: object) -> object:  # a value or, now and then, NULL
        return None if rng.random() < 0.1 else v

    return [
        (
            maybe(rng.choice(["1", "2", ""])),
            maybe(rng.choice(["7", "8"])),
            maybe(rng.choice(["aten::mm", "aten::add", "ProfilerStep#3"])),
            maybe(rng.randrange(0, 50)),
            maybe(rng.randrange(0, 20)),
            i,
        )
        for i in rng.sample(range(10 * n), n)
    ]


def _nulls_last(v: int | None, descending: bool = False) -> tuple[bool, int]:  # SQL's ORDER BY key, NULLs last
    return (v is None, 0 if v is None else (-v if descending else v))


def test_orders_are_sql_orders_with_nulls_last() -> None:
    rng = random.Random(5)
    for _ in range(20):
        rows = _random_rows(rng, 40)
        ops = _ops(rows)
        nest = [rows[i][5] for i in nest_order(ops)]
        want = sorted(
            rows,
            key=lambda r: (
                (r[0] is None, r[0] or ""),
                (r[1] is None, r[1] or ""),
                _nulls_last(r[3]),
                _nulls_last(r[4], descending=True),
                r[5],
            ),
        )
        assert nest == [r[5] for r in want]
        by_time = [rows[i][5] for i in time_order(ops)]
        assert by_time == [r[5] for r in sorted(rows, key=lambda r: (_nulls_last(r[3]), r[5]))]


def test_step_of_a_start_is_the_latest_step_started_before_it_until_its_end() -> None:
    steps = [(3, 100, 200), (4, 200, 260), (6, 300, 400)]
    ts = pa.array([None, 50, 100, 199, 200, 259, 260, 299, 300, 399, 400, 1000], pa.int64())
    assert step_of_starts(steps, ts).to_pylist() == [None, None, 3, 3, 4, 4, None, None, 6, 6, None, None]
    assert step_of_starts([], ts).to_pylist() == [None] * len(ts)


def test_device_times_match_by_name_and_occurrence_within_1us() -> None:
    rng = random.Random(11)
    for _ in range(20):
        rows = _random_rows(rng, 30)
        ops = _ops(rows)
        # the ops of each name numbered by (start, longest first, event id), NULLs last
        occurrence: dict[int, int] = {}
        seen: dict[str, int] = {}
        for r in sorted(rows, key=lambda r: (_nulls_last(r[3]), _nulls_last(r[4], descending=True), r[5])):
            if r[2] is not None:
                occurrence[r[5]] = seen.get(r[2], 0)
                seen[r[2]] = seen.get(r[2], 0) + 1
        det_rows = []
        counts: dict[str, int] = {}
        for _k in range(rng.randrange(0, 35)):
            name = rng.choice(["aten::mm", "aten::add", "other", None])
            det_rows.append((name, counts.get(name, 0), rng.choice([None, 0, 5, 1500, 3000]), rng.randrange(9), None))
            counts[name] = counts.get(name, 0) + 1
        name, rn, host, dself, dtotal = zip(*det_rows) if det_rows else ((),) * 5
        details = pa.table(
            {
                "name": pa.array(name, pa.string()),
                "rn": pa.array(rn, pa.int64()),
                "host_total_ns": pa.array(host, pa.int64()),
                "device_self_ns": pa.array(dself, pa.int64()),
                "device_total_ns": pa.array(dtotal, pa.int64()),
            }
        )
        got_self, got_total, matched, bad = _device_times(ops, details)
        want_self, want_matched, want_bad = [], 0, 0
        by_key = {(d[0], d[1]): d for d in det_rows if d[0] is not None}
        for r in rows:
            d = None
            if r[2] is not None and not r[2].startswith("ProfilerStep#"):
                d = by_key.get((r[2], occurrence[r[5]]))
            want_matched += d is not None
            compared = d is not None and d[2] is not None and r[4] is not None
            want_bad += compared and abs(d[2] - r[4]) > 1000
            want_self.append(d[3] if compared and abs(d[2] - r[4]) <= 1000 else None)
        assert got_self.to_pylist() == want_self
        assert got_total.to_pylist() == [None] * len(rows)
        assert (matched, bad) == (want_matched, want_bad)
