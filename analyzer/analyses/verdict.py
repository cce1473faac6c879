"""The verdict of a diff: the changes between two runs named in one sentence, with their size.

Findings, in the order the sentence gives them (each a row of ``analysis.diff_findings``):

1. ``step_time``: NEW is x % slower / faster per step (mean over the compared ranks), and whether
   that is beyond the step-to-step noise of the two runs (``noise``);
2. ``component``: the step breakdown columns that make up the change — step time = preparing +
   computing + communication not overlapped + memory copies not overlapped + free + the host tail
   after the last task, so each one's change is a share of the step time's — the ones holding at least
   ``SHARE`` of it, with the ranks it happened on (those with at least half of the largest rank's change);
3. ``rank``: a rank (or layout class) whose change in one column stands out from the other ranks'
   (``OUTLIER`` times their median change, and ``FLOOR`` of the step time): a slowed rank;
4. ``contributors``: the operators and kernels whose time per step changed most;
5. ``shapes``: operators whose input shapes changed (a model dimension, a batch size);
6. ``calls``: operators whose calls per step changed (most by the same factor: more micro-batches);
7. ``communication``: per collective type, calls per step and bytes per call / per step that changed
   (a bucket size, a bigger model), and its elapsed time when that changed much
   (``communication_time`` when only the time changed);
8. ``stragglers``: each run's slow ranks;
9. ``memory``: the peak allocated memory when it changed by ``MEMORY_PCT`` or more;
10. ``producers``: runs written by different profilers (their operators and kernels are listed by
    their own names, as new and vanished);
11. ``unchanged``: no operator, kernel or collective changed in calls, shapes or bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from ..messages import Message, message, parse, render
from .diff import TOTAL
from .run_pairing import Pairing, fmt_ranks

SHARE = 0.2  # a component named as part of the step time's change holds at least this share of it
OUTLIER = 3.0  # a rank stands out when its change is this many times the others' median change
FLOOR = 0.05  # ... and at least this share of the base step time
CALLS_EPS = 0.01  # relative change in calls / bytes per step below which they count as unchanged
MEMORY_PCT = 5.0
TOP = 3  # contributors named
# step time = preparing + computing + comm not overlapped + memory not overlapped + free + host tail
COMPONENTS = ("computing_ns", "comm_not_overlapped_ns", "memory_not_overlapped_ns", "free_ns", "preparing_ns")
TAIL = "host_tail_ns"
FINDING_COLUMNS = ["kind", "text", "subject", "base_value", "new_value", "delta", "delta_pct"]


def _pct_text(pct: float | None) -> Message:
    if pct is None or (isinstance(pct, float) and math.isnan(pct)):
        return message("verdict.pct_na")
    if math.isinf(pct):
        return message("verdict.pct_new")
    return message("verdict.pct", pct=pct)


def row_label(label: str) -> Message | str:
    """A row of the pairing by its label: 'rank 4', 'rank 2 ↔ 5', 'all ranks' (``label.*``, see
    ``messages.english``) and the total as messages (shown in the reader's language), a layout class
    ('tp 0 pp 1': dimension names) as it is."""
    if label == TOTAL:
        return message("term.total")
    return parse(label, "label") or label


def _ranks_text(labels: Sequence[str]) -> Message | list[Message | str]:
    """['rank 4', 'rank 5'] → 'ranks 4–5'; layout classes joined as they are."""
    nums = [int(x.split()[1]) for x in labels if x.startswith("rank ") and x.split()[1].isdigit()]
    if len(nums) == len(labels) and nums:
        if len(nums) == 1:
            return message("verdict.rank", rank=nums[0])
        return message("verdict.ranks", ranks=fmt_ranks(nums))
    return [row_label(x) for x in labels]


def _row(
    kind: str, msg: Message, subject: str | None = None, base: Any = None, new: Any = None, pct: Any = None
) -> dict:
    """A finding: its text in English (the CLI's, the ``diff_findings`` table's) and its message."""
    delta = None if base is None or new is None else float(new) - float(base)
    return {
        "kind": kind,
        "text": render(msg),
        "msg": msg,
        "subject": subject,
        "base_value": base,
        "new_value": new,
        "delta": delta,
        "delta_pct": pct,
    }


def _components(bd: pd.DataFrame) -> pd.DataFrame:
    """Per label, base / new / delta of each component of the step time, the host tail included."""
    wide = bd.pivot_table(index="label", columns="metric", values=["base_value", "new_value"], aggfunc="first")
    out = {}
    for side in ("base_value", "new_value"):
        w = wide[side] if side in wide.columns.get_level_values(0) else pd.DataFrame()
        parts = w.reindex(columns=["step_ns", *COMPONENTS])
        span = parts[list(COMPONENTS)].fillna(0.0).sum(axis=1)
        tail = parts["step_ns"] - span
        frame = parts[list(COMPONENTS)].copy()
        frame[TAIL] = tail
        frame["step_ns"] = parts["step_ns"]
        out[side] = frame
    delta = out["new_value"] - out["base_value"]
    return pd.concat({"base": out["base_value"], "new": out["new_value"], "delta": delta}, axis=1)


def _label(col: str) -> Message:
    return message(f"verdict.column.{col}")


def _where(per_label: pd.Series, sign: float, n_labels: int) -> Message | str:
    """'on ranks 4–7' / 'on every rank': the rank rows with at least half of the largest change."""
    d = per_label.dropna() * sign
    if d.empty or d.max() <= 0 or n_labels <= 1:
        return ""
    on = [str(k) for k, v in d.items() if v >= 0.5 * d.max()]
    if len(on) == n_labels:
        return message("verdict.where_all") if n_labels > 1 else ""
    return message("verdict.where", ranks=_ranks_text(on))


def _step_findings(p: Pairing, bd: pd.DataFrame) -> list[dict]:
    out: list[dict] = []
    total = bd[(bd["label"] == "total") & (bd["metric"] == "step_ns")]
    if total.empty or pd.isna(total["base_value"].iloc[0]) or pd.isna(total["new_value"].iloc[0]):
        out.append(_row("step_time", message("verdict.no_step")))
        return out
    t = total.iloc[0]
    b, n, pct = float(t["base_value"]), float(t["new_value"]), t["delta_pct"]
    sig = t["significant"]
    noise = "" if pd.isna(sig) or bool(sig) else message("verdict.noise")
    if b == n:
        text = message("verdict.same", new=p.new, base=p.base, base_ns=b)
    else:
        key = "verdict.slower" if n > b else "verdict.faster"
        text = message(key, new=p.new, base=p.base, pct=abs(pct), base_ns=b, new_ns=n, noise=noise)
    out.append(_row("step_time", text, "step_ns", b, n, pct))
    d_step = n - b
    if d_step == 0:
        return out
    comp = _components(bd)
    labels = [lb for lb in comp.index if lb != "total"]
    tot = comp.loc["total"]
    shares = []
    for col in (*COMPONENTS, TAIL):
        d = tot[("delta", col)]
        if pd.isna(d):
            continue
        share = float(d) / d_step
        if share >= SHARE:
            shares.append((share, col, float(d)))
    for share, col, d in sorted(shares, reverse=True)[:2]:
        where = _where(comp.loc[labels, ("delta", col)], math.copysign(1.0, d_step), len(labels))
        if share <= 1:
            text = message("verdict.share", share=share * 100, column=_label(col), where=where, delta=d)
        else:  # the other columns moved the other way
            text = message("verdict.beyond", column=_label(col), delta=d, where=where)
        out.append(
            _row(
                "component",
                text,
                col,
                tot[("base", col)],
                tot[("new", col)],
                share * 100,
            )
        )
    out += _outliers(comp, labels, b)
    return out


def _outliers(comp: pd.DataFrame, labels: list[str], base_step: float) -> list[dict]:
    """A rank row whose change in one column stands out from the other rows' changes."""
    if len(labels) < 2:
        return []
    found = []
    for col in (*COMPONENTS, TAIL):
        d = comp.loc[labels, ("delta", col)].astype("float64").dropna()
        if len(d) < 2:
            continue
        top = d.abs().idxmax()
        others = d.drop(index=top)
        spread = float(others.abs().median())
        v = float(d[top])
        if abs(v) >= OUTLIER * spread and abs(v) >= FLOOR * base_step and abs(v) > 0:
            lo, hi = float(others.min()), float(others.max())
            rest = message("verdict.range", low=lo, high=hi) if lo != hi else message("verdict.range1", value=lo)
            said = message("verdict.stands_out", who=row_label(str(top)), column=_label(col), delta=v, rest=rest)
            found.append(
                (
                    abs(v),
                    _row(
                        "rank",
                        said,
                        f"{top}:{col}",
                        comp.at[top, ("base", col)],
                        comp.at[top, ("new", col)],
                    ),
                )
            )
    return [r for _, r in sorted(found, key=lambda x: -x[0])[:2]]


def _contributors(ops: pd.DataFrame) -> list[dict]:
    named = ops[(ops["grouping"] == "name") & (ops["delta_ns"] != 0)]
    if named.empty:
        return []
    top = named.assign(_a=named["delta_ns"].abs()).sort_values("_a", ascending=False).head(TOP)
    bits = []
    for r in top.to_dict("records"):
        tag = message(f"verdict.{r['status']}") if r["status"] in ("new", "vanished") else ""
        kind = message("verdict.kernel") if r["kind"] == "kernel" else ""
        bits.append(message("verdict.contributor", name=str(r["name"]), kind=kind, status=tag, delta=r["delta_ns"]))
    return [_row("contributors", message("verdict.contributors", items=bits))]


def _shape_findings(ops: pd.DataFrame) -> list[dict]:
    ops = ops[~ops["is_communication"]]  # a collective's sizes are the communication finding's
    named = ops[ops["grouping"] == "name"]
    in_both = named[(named["base_calls"] > 0) & (named["new_calls"] > 0)].set_index(["kind", "name"]).index
    shaped = ops[(ops["grouping"] == "name+shape") & ops["input_shapes"].notna()]
    shaped = shaped[shaped.set_index(["kind", "name"]).index.isin(in_both)]
    b = shaped[shaped["base_calls"] > 0].groupby(["kind", "name"])["input_shapes"].agg(frozenset)
    n = shaped[shaped["new_calls"] > 0].groupby(["kind", "name"])["input_shapes"].agg(frozenset)
    keys = [k for k in b.index.intersection(n.index) if b[k] != n[k]]
    changed = []
    for kind, name in keys:
        g = shaped[(shaped["kind"] == kind) & (shaped["name"] == name)]
        gone = g[(g["base_calls"] > 0) & ~g["input_shapes"].isin(n[(kind, name)])].sort_values(
            "base_ns", ascending=False
        )
        came = g[(g["new_calls"] > 0) & ~g["input_shapes"].isin(b[(kind, name)])].sort_values("new_ns", ascending=False)
        if gone.empty or came.empty:
            continue
        weight = float(g["base_ns"].sum() + g["new_ns"].sum())
        changed.append((weight, name, gone["input_shapes"].iloc[0], came["input_shapes"].iloc[0]))
    if not changed:
        return []
    changed.sort(key=lambda x: -x[0])
    eg = [f"{name} {a} → {c}" for _, name, a, c in changed[:2]]  # names and shapes: data
    k = len(changed)
    said = message("verdict.shapes_1", items=eg) if k == 1 else message("verdict.shapes_n", n=k, items=eg)
    return [_row("shapes", said, changed[0][1])]


def _call_findings(ops: pd.DataFrame) -> list[dict]:
    named = ops[(ops["grouping"] == "name") & ~ops["is_communication"]]
    both = named[(named["base_calls"] > 0) & (named["new_calls"] > 0)]
    moved = both[((both["new_calls"] / both["base_calls"]) - 1).abs() > CALLS_EPS].copy()
    if moved.empty:
        return []
    moved["ratio"] = (moved["new_calls"] / moved["base_calls"]).round(2)
    moved = moved.assign(_t=moved["base_ns"] + moved["new_ns"]).sort_values("_t", ascending=False)
    counts = moved["ratio"].value_counts()
    common, k = float(counts.index[0]), int(counts.iloc[0])
    if k >= 3 and k >= 0.5 * len(moved):
        eg = moved[moved["ratio"] == common].iloc[0]
        text = message(
            "verdict.calls_factor", factor=common, n=k, name=str(eg["name"]), base=eg["base_calls"], new=eg["new_calls"]
        )
        return [_row("calls", text, str(eg["name"]), float(eg["base_calls"]), float(eg["new_calls"]))]
    bits = [f"{r['name']} {r['base_calls']:g} → {r['new_calls']:g}" for r in moved.head(TOP).to_dict("records")]
    return [_row("calls", message("verdict.calls", items=bits), str(moved.iloc[0]["name"]))]


def _comm_findings(comm: pd.DataFrame, base_step: float | None) -> list[dict]:
    if comm.empty:
        return []
    out = []
    per = comm.groupby("op_type")[
        [
            "base_calls",
            "new_calls",
            "base_bytes",
            "new_bytes",
            "base_elapsed_ns",
            "new_elapsed_ns",
            "base_wait_ns",
            "new_wait_ns",
        ]
    ].sum(min_count=1)
    for op, r in per.iterrows():
        bc, nc = float(r["base_calls"] or 0), float(r["new_calls"] or 0)
        bb, nb = r["base_bytes"], r["new_bytes"]
        bits: list[Message] = []
        calls_changed = bc == 0 or nc == 0 or abs(nc / bc - 1) > CALLS_EPS
        bytes_known = not (pd.isna(bb) or pd.isna(nb)) and bc > 0 and nc > 0
        bytes_changed = bytes_known and (bb == 0 or abs(nb / bb - 1) > CALLS_EPS)
        if calls_changed:
            bits.append(message("verdict.comm_calls", base=bc, new=nc))
            if bytes_known:
                bits.append(message("verdict.comm_per_call", base=bb / bc, new=nb / nc))
        if bytes_known and (calls_changed or bytes_changed):
            if bytes_changed:
                factor = message("verdict.factor", factor=nb / bb) if bb else ""
                bits.append(message("verdict.comm_bytes", base=bb, new=nb, factor=factor))
            else:
                bits.append(message("verdict.comm_bytes_same"))
        d_el = float((r["new_elapsed_ns"] or 0) - (r["base_elapsed_ns"] or 0))
        if base_step and abs(d_el) >= 0.1 * base_step and (bits or abs(d_el) > 0):
            wait = (
                r["new_wait_ns"] - r["base_wait_ns"]
                if not pd.isna(r["new_wait_ns"]) and not pd.isna(r["base_wait_ns"])
                else None
            )
            said_wait = message("verdict.comm_wait", delta=wait) if wait is not None else ""
            bits.append(message("verdict.comm_elapsed", delta=d_el, wait=said_wait))
        if bits:  # "communication": calls or bytes changed; "communication_time": only the time
            kind = "communication" if calls_changed or bytes_changed else "communication_time"
            out.append(_row(kind, message("verdict.comm", op=str(op), items=bits), str(op), bc, nc))
    return out


def _straggler_findings(p: Pairing, st: pd.DataFrame) -> list[dict]:
    if st.empty:
        return []

    def named(side: str, run: str) -> Message:
        s = st[st["side"] == side]
        ranks = [
            message("verdict.straggler", rank=int(r), votes=int(v), instances=int(i))
            for r, v, i in zip(s["rank"], s["votes"], s["instances"])
        ]
        return (
            message("verdict.stragglers_in", ranks=ranks, run=run)
            if ranks
            else message("verdict.stragglers_none", run=run)
        )

    return [_row("stragglers", message("verdict.stragglers", new=named("new", p.new), base=named("base", p.base)))]


def _memory_findings(mem: pd.DataFrame) -> list[dict]:
    t = mem[(mem["label"] == "total") & (mem["metric"] == "peak_allocated_bytes")]
    if t.empty or pd.isna(t["delta"].iloc[0]):
        return []
    r = t.iloc[0]
    pct = r["delta_pct"]
    if r["delta"] == 0 or (not pd.isna(pct) and abs(pct) < MEMORY_PCT):
        return []
    text = message("verdict.memory", delta=r["delta"], pct=_pct_text(pct), base=r["base_value"], new=r["new_value"])
    return [_row("memory", text, "peak_allocated_bytes", r["base_value"], r["new_value"], pct)]


def findings(
    p: Pairing,
    producers: tuple[Sequence[str], Sequence[str]],
    breakdown: pd.DataFrame,
    operators: pd.DataFrame,
    communication: pd.DataFrame,
    memory: pd.DataFrame,
    stragglers: pd.DataFrame,
) -> tuple[pd.DataFrame, list[Message]]:
    """The findings of a diff (one row each, its text in English) and their messages, in the same
    order (``messages.sentence`` writes the verdict of them in a language)."""
    rows = _step_findings(p, breakdown)
    base_step = rows[0]["base_value"]
    rows += _contributors(operators)
    comm = _comm_findings(communication, base_step)
    structural = (
        _shape_findings(operators) + _call_findings(operators) + [r for r in comm if r["kind"] == "communication"]
    )
    bp, np_ = tuple(producers[0]), tuple(producers[1])
    if bp != np_:
        named = operators[operators["grouping"] == "name"]
        only_b, only_n = int((named["status"] == "vanished").sum()), int((named["status"] == "new").sum())
        structural.append(
            _row(
                "producers",
                message(
                    "verdict.producers",
                    base_formats=", ".join(bp) or "?",
                    new_formats=", ".join(np_) or "?",
                    only_base=only_b,
                    base=p.base,
                    only_new=only_n,
                    new=p.new,
                ),
            )
        )
    rows += structural + [r for r in comm if r["kind"] == "communication_time"]
    rows += _straggler_findings(p, stragglers)
    rows += _memory_findings(memory)
    if not structural:
        rows.append(_row("unchanged", message("verdict.unchanged")))
    msgs = [r["msg"] for r in rows]
    out = pd.DataFrame(rows, columns=FINDING_COLUMNS)
    for c in ("base_value", "new_value", "delta", "delta_pct"):
        out[c] = pd.to_numeric(out[c], errors="coerce").astype("float64")
    return out, msgs


def steps_said(steps: Sequence[int | None]) -> Message:
    """``run_pairing.fmt_steps`` as a message: 'steps 2–7', 'step 3', 'the whole profile (no steps)'."""
    known = [s for s in steps if s is not None]
    if not known:
        return message("term.no_steps")
    return message("term.steps_1" if len(known) == 1 else "term.steps_n", steps=fmt_ranks(known))
